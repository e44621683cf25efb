"""xnnpack.fold-repeat-into-bmm: a batched matmul whose right operand repeats each batch element R times
(grouped-query attention's ``repeat_kv``) reads the unrepeated tensor instead; no repeat is made.

transformers writes grouped-query attention as ``k[:, :, None].expand(b, kv, R, t, d)
.reshape(b, kv * R, t, d)`` and then ``q @ k.transpose(-1, -2)``: the K/V cache is copied R times
every step. But ``bmm(A, B)`` with ``B[g*R + r] == B0[g]`` is::

    view(bmm(view(A, [N/R, R*M, K]), B0), [N, M, Y])       # A: [N, M, K], B: [N, K', Y]

since the R query heads of a group read the same keys: they become R*M rows of one matrix
product. The pass walks back from the bmm's right operand to an ``expand_copy`` that repeats one
size-1 dim R times, through ops that keep the flat batch index (views whose batch prefix keeps
its product, permutes that do not move the batch dims, a clone, a dtype cast, a multiply or divide
by a single number), rebuilds that chain on the expand's input with the batch N/R, and rewrites
the bmm as above. The old chain is erased as far as nothing else reads it; the rest stays for its
other readers. The repeated chain must be static; the left operand's rows may be symbolic (the
queries of a dynamic sequence length, written -1 in the views). Runs before
``xnnpack.expand-as-broadcast``.
"""

from __future__ import annotations

import math

import attrs

from passes.dead_code_elimination import is_dead
from passes.remove_no_ops import layout_change
from passes.rewriter import PatternRewritePass, Rewriter, rewrite_pattern
from passes.shape_ops_as_views import symbolic_product, view_size, view_to
from xir import Node, TensorType, Value
from xir.ops import aten, dim_order_ops, family

_SCALAR_OPS = (aten.mul.Scalar, aten.div.Scalar)
_TENSOR_OPS = (aten.mul.Tensor, aten.div.Tensor)
_CLONES = (aten.clone, dim_order_ops._clone_dim_order, aten.alias_copy)
_CASTS = family("cast")  # dtype casts: elementwise


def _static(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.is_static


def _single_number(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.is_static and value.type.numel() == 1


def _chain_operand(node: Node) -> int | None:
    """Which operand of the elementwise ``node`` continues the chain (the other is one number)."""
    if node.op in _SCALAR_OPS:
        return 0
    a, b = node.operands
    if _single_number(b) and not _single_number(a):
        return 0
    if node.op == aten.mul.Tensor and _single_number(a) and not _single_number(b):
        return 1
    return None


def _walk_back(value: Value) -> tuple[Node, list[tuple[Node, int]]] | str:
    """The expand that ``value`` comes from and the steps after it (first to last), or why not."""
    steps: list[tuple[Node, int]] = []
    while True:
        node = value.producer
        if node is None:
            return "no expand before the bmm's right operand"
        if not _static(node.results[0]):
            return f"{node.op} has a symbolic shape"
        if node.op == aten.expand_copy:
            return node, steps[::-1]
        if node.op in (aten.view_copy, aten.permute_copy) or (node.op in _CLONES + _CASTS and not layout_change(node)):
            index = 0
        elif node.op in _SCALAR_OPS + _TENSOR_OPS:
            index = _chain_operand(node)
            if index is None or node.results[0].type.shape != node.operands[index].type.shape:
                return f"{node.op} is not a multiply or divide by one number"
        else:
            return f"{node.op} between the expand and the bmm"
        steps.append((node, index))
        value = node.operands[index]


def _boundaries(shape, batch: int) -> list[int]:
    """The dims j with prod(shape[:j]) == batch: where the batch prefix ends."""
    return [j for j in range(len(shape) + 1) if math.prod(shape[:j]) == batch]


def _repeated_dim(expand: Node) -> int | None:
    """The one size-1 dim the expand repeats, or None when it does not repeat exactly one."""
    source, result = expand.input.type.shape, expand.results[0].type.shape
    repeated = [i for i, (have, want) in enumerate(zip(source, result)) if have != want]
    if len(source) != len(result) or len(repeated) != 1 or source[repeated[0]] != 1:
        return None
    return repeated[0]


def _plan(expand: Node, steps: list[tuple[Node, int]], batch: int) -> list[tuple] | str:
    """The chain on the unrepeated tensor, as (op, chain-operand index, other operands, attributes):
    its batch dim is dim 0, of size batch / R; its other dims follow the original's past the batch prefix."""
    plan: list[tuple] = []
    source, result = expand.input.type.shape, expand.results[0].type.shape
    dim = _repeated_dim(expand)
    if dim is None:
        return "the expand does not repeat exactly one size-1 dim"
    if math.prod(result[: dim + 1]) != batch:
        return "the repeated dim is not the innermost of the bmm's batch"
    suffix = tuple(source[dim + 1 :])

    def view_to(shape_suffix):  # suffix: the replayed value's dims after its batch dim
        nonlocal suffix
        if tuple(shape_suffix) != suffix:
            plan.append((aten.view_copy, 0, (), {"suffix": tuple(shape_suffix)}))
            suffix = tuple(shape_suffix)

    plan.append((aten.view_copy, 0, (), {"suffix": suffix}))
    for node, index in steps:
        shape = node.results[0].type.shape
        if node.op == aten.view_copy:
            cuts = _boundaries(shape, batch)
            if not cuts:
                return "a view mixes the repeated batch with other dims"
            view_to(shape[cuts[0] :])
        elif node.op == aten.permute_copy:
            before = node.input.type.shape
            dims = [d % len(before) for d in node.attribute("dims")]
            cuts = [j for j in _boundaries(before, batch) if dims[:j] == list(range(j))]
            if not cuts:
                return "a permute moves the batch dims"
            j = cuts[-1]
            view_to(before[j:])
            plan.append((aten.permute_copy, 0, (), {"dims": [0] + [d - j + 1 for d in dims[j:]]}))
            suffix = tuple(shape[j:])
        elif node.op in _CLONES:
            continue
        elif node.op in _CASTS:
            attributes = dict(node.attributes)
            if "dim_order" in attributes:
                attributes["dim_order"] = list(range(1 + len(suffix)))
            plan.append((node.op, 0, (), attributes))
        else:
            others = tuple(v for i, v in enumerate(node.operands) if i != index)
            if any(v.rank > 1 + len(suffix) for v in others if isinstance(v.type, TensorType)):
                return f"{node.op}'s number has more dims than the unrepeated operand"
            plan.append((node.op, index, others, dict(node.attributes)))
    return plan


def _symbolic_rows_only(a: Value, result: Value) -> bool:
    """The left operand and the result are static but for their rows (dim 1: the queries of
    ExecuTorch's LLM flow, whose number is the symbolic sequence length)."""
    return all(
        isinstance(v.type, TensorType)
        and v.rank == 3
        and isinstance(v.type.shape[0], int)
        and isinstance(v.type.shape[2], int)
        for v in (a, result)
    )


@rewrite_pattern(aten.bmm)
def fold_repeat_into_bmm(node: Node, rewriter: Rewriter) -> bool:
    a, b = node.operands
    if not (_static(b) and _symbolic_rows_only(a, node.result)) or b.rank != 3:
        return rewriter.notify_match_failure(
            node, "not a 3-D bmm of a static right operand (the left's rows may be symbolic)"
        )
    walked = _walk_back(b)
    if isinstance(walked, str):
        return rewriter.notify_match_failure(node, walked)
    expand, steps = walked
    batch, rows, inner = a.type.shape
    if view_size(a.type.shape) is None or view_size(node.result.type.shape) is None:
        return rewriter.notify_match_failure(node, "symbolic rows beside an empty dim (a view's -1 would be ambiguous)")
    plan = _plan(expand, steps, batch)
    if isinstance(plan, str):
        return rewriter.notify_match_failure(node, plan)
    repeats = expand.results[0].type.shape[_repeated_dim(expand)]
    groups = batch // repeats
    plan.append((aten.view_copy, 0, (), {"suffix": tuple(b.type.shape[1:])}))  # B0: [groups, K', Y]

    value = expand.input
    for op, index, others, attributes in plan:
        if op == aten.view_copy:
            target = [groups, *attributes["suffix"]]
            if list(value.type.shape) != target:  # (a view to the shape it has is none)
                value = rewriter.op_before(node, op, [value], size=target)
            continue
        operands = list(others)
        operands.insert(index, value)
        value = rewriter.op_before(node, op, operands, **attributes)
    # (symbolic rows: the views write them -1)
    merged = repeats * rows if isinstance(rows, int) else symbolic_product((repeats, rows))
    rows_view = view_to(rewriter, node, a, TensorType(a.dtype, (groups, merged, inner)))
    product = rewriter.op_before(node, aten.bmm, [rows_view, value])
    rewriter.replace_node(node, [view_to(rewriter, node, product, node.result.type)])
    for old in [step for step, _ in reversed(steps)] + [expand]:  # the repeat, where nothing else reads it
        if not is_dead(old):
            break
        rewriter.erase(old)
    return True


@attrs.frozen
class FoldRepeatIntoBmm(PatternRewritePass):
    """Rewrite a bmm whose right operand repeats batch elements (GQA's repeat_kv) to read them unrepeated."""

    name = "xnnpack.fold-repeat-into-bmm"
    # it matches the repeat's expand, which expand-as-broadcast would rewrite as a multiply
    runs_before = ("xnnpack.expand-as-broadcast",)

    rules = (fold_repeat_into_bmm,)
