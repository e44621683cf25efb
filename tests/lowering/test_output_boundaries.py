"""Values that are both a graph output and the input of a rewrite, end to end on ExecuTorch's
runtime: a conv/linear whose output is returned and also feeds a batch norm (fold-batch-norm),
quantized ops whose dequantized output (or quantized input) is returned (Q/DQ folding), a layer
norm whose input is returned (xnnpack.layer-norm-in-fp32), and max pooling whose indices are returned
(bf16-in-fp32, the max pooling rule). Every output is compared with eager (or, quantized, with
the converted pt2e model). Each case also runs stock; what stock does was measured and is
asserted where it is deterministic."""

import pytest
import torch
import torch.nn.functional as F

from tests.lowering.test_bf16 import _randomize, bf16_tolerance
from xir_tools.examples import quantize_module
from xir_tools.harness import lower, reference

BF16 = torch.bfloat16
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["fp32", "bf16"])
BATCH_NORM = "aten._native_batch_norm_legit_no_training"


def fp32_tolerance(ref):
    return 1e-5 * max(1.0, max(t.abs().max().item() for t in ref))


def tolerance(ref, dtype):
    return bf16_tolerance(ref) * 2 if dtype == BF16 else fp32_tolerance(ref)


def output_errors(result, ref):
    """Max abs error of every output (a list, one per output); shapes and dtypes must match."""
    assert result.ran, result.error
    assert len(result.outputs) == len(ref), f"{len(result.outputs)} outputs, expected {len(ref)}"
    errors = []
    for i, (out, expected) in enumerate(zip(result.outputs, ref)):
        assert out.shape == expected.shape, f"output {i}: shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
        assert out.dtype == expected.dtype, f"output {i}: dtype {out.dtype}, expected {expected.dtype}"
        errors.append((out.float() - expected.float()).abs().max().item() if out.numel() else 0.0)
    return errors


def assert_matches(result, ref, tol):
    errors = output_errors(result, ref)
    assert max(errors) <= tol, f"max error per output {errors} > {tol}"


def stock_matches(stock, ref, tol) -> bool:
    return (
        stock.ran
        and len(stock.outputs) == len(ref)
        and all(
            o.shape == e.shape and (o.float() - e.float()).abs().max().item() <= tol for o, e in zip(stock.outputs, ref)
        )
    )


def assert_stock(stock, ref, tol, expected):
    """What stock was measured to do: "matches", "wrong" (loads, runs, an output off) or
    "load failed" (the runtime refuses the delegate)."""
    if expected == "load failed":
        assert not stock.ran and "load failed" in stock.error, stock.error or "stock ran"
    elif expected == "matches":
        assert stock_matches(stock, ref, tol), stock.error or output_errors(stock, ref)
    else:
        assert expected == "wrong" and stock.ran and not stock_matches(stock, ref, tol), stock.error


def export_and_lower(module, inputs, dtype=torch.float32):
    """torch.export, then lower with stock and xir (bf16 with enable_bf16=True)."""
    ep = torch.export.export(module, inputs)
    bf16 = dtype == BF16
    return ep, lower(ep, inputs, "stock", enable_bf16=bf16), lower(ep, inputs, "xir", enable_bf16=bf16)


# 1-3. a conv/linear output that is returned and also normalized by a batch norm


class ConvBNBoth(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
        _randomize(self.bn)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y), y


class LinearBNBoth(torch.nn.Module):
    """Linear(in_features, out_features) then BatchNorm1d(channels): 2-D (N, C) when the input is
    2-D (channels = out_features), 3-D (N, C, L) when it is (N, C, L_in) (channels = C)."""

    def __init__(self, in_features, out_features, channels):
        super().__init__()
        self.fc, self.bn = torch.nn.Linear(in_features, out_features), torch.nn.BatchNorm1d(channels)
        _randomize(self.bn)

    def forward(self, x):
        y = self.fc(x)
        return self.bn(y), y


BN_CASES = {
    "conv2d": (ConvBNBoth, (1, 3, 8, 8), "aten.convolution"),
    "linear-2d": (lambda: LinearBNBoth(8, 6, 6), (4, 8), "aten.linear"),
    "linear-3d": (lambda: LinearBNBoth(8, 6, 4), (2, 4, 8), "aten.linear"),  # (N, C=4, L_in=8) -> (N, 4, L=6)
}

# stock, measured (ExecuTorch 1.5.1's XnnpackPartitioner): in fp32 it does not fuse a batch norm
# into a conv/linear with another user; it delegates the batch norm alone, correct in all three.
# In bf16 the runtime refuses the delegate: "Failed to create convolution node" (conv2d) or
# "Failed to create depthwise convolution node" (the standalone batch norm after a linear).
STOCK_BN = {
    ("conv2d", "fp32"): "matches",
    ("conv2d", "bf16"): "load failed",
    ("linear-2d", "fp32"): "matches",
    ("linear-2d", "bf16"): "load failed",
    ("linear-3d", "fp32"): "matches",
    ("linear-3d", "bf16"): "load failed",
}


def dtype_id(dtype):
    return "bf16" if dtype == BF16 else "fp32"


@DTYPES
@pytest.mark.parametrize("name", sorted(BN_CASES))
def test_batch_norm_input_is_also_an_output(name, dtype):
    make, shape, op = BN_CASES[name]
    torch.manual_seed(0)
    module = make().eval().to(dtype)
    inputs = (torch.randn(*shape, dtype=dtype),)
    ep, stock, ours = export_and_lower(module, inputs, dtype)
    ref = reference(ep, inputs)
    tol = tolerance(ref, dtype)
    assert_matches(ours, ref, tol)  # both outputs: the normalized one and the raw conv/linear output
    assert ours.delegated[op] >= 1 and ours.outside[op] == 0, (dict(ours.delegated), dict(ours.outside))
    assert ours.outside[BATCH_NORM] == 0 and ours.delegated[BATCH_NORM] == 0  # folded, or x * scale + shift
    assert_stock(stock, ref, tol, STOCK_BN[name, dtype_id(dtype)])


# 4. quantized conv/linear whose output (dequantized) or input (quantized) is also returned


class QuantConv(torch.nn.Module):
    def __init__(self, variant):
        super().__init__()
        self.op, self.variant = torch.nn.Conv2d(3, 4, 3), variant
        self.op2 = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return _forward(self, x)


class QuantLinear(torch.nn.Module):
    def __init__(self, variant):
        super().__init__()
        self.op, self.variant = torch.nn.Linear(8, 6), variant
        self.op2 = torch.nn.Linear(6, 6)

    def forward(self, x):
        return _forward(self, x)


def _forward(module, x):
    y = module.op(x)
    if module.variant == "relu":  # the op's dequantized output is returned and feeds a relu
        return torch.relu(y), y
    if module.variant == "chained":  # ... returned and feeds a second quantized op (its input dequantize)
        return module.op2(y), y
    if module.variant == "twice":  # ... returned twice
        return y, y
    assert module.variant == "input"  # the graph input is returned and quantized for the op
    return y, x


QUANT_CASES = {
    "conv": (QuantConv, (1, 3, 8, 8), ("aten.convolution",)),
    "linear": (QuantLinear, (4, 8), ("aten.linear", "aten.addmm", "aten.mm")),
}


@pytest.mark.parametrize("variant", ["relu", "chained", "twice", "input"])
@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_quantized_op_output_is_also_an_output(kind, variant):
    """Per-channel static quantization. Stock, measured: matches in all eight (both lowerings
    delegate everything and give the converted model's outputs exactly)."""
    make, shape, ops = QUANT_CASES[kind]
    torch.manual_seed(0)
    inputs = (torch.randn(*shape),)
    module = quantize_module(make(variant).eval(), inputs, "static", per_channel=True)
    ep, stock, ours = export_and_lower(module, inputs)
    ref = reference(ep, inputs)  # the converted pt2e model
    tol = 0.05 * max(t.abs().max().item() for t in ref)
    assert_matches(ours, ref, tol)
    expected_ops = 2 if variant == "chained" else 1
    assert sum(ours.delegated[op] for op in ops) == expected_ops, (dict(ours.delegated), dict(ours.outside))
    assert sum(ours.outside[op] for op in ops) == 0
    assert not any(op.startswith("quantized_decomposed.") for op in ours.outside), dict(ours.outside)
    if variant == "relu":
        assert ours.delegated["aten.relu"] == 1
    assert_stock(stock, ref, tol, "matches")


# 5. a layer norm whose input is also returned (width 256: ExecuTorch 1.5.1's portable bf16 layer
# norm is wrong from about this width on, so stock's bf16 result shows whether the fp32 rewrite ran)

WIDTH = 256


class LayerNormInputOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 2)
            self.norm.bias.uniform_(-1, 1)

    def forward(self, x):
        h = x * 2
        return self.norm(h), h


@DTYPES
def test_layer_norm_input_is_also_an_output(dtype):
    torch.manual_seed(0)
    module = LayerNormInputOut().eval().to(dtype)
    inputs = (torch.randn(2, 3, WIDTH, dtype=dtype),)
    ep, stock, ours = export_and_lower(module, inputs, dtype)
    ref = reference(ep, inputs)
    tol = tolerance(ref, dtype)
    assert_matches(ours, ref, tol)
    assert ours.outside["aten.mul.Tensor"] == 0 and ours.delegates == 1, dict(ours.outside)  # h = x * 2 and the norm
    assert "aten.native_layer_norm" not in ours.outside  # decomposed (in bf16: in fp32), delegated
    assert ours.delegated["aten.rsqrt"] == 1
    # stock, measured: fp32 matches; bf16 loads and runs, h matches, the norm is off by 3.5
    # (the portable bf16 layer norm)
    assert_stock(stock, ref, tol, "wrong" if dtype == BF16 else "matches")


# 6. max pooling whose indices are returned (and, for contrast, only its values)


class ConvMaxPool(torch.nn.Module):
    def __init__(self, indices):
        super().__init__()
        self.conv, self.indices = torch.nn.Conv2d(3, 4, 3, padding=1), indices

    def forward(self, x):
        y = self.conv(x)
        if self.indices:
            values, indices = F.max_pool2d(y, 2, return_indices=True)
            return values, indices
        return F.max_pool2d(y, 2)


MAX_POOL = ("aten.max_pool2d", "aten.max_pool2d_with_indices")


@DTYPES
@pytest.mark.parametrize("indices", [True, False], ids=["values-and-indices", "values-only"])
def test_max_pool_indices_are_an_output(indices, dtype):
    torch.manual_seed(0)
    module = ConvMaxPool(indices).eval().to(dtype)
    inputs = (torch.randn(1, 3, 8, 8, dtype=dtype),)
    ep, stock, ours = export_and_lower(module, inputs, dtype)
    ref = reference(ep, inputs)
    values_ref = ref[:1]
    tol = tolerance(values_ref, dtype)
    errors = output_errors(ours, ref)
    assert errors[0] <= tol, f"values: max error {errors[0]} > {tol}"
    if indices:
        assert torch.equal(ours.outputs[1], ref[1]), (
            f"indices differ at {(ours.outputs[1] != ref[1]).sum().item()} places"
        )
        assert sum(ours.outside[op] for op in MAX_POOL) == 1  # XNNPACK max pooling has no indices
        assert sum(ours.delegated[op] for op in MAX_POOL) == 0
    else:
        assert sum(ours.delegated[op] for op in MAX_POOL) == 1 and sum(ours.outside[op] for op in MAX_POOL) == 0
    assert ours.delegated["aten.convolution"] == 1 and ours.outside["aten.convolution"] == 0
    # stock, measured: fp32 matches (indices equal; with indices returned the pooling stays
    # outside); bf16 load fails in both ("Failed to create convolution node": a bf16 conv)
    assert_stock(stock, ref, tol, "load failed" if dtype == BF16 else "matches")
    if indices and dtype != BF16:
        assert torch.equal(stock.outputs[1], ref[1])
