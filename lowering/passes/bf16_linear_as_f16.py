"""``xnnpack.bf16-linear-as-f16``: run a bf16 linear as XNNPACK's fp16 fully connected, which
reads its weights at half the bytes of fp32.

XNNPACK as built in ExecuTorch 1.5.1 has no bf16 GEMM it uses for a linear: a bf16 linear is
run as converts around an fp32 GEMM, with the weights unpacked to fp32 when the program loads,
so a bf16 decoder is no faster than its fp32 twin (measured in ``bench.llm``). Its fp16 GEMM
reads fp16 weights: one-token linears take 0.60x and 0.57x of the fp32 time at 25 and 92 MB of fp32
weights (``scripts/bf16_linear_f16.py``).

    y = linear(x, w, b)            x, w, b, y in bf16; w (and b) constants
 => y = convert(linear(convert(x, f16), w16, b16), bf16)

``w16``/``b16`` are new fp16 constants equal to ``w``/``b``: every bf16 number within fp16's
range (|v| <= 65504) is an fp16 number too, except those below 2**-14, which become fp16's
subnormals (|error| <= 2**-25, against the bf16 weight's own rounding of 2**-9 of its size).
The activations convert the same way, exactly within that range. What changes is the GEMM's own
arithmetic: fp32 accumulation rounded to fp16 then to bf16 on x86 (measured: within one bf16 ulp of
eager's bf16 result, and as close to the fp32 model as eager's bf16), fp16 accumulation on Arm CPUs
with fp16 arithmetic. **An activation beyond fp16's range (|x| > 65504) becomes infinite**, where
eager's bf16 keeps it; the pass cannot see activations, so it is not in the default pipeline:
``XnnpackPartitioner(enable_bf16=True, bf16_linears_as_f16=True)`` runs it (and only with bf16
enabled, like every pass that makes xir's bf16 ops).

Declined (the linear stays as it was), each with its reason: not bf16 x bf16 -> bf16, a weight or
bias that is not a constant, or one with a value fp16 cannot hold (beyond +-65504, not finite).
A weight read by several linears is converted once; the bf16 original stays while anything else
reads it (a tied embedding).
"""

from __future__ import annotations

import attrs

from passes import Rewriter
from xir import DType, Node, TensorType, Value
from xir.ops import aten

from ..ops import xir_ops
from ._base import Bf16Rewrite, RunStateRule

F16_MAX = 65504.0


def _f16_problem(value: Value, what: str) -> str | None:
    import torch

    if not value.is_constant or value.data is None:
        return f"the {what} is not a constant"
    if value.dtype is not DType.bf16:
        return f"the {what} is {value.dtype}, not bf16"
    data = value.data.detach()
    if not bool(torch.isfinite(data).all()):
        return f"the {what} has a value that is not finite"
    largest = float(data.abs().max()) if data.numel() else 0.0
    if largest > F16_MAX:
        return f"the {what} holds {largest:g}, beyond fp16's range (65504)"
    return None


def _as_f16(value: Value, rewriter: Rewriter, made: dict) -> Value:
    """The fp16 constant equal to the bf16 constant ``value`` (one per value in a run)."""
    import torch

    if value not in made:
        made[value] = rewriter.add_constant(
            f"{value.name}_f16", TensorType(DType.f16, value.type.shape), value.data.detach().to(torch.float16)
        )
    return made[value]


def bf16_linear_as_f16(node: Node, rewriter: Rewriter, made: dict | None = None) -> bool:
    """bf16 linear(x, w, b) => convert(linear(convert(x, f16), w16, b16), bf16), w16/b16 fp16
    constants equal to w/b (``made``: the fp16 twins made so far in this run, by bf16 constant)."""
    x, weight, bias = node.input, node.weight, node.operand("bias")
    if x.dtype is not DType.bf16 or node.result.dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not a bf16 linear")
    for value, what in ((weight, "weight"), (bias, "bias")):
        if value is not None:
            problem = _f16_problem(value, what)
            if problem:
                return rewriter.notify_match_failure(node, problem)
    made = {} if made is None else made
    operands = [rewriter.op_before(node, xir_ops.convert, [x], dtype=DType.f16), _as_f16(weight, rewriter, made)]
    if bias is not None:
        operands.append(_as_f16(bias, rewriter, made))
    narrow = rewriter.op_before(node, aten.linear, operands)
    rewriter.replace_node(node, [rewriter.op_before(node, xir_ops.convert, [narrow], dtype=DType.bf16)])
    return True


@attrs.frozen
class Bf16LinearAsF16(Bf16Rewrite):
    """Run a bf16 linear with constant weights as XNNPACK's fp16 fully connected (half the bytes
    of the fp32 GEMM XNNPACK otherwise runs for bf16); activations must stay within fp16's range."""

    name = "xnnpack.bf16-linear-as-f16"
    # (where the partitioner's bf16_linears_as_f16 puts it: right after the last of runs_after in the pipeline)
    runs_after = ("xnnpack.bf16-bmm-f32-output",)
    runs_before = ("xnnpack.fuse-sibling-linears",)  # (which stacks the linears it makes)
    rules = (RunStateRule(bf16_linear_as_f16, aten.linear),)

    def patterns(self):
        return (RunStateRule(bf16_linear_as_f16, aten.linear),) if self.enable_bf16 else ()
