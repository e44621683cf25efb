"""``xnnpack.bf16-activations-in-fp32``: compute a bf16 program's delegated ops in fp32, rounding
to bf16 only where a value leaves them.

XNNPACK as built in ExecuTorch 1.5.1 computes little in bf16 itself: a bf16 linear is converts
around an fp32 GEMM, and convolutions, pooling, means and softmax are defined only in fp32
(``xnnpack.bf16-in-fp32`` puts converts around them). A bf16 model is then its fp32 twin plus a
convert on each side of every op: on this machine the zoo's bf16 CNNs and encoders take
1.03-1.49x their fp32 time, and 0.96-1.03x with this pass (``python -m bench.bf16 --quick``).
It runs every bf16 op XNNPACK defines in fp32 as that fp32 op, on fp32 values:

    y = op(a, w)                   a, y bf16 values; w a bf16 constant
 => y32 = op(a32, w32)             a32: the fp32 value a was rounded from, or convert(a, f32);
    y = convert(y32, bf16)         w32: an fp32 constant equal to w (one per constant and run);
                                   y only where something still reads y (an op left in bf16,
                                   a graph output)

so a chain of ops reads the fp32 results of the ops before it and converts once at each end.
**The numbers change:** eager bf16 rounds every op's result to bf16, this program only the
values that leave the fp32 ops. Its results are the fp32 computation on the bf16 inputs and
weights: as close to the fp32 model as eager bf16 is or closer, and within bf16's rounding of
eager's bf16 result per op (the tests check both). That is why it is an option, not the
default: ``XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True)``.

Bytes: a linear's bf16 weight becomes an fp16 constant read by ``xir.linear_f16w`` (an fp32
linear on an fp16 weight; XNNPACK's fully connected widens the weight to fp32 when the program
loads, as it does a bf16 GEMM's weights), so the .pte keeps the bf16 weights' bytes:

    y = linear(a, w, b)  =>  y32 = xir.linear_f16w(a32, w16, b32)

Every bf16 value within fp16's range is an fp16 value, but those below 2**-14 become fp16
subnormals (|error| <= 2**-25, against the bf16 weight's own rounding of 2**-9 of its size). A
weight beyond +-65504 or not finite, a bias and every other bf16 constant become fp32 constants
(twice their bytes; convolutions' weights are fp32 already with ``xnnpack.bf16-in-fp32``).
``f16_weights=false`` makes the linears' weights fp32 constants too.

Left in bf16, each with its reason in the pass's stats: an op XNNPACK would not take in fp32
either (an embedding lookup, a rank beyond 6, ...), an op with a dtype attribute (a cast, a
``full_like``), an op with a float operand that is not bf16, an op whose extra results are used.
A convert from fp32 to bf16 read by an fp32 op is read through (the round trip is dropped: a
layer norm ``xnnpack.layer-norm-in-fp32`` computes in fp32 feeds the next op in fp32), and a
batched matmul ``xnnpack.bf16-bmm-f32-output`` made bf16 x bf16 -> fp32 becomes an fp32 bmm of
the values its operands were rounded from.
"""

from __future__ import annotations

import attrs

from passes import Rewriter
from passes.rewriter import RewritePattern
from xir import DType, Node, TensorType, Value
from xir.ops import aten

from ..capability import Options, float_verdict
from ..ops import xir_ops
from ._base import Bf16Rewrite
from .bf16_linear_as_f16 import _as_f16, _f16_problem


def _is_bf16(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.dtype is DType.bf16


def _is_float(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.dtype in (DType.f32, DType.f16, DType.bf16)


def _rounded_from(value: Value) -> Value | None:
    """The fp32 value ``value`` is ``convert(.., bf16)`` of, or None."""
    producer = value.producer
    if producer is not None and producer.op == xir_ops.convert and producer.operands[0].type.dtype is DType.f32:
        return producer.operands[0]
    return None


def _of_constants(node: Node) -> bool:
    """``node`` computes a bf16 tensor from constants only (through other such nodes): a weight's
    layout, which the op reading it needs to see as one (a GEMM's static weight)."""
    if len(node.results) != 1 or not _is_bf16(node.result) or node.attributes.get("dtype") is not None:
        return False
    if node.op == xir_ops.convert:
        return False
    if not all(isinstance(v.type, TensorType) for v in node.inputs()):
        return False  # (a size or bound computed at run time: the rotary tables' rows at the position)
    return all(v.is_constant or (v.producer is not None and _of_constants(v.producer)) for v in node.operands)


def _made_of_constants(value: Value) -> bool:
    """``value`` is a bf16 constant with data, or a layout of such constants (:func:`_of_constants`)."""
    return (value.is_constant and value.data is not None) or (
        value.producer is not None and _of_constants(value.producer)
    )


def _problem(node: Node) -> str | None:
    """Why ``node`` stays in bf16, or None."""

    if node.op == xir_ops.convert:
        return "a convert (the boundary between fp32 and bf16)"
    if not node.results or not _is_bf16(node.results[0]):
        return "no bf16 result"
    if not all(r.is_unused() for r in node.results[1:]):
        return "a second result is used"
    floats = [v for v in node.operands if _is_float(v)]
    if not floats or not all(_is_bf16(v) for v in floats):
        return "a float operand that is not bf16 (or none)"
    if "dtype" in node.attributes and node.attributes["dtype"] is not None:
        return "it has a dtype attribute"
    if _of_constants(node):
        return "it reads only constants (a weight's layout: made in fp32 for the op that reads it)"
    verdict = float_verdict(node, Options(enable_bf16=True), as_fp32=True)
    if not verdict.supported:
        return f"XNNPACK would not take it in fp32: {verdict.reason}"
    return None


class _InFp32(RewritePattern):
    """A bf16 op XNNPACK defines in fp32 => the fp32 op on fp32 operands, converted to bf16 after
    it (read through by the next fp32 op). ``made``: the fp32 twins of constants and the converts
    of other bf16 values made in this run, by value."""

    ops = ()
    name = "bf16_activations_in_fp32"

    def __init__(self, f16_weights: bool = True):
        self.made: dict = {}
        self.f16_weights = f16_weights
        self.made_f16: dict = {}  # the fp16 twins of linears' bf16 weights made in this run
        # each node's reason to stay in bf16 (or None), decided on the graph as the run found it:
        # a node the run made has no torch.fx origin, and its readers' checks would ask in vain
        # what it was (a clone's check reads its input's dim order from there)
        self.problems: dict | None = None

    def _fp32(self, value: Value, node: Node, rewriter: Rewriter) -> Value:
        if not _is_bf16(value):
            return value
        wide = _rounded_from(value)
        if wide is not None:
            return wide
        if value not in self.made:
            producer = value.producer
            if value.is_constant and value.data is not None:
                self.made[value] = rewriter.add_constant(
                    f"{value.name}_f32",
                    value.type.with_dtype(DType.f32),
                    value.data.detach().float().contiguous(),
                    value.input_kind,
                )
            elif _made_of_constants(value):
                # a constant's layout (a weight's permute): the same layout of the fp32 constant,
                # so the op reading it still sees a weight
                twin = rewriter.create(
                    producer.op,
                    [self._fp32(v, node, rewriter) for v in producer.operands],
                    [value.type.with_dtype(DType.f32)],
                    dict(producer.attributes),
                )
                self.made[value] = rewriter.insert_before(producer, twin).result
            else:
                # after the value's producer (at the top for a graph input), so every later reader
                # of the value may read this one convert
                convert = rewriter.create(xir_ops.convert, [value], attributes={"dtype": DType.f32})
                if producer is not None:
                    rewriter.insert_after(producer, convert)
                else:
                    rewriter.insert_before(next(iter(node.graph)), convert)
                self.made[value] = convert.result
        return self.made[value]

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        if node.op == xir_ops.convert and node.result.dtype is DType.f32 and _is_bf16(node.operands[0]):
            return self._widened_constant(node, rewriter)
        if not node.results or not _is_bf16(node.results[0]):
            return False  # (not a bf16 op: nothing to say)
        if self.problems is None:
            self.problems = {n: _problem(n) for n in node.graph if n.results and _is_bf16(n.results[0])}
        problem = self.problems[node] if node in self.problems else _problem(node)
        if problem:
            return rewriter.notify_match_failure(node, problem)
        op, operands = node.op, None
        if node.op == aten.linear and self.f16_weights:
            if _f16_problem(node.weight, "weight") is None:  # (a bf16 constant fp16 holds)
                # an fp16 constant holds the bf16 weight in half the bytes of fp32 (XNNPACK widens it
                # when the program loads): see the module's docstring
                op = xir_ops.linear_f16w
                operands = [self._fp32(node.input, node, rewriter), _as_f16(node.weight, rewriter, self.made_f16)]
                operands += [self._fp32(v, node, rewriter) for v in node.operands[2:]]
        if operands is None:
            operands = [self._fp32(v, node, rewriter) for v in node.operands]
        result_types = [r.type.with_dtype(DType.f32) if _is_bf16(r) else r.type for r in node.results]
        wide = rewriter.insert_before(node, rewriter.create(op, operands, result_types, dict(node.attributes)))
        narrow = rewriter.insert_before(
            node, rewriter.create(xir_ops.convert, [wide.results[0]], attributes={"dtype": DType.bf16})
        )
        rewriter.replace_node(node, [narrow.result] + [None] * (len(node.results) - 1))
        return True

    def _widened_constant(self, node: Node, rewriter: Rewriter) -> bool:
        """convert(c, f32), c a bf16 constant or a layout of constants => the same made from the
        fp32 constants (exact: every bf16 number is an fp32 number), so what reads it reads no
        convert."""
        value = node.operands[0]
        if not _made_of_constants(value):
            return rewriter.notify_match_failure(node, "converts a value that is not made of constants")
        rewriter.replace_node(node, [self._fp32(value, node, rewriter)])
        return True


class _BmmInFp32(RewritePattern):
    """xir.bmm_f32out(a, b) (bf16 operands, an fp32 result: ``xnnpack.bf16-bmm-f32-output``) whose
    operands are rounded from fp32 values => aten.bmm of those fp32 values."""

    ops = (xir_ops.bmm_f32out,)
    name = "bmm_in_fp32"

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        wide = [_rounded_from(v) for v in node.operands]
        if any(v is None for v in wide):
            return rewriter.notify_match_failure(node, "an operand is not rounded from an fp32 value")
        rewriter.replace_node(node, [rewriter.op_before(node, aten.bmm, wide)])
        return True


class _RoundTrip(RewritePattern):
    """convert(convert(x, bf16), f32), x fp32 => x: the rounding between two fp32 ops is dropped."""

    ops = (xir_ops.convert,)
    name = "round_trip"

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        if node.result.dtype is not DType.f32:
            return False
        wide = _rounded_from(node.operands[0])
        if wide is None:
            return rewriter.notify_match_failure(node, "not a convert of a value rounded from fp32")
        rewriter.replace_node(node, [wide])
        return True


class _UnreadConvert(RewritePattern):
    """A convert nothing reads (what the rounding of a value read through is left as) => gone."""

    ops = (xir_ops.convert,)
    name = "unread_convert"

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        if not node.result.is_unused():
            return rewriter.notify_match_failure(node, "read")
        rewriter.erase(node)
        return True


@attrs.frozen
class Bf16ActivationsInFp32(Bf16Rewrite):
    """Compute bf16 ops XNNPACK defines in fp32 as fp32 ops on fp32 values, converting to bf16 only
    where a value leaves them (faster; the numbers are the fp32 computation on bf16 inputs and weights)."""

    name = "xnnpack.bf16-activations-in-fp32"
    # after every pass that puts converts around bf16 ops, so that it reads through them (the partitioner's
    # bf16_activations_in_fp32 puts it right after the last of them)
    runs_after = (
        "xnnpack.casts-as-converts",
        "xnnpack.bf16-in-fp32",
        "xnnpack.bf16-rounded-arithmetic",
        "xnnpack.layer-norm-in-fp32",
    )
    runs_before = ("xnnpack.fuse-sibling-linears",)  # (which stacks the linears it makes)
    rules = (_InFp32(), _BmmInFp32(), _RoundTrip(), _UnreadConvert())
    f16_weights: bool = True

    def patterns(self):
        return (_InFp32(self.f16_weights), _BmmInFp32(), _RoundTrip(), _UnreadConvert()) if self.enable_bf16 else ()
