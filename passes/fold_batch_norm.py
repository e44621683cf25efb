"""fold-batch-norm: fold an inference batch norm into the conv or linear before it, on the
right dim; rewrite the others as a per-channel multiply-add.

A batch norm normalizes dim 1 (the channel dim). It folds into the op before it only when
that dim is the op's output-channel dim:

* a convolution (not transposed): output channels are dim 1, weight rows are output channels;
* a linear with a 2-D output (N, C): output channels are dim 1 = the last dim.

A linear with a 3-D output (N, C, F) has its output channels on F, not C: folding there (as a
fold that only checks the producer's op does) scales the wrong dim. Folding changes what the conv or linear
computes, so it also needs the batch norm to be the only use of that output (not another
node's operand, not a graph output). :func:`fold_target` is the one place that decides; the
lowering's capability check asks it too. A batch norm that cannot fold becomes
``x * scale + shift`` with constants shaped to broadcast on dim 1. The folded weights are
checked for shape.
"""

from __future__ import annotations

import attrs

from xir import DType, Node, TensorType, Value
from xir.ops import aten

from .data import CAST_METHODS, cast_data
from .rewriter import PatternRewritePass, Rewriter, rewrite_pattern

BATCH_NORM = aten._native_batch_norm_legit_no_training
CONVOLUTION = aten.convolution
LINEAR = aten.linear
STATISTICS = ("weight", "bias", "running_mean", "running_var")


def fold_target(norm: Node) -> tuple[Node | None, str]:
    """The conv or linear ``norm`` folds into, or None and the reason it does not fold.

    Structural only (constants are known to be constants, their data is not read): the fold
    pass and the capability check of the lowering both decide with this."""
    if not all(r.is_unused() for r in norm.results[1:]):
        return None, "its mean/var outputs are used"
    weight, bias, mean, var = (norm.operand(s) for s in STATISTICS)
    if not all(v is not None and v.is_constant for v in (mean, var)) or not all(
        v is None or v.is_constant for v in (weight, bias)
    ):
        return None, "its statistics are not constants"
    x = norm.input
    producer = x.producer
    if producer is None or producer.op not in (CONVOLUTION, LINEAR):
        return None, "its input is not the output of a conv or linear"
    if producer.op == LINEAR and x.rank != 2:
        return None, (
            f"follows a linear with a {x.rank}-D output, whose channels are its last dim, not the normalized dim 1"
        )
    if producer.op == CONVOLUTION and producer.attribute("transposed"):
        return None, "follows a transposed convolution (its weight's rows are input channels)"
    if x.single_user() is not norm:
        return (
            None,
            f"the {producer.op} output has other uses (another node or a graph output) that folding would change",
        )
    weight, bias = producer.weight, producer.bias
    if not weight.is_constant or (bias is not None and not bias.is_constant):
        return None, f"the {producer.op} weight or bias is not a constant"
    if weight.shape[0] != x.shape[1]:
        return None, f"the {producer.op} output channels ({weight.shape[0]}) are not the normalized dim ({x.shape[1]})"
    return producer, ""


def _affine(norm: Node):
    """(scale, shift) per channel, computed in fp32, or None when a statistic has no data."""
    weight, bias, mean, var = (norm.operand(name) for name in STATISTICS)
    if any(v is not None and (not v.is_constant or v.data is None) for v in (weight, bias)) or any(
        v is None or not v.is_constant or v.data is None for v in (mean, var)
    ):
        return None
    m, v = mean.data.float(), var.data.float()
    scale = 1 / (v + norm.attribute("eps")).sqrt()  # an absent weight (BatchNorm(affine=False)) is 1
    if weight is not None:
        scale = weight.data.float() * scale
    shift = -m * scale
    if bias is not None:  # an absent bias is 0
        shift = bias.data.float() + shift
    return scale, shift


def _constant(rewriter: Rewriter, base: str, data, dtype: DType) -> Value:
    data = cast_data(data, dtype)
    return rewriter.add_constant(base, TensorType(dtype, tuple(data.shape)), data)


@rewrite_pattern(BATCH_NORM)
def fold_into_producer(norm: Node, rewriter: Rewriter) -> bool:
    """conv/linear -> batch norm  =>  conv/linear with scaled weights and a shifted bias."""
    producer, reason = fold_target(norm)
    if producer is None:
        return rewriter.notify_match_failure(norm, reason)
    affine = _affine(norm)
    weight, bias = producer.weight, producer.bias
    if affine is None or weight.data is None or (bias is not None and bias.data is None):
        return rewriter.notify_match_failure(norm, "constant data is not available")
    if weight.dtype not in CAST_METHODS:
        return rewriter.notify_match_failure(norm, f"{weight.dtype} weight")
    scale, shift = affine
    channels = norm.input.shape[1]
    w = weight.data
    folded_weight = w.float() * scale.reshape([channels] + [1] * (w.dim() - 1))
    old_bias = bias.data.float() if bias is not None else scale * 0
    folded_bias = old_bias * scale + shift
    if tuple(folded_weight.shape) != tuple(w.shape) or tuple(folded_bias.shape) != (channels,):
        raise AssertionError(
            f"fold-batch-norm: folded weight {tuple(folded_weight.shape)} does not match {tuple(w.shape)}"
        )
    # matched completely: edit
    new_weight = _constant(rewriter, f"{weight.name}_bn", folded_weight, weight.dtype)
    new_bias = _constant(rewriter, f"{(bias or weight).name}_bn_bias", folded_bias, weight.dtype)
    if bias is not None:
        rewriter.set_operands(producer, [producer.input, new_weight, new_bias])
    else:
        if "bias" in producer.attributes:  # (IR text may still spell the absent bias {bias=none})
            rewriter.remove_attribute(producer, "bias")
        rewriter.set_operands(producer, [producer.input, new_weight, new_bias])
    rewriter.replace_node(norm, [norm.input, None, None])
    return True


@rewrite_pattern(BATCH_NORM)
def batch_norm_to_affine(norm: Node, rewriter: Rewriter) -> bool:
    """batch norm => x * scale + shift, with per-channel constants broadcast on dim 1."""
    x = norm.input
    if not all(r.is_unused() for r in norm.results[1:]):
        return rewriter.notify_match_failure(norm, "its mean/var outputs are used")
    if x.rank < 2 or not isinstance(x.shape[1], int) or x.dtype not in CAST_METHODS:
        return rewriter.notify_match_failure(norm, f"input {x.type}: no static channel dim or not a float")
    affine = _affine(norm)
    if affine is None:
        return rewriter.notify_match_failure(norm, "its statistics are not constants with data")
    scale, shift = affine
    view = [x.shape[1]] + [1] * (x.rank - 2)
    scale_value = _constant(rewriter, "bn_scale", scale.reshape(view), x.dtype)
    shift_value = _constant(rewriter, "bn_shift", shift.reshape(view), x.dtype)
    mul = rewriter.insert_before(norm, rewriter.create(aten.mul.Tensor, [x, scale_value]))
    add = rewriter.insert_before(norm, rewriter.create(aten.add.Tensor, [mul.result, shift_value]))
    rewriter.replace_node(norm, [add.result, None, None])
    return True


@attrs.frozen
class FoldBatchNorm(PatternRewritePass):
    """Fold batch norms into the conv/linear before them on the right dim; rewrite the rest as x * scale + shift."""

    name = "fold-batch-norm"
    to_affine: bool = True

    def patterns(self):
        return [fold_into_producer] + ([batch_norm_to_affine] if self.to_affine else [])
