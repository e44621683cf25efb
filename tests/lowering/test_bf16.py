"""Correct where stock breaks (2/2): bf16 in XNNPACK, bf16 batched matmul, batch norm folding on
the correct dim, bf16 transformers. Each case also runs stock and shows how it fails."""

import functools

import pytest
import torch
import torch.nn.functional as F

from xir_tools.examples import EXAMPLES, LinearBatchNorm3d, export_example
from xir_tools.harness import lower, reference

BF16 = torch.bfloat16


def bf16_tolerance(ref):
    return 2**-6 * max(1.0, max(t.abs().max().item() for t in ref))  # a few bf16 ulps at the output's magnitude


class DefinableInBf16(torch.nn.Module):
    """Every float op XNNPACK defines in bf16, in one program (one load proves them all)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.prelu = torch.nn.PReLU(3)
        self.register_buffer("w", torch.randn(8, 8))

    def forward(self, x, y, image):
        a = x + y - x * y / (y.abs() + 1)
        b = torch.minimum(a, y) + torch.maximum(a, x) + a.abs().neg() + a.ceil() + a.floor()
        c = torch.sqrt(a.abs() + 1) + torch.rsqrt(a.abs() + 1) + torch.exp(-a.abs()) + torch.log(a.abs() + 1)
        d = torch.sin(c) + torch.cos(c) + torch.sigmoid(c) + torch.tanh(c) + F.relu(b)
        e = F.hardtanh(d) + F.leaky_relu(d, 0.1) + F.gelu(d) + F.hardswish(d) + torch.clamp(d, -1, 1) + d**2
        f = self.fc(e) + torch.mm(e, self.w)
        g = torch.cat([f, e], 1)[:, 3:11].permute(1, 0).reshape(4, -1)
        h = F.pad(self.prelu(image), (1, 1, 1, 1), value=0.5)
        return g, self.bn(self.fc2(f)), h, torch.unsqueeze(f, -1)


DEFINABLE_OPS = {
    "aten.add.Tensor",
    "aten.sub.Tensor",
    "aten.mul.Tensor",
    "aten.div.Tensor",
    "aten.minimum",
    "aten.maximum",
    "aten.abs",
    "aten.neg",
    "aten.ceil",
    "aten.floor",
    "aten.sqrt",
    "aten.rsqrt",
    "aten.exp",
    "aten.log",
    "aten.sin",
    "aten.cos",
    "aten.sigmoid",
    "aten.tanh",
    "aten.relu",
    "aten.hardtanh",
    "aten.leaky_relu",
    "aten.gelu",
    "aten.hardswish",
    "aten.clamp",
    "aten.pow.Tensor_Scalar",
    "aten.linear",
    "aten.mm",
    "aten.cat",
    "aten.slice_copy.Tensor",
    "aten.permute_copy",
    "aten.view_copy",
    "aten.prelu",
    "aten.constant_pad_nd",
}  # (and unsqueeze, which shape-ops-as-views makes a view_copy)


def test_every_op_xnnpack_defines_in_bf16_is_delegated_and_loads():
    torch.manual_seed(0)
    module = DefinableInBf16().eval().to(BF16)
    inputs = (torch.randn(4, 8, dtype=BF16), torch.randn(4, 8, dtype=BF16), torch.randn(1, 3, 4, 4, dtype=BF16))
    ep = torch.export.export(module, inputs)
    ours = lower(ep, inputs, enable_bf16=True)
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    for out, expected in zip(ours.outputs, ref):
        assert (out.float() - expected.float()).abs().max().item() <= bf16_tolerance([expected]) * 4
    missing = DEFINABLE_OPS - set(ours.delegated)
    assert not missing, f"not delegated in bf16: {missing}\n{ours.partitioner.report()}"
    assert not set(ours.outside) & (DEFINABLE_OPS | {"aten.unsqueeze_copy"}), dict(ours.outside)
    assert "aten._native_batch_norm_legit_no_training" not in ours.outside  # folded into fc2


class NotDefinableInBf16(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        pooled = F.avg_pool2d(y, 2) + F.max_pool2d(y, 2)
        up = F.interpolate(pooled, scale_factor=2, mode="bilinear")
        return torch.softmax(up, -1) + up.mean(dim=(2, 3), keepdim=True)


FP32_ONLY = ("aten.convolution", "aten.avg_pool2d", "aten._softmax", "aten.mean.dim", "aten.upsample_bilinear2d.vec")


@functools.lru_cache(maxsize=None)
def lowered_not_definable(via):
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 8, 8, dtype=BF16),)
    ep = torch.export.export(NotDefinableInBf16().eval().to(BF16), inputs)
    return ep, inputs, lower(ep, inputs, "xir", via=via, enable_bf16=True)


def test_ops_xnnpack_cannot_define_in_bf16_stay_outside_with_a_reason():
    """The partitioner alone never delegates them in bf16 and says why."""
    ep, inputs, ours = lowered_not_definable("bare")
    torch.manual_seed(0)
    stock = lower(ep, inputs, "stock", enable_bf16=True)
    assert not stock.ran and "load failed" in stock.error
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= bf16_tolerance(ref)
    for op in FP32_ONLY:
        assert ours.outside[op] >= 1 and ours.delegated[op] == 0, op
    assert ours.outside["aten.max_pool2d"] + ours.outside["aten.max_pool2d_with_indices"] == 1
    report = ours.partitioner.report()
    assert report.count("XNNPACK cannot define it with bf16 tensors") >= 5
    assert ours.delegated["aten.add.Tensor"] >= 1  # the rest of the graph is still delegated


def test_ops_xnnpack_cannot_define_in_bf16_run_in_fp32_inside_xnnpack():
    """With xir's rewrites (bf16-in-fp32) they run in XNNPACK in fp32 between two converts."""
    ep, inputs, ours = lowered_not_definable("etal")
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= bf16_tolerance(ref)
    for op in FP32_ONLY:  # (the softmax follows an upsample, channels-last inside XNNPACK: it is in
        # a delegate of its own, where it reads the upsample's output contiguous)
        assert ours.delegated[op] >= 1 and ours.outside[op] == 0, op
    assert any(
        g.ops() == ["aten._softmax"] or ("aten._softmax" in g.ops() and "aten.upsample_bilinear2d.vec" not in g.ops())
        for g in ours.partitioner.last_plan.groups
    )
    assert ours.delegated["xir.convert"] >= 2


class Matmuls(torch.nn.Module):
    def forward(self, a, b, c, d):
        return torch.bmm(a, b), torch.matmul(c, d)


def test_bf16_bmm_runs_in_xnnpack_as_fp32_output_plus_convert():
    torch.manual_seed(0)
    inputs = (
        torch.randn(3, 17, 64, dtype=BF16),
        torch.randn(3, 64, 9, dtype=BF16),
        torch.randn(2, 2, 5, 16, dtype=BF16),
        torch.randn(2, 2, 16, 7, dtype=BF16),
    )
    ep = torch.export.export(Matmuls(), inputs)
    stock, ours = lower(ep, inputs, "stock", enable_bf16=True), lower(ep, inputs, "xir", enable_bf16=True)
    assert not stock.ran and "load failed" in stock.error  # a bf16-output BMM XNNPACK cannot create
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= bf16_tolerance(ref)
    assert ours.delegated["xir.bmm_f32out"] == 2 and ours.delegated["xir.convert"] == 2
    assert ours.outside["aten.bmm"] == 0


def test_bf16_bmm_without_enable_bf16_stays_outside():
    inputs = (torch.randn(2, 4, 8, dtype=BF16), torch.randn(2, 8, 3, dtype=BF16))
    ep = torch.export.export(Matmuls(), inputs + inputs)
    ours = lower(ep, inputs + inputs, "xir")
    assert ours.ran and not ours.delegated and ours.outside["aten.bmm"] == 2


@pytest.mark.parametrize("pipeline", ["default", "without bf16-in-fp32"])
def test_bf16_attention_block(pipeline):
    """Linears and both matmuls in XNNPACK; softmax never in bf16: outside (the stock-like
    pipeline) or, by default, in XNNPACK in fp32 between converts."""
    example = EXAMPLES["attention-bf16"]
    ep, inputs = export_example(example), example.example_inputs()
    options = (
        {}
        if pipeline == "default"
        else {
            "pipeline": "remove-no-ops,fold-batch-norm,xnnpack.bf16-bmm-f32-output,xnnpack.layer-norm-in-fp32,dead-code-elimination"
        }
    )
    stock, ours = lower(ep, inputs, "stock", enable_bf16=True), lower(ep, inputs, "xir", enable_bf16=True, **options)
    assert not stock.ran
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= bf16_tolerance(ref)
    assert ours.delegated["aten.linear"] == 4 and ours.delegated["xir.bmm_f32out"] == 2
    if pipeline == "default":
        assert ours.delegated["aten._softmax"] == 1 and ours.outside["aten._softmax"] == 0
    else:
        assert ours.outside["aten._softmax"] == 1 and ours.delegated["aten._softmax"] == 0


class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
        _randomize(self.bn)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class LinearBN(torch.nn.Module):
    def __init__(self, shared=False):
        super().__init__()
        self.fc, self.bn, self.shared = torch.nn.Linear(8, 6), torch.nn.BatchNorm1d(6), shared
        _randomize(self.bn)

    def forward(self, x):
        y = self.fc(x)
        return (self.bn(y), y * 2) if self.shared else self.bn(y)


def _randomize(bn):
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)


BN_CASES = {
    "conv2d": (ConvBN, (1, 3, 8, 8), "aten.convolution"),
    "linear-2d": (LinearBN, (4, 8), "aten.linear"),
    "linear-2d-shared-output": (lambda: LinearBN(shared=True), (4, 8), "aten.linear"),
    "linear-3d-C-ne-F": (lambda: LinearBatchNorm3d(channels=4, features=8), (2, 4, 8), "aten.linear"),
    "linear-3d-C-eq-F": (lambda: LinearBatchNorm3d(channels=8, features=8), (2, 8, 8), "aten.linear"),
}


@functools.lru_cache(maxsize=None)
def lowered_bn(name, dtype):
    make, shape, _ = BN_CASES[name]
    torch.manual_seed(0)
    module = make().eval().to(dtype)
    inputs = (torch.randn(*shape, dtype=dtype),)
    ep = torch.export.export(module, inputs)
    return (
        ep,
        inputs,
        lower(ep, inputs, "stock", enable_bf16=dtype == BF16),
        lower(ep, inputs, "xir", enable_bf16=dtype == BF16),
    )


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(BN_CASES))
def test_batch_norm_folds_on_the_correct_dim(name, dtype):
    ep, inputs, stock, ours = lowered_bn(name, dtype)
    ref = reference(ep, inputs)
    tolerance = bf16_tolerance(ref) * 2 if dtype == BF16 else 1e-5 * max(1, ref[0].abs().max().item())
    assert ours.ran, ours.error
    assert ours.err(ref) <= tolerance
    assert ours.outside["aten._native_batch_norm_legit_no_training"] == 0
    assert ours.delegated["aten._native_batch_norm_legit_no_training"] == 0  # folded, or x * scale + shift
    op = BN_CASES[name][2]
    assert ours.delegated[op] == 1  # in bf16 a conv runs in XNNPACK in fp32 (bf16-in-fp32)
    if name.startswith("linear-3d"):
        assert ours.delegated["aten.mul.Tensor"] == 1 and ours.delegated["aten.add.Tensor"] == 1
        # stock folds along F: an error, or a wrong result
        assert not stock.ran or stock.err(ref) > tolerance


def test_fold_batch_norm_ir():
    """IR in, IR out: a conv folds (new weight and bias), a 3-D linear gets x * scale + shift."""
    from passes import PassManager, VerifyEach
    from xir import parse_graph, print_graph

    graph = parse_graph("""graph @g {
  param %w: f32[4,3,1,1]
  param %lw: f32[5,5]
  param %g: f32[4]
  param %b: f32[4]
  buffer %m: f32[4]
  buffer %v: f32[4]
  input %x: f32[1,3,2,2]
  input %y: f32[2,4,5]
  %0: f32[1,4,2,2] = aten.convolution(%x, %w) {bias=none, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}
  %1: f32[1,4,2,2], %2: f32[0], %3: f32[0] = aten._native_batch_norm_legit_no_training(%0, %g, %b, %m, %v) {momentum=0.1, eps=1e-05}
  %4: f32[2,4,5] = aten.linear(%y, %lw)
  %5: f32[2,4,5], %6: f32[0], %7: f32[0] = aten._native_batch_norm_legit_no_training(%4, %g, %b, %m, %v) {momentum=0.1, eps=1e-05}
  return %1, %5
}
""")
    for name, shape in {"w": (4, 3, 1, 1), "lw": (5, 5), "g": (4,), "b": (4,), "m": (4,)}.items():
        graph.input_named(name).data = torch.randn(*shape)
    graph.input_named("v").data = torch.rand(4) + 0.5
    PassManager("fold-batch-norm,dead-code-elimination", [VerifyEach()]).run(graph)
    text = print_graph(graph)
    assert "_native_batch_norm" not in text
    assert "aten.convolution(%x, %w_bn, %w_bn_bias)" in text
    assert "aten.mul.Tensor(%" in text and ", %bn_scale)" in text and "param %bn_scale: f32[4,1]" in text
    assert "aten.linear(%y, %lw)" in text  # the 3-D linear keeps its weights


@pytest.mark.parametrize("example", ["attention-bf16", "linear-bn-3d"])
def test_bare_drop_in_never_wrong(example):
    """The partitioner alone (no transform passes): nodes that need a rewrite stay outside, the
    report says which rewrite, and the program still loads and matches."""
    ex = EXAMPLES[example]
    ep, inputs = export_example(ex), ex.example_inputs()
    ours = lower(ep, inputs, "xir", via="bare", enable_bf16=ex.dtype == BF16)
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= bf16_tolerance(ref)
    report = ours.partitioner.report()
    if example == "attention-bf16":
        assert ours.outside["aten.bmm"] == 2 and "bf16-bmm-f32-output" in report
    else:
        assert ours.outside["aten._native_batch_norm_legit_no_training"] == 1 and "fold-batch-norm" in report


class ConvGroupNormSilu(torch.nn.Module):
    """A bf16 conv, group norm, SiLU (a diffusion U-Net's block): XNNPACK has no group norm, and
    both partitioners left it outside; xnnpack.layer-norm-in-fp32 computes it in fp32, where it
    decomposes, and its output is also a graph output."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.GroupNorm(4, 8)

    def forward(self, x):
        normed = self.norm(self.conv(x))
        return F.silu(normed), normed


def test_bf16_group_norm_runs_in_xnnpack_in_fp32():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 8, 8, 8, dtype=torch.bfloat16),)
    ep = torch.export.export(ConvGroupNormSilu().eval().to(torch.bfloat16), inputs)
    expected, ours = reference(ep, inputs), lower(ep, inputs, "xir", enable_bf16=True)
    assert ours.outputs is not None, ours.error
    assert all(o.dtype == torch.bfloat16 for o in ours.outputs)
    assert ours.err(expected) <= bf16_tolerance(expected)
    assert ours.delegates == 1 and not ours.outside, ours.partitioner.report()
    assert "aten.native_group_norm" not in ours.delegated and ours.delegated["aten.rsqrt"] == 1
