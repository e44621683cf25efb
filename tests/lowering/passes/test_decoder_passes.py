"""IR-text tests of the passes that put decoder LMs in XNNPACK, one case per graph boundary
(graph output, graph input, constant, several uses) plus the cases each pass declines."""

from __future__ import annotations

import pytest

from passes.testing import case, check_pipeline

SHAPE_OPS = [
    case(
        "ordinary",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,1,3] = aten.unsqueeze_copy(%x) {dim=1}
      %b: f32[2,1,3] = aten.relu(%a)
      return %b
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,1,3] = aten.view_copy(%x) {size=[2, 1, 3]}
      %b: f32[2,1,3] = aten.relu(%a)
      return %b
    }""",
    ),
    case(
        "output-result-is-output-and-operand-is-input",
        """
    graph @g {
      input %x: f32[2,1,3]
      %a: f32[2,3] = aten.squeeze_copy.dims(%x) {dim=[1]}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: f32[2,1,3]
      %a: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
      return %a, %x
    }""",
    ),
    case(
        "const-operand-is-param",
        """
    graph @g {
      param %w: f32[3]
      %a: f32[1,3] = aten.unsqueeze_copy(%w) {dim=0}
      return %a
    }""",
        """
    graph @g {
      param %w: f32[3]
      %a: f32[1,3] = aten.view_copy(%w) {size=[1, 3]}
      return %a
    }""",
    ),
    case(
        "uses-result-has-several-uses-expand-adds-nothing",
        """
    graph @g {
      input %x: f32[1,4]
      %a: f32[1,4] = aten.expand_copy(%x) {size=[1, -1]}
      %b: f32[1,4] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
        """
    graph @g {
      input %x: f32[1,4]
      %a: f32[1,4] = aten.view_copy(%x) {size=[1, 4]}
      %b: f32[1,4] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
    ),
    case(
        "declined-expand-repeats-elements",
        """
    graph @g {
      input %x: f32[1,4]
      %a: f32[3,4] = aten.expand_copy(%x) {size=[3, 4]}
      return %a
    }""",
    ),
    # a dynamic shape: the one symbolic dim is written -1 (PyTorch and XNNPACK's reshape infer it)
    case(
        "symbolic-unsqueeze-at-a-middle-dim",
        """
    graph @g {
      input %x: f32[s0,3]
      %a: f32[s0,1,3] = aten.unsqueeze_copy(%x) {dim=1}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[s0,3]
      %a: f32[s0,1,3] = aten.view_copy(%x) {size=[-1, 1, 3]}
      return %a
    }""",
    ),
    case(
        "symbolic-squeeze-result-is-output-and-operand-is-input",
        """
    graph @g {
      input %x: f32[1,s0,1,8]
      %a: f32[1,s0,8] = aten.squeeze_copy.dims(%x) {dim=[2]}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: f32[1,s0,1,8]
      %a: f32[1,s0,8] = aten.view_copy(%x) {size=[1, -1, 8]}
      return %a, %x
    }""",
    ),
    case(
        "symbolic-expand-adds-a-leading-one",
        """
    graph @g {
      input %x: f32[s0,4]
      %a: f32[1,s0,4] = aten.expand_copy(%x) {size=[1, -1, -1]}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[s0,4]
      %a: f32[1,s0,4] = aten.view_copy(%x) {size=[1, -1, 4]}
      return %a
    }""",
    ),
    case(
        "symbolic-view-size-several-uses",
        """
    graph @g {
      input %x: f32[1,s0,32]
      %n: int = aten.sym_size.int(%x) {dim=1}
      %a: f32[1,s0,4,8] = aten.view_copy(%x) {size=[1, %n, 4, 8]}
      %b: f32[1,s0,4,8] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
        """
    graph @g {
      input %x: f32[1,s0,32]
      %n: int = aten.sym_size.int(%x) {dim=1}
      %a: f32[1,s0,4,8] = aten.view_copy(%x) {size=[1, -1, 4, 8]}
      %b: f32[1,s0,4,8] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
    ),
    case(
        "declined-symbolic-two-symbolic-dims",
        """
    graph @g {
      input %x: f32[s0,s1]
      %a: f32[s0,1,s1] = aten.unsqueeze_copy(%x) {dim=1}
      return %a
    }""",
    ),
    case(
        "declined-symbolic-view-two-symbolic-dims",
        """
    graph @g {
      input %x: f32[s0,s1,8]
      %n: int = aten.sym_size.int(%x) {dim=0}
      %m: int = aten.sym_size.int(%x) {dim=1}
      %a: f32[s0,s1,2,4] = aten.view_copy(%x) {size=[%n, %m, 2, 4]}
      return %a
    }""",
    ),
    case(
        "declined-symbolic-a-zero-dim-makes-minus-one-ambiguous",
        """
    graph @g {
      input %x: f32[s0,0]
      %a: f32[s0,1,0] = aten.unsqueeze_copy(%x) {dim=1}
      return %a
    }""",
    ),
    case(
        "declined-symbolic-expand-repeats",
        """
    graph @g {
      input %x: f32[s0,1]
      %a: f32[s0,4] = aten.expand_copy(%x) {size=[-1, 4]}
      return %a
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", SHAPE_OPS)
def test_shape_ops_as_views(before, expected, changed):
    check_pipeline(before, "shape-ops-as-views", expected, changed=changed)


SCALARS = [
    case(
        "ordinary-mul",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.mul.Scalar(%x) {other=0.5}
      %b: f32[2,3] = aten.relu(%a)
      return %b
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      param %scalar: f32[]
      %a: f32[2,3] = aten.mul.Tensor(%x, %scalar)
      %b: f32[2,3] = aten.relu(%a)
      return %b
    }""",
    ),
    case(
        "output-and-input-add-with-alpha",
        """
    graph @g {
      input %x: bf16[4]
      %a: bf16[4] = aten.add.Scalar(%x) {other=2, alpha=3}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: bf16[4]
      param %scalar: bf16[]
      %a: bf16[4] = aten.add.Tensor(%x, %scalar)
      return %a, %x
    }""",
    ),
    case(
        "const-operand-and-several-uses",
        """
    graph @g {
      param %w: f32[4]
      %a: f32[4] = aten.div.Scalar(%w) {other=4.0}
      %b: f32[4] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
        """
    graph @g {
      param %w: f32[4]
      param %scalar: f32[]
      %a: f32[4] = aten.div.Tensor(%w, %scalar)
      %b: f32[4] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
    ),
    case(
        "declined-integer-tensor",
        """
    graph @g {
      input %x: i64[4]
      %a: i64[4] = aten.mul.Scalar(%x) {other=2}
      return %a
    }""",
    ),
    # an add/sub's alpha as a multiply (ExecuTorch's portable add is wrong with an alpha when the
    # first operand is broadcast; XNNPACK's add has none)
    case(
        "add-alpha-broadcast-first-operand-is-input",
        """
    graph @g {
      input %x: f32[1]
      input %y: f32[3]
      %a: f32[3] = aten.add.Tensor(%x, %y) {alpha=2.0}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[1]
      input %y: f32[3]
      param %alpha: f32[]
      %0: f32[3] = aten.mul.Tensor(%y, %alpha)
      %1: f32[3] = aten.add.Tensor(%x, %0)
      return %1
    }""",
    ),
    case(
        "sub-alpha-of-a-constant-result-returned-and-read",
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %a: f32[4] = aten.sub.Tensor(%x, %w) {alpha=3}
      %b: f32[4] = aten.relu(%a)
      return %b, %a
    }""",
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      param %alpha: f32[]
      %0: f32[4] = aten.mul.Tensor(%w, %alpha)
      %1: f32[4] = aten.sub.Tensor(%x, %0)
      %2: f32[4] = aten.relu(%1)
      return %2, %1
    }""",
    ),
    case(
        "declined-integer-alpha-add",
        """
    graph @g {
      input %x: i64[4]
      %a: i64[4] = aten.add.Tensor(%x, %x) {alpha=2}
      return %a
    }""",
    ),
]


# without enable_bf16 a bf16 add/sub stays outside XNNPACK: its alpha is a multiply only where the
# portable kernel errs (first operand broadcast), elsewhere that would be two portable ops for one
BF16_ALPHAS = [
    case(
        "declined-bf16-alpha-staying-outside",
        """
    graph @g {
      input %x: bf16[2,3]
      input %y: bf16[2,3]
      %a: bf16[2,3] = aten.add.Tensor(%x, %y) {alpha=2.0}
      return %a
    }""",
    ),
    case(
        "bf16-alpha-broadcast-first-operand",
        """
    graph @g {
      input %x: bf16[3]
      input %y: bf16[2,3]
      %a: bf16[2,3] = aten.sub.Tensor(%x, %y) {alpha=0.5}
      return %a, %y
    }""",
        """
    graph @g {
      input %x: bf16[3]
      input %y: bf16[2,3]
      param %alpha: bf16[]
      %0: bf16[2,3] = aten.mul.Tensor(%y, %alpha)
      %1: bf16[2,3] = aten.sub.Tensor(%x, %0)
      return %1, %y
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", BF16_ALPHAS)
def test_bf16_alpha_without_enable_bf16(before, expected, changed):
    check_pipeline(before, "xnnpack.scalar-operands-as-constants{enable_bf16=false}", expected, changed=changed)


@pytest.mark.parametrize("before, expected, changed", SCALARS)
def test_scalar_operands_as_constants(before, expected, changed):
    graph = check_pipeline(before, "xnnpack.scalar-operands-as-constants", expected, changed=changed)
    if changed:
        name = next(n for n in ("scalar", "alpha") if any(v.name == n for v in graph.inputs))
        scalar = graph.input_named(name).data
        assert scalar.dim() == 0 and float(scalar) in (0.5, 6.0, 4.0, 2.0, 3.0)  # add.Scalar folds alpha: 2 * 3


MEANS = [  # fp32: a matrix product with a 1/cols column; other dtypes (f16 here): a 4-D spatial mean between views
    case(  # the flattening view reads what the 7-D view reads; that view, a graph output too, stays
        "mean-of-a-view-reads-through-it",
        """
    graph @g {
      input %x: f32[1,1,2,5]
      %v: f32[2,1,1,1,5,1,1] = aten.view_copy(%x) {size=[2, 1, 1, 1, 5, 1, 1]}
      %a: f32[2,1,1,1,5,1] = aten.mean.dim(%v) {dim=[-1]}
      return %a, %v
    }""",
        """
    graph @g {
      input %x: f32[1,1,2,5]
      param %mean_weight_1: f32[1,1]
      %v: f32[2,1,1,1,5,1,1] = aten.view_copy(%x) {size=[2, 1, 1, 1, 5, 1, 1]}
      %0: f32[10,1] = aten.view_copy(%x) {size=[10, 1]}
      %1: f32[10,1] = aten.mm(%0, %mean_weight_1)
      %2: f32[2,1,1,1,5,1] = aten.view_copy(%1) {size=[2, 1, 1, 1, 5, 1]}
      return %2, %v
    }""",
    ),
    case(
        "ordinary-rms-norm-mean",
        """
    graph @g {
      input %x: f32[1,5,64]
      %a: f32[1,5,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      %b: f32[1,5,1] = aten.rsqrt(%a)
      return %b
    }""",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %mean_weight_64: f32[64,1]
      %v: f32[5,64] = aten.view_copy(%x) {size=[5, 64]}
      %m: f32[5,1] = aten.mm(%v, %mean_weight_64)
      %a: f32[1,5,1] = aten.view_copy(%m) {size=[1, 5, 1]}
      %b: f32[1,5,1] = aten.rsqrt(%a)
      return %b
    }""",
    ),
    case(
        "several-users-and-widths-one-weight-per-width",
        """
    graph @g {
      input %x: f32[1,5,64]
      input %y: f32[1,5,2,64]
      %a: f32[1,5,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      %b: f32[1,5,2,1] = aten.mean.dim(%y) {dim=[-1], keepdim=true}
      %c: f32[1,5,1] = aten.mean.dim(%x) {dim=[2], keepdim=true}
      %d: f32[1,5,1] = aten.add.Tensor(%a, %a)
      %e: f32[1,5,1] = aten.mul.Tensor(%a, %c)
      return %d, %e, %b
    }""",
        """
    graph @g {
      input %x: f32[1,5,64]
      input %y: f32[1,5,2,64]
      param %mean_weight_64: f32[64,1]
      %v: f32[5,64] = aten.view_copy(%x) {size=[5, 64]}
      %m: f32[5,1] = aten.mm(%v, %mean_weight_64)
      %a: f32[1,5,1] = aten.view_copy(%m) {size=[1, 5, 1]}
      %v2: f32[10,64] = aten.view_copy(%y) {size=[10, 64]}
      %m2: f32[10,1] = aten.mm(%v2, %mean_weight_64)
      %b: f32[1,5,2,1] = aten.view_copy(%m2) {size=[1, 5, 2, 1]}
      %v3: f32[5,64] = aten.view_copy(%x) {size=[5, 64]}
      %m3: f32[5,1] = aten.mm(%v3, %mean_weight_64)
      %c: f32[1,5,1] = aten.view_copy(%m3) {size=[1, 5, 1]}
      %d: f32[1,5,1] = aten.add.Tensor(%a, %a)
      %e: f32[1,5,1] = aten.mul.Tensor(%a, %c)
      return %d, %e, %b
    }""",
    ),
    case(
        "output-result-is-output-two-trailing-dims-no-keepdim",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[2] = aten.mean.dim(%x) {dim=[1, 2]}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: f32[2,3,4]
      param %mean_weight_12: f32[12,1]
      %v: f32[2,12] = aten.view_copy(%x) {size=[2, 12]}
      %l: f32[2,1] = aten.mm(%v, %mean_weight_12)
      %a: f32[2] = aten.view_copy(%l) {size=[2]}
      return %a, %x
    }""",
    ),
    case(
        "const-operand-is-param",
        """
    graph @g {
      param %w: f32[8]
      %a: f32[1] = aten.mean.dim(%w) {dim=[0], keepdim=true}
      return %a
    }""",
        """
    graph @g {
      param %w: f32[8]
      param %mean_weight_8: f32[8,1]
      %v: f32[1,8] = aten.view_copy(%w) {size=[1, 8]}
      %m: f32[1,1] = aten.mm(%v, %mean_weight_8)
      %a: f32[1] = aten.view_copy(%m) {size=[1]}
      return %a
    }""",
    ),
    case(
        "symbolic-rms-norm-mean",
        """
    graph @g {
      input %x: f32[1,s0,64]
      %a: f32[1,s0,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      %b: f32[1,s0,1] = aten.rsqrt(%a)
      return %b, %a
    }""",
        """
    graph @g {
      input %x: f32[1,s0,64]
      param %mean_weight_64: f32[64,1]
      %v: f32[s0,64] = aten.view_copy(%x) {size=[-1, 64]}
      %m: f32[s0,1] = aten.mm(%v, %mean_weight_64)
      %a: f32[1,s0,1] = aten.view_copy(%m) {size=[1, -1, 1]}
      %b: f32[1,s0,1] = aten.rsqrt(%a)
      return %b, %a
    }""",
    ),
    case(
        "symbolic-two-trailing-dims-no-keepdim",
        """
    graph @g {
      input %x: f32[s0,4,16]
      %a: f32[s0] = aten.mean.dim(%x) {dim=[-1, -2]}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[s0,4,16]
      param %mean_weight_64: f32[64,1]
      %v: f32[s0,64] = aten.view_copy(%x) {size=[-1, 64]}
      %l: f32[s0,1] = aten.mm(%v, %mean_weight_64)
      %a: f32[s0] = aten.view_copy(%l) {size=[-1]}
      return %a
    }""",
    ),
    case(
        "a-quantized-mean-keeps-the-spatial-form",
        """
    graph @g {
      input %q: i8[1,5,64]
      %x: f32[1,5,64] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
      %a: f32[1,5,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
        """
    graph @g {
      input %q: i8[1,5,64]
      %x: f32[1,5,64] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
      %v: f32[1,5,1,64] = aten.view_copy(%x) {size=[1, 5, 1, 64]}
      %m: f32[1,5,1,1] = aten.mean.dim(%v) {dim=[2, 3], keepdim=true}
      %a: f32[1,5,1] = aten.view_copy(%m) {size=[1, 5, 1]}
      return %a
    }""",
    ),
    case(
        "f16-rms-norm-mean-as-spatial-mean",
        """
    graph @g {
      input %x: f16[1,5,64]
      %a: f16[1,5,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      %b: f16[1,5,1] = aten.rsqrt(%a)
      return %b
    }""",
        """
    graph @g {
      input %x: f16[1,5,64]
      %v: f16[1,5,1,64] = aten.view_copy(%x) {size=[1, 5, 1, 64]}
      %m: f16[1,5,1,1] = aten.mean.dim(%v) {dim=[2, 3], keepdim=true}
      %a: f16[1,5,1] = aten.view_copy(%m) {size=[1, 5, 1]}
      %b: f16[1,5,1] = aten.rsqrt(%a)
      return %b
    }""",
    ),
    case(
        "f16-symbolic-rows-are-a-product",
        """
    graph @g {
      input %x: f16[2,s0,64]
      %a: f16[2,s0] = aten.mean.dim(%x) {dim=[-1]}
      return %a
    }""",
        """
    graph @g {
      input %x: f16[2,s0,64]
      %v: f16[1,2*s0,1,64] = aten.view_copy(%x) {size=[1, -1, 1, 64]}
      %m: f16[1,2*s0,1,1] = aten.mean.dim(%v) {dim=[2, 3], keepdim=true}
      %a: f16[2,s0] = aten.view_copy(%m) {size=[2, -1]}
      return %a
    }""",
    ),
    case(
        "declined-symbolic-reduced-dim",
        """
    graph @g {
      input %x: f32[1,4,s0]
      %a: f32[1,4,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
    ),
    case(
        "declined-two-symbolic-dims-in-the-result",
        """
    graph @g {
      input %x: f32[s0,s1,64]
      %a: f32[s0,s1,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
    ),
    case(
        "wider-than-a-matmul-takes-as-spatial-mean",
        """
    graph @g {
      input %x: f32[2,16385]
      %a: f32[2,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[2,16385]
      %v: f32[1,2,1,16385] = aten.view_copy(%x) {size=[1, 2, 1, 16385]}
      %m: f32[1,2,1,1] = aten.mean.dim(%v) {dim=[2, 3], keepdim=true}
      %a: f32[2,1] = aten.view_copy(%m) {size=[2, 1]}
      return %a
    }""",
    ),
    case(
        "two-dim-input-needs-no-views",
        """
    graph @g {
      input %x: f32[3,16]
      %a: f32[3,1] = aten.mean.dim(%x) {dim=[1], keepdim=true}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[3,16]
      param %mean_weight_16: f32[16,1]
      %a: f32[3,1] = aten.mm(%x, %mean_weight_16)
      return %a
    }""",
    ),
    # a program that keeps linears: a mean over the last dim is a linear with a 1/cols row, no views
    case(
        "linear-program-rms-norm-mean-is-a-linear-the-linear-output-read-twice",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %a: f32[1,5,1] = aten.mean.dim(%l) {dim=[-1], keepdim=true}
      %b: f32[1,5,1] = aten.rsqrt(%a)
      return %b, %l
    }""",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      param %mean_row_64: f32[1,64]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %a: f32[1,5,1] = aten.linear(%l, %mean_row_64)
      %b: f32[1,5,1] = aten.rsqrt(%a)
      return %b, %l
    }""",
    ),
    case(
        "linear-program-symbolic-mean-of-an-input-is-an-output",
        """
    graph @g {
      input %x: f32[1,s0,64]
      param %w: f32[8,64]
      %l: f32[1,s0,8] = aten.linear(%x, %w)
      %a: f32[1,s0,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      %c: f32[1,s0,1] = aten.mean.dim(%x) {dim=[2], keepdim=true}
      return %a, %l, %c
    }""",
        """
    graph @g {
      input %x: f32[1,s0,64]
      param %w: f32[8,64]
      param %mean_row_64: f32[1,64]
      %l: f32[1,s0,8] = aten.linear(%x, %w)
      %a: f32[1,s0,1] = aten.linear(%x, %mean_row_64)
      %c: f32[1,s0,1] = aten.linear(%x, %mean_row_64)
      return %a, %l, %c
    }""",
    ),
    case(
        "linear-program-mean-read-by-two-ops-and-returned",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %a: f32[1,5,1] = aten.mean.dim(%l) {dim=[-1], keepdim=true}
      %b: f32[1,5,1] = aten.rsqrt(%a)
      %c: f32[1,5,64] = aten.mul.Tensor(%l, %a)
      return %b, %c, %a
    }""",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      param %mean_row_64: f32[1,64]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %a: f32[1,5,1] = aten.linear(%l, %mean_row_64)
      %b: f32[1,5,1] = aten.rsqrt(%a)
      %c: f32[1,5,64] = aten.mul.Tensor(%l, %a)
      return %b, %c, %a
    }""",
    ),
    case(
        "linear-program-no-keepdim-one-view-two-dims-and-a-vector-as-products",
        """
    graph @g {
      input %x: f32[2,3,4]
      param %w: f32[4,4]
      param %v: f32[4]
      %l: f32[2,3,4] = aten.linear(%x, %w)
      %a: f32[2,3] = aten.mean.dim(%l) {dim=[-1]}
      %b: f32[2] = aten.mean.dim(%l) {dim=[1, 2]}
      %c: f32[1] = aten.mean.dim(%v) {dim=[0], keepdim=true}
      return %a, %b, %c
    }""",
        """
    graph @g {
      input %x: f32[2,3,4]
      param %w: f32[4,4]
      param %v: f32[4]
      param %mean_row_4: f32[1,4]
      param %mean_weight_12: f32[12,1]
      param %mean_weight_4: f32[4,1]
      %l: f32[2,3,4] = aten.linear(%x, %w)
      %m: f32[2,3,1] = aten.linear(%l, %mean_row_4)
      %a: f32[2,3] = aten.view_copy(%m) {size=[2, 3]}
      %v2: f32[2,12] = aten.view_copy(%l) {size=[2, 12]}
      %m2: f32[2,1] = aten.mm(%v2, %mean_weight_12)
      %b: f32[2] = aten.view_copy(%m2) {size=[2]}
      %v3: f32[1,4] = aten.view_copy(%v) {size=[1, 4]}
      %m3: f32[1,1] = aten.mm(%v3, %mean_weight_4)
      %c: f32[1] = aten.view_copy(%m3) {size=[1]}
      return %a, %b, %c
    }""",
    ),
    case(
        "declined-f16-two-symbolic-dims-in-the-result",
        """
    graph @g {
      input %x: f16[s0,s1,64]
      %a: f16[s0,s1,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
    ),
    case(
        "declined-not-trailing",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[2,1,4] = aten.mean.dim(%x) {dim=[1], keepdim=true}
      return %a
    }""",
    ),
    case(
        "declined-already-spatial",
        """
    graph @g {
      input %x: f32[1,2,3,4]
      %a: f32[1,2,1,1] = aten.mean.dim(%x) {dim=[2, 3], keepdim=true}
      return %a
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", MEANS)
def test_mean_over_last_dims(before, expected, changed):
    graph = check_pipeline(before, "xnnpack.mean-over-last-dims", expected, changed=changed)
    for value in graph.inputs:
        if value.name.startswith(("mean_weight_", "mean_row_")):
            cols = max(value.type.shape)
            shape = (cols, 1) if value.name.startswith("mean_weight_") else (1, cols)
            assert value.data.shape == shape and bool((value.data == 1.0 / cols).all())


def test_mean_over_last_dims_linear_false_keeps_the_product_between_views():
    check_pipeline(
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %a: f32[1,5,1] = aten.mean.dim(%l) {dim=[-1], keepdim=true}
      return %a
    }""",
        "xnnpack.mean-over-last-dims{linear=false}",
        """
    graph @g {
      input %x: f32[1,5,64]
      param %w: f32[64,64]
      param %mean_weight_64: f32[64,1]
      %l: f32[1,5,64] = aten.linear(%x, %w)
      %v: f32[5,64] = aten.view_copy(%l) {size=[5, 64]}
      %m: f32[5,1] = aten.mm(%v, %mean_weight_64)
      %a: f32[1,5,1] = aten.view_copy(%m) {size=[1, 5, 1]}
      return %a
    }""",
    )


CASTS = [
    case(
        "ordinary-rms-norm-upcast",
        """
    graph @g {
      input %x: bf16[1,4]
      %a: f32[1,4] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[0, 1]}
      %b: f32[1,4] = aten.mul.Tensor(%a, %a)
      %c: bf16[1,4] = dim_order_ops._to_dim_order_copy(%b) {dtype=bf16}
      return %c
    }""",
        """
    graph @g {
      input %x: bf16[1,4]
      %a: f32[1,4] = xir.convert(%x) {dtype=f32}
      %b: f32[1,4] = aten.mul.Tensor(%a, %a)
      %c: bf16[1,4] = xir.convert(%b) {dtype=bf16}
      return %c
    }""",
    ),
    case(
        "output-result-is-output-and-operand-is-input",
        """
    graph @g {
      input %x: f32[3]
      %a: bf16[3] = aten._to_copy(%x) {dtype=bf16}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: f32[3]
      %a: bf16[3] = xir.convert(%x) {dtype=bf16}
      return %a, %x
    }""",
    ),
    case(
        "const-and-several-uses",
        """
    graph @g {
      param %w: bf16[3]
      %a: f32[3] = dim_order_ops._to_dim_order_copy(%w) {dtype=f32}
      %b: f32[3] = aten.mul.Tensor(%a, %a)
      %c: f32[3] = aten.add.Tensor(%a, %b)
      return %c
    }""",
        """
    graph @g {
      param %w: bf16[3]
      %a: f32[3] = xir.convert(%w) {dtype=f32}
      %b: f32[3] = aten.mul.Tensor(%a, %a)
      %c: f32[3] = aten.add.Tensor(%a, %b)
      return %c
    }""",
    ),
    case(
        "symbolic-cast-pair",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %a: bf16[1,s0,8] = dim_order_ops._to_dim_order_copy(%x) {dtype=bf16, dim_order=[0, 1, 2]}
      %b: f32[1,s0,8] = dim_order_ops._to_dim_order_copy(%a) {dtype=f32, dim_order=[0, 1, 2]}
      %c: f32[1,s0,8] = aten.relu(%b)
      return %c
    }""",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %a: bf16[1,s0,8] = xir.convert(%x) {dtype=bf16}
      %b: f32[1,s0,8] = xir.convert(%a) {dtype=f32}
      %c: f32[1,s0,8] = aten.relu(%b)
      return %c
    }""",
    ),
    # an upcast whose f32 result leaves XNNPACK corrupts another output of the delegate (measured):
    # returned, or read by an op XNNPACK does not take, it stays a cast
    case(
        "declined-upcast-is-an-output",
        """
    graph @g {
      param %w: bf16[3]
      %a: f32[3] = dim_order_ops._to_dim_order_copy(%w) {dtype=f32}
      %b: f32[3] = aten.mul.Tensor(%a, %a)
      return %b, %a
    }""",
    ),
    case(
        "declined-upcast-read-by-an-op-left-outside",
        """
    graph @g {
      input %x: bf16[3]
      %a: f32[3] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32}
      %b: f32[3] = aten.cumsum(%a) {dim=0}
      return %b
    }""",
    ),
    case(
        "declined-0d-would-stay-outside",
        """
    graph @g {
      param %w: f32[]
      %a: bf16[] = dim_order_ops._to_dim_order_copy(%w) {dtype=bf16, dim_order=[]}
      return %a
    }""",
    ),
    case(
        "declined-7d",
        """
    graph @g {
      input %x: f32[1,1,1,1,1,1,2]
      %a: bf16[1,1,1,1,1,1,2] = aten._to_copy(%x) {dtype=bf16}
      return %a
    }""",
    ),
    case(
        "declined-integer",
        """
    graph @g {
      input %x: i64[3]
      %a: f32[3] = aten._to_copy(%x) {dtype=f32}
      return %a
    }""",
    ),
    case(
        "declined-changes-dim-order",
        """
    graph @g {
      input %x: f32[2,3]
      %a: bf16[2,3] = dim_order_ops._to_dim_order_copy(%x) {dtype=bf16, dim_order=[1, 0]}
      return %a
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CASTS)
def test_casts_as_converts(before, expected, changed):
    check_pipeline(before, "xnnpack.casts-as-converts{enable_bf16=true}", expected, changed=changed)


def test_casts_stay_without_enable_bf16():
    text = CASTS[0].values[0]
    check_pipeline(text, "xnnpack.casts-as-converts", text, changed=False)


EXPANDS = [
    case(
        "ordinary-repeat-kv",
        """
    graph @g {
      input %k: f32[1,2,1,8,4]
      %a: f32[1,2,3,8,4] = aten.expand_copy(%k) {size=[1, 2, 3, 8, 4]}
      %b: f32[1,6,8,4] = aten.view_copy(%a) {size=[1, 6, 8, 4]}
      return %b
    }""",
        """
    graph @g {
      input %k: f32[1,2,1,8,4]
      param %expand_ones: f32[1,1,3,1,1]
      %a: f32[1,2,3,8,4] = aten.mul.Tensor(%k, %expand_ones)
      %b: f32[1,6,8,4] = aten.view_copy(%a) {size=[1, 6, 8, 4]}
      return %b
    }""",
    ),
    case(
        "output-new-leading-dims-result-is-output",
        """
    graph @g {
      input %x: bf16[1,4]
      %a: bf16[2,3,4] = aten.expand_copy(%x) {size=[2, 3, 4]}
      return %a, %x
    }""",
        """
    graph @g {
      input %x: bf16[1,4]
      param %expand_ones: bf16[2,3,1]
      %a: bf16[2,3,4] = aten.mul.Tensor(%x, %expand_ones)
      return %a, %x
    }""",
    ),
    case(
        "const-operand-is-param-and-several-uses",
        """
    graph @g {
      param %w: f32[3,1]
      %a: f32[3,5] = aten.expand_copy(%w) {size=[-1, 5]}
      %b: f32[3,5] = aten.add.Tensor(%a, %a)
      return %b, %a
    }""",
        """
    graph @g {
      param %w: f32[3,1]
      param %expand_ones: f32[1,5]
      %a: f32[3,5] = aten.mul.Tensor(%w, %expand_ones)
      %b: f32[3,5] = aten.add.Tensor(%a, %a)
      return %b, %a
    }""",
    ),
    case(
        "declined-integer",
        """
    graph @g {
      input %x: i64[1,4]
      %a: i64[3,4] = aten.expand_copy(%x) {size=[3, 4]}
      return %a
    }""",
    ),
    case(
        "declined-7d-result",
        """
    graph @g {
      input %x: f32[1,1,1,1,1,1,4]
      %a: f32[2,1,1,1,1,1,4] = aten.expand_copy(%x) {size=[2, 1, 1, 1, 1, 1, 4]}
      return %a
    }""",
    ),
    case(
        "declined-symbolic",
        """
    graph @g {
      input %x: f32[s0,1]
      %a: f32[s0,4] = aten.expand_copy(%x) {size=[-1, 4]}
      return %a
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", EXPANDS)
def test_expand_as_broadcast(before, expected, changed):
    graph = check_pipeline(before, "xnnpack.expand-as-broadcast", expected, changed=changed)
    if changed:
        ones = graph.input_named("expand_ones").data
        assert bool((ones == 1).all())


def safe_softmax_graph(dtype="f32", returned="", other="-inf", fill="0", keepdim="true"):
    return f"""
    graph @g {{
      input %x: {dtype}[1,2,1,4]
      %s: {dtype}[1,2,1,4] = aten._softmax(%x) {{dim=-1, half_to_float=false}}
      %e: bool[1,2,1,4] = aten.eq.Scalar(%x) {{other={other}}}
      %n: bool[1,2,1,4] = aten.logical_not(%e)
      %a: bool[1,2,1,1] = aten.any.dim(%n) {{dim=-1, keepdim={keepdim}}}
      %m: bool[1,2,1,1] = aten.logical_not(%a)
      %z: {dtype}[1,2,1,4] = aten.full_like(%s) {{fill_value={fill}, pin_memory=false}}
      %w: {dtype}[1,2,1,4] = aten.where.self(%m, %z, %s)
      return %w{returned}
    }}"""


def safe_softmax_rewritten(dtype="f32", lowest="-3.4028234663852886e+38", returned=""):
    return f"""
    graph @g {{
      input %x: {dtype}[1,2,1,4]
      param %softmax_half: {dtype}[]
      param %softmax_highest: {dtype}[]
      %s: {dtype}[1,2,1,4] = aten._softmax(%x) {{dim=-1, half_to_float=false}}
      %e: bool[1,2,1,4] = aten.eq.Scalar(%x) {{other=-inf}}
      %n: bool[1,2,1,4] = aten.logical_not(%e)
      %a: bool[1,2,1,1] = aten.any.dim(%n) {{dim=-1, keepdim=true}}
      %m: bool[1,2,1,1] = aten.logical_not(%a)
      %z: {dtype}[1,2,1,4] = aten.full_like(%s) {{fill_value=0, pin_memory=false}}
      %c: {dtype}[1,2,1,4] = aten.clamp(%x) {{min={lowest}, max=none}}
      %t: {dtype}[1,2,1,4] = aten._softmax(%c) {{dim=-1, half_to_float=false}}
      %h: {dtype}[1,2,1,4] = aten.mul.Tensor(%x, %softmax_half)
      %p: {dtype}[1,2,1,4] = aten.add.Tensor(%h, %softmax_highest)
      %k: {dtype}[1,2,1,4] = aten.clamp(%p) {{min=0.0, max=1.0}}
      %w: {dtype}[1,2,1,4] = aten.mul.Tensor(%t, %k)
      return %w{returned}
    }}"""


SAFE_SOFTMAX = [
    case("ordinary", safe_softmax_graph(), safe_softmax_rewritten()),
    case(
        "output-input-is-also-returned-bf16",
        safe_softmax_graph("bf16", returned=", %x"),
        safe_softmax_rewritten("bf16", lowest="-3.3895313892515355e+38", returned=", %x"),
    ),
    # (a symbolic query length, as ExecuTorch's LLM flow exports attention without its custom SDPA)
    case(
        "symbolic-query-length",
        safe_softmax_graph().replace("[1,2,1,", "[1,2,s0,"),
        safe_softmax_rewritten().replace("[1,2,1,", "[1,2,s0,"),
    ),
    case("declined-not-minus-inf", safe_softmax_graph(other="0.0")),
    case("declined-fill-not-zero", safe_softmax_graph(fill="1")),
    # (rows of one head: without keepdim, the condition [1,1,1] still broadcasts to the softmax's shape)
    case(
        "declined-no-keepdim",
        safe_softmax_graph(keepdim="false").replace("bool[1,2,1,1]", "bool[1,1,1]").replace("[1,2,1,4]", "[1,1,1,4]"),
    ),
]


@pytest.mark.parametrize("before, expected, changed", SAFE_SOFTMAX)
def test_safe_softmax(before, expected, changed):
    graph = check_pipeline(before, "xnnpack.safe-softmax", expected, changed=changed)
    if changed:
        assert float(graph.input_named("softmax_half").data) == 0.5
        assert float(graph.input_named("softmax_highest").data) > 3e38


def test_safe_softmax_then_dead_code_leaves_no_bool_ops():
    graph = check_pipeline(
        safe_softmax_graph(),
        "xnnpack.safe-softmax,dead-code-elimination",
        """
    graph @g {
      input %x: f32[1,2,1,4]
      param %softmax_half: f32[]
      param %softmax_highest: f32[]
      %c: f32[1,2,1,4] = aten.clamp(%x) {min=-3.4028234663852886e+38, max=none}
      %t: f32[1,2,1,4] = aten._softmax(%c) {dim=-1, half_to_float=false}
      %h: f32[1,2,1,4] = aten.mul.Tensor(%x, %softmax_half)
      %p: f32[1,2,1,4] = aten.add.Tensor(%h, %softmax_highest)
      %k: f32[1,2,1,4] = aten.clamp(%p) {min=0.0, max=1.0}
      %w: f32[1,2,1,4] = aten.mul.Tensor(%t, %k)
      return %w
    }""",
        changed=True,
    )
    assert all(node.result.dtype.name != "bool" for node in graph)


SPLITS = [
    case(
        "ordinary-fused-gate-up",
        """
    graph @g {
      input %x: f32[1,1,8]
      %s: f32[1,1,3], %t: f32[1,1,5] = aten.split_with_sizes_copy(%x) {split_sizes=[3, 5], dim=-1}
      %a: f32[1,1,3] = aten.relu(%s)
      return %a, %t
    }""",
        """
    graph @g {
      input %x: f32[1,1,8]
      %s: f32[1,1,3] = aten.slice_copy.Tensor(%x) {dim=2, start=0, end=3, step=1}
      %t: f32[1,1,5] = aten.slice_copy.Tensor(%x) {dim=2, start=3, end=8, step=1}
      %a: f32[1,1,3] = aten.relu(%s)
      return %a, %t
    }""",
    ),
    case(
        "an-unused-piece-and-a-piece-read-twice",
        """
    graph @g {
      param %w: f32[6,2]
      %a: f32[2,2], %b: f32[2,2], %c: f32[2,2] = aten.split_copy.Tensor(%w) {split_size=2}
      %d: f32[2,2] = aten.mul.Tensor(%c, %c)
      return %d
    }""",
        """
    graph @g {
      param %w: f32[6,2]
      %c: f32[2,2] = aten.slice_copy.Tensor(%w) {dim=0, start=4, end=6, step=1}
      %d: f32[2,2] = aten.mul.Tensor(%c, %c)
      return %d
    }""",
    ),
    case(
        "symbolic-shape-static-dim",
        """
    graph @g {
      input %x: f32[s0,8]
      %s: f32[s0,4], %t: f32[s0,4] = aten.split_with_sizes_copy(%x) {split_sizes=[4, 4], dim=1}
      return %s, %t
    }""",
        """
    graph @g {
      input %x: f32[s0,8]
      %s: f32[s0,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=4, step=1}
      %t: f32[s0,4] = aten.slice_copy.Tensor(%x) {dim=1, start=4, end=8, step=1}
      return %s, %t
    }""",
    ),
    case(
        "declined-split-of-the-symbolic-dim",
        """
    graph @g {
      input %x: f32[s0,8]
      %s: f32[4,8], %t: f32[s1,8] = aten.split_copy.Tensor(%x) {split_size=4, dim=0}
      return %s, %t
    }""",
    ),
    case(
        "declined-a-small-split-of-several-rows",  # (an LSTM's gates: on ExecuTorch's split, one op)
        """
    graph @g {
      input %x: f32[3,80]
      %i: f32[3,20], %f: f32[3,20], %g: f32[3,20], %o: f32[3,20] = aten.split_with_sizes_copy(%x) {split_sizes=[20, 20, 20, 20], dim=1}
      %a: f32[3,20] = aten.sigmoid(%i)
      %b: f32[3,20] = aten.mul.Tensor(%a, %g)
      return %b, %f, %o
    }""",
    ),
    case(
        "several-rows-past-the-small-split",
        """
    graph @g {
      input %x: f32[4,80]
      %s: f32[4,20], %t: f32[4,60] = aten.split_with_sizes_copy(%x) {split_sizes=[20, 60], dim=1}
      return %s, %t
    }""",
        """
    graph @g {
      input %x: f32[4,80]
      %s: f32[4,20] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=20, step=1}
      %t: f32[4,60] = aten.slice_copy.Tensor(%x) {dim=1, start=20, end=80, step=1}
      return %s, %t
    }""",
    ),
    case(
        "declined-7-d-stays-whole-outside-xnnpack",
        """
    graph @g {
      input %x: f32[2,1,2,1,2,1,8]
      %s: f32[2,1,2,1,2,1,4], %t: f32[2,1,2,1,2,1,4] = aten.split_with_sizes_copy(%x) {split_sizes=[4, 4], dim=6}
      return %s, %t
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", SPLITS)
def test_split_as_slices(before, expected, changed):
    check_pipeline(before, "xnnpack.split-as-slices", expected, changed=changed)


EMPTY_CATS = [
    case(
        "declined-bypass-would-return-an-input",
        """
    graph @g {
      input %q: f32[1,4,1,16]
      input %p: f32[1,4,1,0]
      %c: f32[1,4,1,16] = aten.cat(%q, %p) {dim=-1}
      %r: f32[1,4,1,16] = aten.relu(%c)
      return %r, %c
    }""",
    ),
    case(
        "rotary-pass-through-is-empty",
        """
    graph @g {
      input %q: f32[1,4,1,16]
      input %p: f32[1,4,1,0]
      %e: f32[1,4,1,16] = aten.neg(%q)
      %c: f32[1,4,1,16] = aten.cat(%e, %p) {dim=-1}
      return %c
    }""",
        """
    graph @g {
      input %q: f32[1,4,1,16]
      input %p: f32[1,4,1,0]
      %e: f32[1,4,1,16] = aten.neg(%q)
      return %e
    }""",
    ),
    case(
        "one-empty-of-three",
        """
    graph @g {
      input %a: f32[2,3]
      input %b: f32[0]
      %n: f32[2,3] = aten.neg(%a)
      %c: f32[4,3] = aten.cat(%a, %b, %n) {dim=0}
      return %c
    }""",
        """
    graph @g {
      input %a: f32[2,3]
      input %b: f32[0]
      %n: f32[2,3] = aten.neg(%a)
      %c: f32[4,3] = aten.cat(%a, %n) {dim=0}
      return %c
    }""",
    ),
    case(
        "one-input-left-is-computed",
        """
    graph @g {
      input %a: f32[2,3]
      input %b: f32[2,0]
      %n: f32[2,3] = aten.neg(%a)
      %c: f32[2,3] = aten.cat(%n, %b) {dim=1}
      %r: f32[2,3] = aten.relu(%c)
      return %r
    }""",
        """
    graph @g {
      input %a: f32[2,3]
      input %b: f32[2,0]
      %n: f32[2,3] = aten.neg(%a)
      %r: f32[2,3] = aten.relu(%n)
      return %r
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", EMPTY_CATS)
def test_remove_no_ops_drops_empty_cat_inputs(before, expected, changed):
    check_pipeline(before, "remove-no-ops", expected, changed=changed)


CONVERT_PAIRS = [
    case(
        "ordinary-bf16-through-f32",
        """
    graph @g {
      input %x: bf16[2,4]
      %n: bf16[2,4] = aten.neg(%x)
      %w: f32[2,4] = dim_order_ops._to_dim_order_copy(%n) {dtype=f32}
      %b: bf16[2,4] = dim_order_ops._to_dim_order_copy(%w) {dtype=bf16}
      %r: bf16[2,4] = aten.relu(%b)
      return %r, %w
    }""",
        """
    graph @g {
      input %x: bf16[2,4]
      %n: bf16[2,4] = aten.neg(%x)
      %w: f32[2,4] = dim_order_ops._to_dim_order_copy(%n) {dtype=f32}
      %r: bf16[2,4] = aten.relu(%n)
      return %r, %w
    }""",
    ),
    case(
        "declined-narrowing-first-loses-bits",
        """
    graph @g {
      input %x: f32[2,4]
      %n: bf16[2,4] = dim_order_ops._to_dim_order_copy(%x) {dtype=bf16}
      %w: f32[2,4] = dim_order_ops._to_dim_order_copy(%n) {dtype=f32}
      %r: f32[2,4] = aten.relu(%w)
      return %r
    }""",
    ),
    case(
        "declined-would-return-the-input",
        """
    graph @g {
      input %x: bf16[2,4]
      %w: f32[2,4] = aten._to_copy(%x) {dtype=f32}
      %b: bf16[2,4] = aten._to_copy(%w) {dtype=bf16}
      return %b
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CONVERT_PAIRS)
def test_remove_no_ops_drops_a_widening_converted_back(before, expected, changed):
    check_pipeline(before, "remove-no-ops", expected, changed=changed)


def _weight_only(block: str = "[1, 64]", quant_min: int = -128, quant_max: int = 127, bias: bool = True) -> str:
    """A torchao weight-only linear (IntxWeightOnlyConfig): int8 per output channel unless told."""
    return f"""
    graph @g {{
      param %w: i8[32,64]
      param %s: f32[32,{64 // int(block.split(",")[1].strip(" ]"))}]
      param %z: i8[32,{64 // int(block.split(",")[1].strip(" ]"))}]
      param %b: f32[32]
      input %x: f32[4,64]
      %d: f32[32,64] = torchao.dequantize_affine(%w, %s, %z) {{block_size={block}, input_dtype=i8, quant_min={quant_min}, quant_max={quant_max}}}
      %y: f32[4,32] = aten.linear(%x, %d{", %b" if bias else ""})
      return %y
    }}"""


WEIGHT_ONLY = [
    case(
        "int8-per-channel",
        _weight_only(),
        """
    graph @g {
      param %w: i8[32,64]
      param %s: f32[32,1]
      param %z: i8[32,1]
      param %b: f32[32]
      input %x: f32[4,64]
      %d: f32[32,64] = torchao.dequantize_affine(%w, %s, %z) {block_size=[1, 64], input_dtype=i8, quant_min=-128, quant_max=127}
      %l: f32[4,32] = aten.linear(%x, %d)
      %y: f32[4,32] = aten.add.Tensor(%l, %b)
      return %y
    }""",
    ),
    case(
        "result-has-several-users",
        _weight_only().replace(
            "      return %y",
            """      %r: f32[4,32] = aten.relu(%y)
      return %y, %r""",
        ),
        """
    graph @g {
      param %w: i8[32,64]
      param %s: f32[32,1]
      param %z: i8[32,1]
      param %b: f32[32]
      input %x: f32[4,64]
      %d: f32[32,64] = torchao.dequantize_affine(%w, %s, %z) {block_size=[1, 64], input_dtype=i8, quant_min=-128, quant_max=127}
      %l: f32[4,32] = aten.linear(%x, %d)
      %y: f32[4,32] = aten.add.Tensor(%l, %b)
      %r: f32[4,32] = aten.relu(%y)
      return %y, %r
    }""",
    ),
    case("declined-no-bias", _weight_only(bias=False)),
    case("declined-int4", _weight_only(quant_min=-8, quant_max=7)),
    case("declined-int8-groups", _weight_only(block="[1, 32]")),
]


@pytest.mark.parametrize("before, expected, changed", WEIGHT_ONLY)
def test_weight_only_linear_bias(before, expected, changed):
    check_pipeline(before, "xnnpack.weight-only-linear-bias", expected, changed=changed)


@pytest.mark.parametrize(
    "op_line",
    [
        "%a: bf16[1,s0,1,8] = aten.view_copy(%x) {size=[1, %n, 1, 8]}",
        "%a: bf16[1,s0,1,8] = aten.unsqueeze_copy(%x) {dim=2}",
    ],
)
def test_a_value_read_by_an_op_without_schema_is_rewritten(op_line):
    """A value read by an imported op whose call has no schema (the LLM flow's KV-cache update,
    ``auto_functionalized_v2``) is rewritten like any other: shape-ops-as-views writes the view's
    symbolic size -1 and the unsqueeze as a view, which the reader then reads (the write-back
    rewires a schemaless call in place; end to end, for every pass that used to decline such a
    value: tests/lowering/test_writeback_schemaless.py)."""
    import types

    from passes import PassManager
    from xir import parse_graph, print_graph

    graph = parse_graph(f"""
    graph @g {{
      input %x: bf16[1,s0,8]
      %n: int = aten.sym_size.int(%x) {{dim=1}}
      {op_line}
      %u: bf16[1,s0,8] = higher_order.update_cache(%a)
      return %u
    }}""")
    reader = next(n for n in graph if n.op == "higher_order.update_cache")
    reader.fx_node = types.SimpleNamespace(op="call_function", target=object())  # (no _schema)
    PassManager("shape-ops-as-views").run(graph)
    view = reader.operands[0].producer
    assert view.op == "aten.view_copy" and view.attributes["size"] == [1, -1, 1, 8], print_graph(graph)


def test_a_cast_read_by_an_op_without_schema_becomes_a_convert():
    import types

    from passes import PassManager
    from xir import parse_graph, print_graph

    graph = parse_graph("""
    graph @g {
      input %x: f32[1,s0,8]
      %a: bf16[1,s0,8] = dim_order_ops._to_dim_order_copy(%x) {dtype=bf16, dim_order=[0, 1, 2]}
      %u: bf16[1,s0,8] = higher_order.update_cache(%a)
      return %u
    }""")
    reader = next(n for n in graph if n.op == "higher_order.update_cache")
    reader.fx_node = types.SimpleNamespace(op="call_function", target=object())  # (no _schema)
    PassManager("xnnpack.casts-as-converts{enable_bf16=true}").run(graph)
    assert [n.op for n in graph if not n.is_return] == ["xir.convert", "higher_order.update_cache"], print_graph(graph)
    assert reader.operands[0].producer.op == "xir.convert"


def test_mean_over_last_dims_matmul_false_keeps_the_spatial_form():
    check_pipeline(
        """
    graph @g {
      input %x: f32[1,s0,64]
      %a: f32[1,s0,1] = aten.mean.dim(%x) {dim=[-1], keepdim=true}
      return %a
    }""",
        "xnnpack.mean-over-last-dims{matmul=false}",
        """
    graph @g {
      input %x: f32[1,s0,64]
      %v: f32[1,s0,1,64] = aten.view_copy(%x) {size=[1, -1, 1, 64]}
      %m: f32[1,s0,1,1] = aten.mean.dim(%v) {dim=[2, 3], keepdim=true}
      %a: f32[1,s0,1] = aten.view_copy(%m) {size=[1, -1, 1]}
      return %a
    }""",
    )
