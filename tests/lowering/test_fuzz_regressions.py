"""Regression tests made from the differential fuzzer's shrunk repros (issue 12). Each lowers
with xir and with stock, runs on the runtime and compares with eager (or the converted pt2e
model); the comment says what xir did before its fix."""

import pytest
import torch
import torch.nn.functional as F

from xir_tools.examples import quantize_module
from xir_tools.harness import lower, reference

BF16 = torch.bfloat16


def lower_quantized_both(module, inputs, mode, via, per_channel=True):
    """Quantize ``module`` (pt2e, XNNPACKQuantizer: "static" or "dynamic"), export it, and lower it
    with xir and with stock via ``via``: (the reference outputs, xir's result, stock's)."""
    ep = torch.export.export(quantize_module(module, inputs, mode=mode, per_channel=per_channel), inputs)
    return reference(ep, inputs), lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)


class QuantizedElementwise8d(torch.nn.Module):
    """Statically quantized log/sub/add on an 8-D input: the scalars become 0-D quantized
    constants whose dequantize xir delegated alone, and a delegate cannot return a 0-D tensor."""

    def forward(self, x):
        return (torch.log(x.abs() + 1) - 0.5) + 2.0


def test_quantized_8d_elementwise_chain_with_scalar_constants_runs():
    inputs = (torch.rand(2, 1, 2, 1, 2, 1, 2, 3) + 0.1,)
    ep = torch.export.export(quantize_module(QuantizedElementwise8d().eval(), inputs, mode="static"), inputs)
    ours, stock = lower(ep, inputs, "xir"), lower(ep, inputs, "stock")
    assert ours.ran, ours.error  # before: loaded, then "Failed to retrieve dim order from tensor!" at execute
    assert ours.err(reference(ep, inputs)) <= 0.05
    assert ours.delegated == {}  # everything is 8-D or a 0-D dequantize whose result would leave a delegate
    assert not stock.ran and "load failed" in stock.error  # stock delegates the 8-D ops


class ZeroDOutput(torch.nn.Module):
    """abs of a 0-D input (computed at run time: abs of a 0-D parameter would fold into a constant),
    times a scalar (a 0-D constant for XNNPACK)."""

    def forward(self, x, w):
        return torch.log(x.abs() + 1).reshape(2, 1, 2, 1, 2, 1, 2, 3) + w.abs() * 2.0


def test_a_0d_constant_is_a_delegate_input_and_its_0d_result_leaves():
    inputs = (torch.rand(2, 1, 2, 1, 2, 1, 2, 3), torch.tensor(-1.5))
    ep = torch.export.export(ZeroDOutput().eval(), inputs)
    ours, stock = lower(ep, inputs, "xir"), lower(ep, inputs, "stock")
    # abs(w) * 2 in a delegate with the 2 a static tensor failed: XNNPACK makes static tensors at
    # least 1-D, the result came out 1-D, "Size needs to be equal to the number of dimensions". The
    # 2 is a delegate input (as in stock's program), the result 0-D, and the delegate returns it.
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 1e-6
    assert ours.delegated == {"aten.abs": 1, "aten.mul.Tensor": 1}, ours.delegated
    assert not stock.ran and "load failed" in stock.error  # stock delegates the 8-D ops


class ZeroDFromInputs(torch.nn.Module):
    """fuzz dynamic seeds 30060, 30081, reduced: 0-D results computed from 0-D values only."""

    def forward(self, x, w):
        s = torch.tanh(x.sum())
        return torch.remainder(x, s + w.abs()), s, w.abs()


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_0d_result_computed_from_0d_inputs_leaves_a_delegate(via):
    inputs = (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.tensor(-1.5))
    ep = torch.export.export(ZeroDFromInputs().eval(), inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    # before: every op with a 0-D result leaving a delegate stayed outside (stock delegates them
    # and runs them right)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 1e-6
    assert ours.delegated == {"aten.tanh": 1, "aten.abs": 2, "aten.add.Tensor": 1}, ours.delegated
    assert stock.ran and stock.delegated["aten.tanh"] == 1


class ZeroDInside(torch.nn.Module):
    def forward(self, x, w):
        return torch.relu(x) * w.abs()


def test_a_0d_value_inside_a_delegate_stays_inside():
    inputs = (torch.randn(2, 3), torch.tensor(-1.5))
    ep = torch.export.export(ZeroDInside().eval(), inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.ran and ours.err(reference(ep, inputs)) <= 1e-6
    assert ours.delegated == {"aten.relu": 1, "aten.abs": 1, "aten.mul.Tensor": 1} and ours.delegates == 1


class Bf16Conv3dBlock(torch.nn.Module):
    """A bf16 Conv3d beside cat, tanh GELU, a padded max pool, matmul and a cast to half."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 3, 2)

    def forward(self, x, y):
        a = self.conv(x)
        b = F.gelu(torch.cat([a, a], 1), approximate="tanh")
        return F.max_pool2d(b.reshape(1, 18, 3, 3), 2, padding=1), torch.matmul(y, y.transpose(-1, -2)).to(torch.half)


def test_bf16_conv3d_is_decomposed_and_runs():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 2, 4, 4, 4, dtype=BF16), torch.randn(2, 3, 4, dtype=BF16))
    ep = torch.export.export(Bf16Conv3dBlock().eval().to(BF16), inputs)
    ours, stock = lower(ep, inputs, "xir", enable_bf16=True), lower(ep, inputs, "stock", enable_bf16=True)
    # before: the bf16 Conv3d stayed on the portable kernels, which have no 3-D convolution (error 0x12)
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    for out, expected in zip(ours.outputs, ref):
        assert (out.float() - expected.float()).abs().max().item() <= 2 ** -5 * max(1.0, expected.float().abs().max().item())
    assert ours.delegated["aten.convolution"] == 2 and "aten.convolution" not in ours.outside  # two depth taps, in fp32
    assert not stock.ran and "load failed" in stock.error  # stock: bf16 max pooling


class UnbatchedPooling(torch.nn.Module):
    def forward(self, x):
        return torch.sum(torch.cat([F.max_pool2d(x, 3, padding=1)[..., 1:3]] * 2, dim=1), dim=(0, 2))


def test_max_pooling_of_an_unbatched_3d_input_stays_outside():
    inputs = (torch.randn(1, 4, 15),)
    ep = torch.export.export(UnbatchedPooling().eval(), inputs)
    ours = lower(ep, inputs, "xir", via="backend")
    # before: delegated, and XNNPACK's channels-last pass asserted "non-NHWC compatible node"
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 1e-5
    assert not any("max_pool" in op for op in ours.delegated)
    assert lower(ep, inputs, "stock", via="backend").ran


class MatmulThenLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6, 16) / 2.5)
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.linear(torch.matmul(x.unsqueeze(0), self.w))


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["fp32", "bf16"])
def test_views_of_a_linear_decomposed_by_to_backend_are_kept(dtype):
    inputs = (torch.randn(3, 7, 6, dtype=dtype),)
    ep = torch.export.export(MatmulThenLinear().eval().to(dtype), inputs)
    ours = lower(ep, inputs, "xir", via="backend", enable_bf16=True)
    # before: remove-no-ops folded the linear's input view away; XNNPACK rebuilt the linear from a
    # 2-D input with a 4-D output ("Size needs to be equal to the number of dimensions") at run time
    assert ours.ran, ours.error
    ref = reference(ep, inputs)[0].float()
    assert (ours.outputs[0].float() - ref).abs().max().item() <= (1e-5 if dtype is torch.float32 else 2 ** -6) * max(1.0, ref.abs().max().item())
    assert ours.delegated["aten.addmm"] == 1 and ours.delegated["aten.mm"] == 1 and not ours.outside


class BatchNormWithoutAffine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(32, affine=False)
        self.bn.running_mean.uniform_(-1.0, 1.0)
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.bn(x)


@pytest.mark.parametrize("mode", ["fp32", "static"])
def test_batch_norm_without_weight_and_bias(mode):
    torch.manual_seed(0)
    inputs = (torch.randn(7, 32),)
    module = BatchNormWithoutAffine().eval()
    if mode == "static":
        module = quantize_module(module, inputs, mode="static")
    ep = torch.export.export(module, inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.ran, ours.error  # before: fold-batch-norm raised reading the absent weight's data
    assert ours.err(reference(ep, inputs)) <= (1e-5 if mode == "fp32" else 0.05)
    assert "aten._native_batch_norm_legit_no_training" not in ours.outside  # a multiply-add, delegated
    assert ours.delegated["aten.mul.Tensor"] == 1 and ours.delegated["aten.add.Tensor"] == 1


class QuantizedLinearAfterSliceAndUnsqueeze(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.randn(960))
        self.linear = torch.nn.Linear(100, 6)

    def forward(self, x):
        return self.linear((x.reshape(960) + self.c)[..., 823:-37].unsqueeze(-2))


def test_quantized_reshape_with_different_qparams_stays_outside():
    inputs = (torch.randn(2, 6, 10, 8),)
    ep = torch.export.export(quantize_module(QuantizedLinearAfterSliceAndUnsqueeze().eval(), inputs, mode="static"), inputs)
    ours = lower(ep, inputs, "xir", via="backend")
    # before: the unsqueeze (made a view) was delegated as a quantized reshape whose input and output
    # are quantized differently: "Failed to create squeeze node" at load
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 0.05 * max(1.0, reference(ep, inputs)[0].abs().max().item())
    assert ours.delegated["aten.addmm"] == 1
    assert lower(ep, inputs, "stock", via="backend").ran


class DotThenHardswish(torch.nn.Module):
    def forward(self, x):
        v = torch.flatten(x, 0)
        return F.hardswish(torch.matmul(v, v))


def test_an_op_kept_whole_for_xnnpack_is_delegated_or_decomposed():
    inputs = (torch.randn(2, 3),)
    ep = torch.export.export(DotThenHardswish().eval(), inputs)
    ours = lower(ep, inputs, "xir")
    # before: hardswish was kept whole (not decomposed) for XNNPACK, then left outside because its
    # 0-D result cannot leave a delegate: "was not decomposed or delegated"
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 1e-5
    # its 0-D result is computed from delegate inputs only, so it may leave the delegate: delegated whole
    assert ours.delegated["aten.hardswish"] == 1


class QuantizedUpsampleWithFloatOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(8, 6, 3, dilation=2, bias=False)
        self.linear = torch.nn.Linear(9, 6)

    def forward(self, x):
        return F.interpolate(self.linear(self.conv(torch.cat([x, x], dim=1))), scale_factor=2, mode="bilinear")


@pytest.mark.parametrize("precisions", ["default", "static-only"])
def test_an_op_left_outside_does_not_fail_executorchs_final_check(precisions):
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 1, 5),)
    module = quantize_module(QuantizedUpsampleWithFloatOutput().eval(), inputs, mode="static", per_channel=True)
    ep = torch.export.export(module, inputs)
    options = {} if precisions == "default" else {"config_precisions": ConfigPrecisionType.STATIC_QUANT}
    ours = lower(ep, inputs, "xir", **options)
    # before: asked again after lowering, xir said the upsample left outside was supported:
    # "was not decomposed or delegated"
    assert ours.ran, ours.error
    ref = reference(ep, inputs)[0]
    assert ours.err([ref]) <= 0.1 * max(1.0, ref.abs().max().item())
    if precisions == "default":  # quantized input, float output: in fp32 between conversions
        assert ours.delegated["aten.upsample_bilinear2d.vec"] == 1 and not ours.outside
    else:  # no fp32 among the precisions: outside
        assert ours.outside["aten.upsample_bilinear2d.vec"] == 1


class UpcastLeavingTheDelegate(torch.nn.Module):
    def __init__(self, returned: bool):
        super().__init__()
        self.returned = returned

    def forward(self, x):
        v = x / (x.abs() + 1.0)
        up = v.float()
        w = v.unsqueeze(4)
        return (up if self.returned else torch.cumsum(up, 0)), torch.matmul(w, w.transpose(-2, -1))


@pytest.mark.parametrize("returned", [True, False], ids=["returned", "read-outside"])
def test_a_bf16_upcast_whose_result_leaves_xnnpack_stays_a_cast(returned):
    inputs = (torch.randn(1, 1, 6, 12, dtype=BF16),)
    ep = torch.export.export(UpcastLeavingTheDelegate(returned).eval().to(BF16), inputs)
    ours = lower(ep, inputs, "xir", via="backend", enable_bf16=True)
    # before: the upcast became an xir.convert whose f32 result left the delegate, and the other
    # output came back as garbage (max error 1e38)
    assert ours.ran, ours.error
    for out, expected in zip(ours.outputs, reference(ep, inputs)):
        assert (out.float() - expected.float()).abs().max().item() <= 2 ** -6 * max(1.0, expected.float().abs().max().item())
    assert ours.outside["dim_order_ops._to_dim_order_copy"] >= 1 and ours.delegated["xir.bmm_f32out"] == 1  # the upcast stays a cast


class TransposedConvOutputPadding(torch.nn.Module):
    """A transposed convolution with dilation 2 and output_padding 1 at stride 1 (PyTorch allows
    output_padding below max(stride, dilation); XNNPACK's deconvolution needs it below the stride)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose1d(11, 4, 4, dilation=2, bias=False, output_padding=1)

    def forward(self, x):
        return self.conv(x)


@pytest.mark.parametrize("dtype", [torch.float32, BF16])
def test_transposed_conv_with_output_padding_at_stride_1_stays_outside(dtype):
    """fuzz bf16 seed 1073: xir's program loaded and failed to run ("propagating input shapes
    failed"); stock's fails to load."""
    torch.manual_seed(0)
    inputs = (torch.randn(6, 11, 6, dtype=dtype),)
    ep = torch.export.export(TransposedConvOutputPadding().eval().to(dtype), inputs)
    ours = lower(ep, inputs, "xir", enable_bf16=dtype is BF16)
    assert ours.ran, ours.error
    expected = reference(ep, inputs)[0]
    assert (ours.outputs[0].float() - expected.float()).abs().max().item() <= 0.05 * max(1.0, expected.float().abs().max().item())
    assert "aten.convolution" in ours.outside and "aten.convolution" not in ours.delegated
    if dtype is torch.float32:  # (in bf16 it stays bf16: not wrapped in fp32 for a convolution XNNPACK refuses)
        assert "output_padding [1] not below its stride [1]" in ours.partitioner.report()


class ConvThenLinearOnA4dView(torch.nn.Module):
    """fuzz static seed 1160, shrunk: a linear on the 4-D output of a 1x1 conv whose input was
    pooled and transposed. ``to_edge`` writes that linear as expand -> view -> bmm -> view."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(116008)
        self.conv = torch.nn.Conv2d(6, 8, 1)
        torch.manual_seed(116010)
        self.linear = torch.nn.Linear(2, 2, bias=False)

    def forward(self, x):
        v = F.adaptive_avg_pool2d(F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False), 1)
        return self.linear(self.conv(v.transpose(-1, -4)))


@pytest.mark.parametrize("via,per_op_mode", [("backend", True), ("backend", False), ("etal", False)])
def test_a_linear_split_across_a_delegate_edge_is_not_rebuilt_by_xnnpack(via, per_op_mode):
    inputs = (torch.randn(2, 6, 12, 5, generator=torch.Generator().manual_seed(116090)),)
    ep = torch.export.export(quantize_module(ConvThenLinearOnA4dView().eval(), inputs, mode="static",
                                             per_channel=True), inputs)
    ours = lower(ep, inputs, "xir", via=via, per_op_mode=per_op_mode)
    # before (to_backend): the linear's input view stayed outside; XNNPACK's preprocessing rebuilt a
    # linear from the 3-D view to the 4-D output, and the program loaded, then failed at run time:
    # "Size needs to be equal to the number of dimensions ... Failed to retrieve dim order". Since
    # float ops run between conversions the default mode delegates the whole linear; per op, its
    # bmm is alone in a delegate.
    assert ours.ran, ours.error
    ref = reference(ep, inputs)[0]
    assert ours.err([ref]) <= 0.05 * max(1.0, ref.abs().max().item())
    assert ours.delegated["aten.convolution"] == 1
    kept = "run as matrix multiplies, not rebuilt into a linear" in ours.partitioner.report()
    if per_op_mode:
        assert ours.delegated["aten.bmm"] == 1 and kept  # run as the bmm it is
    else:
        assert not kept  # the whole linear in one delegate: rebuilt exactly
    if via == "backend":
        assert not lower(ep, inputs, "stock", via=via, per_op_mode=per_op_mode).ran
    else:
        assert not ours.outside  # the linear kept whole


class CloneBeforeCumsum(torch.nn.Module):
    """fuzz fp32 seed 10951, shrunk: a slice read by a group norm (through the contiguous clone
    torch.export writes before it) and by a subtraction. The group norm is now decomposed into
    XNNPACK ops (xnnpack.decompose-group-norm), so an op that stays outside takes its place."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1095104)
        self.w = torch.nn.Parameter(torch.randn(8, 2) / 2.828)

    def forward(self, x):
        v = torch.matmul(torch.cat([x, x], dim=1), self.w)[:, 6:7]
        first, _ = torch.split(v, [1, 1], dim=3)
        return torch.cumsum(first.clone(), dim=2) - first


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_copy_at_a_delegate_edge_beside_its_operand_stays_outside(via):
    inputs = (torch.randn(1, 4, 11, 8, generator=torch.Generator().manual_seed(1095190)),)
    ep = torch.export.export(CloneBeforeCumsum().eval(), inputs)
    ours = lower(ep, inputs, "xir", via=via)
    # before (to_backend): the clone was delegated as the delegate's output while the slice it
    # copies left the delegate too; XNNPACK's preprocessing dropped the clone and lowering failed:
    # "Output node 'aten_slice_copy_tensor_1' is already in the inputs"
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= 1e-5
    assert "dim_order_ops._clone_dim_order" not in ours.delegated
    assert ours.delegated["aten.mm"] + ours.delegated["aten.linear"] == 1 and ours.delegated["aten.sub.Tensor"] == 1
    assert lower(ep, inputs, "stock", via=via).ran


class BatchNormRelu6Relu(torch.nn.Module):
    """fuzz fp32 seed 11037, shrunk: relu after relu6 after a batch norm (folded into a multiply
    and an add), the result also read by an 8-D multiply left outside."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1103701)
        self.bn = torch.nn.BatchNorm1d(32)
        self.bn.running_mean.uniform_(-1.0, 1.0)
        self.bn.running_var.uniform_(0.5, 2.0)
        torch.nn.init.uniform_(self.bn.weight, 0.5, 2.0)
        torch.nn.init.uniform_(self.bn.bias, -1.0, 1.0)

    def forward(self, x):
        v = F.relu(F.relu6(self.bn(x)))
        return v, (v * x.reshape(-1, 2, 1, 2, 2, 2, 2, 1))[:1]


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_consecutive_activations_keep_both_bounds(via):
    inputs = (torch.randn(2, 32, generator=torch.Generator().manual_seed(1103791)) * 4,)
    ep = torch.export.export(BatchNormRelu6Relu().eval(), inputs)
    ours = lower(ep, inputs, "xir", via=via)
    # before: XNNPACK's preprocessing fused the relu6 into the add and then the relu over it: the
    # program ran relu(x * w + b), without the upper bound 6 (wrong by 0.8 on the fuzzer's input)
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ref[0].max().item() == 6.0  # the upper bound matters on this input
    assert ours.err(ref) <= 1e-5
    assert ours.delegated["aten.hardtanh"] == 1 and "aten.relu" not in ours.delegated  # one activation, both bounds


class AddAndSubWithAlpha(torch.nn.Module):
    """fuzz fp32 seed 10978, reduced: an add with alpha whose first operand is broadcast."""

    def forward(self, x, y):
        return torch.add(x, y, alpha=2.0), torch.sub(x, y, alpha=3.0)


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_alpha_of_an_add_is_a_multiply(via):
    inputs = (torch.randn(1, generator=torch.Generator().manual_seed(0)), torch.randn(3, generator=torch.Generator().manual_seed(1)))
    ep = torch.export.export(AddAndSubWithAlpha().eval(), inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    # before: left outside, ExecuTorch's portable add/sub computed it wrong (as stock's program does)
    ref = reference(ep, inputs)
    assert ours.ran and ours.err(ref) <= 1e-6
    assert ours.delegated == {"aten.mul.Tensor": 2, "aten.add.Tensor": 1, "aten.sub.Tensor": 1} and not ours.outside
    assert stock.ran and stock.err(ref) > 0.1


class PadAfterQuantizedLinear(torch.nn.Module):
    """fuzz static seed 1074, shrunk: a zero pad of a quantized linear's 5-D output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(107401)
        self.linear = torch.nn.Linear(6, 2)

    def forward(self, x):
        return F.pad(self.linear(x), (1, 1, 0, 1, 1, 0))[:, :3:2]


def test_a_pad_reading_a_dequantize_is_not_run_between_conversions():
    inputs = (torch.randn(1, 3, 2, 3, 6, generator=torch.Generator().manual_seed(107490)),)
    ep = torch.export.export(quantize_module(PadAfterQuantizedLinear().eval(), inputs, mode="static"), inputs)
    ours = lower(ep, inputs, "xir")
    # before (while float ops ran between conversions and pads with them): XNNPACK's preprocessing
    # quantized the pad's output, its input an f32 conversion: "Failed to create StaticConstantPad"
    assert ours.ran, ours.error
    ref = reference(ep, inputs)[0]
    assert ours.err([ref]) <= 0.05 * max(1.0, ref.abs().max().item())
    assert ours.delegated["aten.linear"] == 1 and ours.outside["aten.constant_pad_nd"] == 1
    assert not lower(ep, inputs, "stock").ran  # stock delegates the pad and fails to load the same way


class ConvPadLinear(torch.nn.Module):
    """fuzz dynamic seed 30012, reduced: a linear on the 4-D output of a conv (through ops that keep
    its layout: an activation and a pad)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3001201)
        self.conv = torch.nn.Conv2d(2, 3, 2)
        self.linear = torch.nn.Linear(12, 5)

    def forward(self, x):
        y = F.pad(F.leaky_relu(self.conv(x), 0.2), (1, 2, 1, 1))
        return self.linear(y), y


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_dynamically_quantized_linear_after_a_conv_gets_its_own_delegate(via):
    inputs = (torch.randn(1, 2, 11, 10, generator=torch.Generator().manual_seed(3001290)),)
    ep = torch.export.export(quantize_module(ConvPadLinear().eval(), inputs, mode="dynamic", per_channel=True), inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    # before: one delegate; XNNPACK's channels-last pass kept the pad's output NHWC and put a copy
    # between the linear and its dynamic dequantize: "Weight and Input should both be quantized"
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= 0.05 * max(1.0, max(r.abs().max().item() for r in ref))
    assert not ours.outside, ours.outside
    assert ours.delegates == 2  # conv, activation and pad; the linear with its dynamic quantization
    assert "Weight and Input should both be quantized" in stock.error  # stock: one delegate, as xir before


class LinearSliceConv(torch.nn.Module):
    """fuzz dynamic seed 30116, reduced: a conv on a slice of a linear's 4-D output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3011601)
        self.linear = torch.nn.Linear(11, 4)
        self.conv = torch.nn.Conv2d(3, 2, (3, 1), bias=False)

    def forward(self, x):
        y = self.linear(x)
        return y[..., :3], self.conv(y[..., 3:])


class ConvReluConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 4, 3)
        self.conv2 = torch.nn.Conv2d(4, 2, 3)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x)))


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_dynamically_quantized_conv_on_a_computed_activation_gets_its_own_delegate(via):
    inputs = (torch.randn(1, 3, 7, 11, generator=torch.Generator().manual_seed(3011690)),)
    ep = torch.export.export(quantize_module(LinearSliceConv().eval(), inputs, mode="dynamic", per_channel=True), inputs)
    ours = lower(ep, inputs, "xir", via=via)
    # before: one delegate; XNNPACK's channels-last pass followed first arguments from the conv's
    # dequantize up through the slice and the linear to its 1-D bias, and tried to make that
    # channels-last: "required rank 4 tensor to use channels_last format"
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= 0.05 * max(1.0, max(r.abs().max().item() for r in ref))
    assert not ours.outside and ours.delegates == 2, (ours.outside, ours.delegates)


def test_a_dynamically_quantized_conv_after_a_conv_shares_its_delegate():
    """The conv's activation is already channels-last (computed from a conv): nothing to convert,
    one delegate, as stock."""
    inputs = (torch.randn(1, 3, 9, 9, generator=torch.Generator().manual_seed(1)),)
    ep = torch.export.export(quantize_module(ConvReluConv().eval(), inputs, mode="dynamic", per_channel=True), inputs)
    ours, stock = lower(ep, inputs, "xir"), lower(ep, inputs, "stock")
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    assert ours.err(ref) <= 0.05 * max(1.0, ref[0].abs().max().item())
    assert ours.delegated["aten.convolution"] == 2 and ours.delegates == 1 and not ours.outside
    assert stock.ran and stock.delegates == 1


class Bf16ReluFloatPad(torch.nn.Module):
    """fuzz bf16 seed 20194, reduced: a pad with -1 of a bf16 result cast to fp32 (the relu's
    result also returned)."""

    def forward(self, x):
        y = torch.relu(x)
        return F.pad(y.float(), (0, 2), value=-1.0), y


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_pad_of_a_converted_result_pads_with_its_value(via):
    inputs = (torch.randn(4, 3, 6, 8, generator=torch.Generator().manual_seed(2019490)).to(BF16),)
    ep = torch.export.export(Bf16ReluFloatPad().eval(), inputs)
    ours = lower(ep, inputs, "xir", via=via, enable_bf16=True)
    # before: relu, convert and pad in one delegate, and XNNPACK padded with 0 instead of -1
    # (wrong by 1.0; stock keeps the cast outside and is right)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) == 0.0
    assert ours.delegated == {"aten.relu": 1, "xir.convert": 1, "aten.constant_pad_nd": 1} and not ours.outside
    assert ours.delegates == 2  # the pad in a delegate of its own, reading the converted value as an input


class ConvTransposeSoftmax(torch.nn.Module):
    """fuzz bf16 seed 20342, reduced: a softmax over the last dim of a conv's output transposed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2034204)
        self.conv = torch.nn.Conv2d(3, 6, 2, groups=3)

    def forward(self, x):
        return F.softmax(self.conv(x).transpose(-2, -1), dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, BF16])
def test_a_softmax_after_a_permuted_conv_output_runs_in_a_delegate_of_its_own(dtype):
    inputs = (torch.randn(1, 3, 9, 7, generator=torch.Generator().manual_seed(2034290)).to(dtype),)
    ep = torch.export.export(ConvTransposeSoftmax().to(dtype).eval(), inputs)
    ours, stock = lower(ep, inputs, "xir", enable_bf16=True), lower(ep, inputs, "stock", enable_bf16=True)
    # before: xir took a permute for an op after which the tensor is contiguous again, and delegated
    # the softmax; XNNPACK permutes the channels-last tensor and normalized over the channels.
    # Then it left the softmax outside; now it is in a delegate of its own (in bf16, in fp32
    # between conversions), where it reads the permuted tensor contiguous
    ref = reference(ep, inputs)
    assert ours.ran and ours.err(ref) <= (1e-5 if dtype == torch.float32 else 0.02)
    assert not ours.outside and ours.delegated["aten._softmax"] == 1 and ours.delegated["aten.convolution"] == 1
    groups = [g.ops() for g in ours.partitioner.last_plan.groups]
    assert len(groups) == ours.delegates >= 2 and any("aten._softmax" in g and "aten.convolution" not in g for g in groups)
    if dtype == torch.float32:
        assert stock.ran and stock.err(ref) > 0.1  # stock delegates the softmax and is wrong


class Bf16RowMean(torch.nn.Module):
    """fuzz fp32 seeds 10045, 10015, reduced: x + x.mean(-1, keepdim=True) and a split, in bf16."""

    def forward(self, x):
        a, b = x.split([2, 4], dim=1)
        return x + x.mean(dim=-1, keepdim=True), a, b


@pytest.mark.parametrize("enable_bf16", [False, True])
def test_a_bf16_mean_or_split_is_rewritten_only_where_bf16_is_delegated(enable_bf16):
    inputs = (torch.randn(3, 6, 32, generator=torch.Generator().manual_seed(0)).to(BF16),)
    ep = torch.export.export(Bf16RowMean().eval(), inputs)
    ours = lower(ep, inputs, "xir", enable_bf16=enable_bf16)
    assert ours.ran and ours.err(reference(ep, inputs)) <= 0.05
    if enable_bf16:  # as a spatial mean in fp32 between conversions
        assert ours.delegated["aten.mean.dim"] == 1 and not ours.outside, ours.outside
    else:  # before: the mean written as view -> mean -> view and the split as slices, all outside
        assert ours.outside == {"aten.mean.dim": 1, "aten.add.Tensor": 1, "aten.split_with_sizes_copy": 1}
        assert not ours.delegated


class GroupNorms(torch.nn.Module):
    """fuzz fp32 seed 11651, reduced: group norms of a 5-D linear output and of a 4-D mean (one
    without weight and bias), the linear's output also read by a hardtanh and returned."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1165101)
        self.linear = torch.nn.Linear(4, 24)
        self.gn = torch.nn.GroupNorm(2, 2)
        torch.nn.init.uniform_(self.gn.weight, 0.5, 1.5)
        torch.nn.init.uniform_(self.gn.bias, -0.5, 0.5)
        self.plain = torch.nn.GroupNorm(2, 2, affine=False)

    def forward(self, x):
        y = self.linear(x)
        return self.gn(y), self.plain(torch.mean(y - 3.0, dim=-1)), F.hardtanh(y, -2.0, 1.0), y


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_group_norms_are_decomposed_into_xnnpack_ops(via):
    inputs = (torch.randn(1, 2, 4, 5, 4, generator=torch.Generator().manual_seed(1165190)),)
    ep = torch.export.export(GroupNorms().eval(), inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    ref = reference(ep, inputs)
    # before (and stock): the group norms ran on ExecuTorch's portable kernel, off by 1.2e-3 here
    assert ours.ran, ours.error
    assert ours.err(ref) <= 2e-5 * max(1.0, max(r.abs().max().item() for r in ref))
    assert not ours.outside and "aten.native_group_norm" not in ours.delegated, ours.outside
    assert stock.ran and stock.outside["aten.native_group_norm"] == 2


class BmmOfOnePermute(torch.nn.Module):
    """fuzz bf16 seed 20645, reduced: a bmm reading one permute twice, that permute of a graph input
    or of a computed value, and also returned or not."""

    def __init__(self, of_input: bool, returned: bool):
        super().__init__()
        self.of_input, self.returned = of_input, returned

    def forward(self, x):
        p = (x if self.of_input else x.abs()).permute(2, 1, 0)
        return (torch.bmm(p, p), p) if self.returned else torch.bmm(p, p)


@pytest.mark.parametrize("of_input,returned", [(True, False), (False, False), (False, True)],
                         ids=["of-input", "of-computed", "of-computed-and-returned"])
@pytest.mark.parametrize("dtype,via", [(torch.float32, "backend"), (torch.float32, "etal"), (BF16, "backend"), (BF16, "etal")])
def test_a_bmm_reading_one_permute_twice_reads_two(dtype, via, of_input, returned):
    inputs = (torch.randn(2, 2, 8, generator=torch.Generator().manual_seed(0)).to(dtype),)
    ep = torch.export.export(BmmOfOnePermute(of_input, returned).eval(), inputs)
    ref = reference(ep, inputs)
    options = {"enable_bf16": True} if dtype == BF16 else {}
    ours, stock = lower(ep, inputs, "xir", via=via, **options), lower(ep, inputs, "stock", via=via, **options)
    # before: wrong by 0.58 (bf16, fuzz) and by up to 11 (fp32 3x3x3, with stock too): XNNPACK
    # multiplies wrong when one transpose inside the delegate, not returned, feeds both operands.
    # A second permute makes it right.
    assert ours.ran, ours.error
    assert ours.err(ref) <= (0.1 if dtype == BF16 else 1e-5)
    bmm = "xir.bmm_f32out" if dtype == BF16 else "aten.bmm"
    assert ours.delegated[bmm] == 1 and ours.delegated["aten.permute_copy"] == 2, ours.delegated
    assert ours.outside == {}, ours.outside
    if dtype == BF16:
        assert not stock.ran and "load failed" in stock.error  # a bf16 bmm output XNNPACK cannot produce
    elif returned:
        assert stock.ran and stock.err(ref) <= 1e-5  # a permute that is also a delegate output is right
    else:
        assert stock.ran and stock.err(ref) > 0.5, stock.error  # stock delegates one permute and is wrong


class LinearsOfOneInput(torch.nn.Module):
    """fuzz dynamic seed 30466, reduced: three linears of one 1-D input, two without a bias (each an
    unsqueeze -> mm -> squeeze in the edge program), the input also returned."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = (torch.nn.Linear(20, n, bias=n == 3) for n in (2, 8, 3))

    def forward(self, x):
        return self.a(x), self.b(x), self.c(x), x


class LinearThenVectorMatmul(torch.nn.Module):
    """fuzz dynamic seed 30307, reduced: a linear without a bias of a 1-D input, its result times a
    matrix (both unsqueeze -> mm -> squeeze in the edge program, the second reading the first)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(5, 16, bias=False)
        self.w = torch.nn.Parameter(torch.randn(16, 4))

    def forward(self, x):
        return torch.matmul(self.a(x), self.w)


@pytest.mark.parametrize("module,size", [(LinearsOfOneInput, 20), (LinearThenVectorMatmul, 5)],
                         ids=["three-linears-of-one-input", "matmul-of-a-linear-result"])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_1d_dynamically_quantized_linears_are_recognised_after_write_back(via, module, size):
    inputs = (torch.randn(size, generator=torch.Generator().manual_seed(0)),)
    ref, ours, stock = lower_quantized_both(module().eval(), inputs, "dynamic", via, per_channel=True)
    # before (to_backend): write-back gave the view that replaced an unsqueeze the module of another
    # linear (three linears: the first one's, as all three unsqueezes read the shared dequantize;
    # the matmul: the linear's, from the view it reads), the view joined that linear's source
    # partition, and a linear was not recognised: its matmul stayed outside with its quantization
    # (and three linears sharing one: 14 ops outside against stock's 0; the matmul: 5 against 2)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-5
    assert ours.outside == {} and ours.delegates == 1, ours.outside
    assert ours.delegated["quantized_decomposed.choose_qparams.tensor"] >= 1
    assert stock.ran


class SoftmaxAfterARejectedMean(torch.nn.Module):
    """fuzz static seed 1011, reduced: a 4-D softmax over the last dim of a value computed from a
    mean XNNPACK does not take (over dims 0 and 1), that mean also returned."""

    def forward(self, x):
        m = torch.mean(x, dim=(0, 1))
        return F.softmax(m + x * 2.0, dim=-1), m


@pytest.mark.parametrize("mode", ["fp32", "static"])
def test_a_softmax_after_a_mean_left_outside_is_delegated(mode):
    inputs = (torch.randn(1, 1, 12, 10, generator=torch.Generator().manual_seed(0)),)
    module = SoftmaxAfterARejectedMean().eval()
    if mode == "static":
        module = quantize_module(module, inputs, mode="static")
    ep = torch.export.export(module, inputs)
    ref = reference(ep, inputs)
    ours, stock = lower(ep, inputs, "xir", via="backend"), lower(ep, inputs, "stock", via="backend")
    # before: the softmax stayed outside as "after aten.mean.dim" (channels-last in XNNPACK), but that
    # mean is outside XNNPACK and its result arrives contiguous; stock delegates the softmax and is right
    assert ours.ran, ours.error
    assert ours.err(ref) <= (0.02 if mode == "static" else 1e-5)
    assert ours.delegated["aten._softmax"] == 1 and "aten._softmax" not in ours.outside, ours.delegated
    assert ours.outside["aten.mean.dim"] == 1
    assert stock.ran and stock.err(ref) <= (0.02 if mode == "static" else 1e-5)
    assert stock.delegated["aten._softmax"] == 1


@pytest.mark.parametrize("cin,cout,groups", [(8, 8, 4), (4, 12, 2)], ids=["groups-4", "groups-2-widening"])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_grouped_dynamically_quantized_conv_is_delegated(via, cin, cout, groups):
    """fuzz dynamic seed 30286: a 2-D conv with groups=4, dynamically quantized. Before: xir kept
    every grouped one outside (with its quantization: 5 ops); stock delegates it and is right.
    XNNPACK has no dynamically quantized depthwise conv (the quantizer makes none, nor a
    dynamically quantized transposed conv)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(cin, cout, 3, groups=groups)
    inputs = (torch.randn(1, cin, 7, 7, generator=torch.Generator().manual_seed(1)),)
    ref, ours, stock = lower_quantized_both(torch.nn.Sequential(conv).eval(), inputs, "dynamic", via, per_channel=True)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-5
    assert ours.outside == {} and ours.delegated["quantized_decomposed.choose_qparams.tensor"] == 1, ours.outside
    assert ours.delegated["aten.convolution"] == 1
    assert stock.ran and stock.outside == {}


class PadWithAValueAfterQuantizedLinear(torch.nn.Module):
    """fuzz static seed 1243, reduced: a pad with -1 of a quantized linear's output, that output also
    read by a cat (a shared dequantize)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 6)

    def forward(self, x):
        y = self.linear(x)
        return F.pad(y, (1, 1), value=-1.0), torch.cat([x, y], -1)


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_pad_with_a_nonzero_value_runs_between_conversions(via):
    inputs = (torch.randn(7, 4, generator=torch.Generator().manual_seed(1)),)
    ep = torch.export.export(quantize_module(PadWithAValueAfterQuantizedLinear().eval(), inputs, mode="static"), inputs)
    ref = reference(ep, inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    # before: every pad reading a dequantize stayed outside, as XNNPACK's preprocessing quantizes the
    # output of a zero pad there (test above); it leaves a pad with another value alone, and the pad
    # runs in fp32 between conversions as stock delegates it
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-5
    assert ours.delegated["aten.constant_pad_nd"] == 1 and ours.outside == {}, ours.outside
    assert stock.ran and stock.err(ref) <= 1e-5 and stock.delegated["aten.constant_pad_nd"] == 1


class ConvAndLinearOfOneInput(torch.nn.Module):
    """fuzz dynamic seed 30349, reduced: a grouped conv and a linear read one 4-D value, so one
    dynamic quantization (choose_qparams, quantize, dequantize) feeds both."""

    def __init__(self, computed):
        super().__init__()
        torch.manual_seed(0)
        self.computed = computed  # the activation an unsqueeze computed in the delegate, as in the fuzz program
        self.conv = torch.nn.Conv2d(6, 2, 3, padding="same", groups=2)
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        if self.computed:
            x = x.unsqueeze(2)
        return self.conv(x), self.linear(x) - 0.5


@pytest.mark.parametrize("computed", [False, True], ids=["input", "computed"])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_conv_and_a_linear_of_one_dynamic_activation_stay_outside(via, computed):
    module = ConvAndLinearOfOneInput(computed).eval()
    shape = (2, 6, 8) if computed else (2, 6, 3, 8)
    inputs = (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)
    ref, ours, stock = lower_quantized_both(module, inputs, "dynamic", via, per_channel=True)
    # before: the conv and the linear were delegated together and XNNPACK's channels-last pass broke
    # the linear ("required rank 4 tensor to use channels_last format" through the unsqueeze, or
    # "Weight and Input should both be quantized"); stock fails the same way
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-5
    assert "aten.convolution" in ours.outside and "quantized_decomposed.choose_qparams.tensor" in ours.outside
    assert ours.delegated.get("aten.sub.Tensor") == 1, ours.delegated
    assert not stock.ran


class FloatDeconv1dBeforeQuantizedConv(torch.nn.Module):
    """fuzz static seed 1301, reduced: a depthwise transposed 1-D conv, which the quantizer leaves
    fp32, whose result is quantized for the quantized conv after it."""

    def __init__(self, returned):
        super().__init__()
        torch.manual_seed(0)
        self.returned = returned
        self.deconv = torch.nn.ConvTranspose1d(3, 3, 3, stride=2, padding=1, groups=3)
        self.conv = torch.nn.Conv1d(3, 1, 3, stride=2, dilation=2)

    def forward(self, x):
        y = self.deconv(x.transpose(1, 2))
        return (self.conv(y), y) if self.returned else self.conv(y)


@pytest.mark.parametrize("returned", [False, True], ids=["quantized-only", "also-returned"])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_the_quantize_of_a_float_conv1d_stays_outside(via, returned):
    inputs = (torch.randn(1, 10, 3, generator=torch.Generator().manual_seed(1)),)
    module = FloatDeconv1dBeforeQuantizedConv(returned).eval()
    ref, ours, stock = lower_quantized_both(module, inputs, "static", via, per_channel=True)
    # before: the quantize was delegated with the fp32 deconv; XNNPACK's Conv1dUnsqueezePass then
    # made the deconv's output int8: "Failed to create deconvolution node" at load (stock too)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-5
    assert ours.delegated["aten.convolution"] == 2, ours.delegated
    if returned:  # the deconv's result leaves the delegate in fp32 as well: no quantization is folded into it
        assert "quantized_decomposed.quantize_per_tensor" not in ours.outside, ours.outside
        assert stock.ran and stock.err(ref) <= 1e-5
    else:
        assert ours.outside == {"quantized_decomposed.quantize_per_tensor": 1}, ours.outside
        assert not stock.ran and "load failed" in stock.error


class UnsqueezedLinearIntoDynamicLinear(torch.nn.Module):
    """fuzz dynamic seed 30689, reduced: a bias-free linear of a 1-D input (to_edge writes it
    unsqueeze -> mm -> squeeze) whose result is unsqueezed for a dynamically quantized linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(24, 6, bias=False)
        self.second = torch.nn.Linear(6, 6)

    def forward(self, x):
        return self.second(self.first(x).unsqueeze(0))


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_view_after_a_decomposed_linear_is_not_given_the_linears_module(via):
    inputs = (torch.randn(24, generator=torch.Generator().manual_seed(1)),)
    ref, ours, stock = lower_quantized_both(UnsqueezedLinearIntoDynamicLinear().eval(), inputs, "dynamic", via)
    # before: the view xir writes for the second unsqueeze took the first linear's nn_module_stack
    # (the dynamic quantize reading it also reads choose_qparams' getitems, which write-back took for
    # erased nodes), so the first linear's source partition ran past its output, it was not
    # recognised, and via to_backend its dynamic quantization stayed outside (5 ops against stock's 1)
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(ref) <= 1e-5
    assert not ours.outside, ours.outside
    assert ours.delegated.get("quantized_decomposed.choose_qparams.tensor") == 2, ours.delegated
    assert sum(stock.outside.values()) == 1, stock.outside


class SoftmaxAfterAmax(torch.nn.Module):
    """fuzz fp32 seed 11190, reduced: a 4-D softmax over the last dim of what an amax (which
    XNNPACK does not run) computes."""

    def forward(self, x):
        return torch.softmax(x.amax(dim=2, keepdim=True) * 2.0, dim=-1)


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_softmax_after_an_amax_left_outside_is_delegated(via):
    inputs = (torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(1)),)
    ep = torch.export.export(SoftmaxAfterAmax().eval(), inputs)
    ref = reference(ep, inputs)
    ours, stock = lower(ep, inputs, "xir", via=via), lower(ep, inputs, "stock", via=via)
    # before: the softmax stayed outside as if the amax were a channels-last op inside XNNPACK;
    # the amax stays outside, so its result reaches the delegate contiguous
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(ref) <= 1e-6
    assert ours.outside == {"aten.amax": 1}, ours.outside
    assert ours.delegated.get("aten._softmax") == 1, ours.delegated
    assert stock.delegated.get("aten._softmax") == 1, stock.delegated


class FloatGroupedDeconvOnQuantizedInput(torch.nn.Module):
    """fuzz static seeds 1412 and 1538, reduced: XNNPACKQuantizer quantizes the input of a grouped
    transposed conv (the cat before it is quantized, or the graph input) but leaves its weights
    float, and quantizes its output for the quantized conv after it."""

    def __init__(self, computed, shared, returned):
        super().__init__()
        torch.manual_seed(0)
        self.computed, self.shared, self.returned = computed, shared, returned
        self.deconv = torch.nn.ConvTranspose2d(4, 2, 1, stride=3, groups=2, output_padding=2)
        self.conv = torch.nn.Conv2d(2, 3, 2, stride=2, padding=1)
        self.other = torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        y = torch.cat([x, x], dim=1) if self.computed else x
        z = self.deconv(y)
        out = (self.conv(z),)
        if self.returned:
            out += (z,)
        if self.shared:
            out += (self.other(y),)
        return out


@pytest.mark.parametrize("shared,returned", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["alone", "dequantize-shared", "result-returned", "shared-and-returned"])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_float_conv_on_a_statically_quantized_input_runs_between_conversions(via, shared, returned):
    # (the quantizer leaves a conv reading the graph input itself all float: the cat makes its input quantized)
    inputs = (torch.randn(2, 2, 4, 3, generator=torch.Generator().manual_seed(1)),)
    module = FloatGroupedDeconvOnQuantizedInput(True, shared, returned).eval()
    ref, ours, stock = lower_quantized_both(module, inputs, "static", via, per_channel=True)
    # before: the transposed conv stayed outside ("only one of input and weight is quantized");
    # stock delegates it in fp32, its dequantized input converted beside it
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(ref) <= 1e-5
    assert "aten.convolution" not in ours.outside, ours.outside
    assert ours.delegated.get("aten.convolution") == 2 + shared, ours.delegated
    assert stock.delegated.get("aten.convolution") == 2 + shared, stock.delegated


class DecomposedGeluAfterDynamicLinear(torch.nn.Module):
    """fuzz dynamic seed 31542, reduced: a tanh GELU (which xir writes as fp32 arithmetic) after a
    dynamically quantized bias-free linear of a 1-D input (unsqueeze -> mm -> squeeze)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(12, 32, bias=False)

    def forward(self, x):
        return F.gelu(self.linear(x), approximate="tanh")


@pytest.mark.parametrize("via", ["backend", "etal"])
def test_ops_a_rewrite_writes_after_a_decomposed_linear_are_not_part_of_it(via):
    inputs = (torch.randn(12, generator=torch.Generator().manual_seed(1)),)
    ref, ours, stock = lower_quantized_both(DecomposedGeluAfterDynamicLinear().eval(), inputs, "dynamic", via)
    # before: write-back gave the GELU's multiplies the linear's nn_module_stack (they read the view
    # that replaced its squeeze), so the linear's source partition ran past its output, it was not
    # recognised, and via to_backend the mm and its dynamic quantization stayed outside
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(ref) <= 1e-5
    assert not ours.outside, ours.outside
    assert ours.delegated.get("aten.tanh") == 1 and ours.delegated.get("quantized_decomposed.choose_qparams.tensor") == 1
    assert not stock.outside


class Relu6AfterQuantizedMaxPool(torch.nn.Module):
    """fuzz static seed 2427, reduced: XNNPACKQuantizer quantizes a relu6's output with other
    parameters than its input (the max pool's)."""

    def __init__(self, padding):
        super().__init__()
        torch.manual_seed(0)
        self.padding = padding
        self.c1 = torch.nn.Parameter(torch.randn((2, 1, 10)))
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(F.relu6(F.max_pool2d(x + self.c1, (2, 3), padding=self.padding)))


@pytest.mark.parametrize("padding", [0, 1])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_quantized_hardtanh_with_other_output_qparams_runs_in_fp32(via, padding):
    inputs = (torch.randn(2, 2, 7, 10, generator=torch.Generator().manual_seed(242790)),)
    module = Relu6AfterQuantizedMaxPool(padding).eval()
    ref, ours, stock = lower_quantized_both(module, inputs, "static", via, per_channel=False)
    # before: delegated as a quantized hardtanh, wrong by 1.1-1.4 (stock's to_edge_transform_and_lower
    # program too); now it runs in fp32 between conversions, still in the delegate
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-4
    assert ours.delegated.get("aten.hardtanh") == 1 and not ours.outside, (ours.delegated, ours.outside)
    if via == "etal":
        assert stock.ran and stock.err(ref) > 0.5


class GroupedConvTranspose1dOnQuantizedInput(torch.nn.Module):
    """fuzz static seeds 1318, 1582, 2109, reduced: XNNPACKQuantizer leaves a grouped
    ConvTranspose1d in fp32 (float weight) on a quantized input: after a quantized conv1d whose
    output is also returned (several users), or on the graph input itself, which a quantized conv1d
    reads too; its own output returned or read by a matmul."""

    def __init__(self, first: str, matmul: bool):
        super().__init__()
        torch.manual_seed(131802)
        self.conv = torch.nn.Conv1d(6, 6, 3)
        self.first = first
        self.convt = torch.nn.ConvTranspose1d(6, 2, 4, groups=2)
        self.matmul = matmul

    def forward(self, x):
        a = self.conv(x)
        y = self.convt(a if self.first == "conv" else x)
        out = torch.matmul(y, y.transpose(-2, -1)) if self.matmul else y
        return out, a


@pytest.mark.parametrize("first,matmul", [("conv", True), ("conv", False), ("input", False)])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_float_conv1d_reading_a_dequantize_gets_it_as_an_fp32_delegate_input(via, first, matmul):
    inputs = (torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(131890)),)
    ref, ours, stock = lower_quantized_both(GroupedConvTranspose1dOnQuantizedInput(first, matmul).eval(), inputs,
                                            "static", via, per_channel=False)
    # before: the dequantize shared the conv's delegate, XNNPACK's Conv1dUnsqueezePass quantized
    # again after its unsqueeze, and the conv, now reading a dequantize, failed to lower
    if first == "conv":
        assert not stock.ran and "Weight and Input should both be quantized" in stock.error
    else:  # (stock delegates the dequantize of a graph input apart from the conv, and is right)
        assert stock.ran and stock.err(ref) <= 1e-4 and not stock.outside, stock.outside
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-4
    assert not ours.outside, ours.outside
    assert ours.delegated["aten.convolution"] == 2
    groups = [g.ops() for g in ours.partitioner.last_plan.groups]
    assert len(groups) == ours.delegates, groups
    if first == "conv":
        assert ["quantized_decomposed.dequantize_per_tensor"] in groups, groups


class ScaledByA0dValue(torch.nn.Module):
    """fuzz static seed 1733, reduced: a 0-D value computed outside XNNPACK (an amax over all dims
    of a linear's output; also returned, or a 0-D graph input instead) scales a tensor, then a
    relu or an unbatched transposed conv, statically quantized."""

    def __init__(self, source: str, conv: bool):
        super().__init__()
        torch.manual_seed(173311)
        self.linear = torch.nn.Linear(8, 8)
        self.conv = torch.nn.ConvTranspose2d(3, 2, 3, stride=3, padding=1) if conv else None
        self.source = source

    def forward(self, x, e, s):
        scale = s if self.source == "input" else self.linear(x).amax(dim=(0, 1))
        y = scale * e
        out = self.conv(y) if self.conv is not None else y.relu()
        return (out, scale) if self.source == "returned" else out


@pytest.mark.parametrize("source,conv", [("amax", True), ("amax", False), ("returned", False), ("input", False)])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_0d_delegate_input_is_quantized_outside(via, source, conv):
    g = torch.Generator().manual_seed(173390)
    inputs = (torch.randn(4, 8, generator=g), torch.randn(3, 4, 8, generator=g), torch.rand((), generator=g) + 0.5)
    ref, ours, stock = lower_quantized_both(ScaledByA0dValue(source, conv).eval(), inputs, "static", via, per_channel=False)
    # before: the quantize of the 0-D value was in the delegate, and XNNPACK's channels-last pass
    # failed on it
    assert not stock.ran and "ChannelsLastTaggedReshapePass" in stock.error, stock.error
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-4
    assert ours.outside["quantized_decomposed.quantize_per_tensor"] == 1
    assert set(ours.outside) <= {"quantized_decomposed.quantize_per_tensor", "aten.amax"}, ours.outside
    assert ours.delegated["aten.mul.Tensor"] == 1 and ours.delegated["aten.convolution" if conv else "aten.relu"] == 1


class GroupedConvTranspose1dActivationLinear(torch.nn.Module):
    """fuzz static seed 2744, reduced: a grouped ConvTranspose1d (fp32: XNNPACKQuantizer leaves
    it so), a relu6 or relu XNNPACK fuses into it, then a quantized linear; the activation's
    output also returned, or not."""

    def __init__(self, act: str, returned: bool):
        super().__init__()
        torch.manual_seed(274408)
        self.convt = torch.nn.ConvTranspose1d(4, 4, 4, stride=3, padding=1, groups=4)
        self.linear = torch.nn.Linear(20, 16)
        self.act, self.returned = act, returned

    def forward(self, x):
        y = self.convt(F.gelu(x))
        y = F.relu6(y) if self.act == "relu6" else torch.relu(y)
        return (self.linear(y), y) if self.returned else self.linear(y)


@pytest.mark.parametrize("act,returned", [("relu6", False), ("relu", False), ("relu6", True)])
@pytest.mark.parametrize("via", ["backend", "etal"])
def test_a_float_conv1d_with_a_fused_activation_keeps_its_quantize_outside(via, act, returned):
    inputs = (torch.randn(1, 4, 7, generator=torch.Generator().manual_seed(274492)),)
    ref, ours, stock = lower_quantized_both(GroupedConvTranspose1dActivationLinear(act, returned).eval(), inputs,
                                            "static", via, per_channel=False)
    # before: the quantize after the activation was in the conv's delegate; XNNPACK fused the
    # activation into the conv, whose only reader was then that quantize, and its Conv1dUnsqueezePass
    # gave the fp32 deconvolution an int8 output: "Failed to create deconvolution node"
    if not returned:
        assert not stock.ran and stock.error.startswith("load failed"), stock.error
    assert ours.ran, ours.error
    assert ours.err(ref) <= 1e-4
    activation = "aten.hardtanh" if act == "relu6" else "aten.relu"
    assert ours.delegated["aten.convolution"] == 1 and ours.delegated[activation] == 1
    assert ours.delegated["aten.linear" if via == "etal" else "aten.addmm"] == 1
    assert set(ours.outside) <= {"quantized_decomposed.quantize_per_tensor"}, ours.outside
    assert ours.outside["quantized_decomposed.quantize_per_tensor"] == (0 if returned else 1)
