"""``xnnpack.bf16-rounded-arithmetic``: round a bf16 op's result to bf16 inside XNNPACK where eager
PyTorch rounds it, so that a bf16 program computes what eager bf16 computes.

Eager PyTorch computes a bf16 add, multiply, sigmoid, ... in fp32 and rounds each result to bf16
before the next op reads it. XNNPACK, as ExecuTorch 1.5.1 builds it, does not round a bf16
arithmetic op's result that another op of the same delegate reads: it reads it at fp32
precision. Measured (``tests/lowering/test_bf16_rounding.py``): ``(a * b) * a`` on bf16 tensors
of [1, 7, 768], delegated whole, equals ``bf16(a32 * b32 * a32)`` on every element and differs from
eager's ``bf16(bf16(a32 * b32) * a32)`` on 1383 of 5376, by one bf16 ulp; a bf16 ``a * b`` or
``a + b`` read by a linear differs from eager on 40-45% of the linear's outputs, and the flow's bf16
Llama 3 ended 0.0156 (two bf16 ulps) from eager's logits where stock's program, whose arithmetic
runs on portable kernels, ends 0. One op whose result leaves the delegate at once is rounded
where XNNPACK writes it as bf16, and an explicit convert to bf16 rounds. So:

    y = op(a, b)                   bf16 arithmetic, y read by an op XNNPACK takes
 => y = convert(op(a32, b32), bf16)
                                   a32 = convert(a, f32) (exact), or an fp32 constant equal to a
                                   bf16 constant

the rewrite ``xnnpack.bf16-in-fp32`` makes for the ops XNNPACK defines only in fp32, with the
same result as eager's: both compute the op in fp32 and round it to bf16 (sqrt, exp, sigmoid, ...
by XNNPACK's own fp32 approximations, within an fp32 ulp or two of eager's before the rounding).

The ops: add, sub, mul, div, sqrt, rsqrt, exp, log, sigmoid, tanh, sin, cos, hardswish,
leaky_relu, gelu, pow (x ** 2), prelu, and a clamp or hardtanh whose bound is not a bf16 number.
Not the ops that only pick, move or negate bf16 values (neg, abs, relu, min/max, a clamp to bf16
bounds, views, slices, concatenations, a product with a constant of signs, every element 1 or -1:
rotate_half's signs): their results are the bf16 values they read. Declined, each
with its reason in the pass's stats: a result no op XNNPACK takes reads (returned, or read only
outside: XNNPACK writes it rounded), an op XNNPACK would not take in fp32 either.

The cost is ops: a convert after each such op and one before each op that reads its result in
fp32. The default pipeline runs ``common-subexpression-elimination`` after this pass and
``xnnpack.casts-as-converts``, so that the ops reading one value share its convert (and ``xnnpack.merge-head-chains`` sees q's and
k's chains read the same converted tables).
``XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True)`` drops the round trips
again (``xnnpack.bf16-activations-in-fp32``): the fp32 computation, for speed, not eager's numbers.
"""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten

from ..capability import Options, float_verdict
from ._base import Bf16Rewrite
from .bf16_in_fp32 import compute_in_fp32
from .casts_as_converts import CASTS

_CAST_OPS = frozenset(str(op) for op in CASTS)

# bf16 ops XNNPACK defines in bf16 whose result is a new number, which eager rounds to bf16
ROUNDED_OPS = (
    aten.add.Tensor,
    aten.sub.Tensor,
    aten.mul.Tensor,
    aten.div.Tensor,
    aten.sqrt,
    aten.rsqrt,
    aten.exp,
    aten.log,
    aten.sigmoid,
    aten.tanh,
    aten.sin,
    aten.cos,
    aten.hardswish,
    aten.leaky_relu,
    aten.gelu,
    aten.pow.Tensor_Scalar,
    aten.prelu,
)
CLAMPS = (aten.clamp, aten.hardtanh)
_BOUNDS = {aten.clamp: ("min", "max"), aten.hardtanh: ("min_val", "max_val")}


def _read_inside(node: Node) -> bool:
    """Whether an op XNNPACK takes reads ``node``'s result (an op left outside, or the graph's
    output, reads what XNNPACK writes: bf16, rounded)."""

    options = Options(enable_bf16=True)
    return any(
        not user.is_return and (float_verdict(user, options).supported or _upcast(user)) for user in node.result.users
    )


def _upcast(node: Node) -> bool:
    """A cast to f32: ``xnnpack.casts-as-converts`` (later in the pipeline) makes it a convert
    inside XNNPACK, which reads its operand unrounded. Counted as inside either way: rounding a
    result that then leaves is one op more, never a wrong number."""
    return node.op in _CAST_OPS and isinstance(node.results[0].type, TensorType) and node.results[0].dtype is DType.f32


def _bf16(node: Node) -> bool:
    return isinstance(node.results[0].type, TensorType) and node.results[0].dtype is DType.bf16


def _rounded_where_read_inside(node: Node, rewriter: Rewriter) -> bool:
    """The op in fp32 between converts, where an op XNNPACK takes reads its result."""
    if not _read_inside(node):
        return rewriter.notify_match_failure(node, "no op XNNPACK takes reads its result: XNNPACK writes it rounded")
    return compute_in_fp32(node, rewriter)


def _signs(value) -> bool:
    """A constant whose every element is 1 or -1 (a product with it is exact: rotate_half's signs)."""
    data = value.data if isinstance(value.type, TensorType) and value.is_constant else None
    return data is not None and data.numel() > 0 and bool((data.float().abs() == 1).all())


@rewrite_pattern(*ROUNDED_OPS)
def round_arithmetic(node: Node, rewriter: Rewriter) -> bool:
    """bf16 arithmetic read inside XNNPACK => the op in fp32 between converts."""
    if not _bf16(node):
        return rewriter.notify_match_failure(node, "not bf16")
    if (node.op == aten.mul.Tensor and any(_signs(v) for v in node.operands)) or (
        node.op == aten.div.Tensor and _signs(node.operands[1])
    ):
        return rewriter.notify_match_failure(node, "a product with signs (every element 1 or -1): exact in bf16")
    return _rounded_where_read_inside(node, rewriter)


@rewrite_pattern(*CLAMPS)
def round_clamp(node: Node, rewriter: Rewriter) -> bool:
    """A bf16 clamp to a bound that is not a bf16 number, read inside XNNPACK => in fp32 between
    converts (eager rounds the bound it clamps to)."""
    import torch

    if not _bf16(node):
        return rewriter.notify_match_failure(node, "not bf16")
    bounds = [b for b in (node.attribute(name) for name in _BOUNDS[node.op]) if b is not None]
    if not all(isinstance(b, (int, float)) for b in bounds):
        return rewriter.notify_match_failure(node, "a bound that is not a number")
    if all(float(torch.tensor(float(b)).bfloat16()) == float(b) for b in bounds):
        return rewriter.notify_match_failure(node, "its bounds are bf16 numbers: it only picks bf16 values")
    return _rounded_where_read_inside(node, rewriter)


@attrs.frozen
class Bf16RoundedArithmetic(Bf16Rewrite):
    """Round each bf16 arithmetic op's result to bf16 inside XNNPACK, as eager does: the op in fp32
    between converts, where an op XNNPACK takes reads the result (XNNPACK reads it unrounded)."""

    name = "xnnpack.bf16-rounded-arithmetic"
    # its casts to f32 become converts after it, and the ops reading one value share its convert
    runs_before = ("xnnpack.casts-as-converts", "common-subexpression-elimination")
    rules = (round_arithmetic, round_clamp)
