"""The programs of the fuzz regression cases: the differential fuzzer's shrunk repros (issue 12)
and the variants written around them, each a ``torch.nn.Module`` (its docstring says what it
reproduces) and a maker of its sample inputs.

Two readers run the same programs: ``tests/lowering/test_fuzz_regressions.py`` lowers them with
xir and checks that the program runs, matches eager PyTorch and delegates what it should;
``scripts/stock_evidence.py`` lowers them with ExecuTorch's stock partitioner (and xir) and checks
what stock does with them (evidence about ExecuTorch, not a check of xir).

Some makers read the global RNG (``torch.rand``/``torch.randn`` without a generator), as the
cases always did; the others seed their own generator. Module constructors that seed
(``torch.manual_seed``) do so themselves.
"""

import torch
import torch.nn.functional as F

from xir_tools.examples import quantize_module

BF16 = torch.bfloat16


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def quantized_program(module, inputs, mode, per_channel):
    """``module`` quantized with pt2e (XNNPACKQuantizer, ``mode`` "static" or "dynamic", per channel
    or per tensor), calibrated on ``inputs``, and exported."""
    return torch.export.export(quantize_module(module, inputs, mode=mode, per_channel=per_channel), inputs)


class QuantizedElementwise8d(torch.nn.Module):
    """Statically quantized log/sub/add on an 8-D input: the scalars become 0-D quantized
    constants whose dequantize xir delegated alone, and a delegate cannot return a 0-D tensor."""

    def forward(self, x):
        return (torch.log(x.abs() + 1) - 0.5) + 2.0


def quantized_elementwise_8d_inputs():
    return (torch.rand(2, 1, 2, 1, 2, 1, 2, 3) + 0.1,)


class ZeroDOutput(torch.nn.Module):
    """abs of a 0-D input (computed at run time: abs of a 0-D parameter would fold into a constant),
    times a scalar (a 0-D constant for XNNPACK)."""

    def forward(self, x, w):
        return torch.log(x.abs() + 1).reshape(2, 1, 2, 1, 2, 1, 2, 3) + w.abs() * 2.0


def zero_d_output_inputs():
    return torch.rand(2, 1, 2, 1, 2, 1, 2, 3), torch.tensor(-1.5)


class ZeroDFromInputs(torch.nn.Module):
    """fuzz dynamic seeds 30060, 30081, reduced: 0-D results computed from 0-D values only."""

    def forward(self, x, w):
        s = torch.tanh(x.sum())
        return torch.remainder(x, s + w.abs()), s, w.abs()


def zero_d_from_inputs_inputs():
    return torch.randn(3, 4, generator=_generator(0)), torch.tensor(-1.5)


class ZeroDInside(torch.nn.Module):
    """relu of a 2-D input times abs of a 0-D input: a 0-D value used inside a delegate only."""

    def forward(self, x, w):
        return torch.relu(x) * w.abs()


def zero_d_inside_inputs():
    return torch.randn(2, 3), torch.tensor(-1.5)


class Bf16Conv3dBlock(torch.nn.Module):
    """A bf16 Conv3d beside cat, tanh GELU, a padded max pool, matmul and a cast to half."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 3, 2)

    def forward(self, x, y):
        a = self.conv(x)
        b = F.gelu(torch.cat([a, a], 1), approximate="tanh")
        return F.max_pool2d(b.reshape(1, 18, 3, 3), 2, padding=1), torch.matmul(y, y.transpose(-1, -2)).to(torch.half)


def bf16_conv3d_block_inputs():
    """(global RNG: the case seeds it with ``torch.manual_seed(0)`` first, then makes the module)"""
    return torch.randn(1, 2, 4, 4, 4, dtype=BF16), torch.randn(2, 3, 4, dtype=BF16)


class UnbatchedPooling(torch.nn.Module):
    """A padded 2-D max pool of an unbatched 3-D input (C, H, W), sliced, concatenated and summed."""

    def forward(self, x):
        return torch.sum(torch.cat([F.max_pool2d(x, 3, padding=1)[..., 1:3]] * 2, dim=1), dim=(0, 2))


def unbatched_pooling_inputs():
    return (torch.randn(1, 4, 15),)


class MatmulThenLinear(torch.nn.Module):
    """A matmul of an unsqueezed 3-D input by a parameter, then a linear: ``to_edge`` writes that
    linear on a 4-D input as view -> addmm -> view."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6, 16) / 2.5)
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.linear(torch.matmul(x.unsqueeze(0), self.w))


def matmul_then_linear_inputs(dtype):
    return (torch.randn(3, 7, 6, dtype=dtype),)


class BatchNormWithoutAffine(torch.nn.Module):
    """A BatchNorm1d without weight and bias (``affine=False``), its running statistics not trivial."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(32, affine=False)
        self.bn.running_mean.uniform_(-1.0, 1.0)
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.bn(x)


def batch_norm_without_affine_inputs():
    """(global RNG: the case seeds it with ``torch.manual_seed(0)`` first, then makes the module)"""
    return (torch.randn(7, 32),)


class QuantizedLinearAfterSliceAndUnsqueeze(torch.nn.Module):
    """A linear of a slice of the flattened input plus a buffer, unsqueezed; statically quantized,
    the unsqueeze's input and output get different quantization parameters."""

    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.randn(960))
        self.linear = torch.nn.Linear(100, 6)

    def forward(self, x):
        return self.linear((x.reshape(960) + self.c)[..., 823:-37].unsqueeze(-2))


def quantized_linear_after_slice_and_unsqueeze_inputs():
    return (torch.randn(2, 6, 10, 8),)


class DotThenHardswish(torch.nn.Module):
    """hardswish of the dot product of the flattened input with itself: a 0-D result."""

    def forward(self, x):
        v = torch.flatten(x, 0)
        return F.hardswish(torch.matmul(v, v))


def dot_then_hardswish_inputs():
    return (torch.randn(2, 3),)


class QuantizedUpsampleWithFloatOutput(torch.nn.Module):
    """A bilinear upsample of a linear of a dilated transposed conv; statically quantized, the
    upsample reads a quantized value and its output is float."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(8, 6, 3, dilation=2, bias=False)
        self.linear = torch.nn.Linear(9, 6)

    def forward(self, x):
        return F.interpolate(self.linear(self.conv(torch.cat([x, x], dim=1))), scale_factor=2, mode="bilinear")


def quantized_upsample_with_float_output_inputs():
    """(global RNG: the case seeds it with ``torch.manual_seed(0)`` first, then makes the module)"""
    return (torch.randn(1, 4, 1, 5),)


class UpcastLeavingTheDelegate(torch.nn.Module):
    """A bf16 value cast to fp32 and returned (or read by a cumsum, which XNNPACK does not run),
    beside a batched matmul of the same bf16 value."""

    def __init__(self, returned: bool):
        super().__init__()
        self.returned = returned

    def forward(self, x):
        v = x / (x.abs() + 1.0)
        up = v.float()
        w = v.unsqueeze(4)
        return (up if self.returned else torch.cumsum(up, 0)), torch.matmul(w, w.transpose(-2, -1))


def upcast_leaving_the_delegate_inputs():
    return (torch.randn(1, 1, 6, 12, dtype=BF16),)


class TransposedConvOutputPadding(torch.nn.Module):
    """A transposed convolution with dilation 2 and output_padding 1 at stride 1 (PyTorch allows
    output_padding below max(stride, dilation); XNNPACK's deconvolution needs it below the stride)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose1d(11, 4, 4, dilation=2, bias=False, output_padding=1)

    def forward(self, x):
        return self.conv(x)


def transposed_conv_output_padding_inputs(dtype):
    """(global RNG: the case seeds it with ``torch.manual_seed(0)`` first, then makes the module)"""
    return (torch.randn(6, 11, 6, dtype=dtype),)


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


def conv_then_linear_on_a_4d_view_inputs():
    return (torch.randn(2, 6, 12, 5, generator=_generator(116090)),)


class ConvAndRowsOfOneInput(torch.nn.Module):
    """fuzz dynamic seed 49000, shrunk: one 4-D input read by a conv and, viewed as rows, by a
    linear (both dynamically quantized), and an RMSNorm between that linear and another."""

    def __init__(self, norm: bool = True):
        super().__init__()
        self.norm = norm
        torch.manual_seed(4900009)
        self.conv = torch.nn.Conv2d(4, 2, (1, 1), padding="same")
        torch.manual_seed(4900011)
        self.linear = torch.nn.Linear(4, 32, bias=False)
        torch.manual_seed(4900014)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = self.linear(x.view(60, -1))
        if self.norm:
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-06)
        return self.conv(x).unsqueeze(0), self.head(h)


def conv_and_rows_of_one_input_inputs():
    return (torch.randn(1, 4, 6, 10, generator=_generator(4900090)),)


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


def clone_before_cumsum_inputs():
    return (torch.randn(1, 4, 11, 8, generator=_generator(1095190)),)


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


def batch_norm_relu6_relu_inputs():
    return (torch.randn(2, 32, generator=_generator(1103791)) * 4,)


class AddAndSubWithAlpha(torch.nn.Module):
    """fuzz fp32 seed 10978, reduced: an add with alpha whose first operand is broadcast."""

    def forward(self, x, y):
        return torch.add(x, y, alpha=2.0), torch.sub(x, y, alpha=3.0)


def add_and_sub_with_alpha_inputs():
    return torch.randn(1, generator=_generator(0)), torch.randn(3, generator=_generator(1))


class Bf16AddsWithAlpha(torch.nn.Module):
    """fuzz fp32 seeds 11044 and 11140, reduced: bf16 adds and subs with an alpha, which stay outside
    XNNPACK without enable_bf16: one whose first operand is broadcast (the portable kernel errs
    there), the others not, one of them reading a constant, their operand with several readers."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(2, 3, generator=_generator(1104401)).to(torch.bfloat16))

    def forward(self, x, y, z):
        a = torch.add(x, y, alpha=2.0)  # a graph output
        b = torch.sub(y, self.w, alpha=3.0)  # a constant operand
        c = torch.sub(z, y, alpha=0.5)  # z [3] is broadcast
        return a, b * 2, c


def bf16_adds_with_alpha_inputs():
    def bf16(*shape, seed):
        return torch.randn(*shape, generator=_generator(seed)).to(torch.bfloat16)

    return bf16(2, 3, seed=11044), bf16(2, 3, seed=11140), bf16(3, seed=11141)


class MeanOfAViewPastRank(torch.nn.Module):
    """fuzz static seed 2922, shrunk: a mean over the last dim of a 7-D view of a pooling's result
    (with ``also_output``, the 7-D view is a graph output too)."""

    def __init__(self, also_output: bool = False):
        super().__init__()
        self.also_output = also_output

    def forward(self, x):
        v = F.avg_pool2d(x, (2, 3), stride=2).view(2, 1, 1, 1, 5, 1, 1)
        m = v.mean(dim=-1)
        return (m, v) if self.also_output else (m,)


def mean_of_a_view_past_rank_inputs():
    return (torch.randn(1, 1, 5, 12, generator=_generator(292290)),)


class Bf16PaddedAvgPool(torch.nn.Module):
    """fuzz fp32 seed 10666, reduced: a bf16 average pool with zero padding after a softmax, its
    result returned and read again."""

    def forward(self, x):
        v = F.avg_pool2d(x.to(torch.bfloat16).softmax(-1), 2, padding=1)
        return v, v * 2


def bf16_padded_avg_pool_inputs():
    return (torch.randn(2, 2, 11, 11, generator=_generator(1066690)),)


class DynamicLinearBesideUnbatchedConv(torch.nn.Module):
    """fuzz dynamic seed 30924, reduced and made observable: a linear and an unbatched conv (a view
    before it) read one dynamically quantized input; the conv is no pattern XNNPACK runs."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3092401)
        self.linear = torch.nn.Linear(17, 5)
        torch.manual_seed(3092404)
        self.conv = torch.nn.Conv2d(2, 8, 1, padding=1, bias=False)

    def forward(self, x):
        return self.linear(x), self.conv(x)


def dynamic_linear_beside_unbatched_conv_inputs():
    return (torch.randn(2, 2, 17, generator=_generator(3092490)),)


class PadAfterQuantizedLinear(torch.nn.Module):
    """fuzz static seed 1074, shrunk: a zero pad of a quantized linear's 5-D output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(107401)
        self.linear = torch.nn.Linear(6, 2)

    def forward(self, x):
        return F.pad(self.linear(x), (1, 1, 0, 1, 1, 0))[:, :3:2]


def pad_after_quantized_linear_inputs():
    return (torch.randn(1, 3, 2, 3, 6, generator=_generator(107490)),)


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


def conv_pad_linear_inputs():
    return (torch.randn(1, 2, 11, 10, generator=_generator(3001290)),)


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


def linear_slice_conv_inputs():
    return (torch.randn(1, 3, 7, 11, generator=_generator(3011690)),)


class ConvReluConv(torch.nn.Module):
    """conv -> relu -> conv: the second conv reads an activation computed from a conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 4, 3)
        self.conv2 = torch.nn.Conv2d(4, 2, 3)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x)))


def conv_relu_conv_inputs():
    return (torch.randn(1, 3, 9, 9, generator=_generator(1)),)


class Bf16ReluFloatPad(torch.nn.Module):
    """fuzz bf16 seed 20194, reduced: a pad with -1 of a bf16 result cast to fp32 (the relu's
    result also returned)."""

    def forward(self, x):
        y = torch.relu(x)
        return F.pad(y.float(), (0, 2), value=-1.0), y


def bf16_relu_float_pad_inputs():
    return (torch.randn(4, 3, 6, 8, generator=_generator(2019490)).to(BF16),)


class ConvTransposeSoftmax(torch.nn.Module):
    """fuzz bf16 seed 20342, reduced: a softmax over the last dim of a conv's output transposed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2034204)
        self.conv = torch.nn.Conv2d(3, 6, 2, groups=3)

    def forward(self, x):
        return F.softmax(self.conv(x).transpose(-2, -1), dim=-1)


def conv_transpose_softmax_inputs(dtype):
    return (torch.randn(1, 3, 9, 7, generator=_generator(2034290)).to(dtype),)


class Bf16RowMean(torch.nn.Module):
    """fuzz fp32 seeds 10045, 10015, reduced: x + x.mean(-1, keepdim=True) and a split, in bf16."""

    def forward(self, x):
        a, b = x.split([2, 4], dim=1)
        return x + x.mean(dim=-1, keepdim=True), a, b


def bf16_row_mean_inputs():
    return (torch.randn(3, 6, 32, generator=_generator(0)).to(BF16),)


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


def group_norms_inputs():
    return (torch.randn(1, 2, 4, 5, 4, generator=_generator(1165190)),)


class BmmOfOnePermute(torch.nn.Module):
    """fuzz bf16 seed 20645, reduced: a bmm reading one permute twice, that permute of a graph input
    or of a computed value, and also returned or not."""

    def __init__(self, of_input: bool, returned: bool):
        super().__init__()
        self.of_input, self.returned = of_input, returned

    def forward(self, x):
        p = (x if self.of_input else x.abs()).permute(2, 1, 0)
        return (torch.bmm(p, p), p) if self.returned else torch.bmm(p, p)


def bmm_of_one_permute_inputs(dtype):
    return (torch.randn(2, 2, 8, generator=_generator(0)).to(dtype),)


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


def vector_input(size):
    """The 1-D input of LinearsOfOneInput (size 20) or LinearThenVectorMatmul (size 5)."""
    return (torch.randn(size, generator=_generator(0)),)


class SoftmaxAfterARejectedMean(torch.nn.Module):
    """fuzz static seed 1011, reduced: a 4-D softmax over the last dim of a value computed from a
    mean XNNPACK does not take (over dims 0 and 1), that mean also returned."""

    def forward(self, x):
        m = torch.mean(x, dim=(0, 1))
        return F.softmax(m + x * 2.0, dim=-1), m


def softmax_after_a_rejected_mean_inputs():
    return (torch.randn(1, 1, 12, 10, generator=_generator(0)),)


def grouped_conv(cin, cout, groups):
    """fuzz dynamic seed 30286: one 2-D conv with ``groups`` (3x3 kernel), in a Sequential."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, groups=groups))


def grouped_conv_inputs(cin):
    return (torch.randn(1, cin, 7, 7, generator=_generator(1)),)


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


def pad_with_a_value_after_quantized_linear_inputs():
    return (torch.randn(7, 4, generator=_generator(1)),)


class ZeroPadBeforeQuantizedLinear(torch.nn.Module):
    """fuzz static seed 31009, reduced: a zero pad of a quantized linear's output read by another
    quantized linear (XNNPACKQuantizer quantizes the pad's output with its input's parameters);
    ``returned``: the pad's output is also a graph output."""

    def __init__(self, returned: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(6, 6)
        self.b = torch.nn.Linear(8, 4)
        self.returned = returned

    def forward(self, x):
        padded = F.pad(self.a(x), (1, 1))
        return (self.b(padded), padded) if self.returned else self.b(padded)


def zero_pad_before_quantized_linear_inputs():
    return (torch.randn(5, 6, generator=_generator(1)),)


class QuantizedRmsNorm7d(torch.nn.Module):
    """fuzz static seed 43039, reduced: a statically quantized RMSNorm on a 7-D view, so on
    ExecuTorch's kernels; its eps quantizes to 0, ``rsqrt`` of a zero mean is +inf, and ExecuTorch's
    quantize overflows on +inf (0 where eager gives the largest value). ``returned``: the rsqrt's
    result is also a graph output."""

    def __init__(self, returned: bool = False):
        super().__init__()
        self.returned = returned

    def forward(self, x0):
        v7 = x0.view(2, 1, 1, 9, 2, 3, 2)
        r = torch.rsqrt(v7.pow(2).mean(-1, keepdim=True) + 1e-06)
        return (v7 * r, r) if self.returned else v7 * r


def quantized_rms_norm_7d_inputs():
    x = torch.randn(3, 6, 12, generator=torch.Generator().manual_seed(4303990))
    return (x,)


class QuantizedScale7d(torch.nn.Module):
    """A statically quantized product of a 7-D graph input and a constant: the input's quantize
    runs on ExecuTorch's kernel and reads the graph input itself, which is also read by a second
    op and returned (``x`` may hold +inf at run time)."""

    def forward(self, x):
        v = x.view(2, 1, 1, 3, 2, 1, 2)
        return v * 0.5, v.abs(), v


def quantized_scale_7d_inputs(infinite: bool = False):
    x = torch.randn(24, generator=_generator(7))
    if infinite:
        x[3], x[10], x[11] = float("inf"), 1e30, -float("inf")
    return (x,)


class DynamicConvAfterConv(torch.nn.Module):
    """fuzz dynamic seed 46043, reduced: an fp32 conv, one op, then a conv XNNPACKQuantizer
    quantizes dynamically. ``between``: "relu", "scale" (``-0.75 * x``), "shift" (``x + 0.5``) or
    "channel-scale" (``x * w``, ``w`` one number per channel)."""

    def __init__(self, between: str):
        super().__init__()
        torch.manual_seed(4604307)
        self.first = torch.nn.Conv2d(1, 3, (1, 3), padding=1)
        torch.manual_seed(4604309)
        self.second = torch.nn.Conv2d(3, 12, 3, stride=2, padding=1, bias=False)
        self.w = torch.nn.Parameter(torch.rand(3, 1, 1) + 0.5)
        self.between = between

    def forward(self, x):
        v = self.first(x)
        v = {
            "relu": torch.relu,
            "scale": lambda t: -0.75 * t,
            "shift": lambda t: t + 0.5,
            "channel-scale": lambda t: t * self.w,
        }[self.between](v)
        return self.second(v)


def dynamic_conv_after_conv_inputs():
    return (torch.randn(1, 1, 6, 8, generator=torch.Generator().manual_seed(4604390)),)


class MatmulOfQuantizedActivationAndParameter(torch.nn.Module):
    """fuzz static seeds 40001, 40037, reduced: ``torch.matmul`` of a quantized linear's output and a
    float parameter (XNNPACKQuantizer quantizes neither the product nor the parameter).
    ``variant``: "plain"; "shared-activation" (the linear's output also read by a quantized
    linear); "shared-weight" (the parameter also multiplies a float value)."""

    def __init__(self, variant: str = "plain"):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 3)
        self.w = torch.nn.Parameter(torch.randn(8, 4) / 3)
        self.variant = variant

    def forward(self, x):
        h = self.a(x)
        y = torch.matmul(h, self.w)
        if self.variant == "shared-activation":
            return y, self.b(h)
        if self.variant == "shared-weight":
            return y, torch.matmul(torch.tanh(h), self.w)
        return y


def matmul_of_quantized_activation_and_parameter_inputs():
    return (torch.randn(5, 6, generator=_generator(1)),)


class ReturnedAndSplitQuantizedOutput(torch.nn.Module):
    """fuzz static seeds 2679, 42158, reduced: a quantized linear's (``conv``: a conv's) output
    returned and also split, the halves read by a relu and a cat (XNNPACKQuantizer gives the output
    and the split one dequantize). ``width``: the linear's output features (the seeds': 2)."""

    def __init__(self, conv: bool = False, width: int = 2):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.width = conv, width
        self.linear = torch.nn.Linear(4, width)
        self.conv2d = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv2d(x) if self.conv else self.linear(x)
        half = self.width // 2
        a, b = torch.split(y, [2, 2] if self.conv else [half, self.width - half], dim=1 if self.conv else -1)
        return y, F.relu(a), torch.cat([b, a], dim=0)


def returned_and_split_quantized_output_inputs(conv: bool = False):
    return (torch.randn(*((1, 3, 8, 8) if conv else (2, 3, 4)), generator=_generator(1)),)


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


def conv_and_linear_of_one_input_inputs(computed):
    shape = (2, 6, 8) if computed else (2, 6, 3, 8)
    return (torch.randn(*shape, generator=_generator(1)),)


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


def float_deconv1d_before_quantized_conv_inputs():
    return (torch.randn(1, 10, 3, generator=_generator(1)),)


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


def unsqueezed_linear_into_dynamic_linear_inputs():
    return (torch.randn(24, generator=_generator(1)),)


class SoftmaxAfterAmax(torch.nn.Module):
    """fuzz fp32 seed 11190, reduced: a 4-D softmax over the last dim of what an amax (which
    XNNPACK does not run) computes."""

    def forward(self, x):
        return torch.softmax(x.amax(dim=2, keepdim=True) * 2.0, dim=-1)


def softmax_after_amax_inputs():
    return (torch.randn(2, 3, 5, 4, generator=_generator(1)),)


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


def float_grouped_deconv_on_quantized_input_inputs():
    return (torch.randn(2, 2, 4, 3, generator=_generator(1)),)


class DecomposedGeluAfterDynamicLinear(torch.nn.Module):
    """fuzz dynamic seed 31542, reduced: a tanh GELU (which xir writes as fp32 arithmetic) after a
    dynamically quantized bias-free linear of a 1-D input (unsqueeze -> mm -> squeeze)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(12, 32, bias=False)

    def forward(self, x):
        return F.gelu(self.linear(x), approximate="tanh")


def decomposed_gelu_after_dynamic_linear_inputs():
    return (torch.randn(12, generator=_generator(1)),)


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


def relu6_after_quantized_max_pool_inputs():
    return (torch.randn(2, 2, 7, 10, generator=_generator(242790)),)


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


def grouped_conv_transpose1d_on_quantized_input_inputs():
    return (torch.randn(2, 6, 8, generator=_generator(131890)),)


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


def scaled_by_a_0d_value_inputs():
    g = _generator(173390)
    return torch.randn(4, 8, generator=g), torch.randn(3, 4, 8, generator=g), torch.rand((), generator=g) + 0.5


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


def grouped_conv_transpose1d_activation_linear_inputs():
    return (torch.randn(1, 4, 7, generator=_generator(274492)),)
