"""Graph-boundary tests of every built-in pass (in the style of onnx-ir's identity_elimination_test).

For each pass, the value it rewrites (or the value the rewrite reads or bypasses) is put on
each boundary of the graph in turn:

* ``output``: it is a graph output;
* ``input``: it is a graph input;
* ``const``: it is a constant (a param);
* ``uses``: it has several uses (another node reads it too);

plus one ``ordinary`` case, where it is none of these. The expected IR is what a correct pass
gives, whatever the pass does today. A correct pass never changes the value of a graph
output; never erases a node whose result is still a graph output (unless the output moves to
an equivalent value); never makes a graph input (or a constant) a graph output by bypassing a
no-op; and dead-code elimination keeps every node whose result is used or is a graph output.

Passes that read constant data (fold-batch-norm, xnnpack.layer-norm-in-fp32, xnnpack.decompose-conv3d,
bf16-in-fp32) run on a parsed graph whose constants get data attached (parsed constants have
none): see :func:`check_pipeline_with_data`.
"""

from __future__ import annotations

import math
import textwrap

import pytest
import torch

from passes.testing import check_pipeline
from xir import DType, Graph, parse_graph

_TORCH_DTYPES = {
    DType.f32: torch.float32,
    DType.bf16: torch.bfloat16,
    DType.f16: torch.float16,
    DType.f64: torch.float64,
}


def attach_data(graph: Graph, seed: int = 0) -> Graph:
    """Give every constant input (param, buffer, const) of ``graph`` data of its type: values
    in [0.5, 1.5), so a batch norm's variance is positive."""
    generator = torch.Generator().manual_seed(seed)
    for value in graph.inputs:
        if value.is_constant and value.data is None:
            value.data = (torch.rand(tuple(value.shape), generator=generator) + 0.5).to(_TORCH_DTYPES[value.dtype])
    return graph


def check_pipeline_with_data(before: str, pipeline: str, expected: str, *, changed: bool | None = None) -> Graph:
    """check_pipeline for passes that read constant data: parse ``before``, attach data to its
    constants, then run and compare as check_pipeline does."""
    return check_pipeline(attach_data(parse_graph(textwrap.dedent(before))), pipeline, expected, changed=changed)


def case(name: str, before: str, expected: str | None = None, changed: bool | None = None):
    """One parametrized case; ``expected=None`` means the pass must leave the graph as it is."""
    if expected is None:
        expected, changed = before, False
    elif changed is None:
        changed = True
    return pytest.param(before, expected, changed, id=name)


# =========================================================================== remove-no-ops

REMOVE_NO_OPS = [
    case(
        "ordinary",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %b: f32[2,3] = aten.view_copy(%a) {size=[2, 3]}
      %c: f32[2,3] = aten.neg(%b)
      return %c
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %c: f32[2,3] = aten.neg(%a)
      return %c
    }""",
    ),
    # the no-op's result is a graph output: the output moves to its operand
    case(
        "output-result-is-output",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %b: f32[2,3] = aten.clone(%a)
      return %b
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      return %a
    }""",
    ),
    # ... unless its operand is a graph input (the input would become an output)
    case(
        "output-result-is-output-operand-is-input",
        """
    graph @g {
      input %x: f32[2,3]
      %b: f32[2,3] = aten.permute_copy(%x) {dims=[0, 1]}
      return %b
    }""",
    ),
    # ... or is a graph output already
    case(
        "output-result-and-operand-are-outputs",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %b: f32[2,3] = dim_order_ops._to_dim_order_copy(%a) {dtype=f32, dim_order=[0, 1]}
      return %a, %b
    }""",
    ),
    # the inner permute of a chain is a graph output: it stays, the outer one reads around it
    case(
        "output-inner-permute-is-output",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[3,2,4] = aten.permute_copy(%x) {dims=[1, 0, 2]}
      %b: f32[4,2,3] = aten.permute_copy(%a) {dims=[2, 1, 0]}
      return %a, %b
    }""",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[3,2,4] = aten.permute_copy(%x) {dims=[1, 0, 2]}
      %b: f32[4,2,3] = aten.permute_copy(%x) {dims=[2, 0, 1]}
      return %a, %b
    }""",
    ),
    # the no-op's operand is a graph input (its result is not an output): bypassed
    case(
        "input-operand-is-input",
        """
    graph @g {
      input %x: f32[2,3]
      %b: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
      %c: f32[2,3] = aten.relu(%b)
      return %c
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %c: f32[2,3] = aten.relu(%x)
      return %c
    }""",
    ),
    # a view chain that folds to an identity view of a graph input, and is an output: the folded
    # view stays (bypassing it would make the input an output)
    case(
        "input-folded-view-chain-of-input-is-output",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %b: f32[2,3,4] = aten.view_copy(%a) {size=[2, 3, 4]}
      return %b
    }""",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %b: f32[2,3,4] = aten.view_copy(%x) {size=[2, 3, 4]}
      return %b
    }""",
    ),
    # the no-op's operand is a constant: readers read the constant
    case(
        "const-operand-is-param",
        """
    graph @g {
      input %x: f32[2,3]
      param %w: f32[4,3]
      %wc: f32[4,3] = aten.clone(%w)
      %y: f32[2,4] = aten.linear(%x, %wc)
      return %y
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      param %w: f32[4,3]
      %y: f32[2,4] = aten.linear(%x, %w)
      return %y
    }""",
    ),
    # ... but a constant does not become a graph output
    case(
        "const-operand-is-param-result-is-output",
        """
    graph @g {
      param %w: f32[4,3]
      %wc: f32[4,3] = aten.alias_copy(%w)
      return %wc
    }""",
    ),
    # the no-op's result has several uses: all of them read the operand
    case(
        "uses-result-has-several-uses",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %b: f32[2,3] = aten._to_copy(%a) {dtype=f32}
      %c: f32[2,3] = aten.neg(%b)
      %d: f32[2,3] = aten.mul.Tensor(%b, %c)
      return %d
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.relu(%x)
      %c: f32[2,3] = aten.neg(%a)
      %d: f32[2,3] = aten.mul.Tensor(%a, %c)
      return %d
    }""",
    ),
    # the result is read by a node and is a graph output, the operand is an input: not bypassed
    case(
        "uses-result-used-and-output-operand-is-input",
        """
    graph @g {
      input %x: f32[2,3]
      %b: f32[2,3] = aten.clone(%x)
      %c: f32[2,3] = aten.relu(%b)
      return %b, %c
    }""",
    ),
    # the inner view of a chain has another user: it stays, the outer view reads around it
    case(
        "uses-inner-view-has-another-user",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %b: f32[24] = aten.view_copy(%a) {size=[24]}
      %c: f32[6,4] = aten.neg(%a)
      return %b, %c
    }""",
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %b: f32[24] = aten.view_copy(%x) {size=[24]}
      %c: f32[6,4] = aten.neg(%a)
      return %b, %c
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", REMOVE_NO_OPS)
def test_remove_no_ops(before, expected, changed):
    check_pipeline(before, "remove-no-ops", expected, changed=changed)


# ==================================================================== dead-code-elimination

DEAD_CODE = [
    case(
        "ordinary",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%a)
      %c: f32[4] = aten.exp(%x)
      return %c
    }""",
        """
    graph @g {
      input %x: f32[4]
      %c: f32[4] = aten.exp(%x)
      return %c
    }""",
    ),
    # a node no other node reads, whose result is a graph output, stays
    case(
        "output-unread-result-is-output",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%x)
      return %a, %b
    }""",
    ),
    # a node whose second result (only) is a graph output stays
    case(
        "output-second-result-is-output",
        """
    graph @g {
      input %x: f32[2,4]
      param %w: f32[4]
      param %b: f32[4]
      %n: f32[2,4], %mean: f32[2,1], %rstd: f32[2,1] = aten.native_layer_norm(%x, %w, %b) {normalized_shape=[4], eps=1e-05}
      return %mean
    }""",
    ),
    # a graph input nobody reads stays (it is part of the signature)
    case(
        "input-unused-input",
        """
    graph @g {
      input %x: f32[4]
      input %y: f32[4]
      %a: f32[4] = aten.neg(%x)
      return %a
    }""",
    ),
    # a constant read only by dead code: the node goes, the constant stays
    case(
        "const-param-read-only-by-dead-code",
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %a: f32[4] = aten.add.Tensor(%x, %w)
      %b: f32[4] = aten.relu(%x)
      return %b
    }""",
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %b: f32[4] = aten.relu(%x)
      return %b
    }""",
    ),
    # a value read by a dead node and a live one: only the dead reader goes
    case(
        "uses-one-reader-dead-one-live",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%a)
      %c: f32[4] = aten.exp(%a)
      return %c
    }""",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %c: f32[4] = aten.exp(%a)
      return %c
    }""",
    ),
    # a value read by several dead nodes: it goes with them
    case(
        "uses-all-readers-dead",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%a)
      %c: f32[4] = aten.exp(%a)
      %d: f32[4] = aten.mul.Tensor(%b, %c)
      %e: f32[4] = aten.sigmoid(%x)
      return %e
    }""",
        """
    graph @g {
      input %x: f32[4]
      %e: f32[4] = aten.sigmoid(%x)
      return %e
    }""",
    ),
    # a graph output that another node also reads stays, and so does its reader's result
    case(
        "uses-output-also-read",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%a)
      %c: f32[4] = aten.exp(%a)
      return %a, %b
    }""",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.neg(%x)
      %b: f32[4] = aten.relu(%a)
      return %a, %b
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", DEAD_CODE)
def test_dead_code_elimination(before, expected, changed):
    check_pipeline(before, "dead-code-elimination", expected, changed=changed)


# ========================================================================== fold-batch-norm

BN = "aten._native_batch_norm_legit_no_training"
BN_STATS = """
      param %g: f32[4]
      param %b: f32[4]
      buffer %m: f32[4]
      buffer %v: f32[4]"""
LINEAR_INPUTS = (
    """
      input %x: f32[2,3]
      param %w: f32[4,3]
      param %bias: f32[4]"""
    + BN_STATS
)
CONV_INPUTS = (
    """
      input %x: f32[1,3,2,2]
      param %cw: f32[4,3,1,1]"""
    + BN_STATS
)
CONV_ATTRS = "stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1"
# the batch norm on %y, and the linear / conv producing %y
NORM_Y = f"%n: f32[2,4], %nm: f32[0], %nv: f32[0] = {BN}(%y, %g, %b, %m, %v) {{momentum=0.1, eps=1e-05}}"
LINEAR_Y = "%y: f32[2,4] = aten.linear(%x, %w, %bias)"
FOLDED_LINEAR_Y = "%y: f32[2,4] = aten.linear(%x, %w_bn, %bias_bn_bias)"
FOLDED_LINEAR_PARAMS = """
      param %w_bn: f32[4,3]
      param %bias_bn_bias: f32[4]"""
# the batch norm as x * scale + shift, on a 2-D %y (scale and shift shaped [4])
AFFINE_PARAMS_2D = """
      param %bn_scale: f32[4]
      param %bn_shift: f32[4]"""


def _affine(x: str, out: str, shape: str) -> str:
    return f"""
      %scaled: {shape} = aten.mul.Tensor({x}, %bn_scale)
      {out}: {shape} = aten.add.Tensor(%scaled, %bn_shift)"""


FOLD_BATCH_NORM = [
    case(
        "ordinary-linear",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      %r: f32[2,4] = aten.relu(%n)
      return %r
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{FOLDED_LINEAR_PARAMS}
      {FOLDED_LINEAR_Y}
      %r: f32[2,4] = aten.relu(%y)
      return %r
    }}""",
    ),
    case(
        "ordinary-conv",
        f"""
    graph @g {{{CONV_INPUTS}
      %y: f32[1,4,2,2] = aten.convolution(%x, %cw) {{bias=none, {CONV_ATTRS}}}
      %n: f32[1,4,2,2], %nm: f32[0], %nv: f32[0] = {BN}(%y, %g, %b, %m, %v) {{momentum=0.1, eps=1e-05}}
      %r: f32[1,4,2,2] = aten.relu(%n)
      return %r
    }}""",
        f"""
    graph @g {{{CONV_INPUTS}
      param %cw_bn: f32[4,3,1,1]
      param %cw_bn_bias: f32[4]
      %y: f32[1,4,2,2] = aten.convolution(%x, %cw_bn, %cw_bn_bias) {{{CONV_ATTRS}}}
      %r: f32[1,4,2,2] = aten.relu(%y)
      return %r
    }}""",
    ),
    # the batch norm's result is a graph output: it folds, the output moves to the linear
    case(
        "output-norm-result-is-output",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      return %n
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{FOLDED_LINEAR_PARAMS}
      {FOLDED_LINEAR_Y}
      return %y
    }}""",
    ),
    # the linear's result is a graph output too: folding would change that output, so the
    # linear stays as it is and the batch norm becomes x * scale + shift
    case(
        "output-linear-result-is-output",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      return %y, %n
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{AFFINE_PARAMS_2D}
      {LINEAR_Y}{_affine("%y", "%n", "f32[2,4]")}
      return %y, %n
    }}""",
    ),
    # the same with a convolution (scale and shift shaped [4,1,1] to broadcast on dim 1)
    case(
        "output-conv-result-is-output",
        f"""
    graph @g {{{CONV_INPUTS}
      %y: f32[1,4,2,2] = aten.convolution(%x, %cw) {{bias=none, {CONV_ATTRS}}}
      %n: f32[1,4,2,2], %nm: f32[0], %nv: f32[0] = {BN}(%y, %g, %b, %m, %v) {{momentum=0.1, eps=1e-05}}
      return %n, %y
    }}""",
        f"""
    graph @g {{{CONV_INPUTS}
      param %bn_scale: f32[4,1,1]
      param %bn_shift: f32[4,1,1]
      %y: f32[1,4,2,2] = aten.convolution(%x, %cw) {{bias=none, {CONV_ATTRS}}}{_affine("%y", "%n", "f32[1,4,2,2]")}
      return %n, %y
    }}""",
    ),
    # a statistics result of the batch norm is a graph output: the node must stay
    case(
        "output-norm-statistics-are-outputs",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      return %n, %nm, %nv
    }}""",
    ),
    # the batch norm reads a graph input: nothing to fold into, x * scale + shift
    case(
        "input-norm-operand-is-input",
        f"""
    graph @g {{
      input %y: f32[2,4]{BN_STATS}
      {NORM_Y}
      %r: f32[2,4] = aten.relu(%n)
      return %r
    }}""",
        f"""
    graph @g {{
      input %y: f32[2,4]{BN_STATS}{AFFINE_PARAMS_2D}{_affine("%y", "%n", "f32[2,4]")}
      %r: f32[2,4] = aten.relu(%n)
      return %r
    }}""",
    ),
    # the linear's weight is a graph input, not a constant: cannot fold, x * scale + shift
    case(
        "input-linear-weight-is-input",
        f"""
    graph @g {{
      input %x: f32[2,3]
      input %w: f32[4,3]
      param %bias: f32[4]{BN_STATS}
      {LINEAR_Y}
      {NORM_Y}
      return %n
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,3]
      input %w: f32[4,3]
      param %bias: f32[4]{BN_STATS}{AFFINE_PARAMS_2D}
      {LINEAR_Y}{_affine("%y", "%n", "f32[2,4]")}
      return %n
    }}""",
    ),
    # the statistics are graph inputs: scale and shift are unknown, nothing changes
    case(
        "input-statistics-are-inputs",
        f"""
    graph @g {{
      input %x: f32[2,3]
      param %w: f32[4,3]
      param %bias: f32[4]
      param %g: f32[4]
      param %b: f32[4]
      input %m: f32[4]
      input %v: f32[4]
      {LINEAR_Y}
      {NORM_Y}
      return %n
    }}""",
    ),
    # the batch norm reads a constant: x * scale + shift on the constant
    case(
        "const-norm-operand-is-param",
        f"""
    graph @g {{
      param %y: f32[2,4]{BN_STATS}
      {NORM_Y}
      return %n
    }}""",
        f"""
    graph @g {{
      param %y: f32[2,4]{BN_STATS}{AFFINE_PARAMS_2D}{_affine("%y", "%n", "f32[2,4]")}
      return %n
    }}""",
    ),
    # the linear's weight and bias are shared with another linear: folding gives the folded
    # linear its own constants, the other one keeps the originals
    case(
        "const-linear-weight-shared",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      %z: f32[2,4] = aten.linear(%x, %w, %bias)
      return %n, %z
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{FOLDED_LINEAR_PARAMS}
      {FOLDED_LINEAR_Y}
      %z: f32[2,4] = aten.linear(%x, %w, %bias)
      return %y, %z
    }}""",
    ),
    # the linear's result has another user: folding would change what it reads
    case(
        "uses-linear-result-has-another-user",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      %r: f32[2,4] = aten.relu(%y)
      return %n, %r
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{AFFINE_PARAMS_2D}
      {LINEAR_Y}{_affine("%y", "%n", "f32[2,4]")}
      %r: f32[2,4] = aten.relu(%y)
      return %n, %r
    }}""",
    ),
    # the batch norm's result has several users: it folds, all of them read the linear
    case(
        "uses-norm-result-has-several-users",
        f"""
    graph @g {{{LINEAR_INPUTS}
      {LINEAR_Y}
      {NORM_Y}
      %r: f32[2,4] = aten.relu(%n)
      %s: f32[2,4] = aten.neg(%n)
      return %r, %s
    }}""",
        f"""
    graph @g {{{LINEAR_INPUTS}{FOLDED_LINEAR_PARAMS}
      {FOLDED_LINEAR_Y}
      %r: f32[2,4] = aten.relu(%y)
      %s: f32[2,4] = aten.neg(%y)
      return %r, %s
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", FOLD_BATCH_NORM)
def test_fold_batch_norm(before, expected, changed):
    check_pipeline_with_data(before, "fold-batch-norm", expected, changed=changed)


# ============================================================================= xnnpack.mean-keepdim

MEAN_KEEPDIM = [
    case(
        "ordinary",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %m: f32[2,8] = aten.mean.dim(%a) {dim=[2, 3]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %k: f32[2,8,1,1] = aten.mean.dim(%a) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
    ),
    case(
        "output-result-is-output",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %m: f32[2,8] = aten.mean.dim(%a) {dim=[-1, -2]}
      return %m
    }""",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %k: f32[2,8,1,1] = aten.mean.dim(%a) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      return %m
    }""",
    ),
    case(
        "input-operand-is-input",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %m: f32[2,8] = aten.mean.dim(%x) {dim=[2, 3]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %k: f32[2,8,1,1] = aten.mean.dim(%x) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
    ),
    case(
        "const-operand-is-param",
        """
    graph @g {
      param %p: f32[2,8,4,4]
      %m: f32[2,8] = aten.mean.dim(%p) {dim=[2, 3]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
        """
    graph @g {
      param %p: f32[2,8,4,4]
      %k: f32[2,8,1,1] = aten.mean.dim(%p) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %r: f32[2,8] = aten.neg(%m)
      return %r
    }""",
    ),
    case(
        "uses-result-has-several-uses",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %m: f32[2,8] = aten.mean.dim(%x) {dim=[2, 3]}
      %r: f32[2,8] = aten.neg(%m)
      %s: f32[2,8] = aten.relu(%m)
      return %r, %s, %m
    }""",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %k: f32[2,8,1,1] = aten.mean.dim(%x) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %r: f32[2,8] = aten.neg(%m)
      %s: f32[2,8] = aten.relu(%m)
      return %r, %s, %m
    }""",
    ),
    case(
        "uses-operand-has-several-uses",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %m: f32[2,8] = aten.mean.dim(%a) {dim=[2, 3]}
      %s: f32[2,8,4,4] = aten.sigmoid(%a)
      return %m, %s
    }""",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %a: f32[2,8,4,4] = aten.relu(%x)
      %k: f32[2,8,1,1] = aten.mean.dim(%a) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %s: f32[2,8,4,4] = aten.sigmoid(%a)
      return %m, %s
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", MEAN_KEEPDIM)
def test_mean_keepdim(before, expected, changed):
    check_pipeline(before, "xnnpack.mean-keepdim", expected, changed=changed)


# ======================================================================= xnnpack.layer-norm-in-fp32

LN = "aten.native_layer_norm"
LN_ATTRS = "{normalized_shape=[8], eps=1e-05}"
LN_WEIGHTS = """
      param %w: bf16[8]
      param %b: bf16[8]"""
LN_WIDE_WEIGHTS = """
      param %w_f32: f32[8]
      param %b_f32: f32[8]"""


def _norm(x: str, out: str = "%n") -> str:
    return f"{out}: bf16[2,8], %mean: bf16[2,1], %rstd: bf16[2,1] = {LN}({x}, %w, %b) {LN_ATTRS}"


def _norm_in_fp32(x: str, out: str = "%n") -> str:
    return f"""
      %wide_x: f32[2,8] = dim_order_ops._to_dim_order_copy({x}) {{dtype=f32}}
      %wide_n: f32[2,8], %wide_mean: f32[2,1], %wide_rstd: f32[2,1] = {LN}(%wide_x, %w_f32, %b_f32) {LN_ATTRS}
      {out}: bf16[2,8] = dim_order_ops._to_dim_order_copy(%wide_n) {{dtype=bf16}}"""


LAYER_NORM_IN_FP32 = [
    case(
        "ordinary",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x)
      {_norm("%a")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}{LN_WIDE_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x){_norm_in_fp32("%a")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
    ),
    # the normalized result is a graph output: the output moves to the convert back to bf16
    case(
        "output-result-is-output",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x)
      {_norm("%a")}
      return %n
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}{LN_WIDE_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x){_norm_in_fp32("%a")}
      return %n
    }}""",
    ),
    # its mean and rstd are graph outputs (in bf16): the node must stay
    case(
        "output-statistics-are-outputs",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x)
      {_norm("%a")}
      return %n, %mean, %rstd
    }}""",
    ),
    case(
        "input-operand-is-input",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}
      {_norm("%x")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}{LN_WIDE_WEIGHTS}{_norm_in_fp32("%x")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
    ),
    # its weight is a graph input, not a constant: nothing changes
    case(
        "input-weight-is-input",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      input %w: bf16[8]
      param %b: bf16[8]
      {_norm("%x")}
      return %n
    }}""",
    ),
    case(
        "const-operand-is-param",
        f"""
    graph @g {{
      param %p: bf16[2,8]{LN_WEIGHTS}
      {_norm("%p")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
        f"""
    graph @g {{
      param %p: bf16[2,8]{LN_WEIGHTS}{LN_WIDE_WEIGHTS}{_norm_in_fp32("%p")}
      %r: bf16[2,8] = aten.neg(%n)
      return %r
    }}""",
    ),
    # the operand has another reader (which keeps reading bf16), the result several readers
    case(
        "uses-operand-and-result-have-several-uses",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x)
      {_norm("%a")}
      %r: bf16[2,8] = aten.neg(%n)
      %s: bf16[2,8] = aten.add.Tensor(%a, %n)
      return %r, %s
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]{LN_WEIGHTS}{LN_WIDE_WEIGHTS}
      %a: bf16[2,8] = aten.relu(%x){_norm_in_fp32("%a")}
      %r: bf16[2,8] = aten.neg(%n)
      %s: bf16[2,8] = aten.add.Tensor(%a, %n)
      return %r, %s
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", LAYER_NORM_IN_FP32)
def test_layer_norm_in_fp32(before, expected, changed):
    check_pipeline_with_data(before, "xnnpack.layer-norm-in-fp32", expected, changed=changed)


# ========================================================================= xnnpack.decompose-conv3d

CONV3D_ATTRS = (
    "stride=[1, 1, 1], padding=[0, 0, 0], dilation=[1, 1, 1], transposed=false, output_padding=[0, 0, 0], groups=1"
)
TAP_PARAMS = """
      param %w_tap0: f32[4,2,1,1]
      param %w_tap1: f32[4,2,1,1]"""


def _conv3d(x: str, out: str = "%y", bias: str | None = None) -> str:
    """A 3-D convolution of x f32[1,2,3,4,4] with w f32[4,2,2,1,1] (two depth taps)."""
    if bias is None:
        return f"{out}: f32[1,4,2,4,4] = aten.convolution({x}, %w) {{bias=none, {CONV3D_ATTRS}}}"
    return f"{out}: f32[1,4,2,4,4] = aten.convolution({x}, %w, {bias}) {{{CONV3D_ATTRS}}}"


def _conv3d_as_2d(x: str, out: str = "%y", bias: str | None = None) -> str:
    """Its decomposition: frames (N*D, C, H, W), one 2-D conv per depth tap, slices summed."""
    tap0 = f"(%frames, %w_tap0, {bias}) {{{CONV_ATTRS}}}" if bias else f"(%frames, %w_tap0) {{{CONV_ATTRS}}}"
    return f"""
      %by_depth: f32[1,3,2,4,4] = aten.permute_copy({x}) {{dims=[0, 2, 1, 3, 4]}}
      %frames: f32[3,2,4,4] = aten.view_copy(%by_depth) {{size=[3, 2, 4, 4]}}
      %conv0: f32[3,4,4,4] = aten.convolution{tap0}
      %depth0: f32[1,3,4,4,4] = aten.view_copy(%conv0) {{size=[1, 3, 4, 4, 4]}}
      %slice0: f32[1,2,4,4,4] = aten.slice_copy.Tensor(%depth0) {{dim=1, start=0, end=2, step=1}}
      %conv1: f32[3,4,4,4] = aten.convolution(%frames, %w_tap1) {{{CONV_ATTRS}}}
      %depth1: f32[1,3,4,4,4] = aten.view_copy(%conv1) {{size=[1, 3, 4, 4, 4]}}
      %slice1: f32[1,2,4,4,4] = aten.slice_copy.Tensor(%depth1) {{dim=1, start=1, end=3, step=1}}
      %sum: f32[1,2,4,4,4] = aten.add.Tensor(%slice0, %slice1)
      {out}: f32[1,4,2,4,4] = aten.permute_copy(%sum) {{dims=[0, 2, 1, 3, 4]}}"""


DECOMPOSE_CONV3D = [
    case(
        "ordinary",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      %a: f32[1,2,3,4,4] = aten.relu(%x)
      {_conv3d("%a")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]{TAP_PARAMS}
      %a: f32[1,2,3,4,4] = aten.relu(%x){_conv3d_as_2d("%a")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "output-result-is-output",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      %a: f32[1,2,3,4,4] = aten.relu(%x)
      {_conv3d("%a")}
      return %y
    }}""",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]{TAP_PARAMS}
      %a: f32[1,2,3,4,4] = aten.relu(%x){_conv3d_as_2d("%a")}
      return %y
    }}""",
    ),
    case(
        "input-operand-is-input-with-bias",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      param %cb: f32[4]
      {_conv3d("%x", bias="%cb")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      param %cb: f32[4]{TAP_PARAMS}{_conv3d_as_2d("%x", bias="%cb")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
    ),
    # its weight is a graph input: nothing changes
    case(
        "input-weight-is-input",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      input %w: f32[4,2,2,1,1]
      {_conv3d("%x")}
      return %y
    }}""",
    ),
    # its bias is a graph input: nothing changes
    case(
        "input-bias-is-input",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      input %cb: f32[4]
      {_conv3d("%x", bias="%cb")}
      return %y
    }}""",
    ),
    case(
        "const-operand-is-param",
        f"""
    graph @g {{
      param %p: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      {_conv3d("%p")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
        f"""
    graph @g {{
      param %p: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]{TAP_PARAMS}{_conv3d_as_2d("%p")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "uses-operand-and-result-have-several-uses",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]
      %a: f32[1,2,3,4,4] = aten.relu(%x)
      {_conv3d("%a")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      %s: f32[1,4,2,4,4] = aten.sigmoid(%y)
      %t: f32[1,2,3,4,4] = aten.exp(%a)
      return %r, %s, %t
    }}""",
        f"""
    graph @g {{
      input %x: f32[1,2,3,4,4]
      param %w: f32[4,2,2,1,1]{TAP_PARAMS}
      %a: f32[1,2,3,4,4] = aten.relu(%x){_conv3d_as_2d("%a")}
      %r: f32[1,4,2,4,4] = aten.neg(%y)
      %s: f32[1,4,2,4,4] = aten.sigmoid(%y)
      %t: f32[1,2,3,4,4] = aten.exp(%a)
      return %r, %s, %t
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", DECOMPOSE_CONV3D)
def test_decompose_conv3d(before, expected, changed):
    check_pipeline_with_data(before, "xnnpack.decompose-conv3d", expected, changed=changed)


# ====================================================================== bf16-bmm-f32-output


def _bmm_f32(a: str, b: str, out: str = "%y", shape: str = "[2,3,5]") -> str:
    return f"""
      %wide: f32{shape} = xir.bmm_f32out({a}, {b})
      {out}: bf16{shape} = xir.convert(%wide) {{dtype=bf16}}"""


BF16_BMM = [
    case(
        "ordinary",
        """
    graph @g {
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %ra: bf16[2,3,4] = aten.relu(%a)
      %y: bf16[2,3,5] = aten.bmm(%ra, %b)
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %ra: bf16[2,3,4] = aten.relu(%a){_bmm_f32("%ra", "%b")}
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "output-result-is-output",
        """
    graph @g {
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %ra: bf16[2,3,4] = aten.relu(%a)
      %y: bf16[2,3,5] = aten.bmm(%ra, %b)
      return %y
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %ra: bf16[2,3,4] = aten.relu(%a){_bmm_f32("%ra", "%b")}
      return %y
    }}""",
    ),
    case(
        "input-operands-are-inputs",
        """
    graph @g {
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %y: bf16[2,3,5] = aten.bmm(%a, %b)
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]{_bmm_f32("%a", "%b")}
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "const-operand-is-param",
        """
    graph @g {
      input %a: bf16[2,3,4]
      param %p: bf16[2,4,5]
      %y: bf16[2,3,5] = aten.bmm(%a, %p)
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,4]
      param %p: bf16[2,4,5]{_bmm_f32("%a", "%p")}
      %r: bf16[2,3,5] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "uses-result-has-several-uses",
        """
    graph @g {
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %y: bf16[2,3,5] = aten.bmm(%a, %b)
      %r: bf16[2,3,5] = aten.neg(%y)
      %s: bf16[2,3,5] = aten.mul.Tensor(%y, %r)
      return %s, %y
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]{_bmm_f32("%a", "%b")}
      %r: bf16[2,3,5] = aten.neg(%y)
      %s: bf16[2,3,5] = aten.mul.Tensor(%y, %r)
      return %s, %y
    }}""",
    ),
    # both operands are the same value, which another node also reads
    case(
        "uses-operand-read-twice-and-elsewhere",
        """
    graph @g {
      input %a: bf16[2,3,3]
      %y: bf16[2,3,3] = aten.bmm(%a, %a)
      %r: bf16[2,3,3] = aten.add.Tensor(%y, %a)
      return %r
    }""",
        f"""
    graph @g {{
      input %a: bf16[2,3,3]{_bmm_f32("%a", "%a", shape="[2,3,3]")}
      %r: bf16[2,3,3] = aten.add.Tensor(%y, %a)
      return %r
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", BF16_BMM)
def test_bf16_bmm_f32_output(before, expected, changed):
    check_pipeline(before, "xnnpack.bf16-bmm-f32-output{enable_bf16=true}", expected, changed=changed)


def test_bf16_bmm_f32_output_off_by_default():
    text = """
    graph @g {
      input %a: bf16[2,3,4]
      input %b: bf16[2,4,5]
      %y: bf16[2,3,5] = aten.bmm(%a, %b)
      return %y
    }"""
    check_pipeline(text, "xnnpack.bf16-bmm-f32-output", text, changed=False)


# ============================================================================= bf16-in-fp32

SOFTMAX_ATTRS = "{dim=-1, half_to_float=false}"


def _softmax_in_fp32(x: str, out: str = "%s", wide_x: str | None = None) -> str:
    """Softmax of a bf16[2,8] value computed in fp32: convert in (unless ``wide_x`` is given, an
    fp32 copy of a constant), softmax, convert out."""
    convert = "" if wide_x else f"\n      %wide_x: f32[2,8] = xir.convert({x}) {{dtype=f32}}"
    return f"""{convert}
      %wide_s: f32[2,8] = aten._softmax({wide_x or "%wide_x"}) {SOFTMAX_ATTRS}
      {out}: bf16[2,8] = xir.convert(%wide_s) {{dtype=bf16}}"""


BF16_CONV_INPUTS = """
      input %x: bf16[1,2,4,4]
      param %w: bf16[3,2,1,1]
      param %cb: bf16[3]"""

BF16_IN_FP32 = [
    # a 2-D convolution with constant weight and bias: fp32 copies of the constants
    case(
        "ordinary-conv",
        f"""
    graph @g {{{BF16_CONV_INPUTS}
      %a: bf16[1,2,4,4] = aten.relu(%x)
      %y: bf16[1,3,4,4] = aten.convolution(%a, %w, %cb) {{{CONV_ATTRS}}}
      %r: bf16[1,3,4,4] = aten.neg(%y)
      return %r
    }}""",
        f"""
    graph @g {{{BF16_CONV_INPUTS}
      param %w_f32: f32[3,2,1,1]
      param %cb_f32: f32[3]
      %a: bf16[1,2,4,4] = aten.relu(%x)
      %wide_a: f32[1,2,4,4] = xir.convert(%a) {{dtype=f32}}
      %wide_y: f32[1,3,4,4] = aten.convolution(%wide_a, %w_f32, %cb_f32) {{{CONV_ATTRS}}}
      %y: bf16[1,3,4,4] = xir.convert(%wide_y) {{dtype=bf16}}
      %r: bf16[1,3,4,4] = aten.neg(%y)
      return %r
    }}""",
    ),
    case(
        "output-result-is-output",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      %a: bf16[2,8] = aten.relu(%x)
      %s: bf16[2,8] = aten._softmax(%a) {SOFTMAX_ATTRS}
      return %s
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      %a: bf16[2,8] = aten.relu(%x){_softmax_in_fp32("%a")}
      return %s
    }}""",
    ),
    # a max pooling whose indices are a graph output: the node must stay
    case(
        "output-pool-indices-are-output",
        """
    graph @g {
      input %x: bf16[1,2,4,4]
      %a: bf16[1,2,4,4] = aten.relu(%x)
      %p: bf16[1,2,2,2], %i: i64[1,2,2,2] = aten.max_pool2d_with_indices(%a) {kernel_size=[2, 2], stride=[2, 2]}
      return %p, %i
    }""",
    ),
    case(
        "input-operand-is-input",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      %s: bf16[2,8] = aten._softmax(%x) {SOFTMAX_ATTRS}
      %r: bf16[2,8] = aten.neg(%s)
      return %r
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]{_softmax_in_fp32("%x")}
      %r: bf16[2,8] = aten.neg(%s)
      return %r
    }}""",
    ),
    # the convolution's weight is a graph input: XNNPACK would not take the fp32 conv either, nothing changes
    case(
        "input-conv-weight-is-input",
        f"""
    graph @g {{
      input %x: bf16[1,2,4,4]
      input %w: bf16[3,2,1,1]
      %y: bf16[1,3,4,4] = aten.convolution(%x, %w) {{bias=none, {CONV_ATTRS}}}
      return %y
    }}""",
    ),
    # the operand is a constant: an fp32 copy of it, no convert node
    case(
        "const-operand-is-param",
        f"""
    graph @g {{
      param %p: bf16[2,8]
      %s: bf16[2,8] = aten._softmax(%p) {SOFTMAX_ATTRS}
      %r: bf16[2,8] = aten.neg(%s)
      return %r
    }}""",
        f"""
    graph @g {{
      param %p: bf16[2,8]
      param %p_f32: f32[2,8]{_softmax_in_fp32("%p", wide_x="%p_f32")}
      %r: bf16[2,8] = aten.neg(%s)
      return %r
    }}""",
    ),
    # the operand has another reader (which keeps reading bf16), the result several readers
    case(
        "uses-operand-and-result-have-several-uses",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      %a: bf16[2,8] = aten.relu(%x)
      %s: bf16[2,8] = aten._softmax(%a) {SOFTMAX_ATTRS}
      %r: bf16[2,8] = aten.neg(%s)
      %t: bf16[2,8] = aten.add.Tensor(%a, %s)
      return %r, %t
    }}""",
        f"""
    graph @g {{
      input %x: bf16[2,8]
      %a: bf16[2,8] = aten.relu(%x){_softmax_in_fp32("%a")}
      %r: bf16[2,8] = aten.neg(%s)
      %t: bf16[2,8] = aten.add.Tensor(%a, %s)
      return %r, %t
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", BF16_IN_FP32)
def test_bf16_in_fp32(before, expected, changed):
    check_pipeline_with_data(before, "xnnpack.bf16-in-fp32{enable_bf16=true}", expected, changed=changed)


def test_bf16_in_fp32_off_by_default():
    text = f"""
    graph @g {{
      input %x: bf16[2,8]
      %s: bf16[2,8] = aten._softmax(%x) {SOFTMAX_ATTRS}
      return %s
    }}"""
    check_pipeline_with_data(text, "xnnpack.bf16-in-fp32", text, changed=False)


# ====================================================================== decompose-gelu-tanh

GELU_CONSTANTS = """
      param %gelu_k1: f32[]
      param %gelu_k0: f32[]
      param %gelu_one: f32[]
      param %gelu_half: f32[]"""


def _gelu_tanh(x: str, out: str = "%g") -> str:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) on f32[2,8]."""
    return f"""
      %x2: f32[2,8] = aten.mul.Tensor({x}, {x})
      %x3: f32[2,8] = aten.mul.Tensor(%x2, {x})
      %kx3: f32[2,8] = aten.mul.Tensor(%x3, %gelu_k1)
      %inner: f32[2,8] = aten.add.Tensor({x}, %kx3)
      %scaled: f32[2,8] = aten.mul.Tensor(%inner, %gelu_k0)
      %t: f32[2,8] = aten.tanh(%scaled)
      %t1: f32[2,8] = aten.add.Tensor(%t, %gelu_one)
      %xt1: f32[2,8] = aten.mul.Tensor({x}, %t1)
      {out}: f32[2,8] = aten.mul.Tensor(%xt1, %gelu_half)"""


DECOMPOSE_GELU_TANH = [
    case(
        "ordinary",
        """
    graph @g {
      input %x: f32[2,8]
      %a: f32[2,8] = aten.relu(%x)
      %g: f32[2,8] = aten.gelu(%a) {approximate="tanh"}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }""",
        f"""
    graph @g {{
      input %x: f32[2,8]{GELU_CONSTANTS}
      %a: f32[2,8] = aten.relu(%x){_gelu_tanh("%a")}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }}""",
    ),
    case(
        "output-result-is-output",
        """
    graph @g {
      input %x: f32[2,8]
      %a: f32[2,8] = aten.relu(%x)
      %g: f32[2,8] = aten.gelu(%a) {approximate="tanh"}
      return %g
    }""",
        f"""
    graph @g {{
      input %x: f32[2,8]{GELU_CONSTANTS}
      %a: f32[2,8] = aten.relu(%x){_gelu_tanh("%a")}
      return %g
    }}""",
    ),
    case(
        "input-operand-is-input",
        """
    graph @g {
      input %x: f32[2,8]
      %g: f32[2,8] = aten.gelu(%x) {approximate="tanh"}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }""",
        f"""
    graph @g {{
      input %x: f32[2,8]{GELU_CONSTANTS}{_gelu_tanh("%x")}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }}""",
    ),
    case(
        "const-operand-is-param",
        """
    graph @g {
      param %p: f32[2,8]
      %g: f32[2,8] = aten.gelu(%p) {approximate="tanh"}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }""",
        f"""
    graph @g {{
      param %p: f32[2,8]{GELU_CONSTANTS}{_gelu_tanh("%p")}
      %r: f32[2,8] = aten.neg(%g)
      return %r
    }}""",
    ),
    case(
        "uses-operand-and-result-have-several-uses",
        """
    graph @g {
      input %x: f32[2,8]
      %a: f32[2,8] = aten.relu(%x)
      %g: f32[2,8] = aten.gelu(%a) {approximate="tanh"}
      %r: f32[2,8] = aten.neg(%g)
      %s: f32[2,8] = aten.add.Tensor(%a, %g)
      return %r, %s
    }""",
        f"""
    graph @g {{
      input %x: f32[2,8]{GELU_CONSTANTS}
      %a: f32[2,8] = aten.relu(%x){_gelu_tanh("%a")}
      %r: f32[2,8] = aten.neg(%g)
      %s: f32[2,8] = aten.add.Tensor(%a, %g)
      return %r, %s
    }}""",
    ),
    # the exact GELU, and a bf16 one, stay
    case(
        "exact-gelu-stays",
        """
    graph @g {
      input %x: f32[2,8]
      %g: f32[2,8] = aten.gelu(%x) {approximate="none"}
      return %g
    }""",
    ),
    case(
        "bf16-gelu-in-fp32",
        """
    graph @g {
      input %x: bf16[2,8]
      %g: bf16[2,8] = aten.gelu(%x) {approximate="tanh"}
      return %g
    }""",
        """
    graph @g {
      input %x: bf16[2,8]
      param %gelu_k1: f32[]
      param %gelu_k0: f32[]
      param %gelu_one: f32[]
      param %gelu_half: f32[]
      %0: f32[2,8] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32}
      %1: f32[2,8] = aten.mul.Tensor(%0, %0)
      %2: f32[2,8] = aten.mul.Tensor(%1, %0)
      %3: f32[2,8] = aten.mul.Tensor(%2, %gelu_k1)
      %4: f32[2,8] = aten.add.Tensor(%0, %3)
      %5: f32[2,8] = aten.mul.Tensor(%4, %gelu_k0)
      %6: f32[2,8] = aten.tanh(%5)
      %7: f32[2,8] = aten.add.Tensor(%6, %gelu_one)
      %8: f32[2,8] = aten.mul.Tensor(%0, %7)
      %9: f32[2,8] = aten.mul.Tensor(%8, %gelu_half)
      %10: bf16[2,8] = dim_order_ops._to_dim_order_copy(%9) {dtype=bf16}
      return %10
    }""",
    ),
    case(
        "f16-gelu-stays",
        """
    graph @g {
      input %x: f16[2,8]
      %g: f16[2,8] = aten.gelu(%x) {approximate="tanh"}
      return %g
    }""",
    ),
    case(
        "7-d-gelu-stays-whole-outside-xnnpack",
        """
    graph @g {
      input %x: f32[2,1,2,1,2,1,3]
      %g: f32[2,1,2,1,2,1,3] = aten.gelu(%x) {approximate="tanh"}
      return %g
    }""",
    ),
]


def test_decompose_gelu_tanh_leaves_bf16_whole_without_enable_bf16():
    """Without enable_bf16 a bf16 GELU stays one op: decomposed, its casts to fp32 and back would
    stay outside XNNPACK, two portable ops more (fuzz fp32 97069: 7 ops outside against stock's 6)."""
    text = """
    graph @g {
      input %x: bf16[2,8]
      %g: bf16[2,8] = aten.gelu(%x) {approximate="tanh"}
      %r: f32[2,8] = dim_order_ops._to_dim_order_copy(%g) {dtype=f32}
      return %r
    }"""
    check_pipeline(text, "xnnpack.decompose-gelu-tanh{enable_bf16=false}", text, changed=False)
    f32 = DECOMPOSE_GELU_TANH[0].values  # an fp32 GELU is still decomposed
    check_pipeline(f32[0], "xnnpack.decompose-gelu-tanh{enable_bf16=false}", f32[1], changed=True)


@pytest.mark.parametrize("before, expected, changed", DECOMPOSE_GELU_TANH)
def test_decompose_gelu_tanh(before, expected, changed):
    graph = check_pipeline(before, "xnnpack.decompose-gelu-tanh", expected, changed=changed)
    if changed:  # the constants it creates hold what their names say
        values = {name: graph.input_named(name).data.item() for name in ("gelu_k1", "gelu_k0", "gelu_one", "gelu_half")}
        assert values == pytest.approx(
            {"gelu_k1": 0.044715, "gelu_k0": math.sqrt(2 / math.pi), "gelu_one": 1.0, "gelu_half": 0.5}
        )
