"""The benchmark zoo: real architectures built from configs with random weights (no downloads),
plus small CNNs written here. Each entry makes a module and example inputs at a size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Model:
    name: str
    make: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple]
    quantizable: bool = False  # also benchmarked statically quantized


class OutputOf(torch.nn.Module):
    """A transformers model called on one tensor, returning one field of its output."""

    def __init__(self, model, key="logits", **kwargs):
        super().__init__()
        self.model, self.key, self.kwargs = model, key, kwargs

    def forward(self, x):
        return getattr(self.model(x, **self.kwargs), self.key)


def llama(quick: bool) -> Model:
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden = 128 if quick else 512
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=2 if quick else 4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=128,
    )
    seq = 32 if quick else 64
    return Model(
        "llama", lambda: OutputOf(LlamaForCausalLM(config), use_cache=False), lambda: (torch.randint(0, 256, (1, seq)),)
    )


def vit(quick: bool) -> Model:
    from transformers import ViTConfig, ViTModel

    hidden = 128 if quick else 384
    config = ViTConfig(
        image_size=64 if quick else 224,
        patch_size=16,
        hidden_size=hidden,
        num_hidden_layers=2 if quick else 4,
        num_attention_heads=4 if quick else 6,
        intermediate_size=hidden * 4,
    )
    size = config.image_size
    return Model(
        "vit", lambda: OutputOf(ViTModel(config), key="last_hidden_state"), lambda: (torch.randn(1, 3, size, size),)
    )


def siglip(quick: bool) -> Model:
    from transformers import SiglipVisionConfig, SiglipVisionModel

    hidden = 128 if quick else 384
    config = SiglipVisionConfig(
        image_size=64 if quick else 224,
        patch_size=16,
        hidden_size=hidden,
        num_hidden_layers=2 if quick else 4,
        num_attention_heads=4 if quick else 6,
        intermediate_size=hidden * 4,
    )
    size = config.image_size
    return Model(
        "siglip",
        lambda: OutputOf(SiglipVisionModel(config), key="last_hidden_state"),
        lambda: (torch.randn(1, 3, size, size),),
    )


def bert(quick: bool) -> Model:
    from transformers import BertConfig, BertModel

    hidden = 128 if quick else 512
    config = BertConfig(
        vocab_size=512,
        hidden_size=hidden,
        num_hidden_layers=2 if quick else 4,
        num_attention_heads=8,
        intermediate_size=hidden * 4,
        max_position_embeddings=128,
    )
    seq = 32 if quick else 64
    return Model(
        "bert", lambda: OutputOf(BertModel(config), key="last_hidden_state"), lambda: (torch.randint(0, 512, (1, seq)),)
    )


class BasicBlock(torch.nn.Module):
    def __init__(self, channels, stride=1):
        super().__init__()
        out = channels * stride
        self.conv1 = torch.nn.Conv2d(channels, out, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(out)
        self.conv2 = torch.nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(out)
        self.down = None
        if stride != 1:
            self.down = torch.nn.Sequential(
                torch.nn.Conv2d(channels, out, 1, stride, bias=False), torch.nn.BatchNorm2d(out)
            )

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(torch.nn.Module):
    def __init__(self, width=16, blocks=(1, 1, 1)):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, width, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(width), torch.nn.ReLU()
        )
        layers, channels = [], width
        for i, count in enumerate(blocks):
            for j in range(count):
                stride = 2 if i > 0 and j == 0 else 1
                layers.append(BasicBlock(channels, stride))
                channels *= stride
        self.layers = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(channels, 10)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


class InvertedResidual(torch.nn.Module):
    def __init__(self, channels, expand=4):
        super().__init__()
        hidden = channels * expand
        self.block = torch.nn.Sequential(
            torch.nn.Conv2d(channels, hidden, 1, bias=False),
            torch.nn.BatchNorm2d(hidden),
            torch.nn.ReLU6(),
            torch.nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
            torch.nn.BatchNorm2d(hidden),
            torch.nn.ReLU6(),
            torch.nn.Conv2d(hidden, channels, 1, bias=False),
            torch.nn.BatchNorm2d(channels),
        )

    def forward(self, x):
        return x + self.block(x)


class MobileNetV2ish(torch.nn.Module):
    def __init__(self, channels=16, blocks=3):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, channels, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(channels), torch.nn.ReLU6()
        )
        self.blocks = torch.nn.Sequential(*[InvertedResidual(channels) for _ in range(blocks)])
        self.head = torch.nn.Linear(channels, 10)

    def forward(self, x):
        return self.head(torch.nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


def resnet(quick: bool) -> Model:
    size = 32 if quick else 64
    return Model(
        "resnet", lambda: ResNet(blocks=(1, 1) if quick else (2, 2, 2)), lambda: (torch.randn(1, 3, size, size),), True
    )


def mobilenet(quick: bool) -> Model:
    size = 32 if quick else 96
    return Model(
        "mobilenetv2", lambda: MobileNetV2ish(blocks=2 if quick else 6), lambda: (torch.randn(1, 3, size, size),), True
    )


def zoo(quick: bool) -> list[Model]:
    return [f(quick) for f in (llama, vit, siglip, bert, resnet, mobilenet)]


def lowered_forms(model: Model, partitioners: dict) -> tuple[tuple, dict, dict, dict]:
    """``model`` (seeded, eval) exported once and lowered with each of ``partitioners`` ({name:
    an xir ``XnnpackPartitioner``, or None for stock's}), each loaded: (the inputs, {name:
    (program, method)}, {name: max error of the first output against eager}, {name: ops inside
    its delegates})."""
    from xir_tools import harness

    torch.manual_seed(0)
    module, inputs = model.make().eval(), model.inputs()
    with torch.no_grad():
        expected = module(*inputs)
    loaded, errors, ops = {}, {}, {}
    for name, partitioner in partitioners.items():
        which = "stock" if partitioner is None else "xir"
        edge, _ = harness.lower_edge(torch.export.export(module, inputs), which, partitioner=partitioner)
        ops[name] = sum(harness.delegated_ops(edge).values())
        loaded[name] = harness.load_method(harness.to_buffer(edge))
        errors[name] = float((loaded[name][1].execute(list(inputs))[0] - expected).abs().max())
    return inputs, loaded, errors, ops


# ------------------------------------------------------------------ synthetic stacks for scaling


class LinearStack(torch.nn.Module):
    def __init__(self, blocks, width=32):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.LayerNorm(width))
            for _ in range(blocks)
        )

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class ConvStack(torch.nn.Module):
    def __init__(self, blocks, channels=8):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.Conv2d(channels, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU()
            )
            for _ in range(blocks)
        )

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
