"""Parity with the stock partitioner on the runtime: for a matrix of fp32 ops and quantized
models, xir delegates at least what stock delegates wherever stock is correct, and matches
eager PyTorch. Each case is lowered once per session (both partitioners)."""

import functools

import pytest
import torch
import torch.nn.functional as F

from xir_tools.examples import quantize_module
from xir_tools.harness import compute_count, lower, reference

torch.manual_seed(0)


class Op(torch.nn.Module):
    def __init__(self, fn, *params):
        super().__init__()
        self.fn = fn
        self.params = torch.nn.ParameterList([torch.nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *xs):
        return self.fn(*xs, *self.params)


def r(*shape):
    return torch.randn(*shape)


FP32_CASES = {
    "add": (lambda x, y: x + y, (r(2, 8), r(2, 8))),
    "sub-broadcast": (lambda x, y: x - y, (r(2, 3, 8), r(8))),
    "mul": (lambda x, y: x * y, (r(4, 8), r(4, 8))),
    "div": (lambda x, y: x / (y.abs() + 1), (r(4, 8), r(4, 8))),
    "unary-chain": (lambda x: torch.sigmoid(torch.tanh(torch.exp(-x.abs()).neg()).floor() + x.ceil()), (r(4, 8),)),
    "sqrt-rsqrt-log": (
        lambda x: torch.sqrt(x.abs() + 1) + torch.rsqrt(x.abs() + 1) + torch.log(x.abs() + 1),
        (r(4, 8),),
    ),
    "activations": (lambda x: F.hardswish(F.leaky_relu(F.hardtanh(F.relu(x) - 0.5), 0.2)), (r(4, 8),)),
    "clamp-min-max": (lambda x: torch.minimum(torch.clamp(x, -0.5, 0.5), torch.maximum(x, x * 0.1)), (r(4, 8),)),
    "gelu": (lambda x: F.gelu(x), (r(4, 8),)),
    "square": (lambda x: x**2, (r(4, 8),)),
    "linear-3d": (lambda x, w, b: F.linear(x, w, b), (r(2, 5, 8),), r(16, 8), r(16)),
    "linear-relu": (lambda x, w: F.relu(F.linear(x, w)), (r(4, 8),), r(16, 8)),
    "bmm": (lambda a, b: torch.bmm(a, b), (r(2, 4, 8), r(2, 8, 3))),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, padding=1), (r(1, 4, 16),), r(8, 4, 3), r(8)),
    "conv2d-depthwise": (lambda x, w: F.conv2d(x, w, groups=4, stride=2), (r(1, 4, 9, 9),), r(4, 1, 3, 3)),
    "conv-transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), (r(1, 4, 5, 5),), r(4, 6, 3, 3)),
    "avg-pool": (lambda x: F.avg_pool2d(x, 2), (r(1, 4, 8, 8),)),
    "max-pool": (lambda x: F.max_pool2d(x, 3, 2, 1), (r(1, 4, 9, 9),)),
    "mean-spatial": (lambda x: x.mean(dim=(2, 3), keepdim=True), (r(1, 4, 6, 6),)),
    "softmax": (lambda x: torch.softmax(x, -1), (r(4, 8),)),
    "softmax-dim0": (lambda x: torch.softmax(x, 0), (r(4, 8),)),
    "cat-slice": (lambda x, y: torch.cat([x, y], 1)[:, 2:7], (r(2, 4), r(2, 5))),
    "permute-view": (lambda x: x.permute(0, 2, 1).reshape(2, -1), (r(2, 3, 4),)),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), (r(1, 2, 4, 4),)),
    "upsample-bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (r(1, 2, 4, 4),)),
    "prelu": (lambda x, w: F.prelu(x, w), (r(1, 4, 3, 3),), torch.rand(4)),
    "batch-norm-alone": (
        lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b),
        (r(2, 4, 5),),
        r(4),
        torch.rand(4) + 0.5,
        r(4),
        r(4),
    ),
    "6d-permute": (lambda x: x.permute(5, 4, 3, 2, 1, 0) * 2, (r(2, 1, 3, 1, 2, 2),)),
    # stock delegates these and XNNPACK computes something else (xir keeps the op outside)
    "softmax-after-conv": (lambda x, w: torch.softmax(F.conv2d(x, w), -1), (r(1, 3, 6, 6),), r(4, 3, 3, 3)),
    "upsample-bilinear-1.3": (lambda x: F.interpolate(x, scale_factor=1.3, mode="bilinear"), (r(1, 2, 8, 8),)),
    "addmm-beta-alpha": (lambda x, w, b: torch.addmm(b, x, w, beta=0.5, alpha=2.0), (r(4, 8),), r(8, 6), r(6)),
}


@functools.lru_cache(maxsize=None)
def lowered_case(name):
    fn, inputs, *params = FP32_CASES[name]
    module = Op(fn, *params).eval()
    ep = torch.export.export(module, inputs)
    return ep, inputs, lower(ep, inputs, "stock"), lower(ep, inputs, "xir")


def tolerance(ref):
    return 1e-4 * max(1.0, max(t.abs().max().item() for t in ref))


@pytest.mark.parametrize("name", sorted(FP32_CASES))
def test_fp32_op_parity(name):
    ep, inputs, stock, ours = lowered_case(name)
    ref = reference(ep, inputs)
    assert ours.ran, ours.error
    assert ours.err(ref) <= tolerance(ref), f"xir differs from eager by {ours.err(ref)}"
    stock_correct = stock.ran and stock.err(ref) <= tolerance(ref)
    if stock_correct:
        # everything stock leaves outside, xir may leave outside; xir leaves nothing more outside
        extra = ours.outside - stock.outside
        assert not extra, (
            f"xir leaves {dict(extra)} outside where stock delegates them (report:\n{ours.partitioner.report()})"
        )


@pytest.mark.parametrize(
    "name, op",
    [
        ("softmax-after-conv", "aten._softmax"),
        ("upsample-bilinear-1.3", "aten.upsample_bilinear2d.vec"),
        ("addmm-beta-alpha", "aten.addmm"),
    ],
)
def test_stock_computes_something_else(name, op):
    ep, inputs, stock, ours = lowered_case(name)
    ref = reference(ep, inputs)
    assert stock.ran and stock.err(ref) > 1e-2 and stock.delegated[op] >= 1
    assert ours.err(ref) <= tolerance(ref)
    if op == "aten._softmax":  # in a delegate of its own, where it reads the conv's output contiguous
        assert ours.delegated[op] == 1 and not ours.outside, ours.outside
        assert ["aten._softmax"] in [g.ops() for g in ours.partitioner.last_plan.groups]
    else:
        assert ours.outside[op] == 1


def test_gelu_tanh_is_not_delegated_because_xnnpack_computes_exact_gelu():
    module = Op(lambda x: F.gelu(x, approximate="tanh")).eval()
    inputs = (torch.linspace(-4, 4, 64).reshape(4, 16),)
    ep = torch.export.export(module, inputs)
    ref = reference(ep, inputs)
    stock, bare, ours = lower(ep, inputs, "stock"), lower(ep, inputs, "xir", via="bare"), lower(ep, inputs, "xir")
    # stock delegates it and computes exact GELU: a visible error
    assert stock.delegated["aten.gelu"] == 1 and stock.err(ref) > 1e-4
    # the partitioner alone keeps it outside, and says why
    assert bare.outside["aten.gelu"] == 1 and bare.err(ref) < 1e-6
    assert "approximate='tanh'" in bare.partitioner.report()
    # with xir's rewrites, its formula runs in XNNPACK
    assert ours.err(ref) < 1e-5 and not ours.outside
    assert ours.delegated["aten.tanh"] == 1 and ours.delegated["aten.mul.Tensor"] >= 5


QUANT_CASES = {
    "static-conv-relu": (
        lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()),
        (r(1, 3, 8, 8),),
        "static",
        False,
    ),
    "static-conv-per-channel": (
        lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3)),
        (r(1, 3, 8, 8),),
        "static",
        True,
    ),
    "static-linear": (
        lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)),
        (r(4, 8),),
        "static",
        False,
    ),
    "static-linear-per-channel": (lambda: torch.nn.Sequential(torch.nn.Linear(8, 16)), (r(4, 8),), "static", True),
    "static-add-maxpool": (lambda: AddPool(), (r(1, 4, 8, 8),), "static", False),
    "dynamic-linear": (
        lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)),
        (r(4, 8),),
        "dynamic",
        True,
    ),
}


class AddPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return F.max_pool2d(self.conv(x) + x, 2)


@functools.lru_cache(maxsize=None)
def lowered_quant_case(name):
    make, inputs, mode, per_channel = QUANT_CASES[name]
    torch.manual_seed(0)
    module = quantize_module(make().eval(), inputs, mode, per_channel=per_channel)
    ep = torch.export.export(module, inputs)
    return ep, inputs, lower(ep, inputs, "stock"), lower(ep, inputs, "xir")


@pytest.mark.parametrize("name", sorted(QUANT_CASES))
def test_quantized_parity(name):
    ep, inputs, stock, ours = lowered_quant_case(name)
    ref = reference(ep, inputs)
    scale = max(t.abs().max().item() for t in ref)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 0.05 * scale, f"xir differs from the quantized reference by {ours.err(ref)}"
    assert stock.ran and stock.err(ref) <= 0.05 * scale  # stock is right on these
    assert compute_count(ours.outside) <= compute_count(stock.outside), (dict(ours.outside), dict(stock.outside))
    assert ours.delegated.keys() >= {k for k in stock.delegated if stock.delegated[k]}
    for op in ("aten.convolution", "aten.linear", "aten.addmm"):
        assert ours.outside[op] == 0, f"{op} left outside: {ours.partitioner.report()}"


def test_config_precisions_limit_what_is_delegated():
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

    ep, inputs, _, _ = lowered_quant_case("static-linear")
    ref = reference(ep, inputs)
    only_fp32 = lower(ep, inputs, "xir", config_precisions=ConfigPrecisionType.FP32)
    assert only_fp32.ran, only_fp32.error
    assert only_fp32.err(ref) <= 0.05 * ref[0].abs().max().item()
    assert not any(op.startswith("quantized_decomposed") for op in only_fp32.delegated)
    # with fp32 alone, the quantized linears run in XNNPACK as fp32 linears on their dequantized
    # activations and weights (Q/DQ outside, on ExecuTorch's quantized kernels), as stock's
    # LinearConfig overwrites their precision (lowering.capability.fp32_of_dequantized_weight)
    assert only_fp32.delegated["aten.linear"] == 2 and not only_fp32.outside["aten.linear"]
    assert any(op.startswith("quantized_decomposed") for op in only_fp32.outside)
    static = lower(ep, inputs, "xir", config_precisions=[ConfigPrecisionType.STATIC_QUANT])
    assert static.ran and static.delegated["aten.linear"] == 2
