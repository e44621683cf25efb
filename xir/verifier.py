"""Checks a graph's invariants.

* every value is defined before it is used, and every value has a type;
* use-lists agree with the operands and attributes that really refer to each value;
* the result types of the ops that passes create agree with their operands.

Errors are :class:`~xir.errors.VerificationError` naming the rule and printing the node.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from .core import Graph, Node, Value
from .dtypes import DType
from .errors import VerificationError
from .printer import Namer, print_node
from .types import ScalarType, Symbol, TensorType


def verify(graph: Graph) -> None:
    """Raise VerificationError on the first broken invariant."""
    namer = Namer(graph)

    def fail(message: str, node: Node | None = None) -> None:
        raise VerificationError(message, None if node is None else print_node(node, namer))

    defined: set[int] = set()
    for value in graph.inputs:
        _check_typed(value, fail, None)
        defined.add(id(value))
    actual_uses: Counter = Counter()
    for node in graph:
        if node.graph is not graph:
            fail(f"node {node.op} is linked into the graph but does not belong to it", node)
        for value in node.inputs():
            if id(value) not in defined:
                fail(f"{node.op} uses {namer.ref(value)} before it is defined", node)
            actual_uses[(id(value), id(node))] += 1
        for result in node.results:
            if result.producer is not node:
                fail(f"result {namer.ref(result)} of {node.op} names another producer", node)
            _check_typed(result, fail, node)
            defined.add(id(result))
    for value in graph.outputs:
        if id(value) not in defined:
            fail(f"graph output {namer.ref(value)} is not defined")
    recorded: Counter = Counter()
    nodes_by_id = {id(node): node for node in graph}
    values_by_id = {id(value): value for value in graph.values()}
    for value in graph.values():
        for user in value.uses:
            recorded[(id(value), id(user))] += 1
    for key in set(recorded) | set(actual_uses):
        if recorded[key] != actual_uses[key]:
            value, node = values_by_id.get(key[0]), nodes_by_id.get(key[1])
            name = namer.ref(value) if value is not None else "a value"
            op = node.op if node is not None else "a node outside the graph"
            fail(f"use-list of {name} is inconsistent: it records {op} {recorded[key]} time(s), "
                 f"but the node reads it {actual_uses[key]} time(s)", node)
    for node in graph:
        rule = OP_TYPE_RULES.get(node.op)
        if rule is not None:
            problem = rule(node)
            if problem:
                fail(f"{node.op}: {problem}", node)


def _check_typed(value: Value, fail, node: Node | None) -> None:
    if not isinstance(value.type, (TensorType, ScalarType)):
        fail(f"value {value.describe()} has no type", node)


# --------------------------------------------------------------------------- op rules
# Each rule returns None when the node is well typed, or a sentence saying what is wrong.


def _dims_equal(a, b) -> bool:
    if isinstance(a, Symbol) or isinstance(b, Symbol):
        return True  # symbolic dims are only compared when both are static
    return a == b


def _shapes_equal(a, b) -> bool:
    return len(a) == len(b) and all(_dims_equal(x, y) for x, y in zip(a, b))


def _tensor(value: Value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def _show(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _result_is(node: Node, dtype: DType, shape) -> str | None:
    out = _tensor(node.results[0])
    if out is None:
        return "its result is not a tensor"
    if out.dtype != dtype:
        return f"result dtype is {out.dtype}, expected {dtype}"
    if not _shapes_equal(out.shape, shape):
        return f"result shape is {_show(out.shape)}, expected {_show(shape)}"
    return None


def _operand_types(node: Node, count: int) -> list[TensorType] | str:
    if len(node.operands) < count:
        return f"expected {count} tensor operands, got {len(node.operands)}"
    types = [_tensor(v) for v in node.operands[:count]]
    if any(t is None for t in types):
        return "an operand is not a tensor"
    return types


def _same_dtype(types: list[TensorType]) -> str | None:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        return f"operands have different dtypes: {', '.join(sorted(d.value for d in dtypes))}"
    return None


def _linear(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    x, w = types
    if w.rank != 2:
        return f"weight must be 2-D, got {w}"
    if x.rank < 1 or not _dims_equal(x.shape[-1], w.shape[1]):
        return f"input's last dim {x.shape[-1] if x.rank else '?'} does not match the weight's in-features {w.shape[1]}"
    if len(node.operands) > 2:
        b = _tensor(node.operands[2])
        if b is None or b.rank != 1 or not _dims_equal(b.shape[0], w.shape[0]):
            return f"bias must be 1-D with {w.shape[0]} elements"
    return _same_dtype(types) or _result_is(node, x.dtype, x.shape[:-1] + (w.shape[0],))


def _mm(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    a, b = types
    if a.rank != 2 or b.rank != 2:
        return f"operands must be 2-D, got {a} and {b}"
    if not _dims_equal(a.shape[1], b.shape[0]):
        return f"inner dims differ: {a.shape[1]} and {b.shape[0]}"
    return _same_dtype(types) or _result_is(node, a.dtype, (a.shape[0], b.shape[1]))


def _addmm(node: Node) -> str | None:
    types = _operand_types(node, 3)
    if isinstance(types, str):
        return types
    bias, a, b = types
    if a.rank != 2 or b.rank != 2:
        return f"matrix operands must be 2-D, got {a} and {b}"
    if not _dims_equal(a.shape[1], b.shape[0]):
        return f"inner dims differ: {a.shape[1]} and {b.shape[0]}"
    return _same_dtype(types) or _result_is(node, a.dtype, (a.shape[0], b.shape[1]))


def _bmm(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    a, b = types
    if a.rank != 3 or b.rank != 3:
        return f"operands must be 3-D, got {a} and {b}"
    if not _dims_equal(a.shape[0], b.shape[0]) or not _dims_equal(a.shape[2], b.shape[1]):
        return f"cannot multiply {_show(a.shape)} by {_show(b.shape)}"
    return _same_dtype(types) or _result_is(node, a.dtype, (a.shape[0], a.shape[1], b.shape[2]))


def _matmul(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    a, b = types
    if a.rank < 1 or b.rank < 1:
        return "operands must have at least one dim"
    inner_a = a.shape[-1]
    inner_b = b.shape[-2] if b.rank >= 2 else b.shape[0]
    if not _dims_equal(inner_a, inner_b):
        return f"inner dims differ: {inner_a} and {inner_b}"
    return _same_dtype(types)


def _convolution(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    x, w = types
    if x.rank != w.rank:
        return f"input rank {x.rank} differs from weight rank {w.rank}"
    transposed = bool(node.attributes.get("transposed", False))
    groups = node.attributes.get("groups", 1)
    out = _tensor(node.results[0])
    if out is None or out.rank != x.rank:
        return f"result must be a tensor of rank {x.rank}"
    if transposed:  # weight (in, out / groups, ...)
        if not _dims_equal(x.shape[1], w.shape[0]):
            return f"input has {x.shape[1]} channels, the transposed weight expects {w.shape[0]}"
    elif isinstance(groups, int) and isinstance(w.shape[1], int) and isinstance(x.shape[1], int):
        if x.shape[1] != w.shape[1] * groups:
            return f"input has {x.shape[1]} channels, weight expects {w.shape[1]} x {groups} groups"
    out_channels = w.shape[1] * groups if transposed and isinstance(groups, int) and isinstance(w.shape[1], int) else w.shape[0]
    if not transposed and not _dims_equal(out.shape[1], out_channels):
        return f"result has {out.shape[1]} channels, weight gives {out_channels}"
    if transposed and not _dims_equal(out.shape[1], out_channels):
        return f"result has {out.shape[1]} channels, weight gives {out_channels}"
    if len(node.operands) > 2:
        b = _tensor(node.operands[2])
        if b is None or b.rank != 1 or not _dims_equal(b.shape[0], out_channels):
            return f"bias must be 1-D with {out_channels} elements"
    if out.dtype != x.dtype:
        return f"result dtype is {out.dtype}, expected {x.dtype}"
    return None


def _batch_norm(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    if x.rank < 2:
        return f"input must have a channel dim, got {x}"
    channels = x.shape[1]
    for operand in node.operands[1:]:
        t = _tensor(operand)
        if t is None or t.rank != 1 or not _dims_equal(t.shape[0], channels):
            return f"per-channel operands must be 1-D with {channels} elements (the input's dim 1)"
    return _result_is(node, x.dtype, x.shape)


def _permute(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    dims = node.attributes.get("dims")
    if not isinstance(dims, list) or sorted(d % max(x.rank, 1) for d in dims) != list(range(x.rank)):
        return f"dims {dims} is not a permutation of {x.rank} dims"
    return _result_is(node, x.dtype, tuple(x.shape[d] for d in dims))


def _view(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    out = _tensor(node.results[0])
    if out is None:
        return "its result is not a tensor"
    if out.dtype != x.dtype:
        return f"result dtype is {out.dtype}, expected {x.dtype}"
    size = node.attributes.get("size")
    if isinstance(size, list) and all(isinstance(d, int) for d in size) and out.is_static:
        if len(size) != out.rank or any(s not in (-1, o) for s, o in zip(size, out.shape)):
            return f"result shape {_show(out.shape)} does not follow size {size}"
    if x.is_static and out.is_static and x.numel() != out.numel():
        return f"view changes the element count: {_show(x.shape)} has {x.numel()}, {_show(out.shape)} has {out.numel()}"
    return None


def _quantize(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    if not x.dtype.is_float:
        return f"quantizes a {x.dtype} tensor; expected a float input"
    dtype = node.attributes.get("dtype")
    if not isinstance(dtype, DType):
        return "needs a dtype attribute"
    return _result_is(node, dtype, x.shape)


def _dequantize(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    dtype = node.attributes.get("dtype")
    if isinstance(dtype, DType) and x.dtype != dtype:
        return f"input dtype {x.dtype} differs from its dtype attribute {dtype}"
    out = _tensor(node.results[0])
    if out is None or not out.dtype.is_float:
        return "result must be a float tensor"
    if not _shapes_equal(out.shape, x.shape):
        return f"result shape {_show(out.shape)} differs from the input's {_show(x.shape)}"
    return None


def _convert(node: Node) -> str | None:
    types = _operand_types(node, 1)
    if isinstance(types, str):
        return types
    (x,) = types
    dtype = node.attributes.get("dtype")
    target = dtype if isinstance(dtype, DType) else x.dtype
    return _result_is(node, target, x.shape)


def _bmm_f32out(node: Node) -> str | None:
    types = _operand_types(node, 2)
    if isinstance(types, str):
        return types
    a, b = types
    if a.rank != 3 or b.rank != 3 or not _dims_equal(a.shape[2], b.shape[1]):
        return f"cannot multiply {_show(a.shape)} by {_show(b.shape)}"
    return _same_dtype(types) or _result_is(node, DType.f32, (a.shape[0], a.shape[1], b.shape[2]))


OP_TYPE_RULES: dict[str, Callable[[Node], str | None]] = {
    "aten.linear": _linear,
    "aten.mm": _mm,
    "aten.addmm": _addmm,
    "aten.bmm": _bmm,
    "aten.matmul": _matmul,
    "aten.convolution": _convolution,
    "aten._native_batch_norm_legit_no_training": _batch_norm,
    "aten.permute_copy": _permute,
    "aten.permute": _permute,
    "aten.view_copy": _view,
    "aten.view": _view,
    "aten.reshape": _view,
    "aten._to_copy": _convert,
    "dim_order_ops._to_dim_order_copy": _convert,
    "xir.convert": _convert,
    "xir.bmm_f32out": _bmm_f32out,
}
for _name in ("quantize_per_tensor", "quantize_per_tensor.tensor", "quantize_per_channel"):
    OP_TYPE_RULES[f"quantized_decomposed.{_name}"] = _quantize
for _name in ("dequantize_per_tensor", "dequantize_per_tensor.tensor", "dequantize_per_channel"):
    OP_TYPE_RULES[f"quantized_decomposed.{_name}"] = _dequantize
