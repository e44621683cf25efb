"""What the XNNPACK passes share: the base classes of the passes whose rules depend on ``enable_bf16`` (which the partitioner sets from its own), and helpers that make float constants and normalizations."""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter
from passes.rewriter import RewritePattern
from xir import DType, Node, TensorType, Value
from xir.ops import aten

from ..rules import MAX_RANK

# the float dtypes XNNPACK's ops take (bf16 only with enable_bf16: the passes' gates decide that)
FLOATS = (DType.f32, DType.f16, DType.bf16)


@attrs.frozen
class Bf16Rewrite(PatternRewritePass, register=False):
    """A rewrite that creates xir's own ops for bf16: its rules run only with ``enable_bf16`` (the
    partitioner sets it from its own), since without it bf16 stays outside XNNPACK and xir's ops
    would have no kernel there."""

    enable_bf16: bool = False

    def patterns(self):
        return self.rules if self.enable_bf16 else ()


class _NotBf16(RewritePattern):
    """``rule``, declined on nodes with a bf16 operand or result."""

    def __init__(self, rule: RewritePattern):
        self.rule, self.ops, self.name = rule, rule.ops, rule.name

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        values = list(node.operands) + list(node.results)
        if any(isinstance(v.type, TensorType) and v.type.dtype is DType.bf16 for v in values):
            return rewriter.notify_match_failure(node, "bf16, and bf16 is not enabled: it stays outside XNNPACK")
        return self.rule.match_and_rewrite(node, rewriter)


@attrs.frozen
class DelegatedDtypeRewrite(PatternRewritePass, register=False):
    """A rewrite into ops for XNNPACK that declines bf16 nodes without ``enable_bf16`` (the
    partitioner sets it from its own): those stay outside XNNPACK, and rewritten they would only be
    more ops there (a mean as view -> mean -> view, a split as slices; fuzz fp32 10045, 10015)."""

    enable_bf16: bool = True

    def patterns(self):
        return self.gated(self.rules)

    def gated(self, rules: tuple) -> tuple:
        """``rules`` as they run: each declining bf16 nodes without ``enable_bf16``."""
        return rules if self.enable_bf16 else tuple(_NotBf16(rule) for rule in rules)


class RunStateRule(RewritePattern):
    """A rule ``fn(node, rewriter, made)`` given ``made``, a dict that lasts one run of its pass:
    what the rule made earlier in the run (one fp16 twin per weight, one swap matrix per width).
    A pass returns a fresh one from ``patterns()`` for every run."""

    def __init__(self, fn, *ops: str):
        self.fn, self.ops, self.name, self.__doc__ = fn, tuple(str(op) for op in ops), fn.__name__, fn.__doc__
        self.made: dict = {}

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        return self.fn(node, rewriter, self.made)


_TORCH_DTYPES = {DType.f32: "float32", DType.bf16: "bfloat16", DType.f16: "float16"}


def _float_constant(rewriter: Rewriter, base: str, value_type: TensorType, number: float, shape=()):
    """A constant of ``value_type``'s float dtype filled with ``number``."""
    import torch

    dtype = getattr(torch, _TORCH_DTYPES[value_type.dtype])
    return rewriter.add_constant(
        base, TensorType(value_type.dtype, tuple(shape)), torch.full(tuple(shape), number, dtype=dtype)
    )


def _norm_input_problem(node: Node, x: Value, min_rank: int, what: str, static_from: int = 0) -> str | None:
    """Why the fp32 norm ``node`` of ``x`` is not decomposed, or None. The dims of ``x`` from
    ``static_from`` on (those it normalizes over, and for a group norm its channels) must be
    static; the ones before may be symbolic (a dynamic batch or sequence length: the rows), as the
    decomposition's ops take them (its means reduce static dims only)."""

    if not isinstance(x.type, TensorType) or x.dtype is not DType.f32:
        return f"not an f32 {what}"
    if not min_rank <= x.rank <= MAX_RANK:
        return f"rank not {min_rank} to {MAX_RANK}"
    if not all(isinstance(d, int) for d in x.shape[static_from:]):
        return "a symbolic dim among the normalized ones"
    if not all(r.is_unused() for r in node.results[1:]):
        return "its mean/rstd outputs are used"
    return None


def _normalize(node: Node, rewriter: Rewriter, x: Value, dims: list, base: str) -> Value:
    """(x - mean(x)) * rsqrt(mean((x - mean(x))**2) + eps) over ``dims``, before ``node``, with
    ``node``'s eps as a constant named after ``base``."""

    def op(name, operands, **attributes):
        return rewriter.op_before(node, name, operands, **attributes)

    mean = op(aten.mean.dim, [x], dim=dims, keepdim=True)
    centered = op(aten.sub.Tensor, [x, mean])
    variance = op(aten.mean.dim, [op(aten.mul.Tensor, [centered, centered])], dim=dims, keepdim=True)
    eps = _float_constant(rewriter, base, x.type, float(node.attribute("eps")))
    return op(aten.mul.Tensor, [centered, op(aten.rsqrt, [op(aten.add.Tensor, [variance, eps])])])
