"""Built-in example models: small programs that show what xir is for.

Each example is a ``torch.nn.Module`` in eval mode and a tuple of example inputs. The
helpers here export them (optionally quantized with ExecuTorch's XNNPACKQuantizer) so that
tests, the demo and the benchmarks share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32, out: int = 8):
        super().__init__()
        self.fc1 = torch.nn.Linear(features, hidden)
        self.fc2 = torch.nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        return F.relu(self.bn2(self.conv2(x))).mean(dim=(2, 3))


class Attention(torch.nn.Module):
    """Single-head attention: q/k/v linears, q @ k^T, softmax, @ v, output linear."""

    def __init__(self, dim: int = 32):
        super().__init__()
        self.q = torch.nn.Linear(dim, dim)
        self.k = torch.nn.Linear(dim, dim)
        self.v = torch.nn.Linear(dim, dim)
        self.out = torch.nn.Linear(dim, dim)
        self.scale = dim**-0.5

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.out(torch.matmul(scores, v))


class Patchify(torch.nn.Module):
    """The 8-D "patchify" reshape/permute from vision models."""

    def forward(self, x):
        y = x.reshape(2, 6, 8, 2, 16, 8, 2, 16).permute(0, 2, 5, 3, 6, 1, 4, 7)
        return y.reshape(2, 64, -1) * 2


class ConvOnly(torch.nn.Module):
    def __init__(self, in_channels: int = 3, out_channels: int = 8):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, 3)

    def forward(self, x):
        return self.conv(x)


class LinearBatchNorm3d(torch.nn.Module):
    """A linear on a 3-D (N, C, F) input followed by BatchNorm1d(C): the channel is dim 1, not F."""

    def __init__(self, channels: int = 4, features: int = 8):
        super().__init__()
        self.fc = torch.nn.Linear(features, features)
        self.bn = torch.nn.BatchNorm1d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        return self.bn(self.fc(x))


@dataclass
class Example:
    name: str
    description: str
    make: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple]
    dtype: torch.dtype = torch.float32
    quantize: str | None = None  # None, "static" or "dynamic"
    quantizer_options: dict = field(default_factory=dict)

    def module(self) -> torch.nn.Module:
        torch.manual_seed(0)
        return self.make().eval().to(self.dtype)

    def example_inputs(self) -> tuple:
        torch.manual_seed(1)
        return tuple(t.to(self.dtype) if t.is_floating_point() else t for t in self.inputs())


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in [
        Example("mlp", "two linears with a ReLU", MLP, lambda: (torch.randn(4, 16),)),
        Example("cnn", "conv + batch norm + ReLU, max pool, mean", SmallCNN, lambda: (torch.randn(1, 3, 16, 16),)),
        Example("attention", "q/k/v linears, matmul, softmax", Attention, lambda: (torch.randn(2, 8, 32),)),
        Example(
            "attention-bf16",
            "the attention block in bf16",
            Attention,
            lambda: (torch.randn(2, 8, 32),),
            dtype=torch.bfloat16,
        ),
        Example(
            "patchify",
            "8-D reshape/permute (XNNPACK takes at most 6-D)",
            Patchify,
            lambda: (torch.randn(2, 6, 256, 256),),
        ),
        Example(
            "quantized-conv",
            "statically quantized conv with a float output",
            ConvOnly,
            lambda: (torch.randn(1, 3, 8, 8),),
            quantize="static",
            quantizer_options={"float_output": True},
        ),
        Example(
            "linear-bn-3d",
            "linear on (N, C, F) then BatchNorm1d(C)",
            LinearBatchNorm3d,
            lambda: (torch.randn(2, 4, 8),),
        ),
    ]
}


def quantize_module(
    module: torch.nn.Module, inputs: tuple, mode: str = "static", per_channel: bool = False, float_output: bool = False
) -> torch.nn.Module:
    """Quantize with ExecuTorch's XNNPACKQuantizer (pt2e), calibrated on ``inputs``.

    ``float_output=True`` quantizes inputs and weights but leaves the op's output in float
    (a QuantizationConfig without an output activation spec)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=(mode == "dynamic"))
    if float_output:
        import dataclasses

        config = dataclasses.replace(config, output_activation=None)
    quantizer = XNNPACKQuantizer().set_global(config)
    graph_module = torch.export.export(module, inputs).module()
    prepared = prepare_pt2e(graph_module, quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def export_example(example: Example, dynamic_shapes=None) -> torch.export.ExportedProgram:
    """torch.export the example (quantized first when it asks for it)."""
    module, inputs = example.module(), example.example_inputs()
    if example.quantize:
        module = quantize_module(module, inputs, example.quantize, **example.quantizer_options)
    return torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)


def edge_program(example_or_ep, dynamic_shapes=None):
    """The example (or an ExportedProgram) in ExecuTorch's edge dialect, not yet partitioned."""
    from executorch.exir import EdgeCompileConfig, to_edge

    ep = (
        example_or_ep
        if isinstance(example_or_ep, torch.export.ExportedProgram)
        else export_example(example_or_ep, dynamic_shapes)
    )
    return to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).exported_program()
