"""The ops xir knows: ATen (edge dialect), quantized_decomposed, dim_order_ops, and xir's own.

Each op is one :func:`~xir.ops.define_op` call here. Result-type inference returns None where
the types cannot be told from the operands and attributes alone (then the verifier does not
compare, and a pass creating the op must give them).

Attributes may come from IR text anyone wrote: inference and checks raise
:class:`~xir.errors.IRError` for an attribute of the wrong kind or out of range (a dim past the
rank, a stride of 0, a size below 0), which the verifier reports against the node. They never take
a dim modulo the rank (that turns a wrong dim into another dim) nor fail with Python's own errors.
"""

from __future__ import annotations

import math

from .core import Value
from .dtypes import DType
from .errors import IRError
from .op_schemas import CATCH_ALL, SCHEMAS
from .ops import (
    CAST,
    CHOOSE_QPARAMS,
    COMMUTATIVE,
    DEQUANTIZE,
    ELEMENTWISE,
    LINEAR,
    MATMUL,
    PURE,
    QUANTIZE,
    RANDOM,
    REQUIRED,
    RESHAPE,
    SOFTMAX,
    VIEW,
    define_op,
    dims_agree,
    same_as_input,
    show_shape,
)
from .types import ScalarType, Symbol, TensorType, Type

# ------------------------------------------------------------------------------- attributes


def _tensor(value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def _attr(node, name, default=None):
    value = node.attributes.get(name, default)
    return default if value is None else value


def _is_int(value) -> bool:
    """An integer (True and False are not, though Python counts them as ints)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _dim(dim, rank: int, name: str = "dim") -> int:
    """``dim`` as an index in [0, rank); a negative one counts from the end, as in PyTorch. One out
    of range is an error, never taken modulo the rank."""
    if not _is_int(dim):
        raise IRError(f"{name} must be an integer, got {dim!r}")
    if not -rank <= dim < rank:
        raise IRError(f"{name} {dim} is out of range [{-rank}, {rank - 1}]")
    return dim + rank if dim < 0 else dim


def _dims(value, rank: int, name: str = "dim") -> list[int]:
    """One dim or a list of dims, each as :func:`_dim` gives it; a dim named twice is an error."""
    dims = [_dim(d, rank, name) for d in (value if isinstance(value, list) else [value])]
    if len(set(dims)) != len(dims):
        raise IRError(f"{name} {value} names a dim twice")
    return dims


def _ints(node, name: str, default, count: int, minimum: int) -> list[int]:
    """Attribute ``name`` as ``count`` integers of at least ``minimum``: a list of them, or one integer
    (or a list of one) for all, as PyTorch's ``int[N]`` arguments take them."""
    value = _attr(node, name, default)
    items = [value] if _is_int(value) else value
    if not isinstance(items, list) or not all(_is_int(v) for v in items):
        raise IRError(f"{name} must be a list of integers, got {value!r}")
    if len(items) == 1:
        items = items * count
    if len(items) != count:
        raise IRError(f"{name} must have {count} values, got {len(items)}")
    if any(v < minimum for v in items):
        raise IRError(f"{name} must be at least {minimum}, got {value}")
    return items


def _groups(node) -> int:
    groups = _attr(node, "groups", 1)
    if not _is_int(groups) or groups < 1:
        raise IRError(f"groups must be an integer of at least 1, got {groups!r}")
    return groups


def _flag(node, name: str) -> bool:
    value = _attr(node, name, False)
    if not isinstance(value, bool):
        raise IRError(f"{name} must be true or false, got {value!r}")
    return value


def _dtype(node, name: str, default):
    """Attribute ``name``, a dtype (``default`` when the node leaves it out or sets it to none)."""
    value = _attr(node, name, default)
    if value is not None and not isinstance(value, DType):
        raise IRError(f"{name} must be a dtype such as f32, got {value!r}")
    return value


def _sizes(size, name: str = "size") -> tuple[int, ...] | None:
    """A list of sizes (integers of at least 0, or values known at run time) as a static shape: None
    when a size is a value."""
    if not isinstance(size, list) or not all(_is_int(d) or isinstance(d, Value) for d in size):
        raise IRError(f"{name} must be a list of sizes, got {size!r}")
    if any(_is_int(d) and d < 0 for d in size):
        raise IRError(f"{name} {size} has a negative size")
    return None if any(isinstance(d, Value) for d in size) else tuple(size)


def _scalar_dtype(value, name: str) -> DType | None:
    """The dtype PyTorch gives a tensor made from the scalar ``value`` when no dtype is named: bool,
    i64 for an integer, f32 (the default float dtype) for a float; None for a value known at run time."""
    if isinstance(value, Value):
        return None
    if isinstance(value, bool):
        return DType.bool
    if isinstance(value, int):
        return DType.i64
    if isinstance(value, float):
        return DType.f32
    raise IRError(f"{name} must be a number, got {value!r}")


# ------------------------------------------------------------------------------- inference


def _broadcast_shapes(shapes):
    rank = max(len(s) for s in shapes)
    result = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        static = {d for d in dims if isinstance(d, int) and d != 1}
        symbolic = [d for d in dims if isinstance(d, Symbol)]
        if len(static) > 1:
            return None
        if static:
            result.append(static.pop())
        elif symbolic:
            result.append(symbolic[0])
        else:
            result.append(1)
    return tuple(result)


def broadcast(node):
    """Elementwise on tensors of one float dtype, broadcast to a common shape (other dtypes
    promote in ways not modelled here: not inferred). Shapes that do not broadcast are an error."""
    tensors = [_tensor(v) for v in node.operands]
    if not tensors or any(t is None for t in tensors) or len({t.dtype for t in tensors}) != 1:
        return None
    if not tensors[0].dtype.is_float:
        return None
    shape = _broadcast_shapes([t.shape for t in tensors])
    if shape is None:
        raise IRError(f"operand shapes {', '.join(show_shape(t.shape) for t in tensors)} do not broadcast")
    return [TensorType(tensors[0].dtype, shape)]


def _to_dtype(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x.with_dtype(_dtype(node, "dtype", x.dtype))]


def _linear(node):
    x, w = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or w is None or w.rank != 2 or x.rank < 1:
        return None
    return [TensorType(x.dtype, x.shape[:-1] + (w.shape[0],))]


def _mm(node):
    a, b = _tensor(node.operands[0]), _tensor(node.operands[1])
    return (
        None
        if a is None or b is None or a.rank != 2 or b.rank != 2
        else [TensorType(a.dtype, (a.shape[0], b.shape[1]))]
    )


def _addmm(node):
    a, b = _tensor(node.operands[1]), _tensor(node.operands[2])
    return (
        None
        if a is None or b is None or a.rank != 2 or b.rank != 2
        else [TensorType(a.dtype, (a.shape[0], b.shape[1]))]
    )


def _bmm(dtype=None):
    def infer(node):
        a, b = _tensor(node.operands[0]), _tensor(node.operands[1])
        if a is None or b is None or a.rank != 3 or b.rank != 3:
            return None
        return [TensorType(dtype or a.dtype, (a.shape[0], a.shape[1], b.shape[2]))]

    return infer


def _matmul(node):
    a, b = _tensor(node.operands[0]), _tensor(node.operands[1])
    if a is None or b is None or a.rank < 2 or b.rank < 2:
        return None
    batch = _broadcast_shapes([a.shape[:-2], b.shape[:-2]]) if a.rank > 2 or b.rank > 2 else ()
    return None if batch is None else [TensorType(a.dtype, tuple(batch) + (a.shape[-2], b.shape[-1]))]


def _window(size, kernel, stride, padding, dilation, ceil_mode=False):
    """The output size of a window sliding along one dim (None when a size is symbolic); a window
    that does not fit the padded input is an error."""
    if not isinstance(size, int) or not isinstance(kernel, int):
        return None
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    if out < 1:
        raise IRError(f"a window of {kernel} (dilation {dilation}) does not fit a dim of {size} padded by {padding}")
    return out


def _convolution(node):
    x, w = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or w is None or x.rank != w.rank or x.rank < 3:
        return None
    spatial = x.rank - 2
    stride = _ints(node, "stride", [1], spatial, 1)
    padding = _ints(node, "padding", [0], spatial, 0)
    dilation = _ints(node, "dilation", [1], spatial, 1)
    if _flag(node, "transposed"):
        output_padding = _ints(node, "output_padding", [0], spatial, 0)
        sizes = []
        for i in range(spatial):
            size, k = x.shape[2 + i], w.shape[2 + i]
            if not isinstance(size, int) or not isinstance(k, int) or not isinstance(w.shape[1], int):
                return None
            sizes.append((size - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + output_padding[i] + 1)
        if min(sizes) < 1:
            raise IRError(f"the transposed convolution's output sizes {sizes} are not all positive")
        channels = w.shape[1] * _groups(node)
    else:
        sizes = [_window(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in range(spatial)]
        if any(s is None for s in sizes):
            return None
        channels = w.shape[0]
    return [TensorType(x.dtype, (x.shape[0], channels, *sizes))]


def _pool(with_indices: bool, has_dilation: bool):
    def infer(node):
        x = _tensor(node.operands[0])
        if x is None:
            return None
        if x.rank not in (3, 4):
            raise IRError(f"input must be 3-D or 4-D, got {x}")
        kernel = _ints(node, "kernel_size", None, 2, 1)
        stride = kernel if _attr(node, "stride") in (None, []) else _ints(node, "stride", None, 2, 1)
        padding = _ints(node, "padding", [0], 2, 0)
        dilation = _ints(node, "dilation", [1], 2, 1) if has_dilation else [1, 1]
        ceil_mode = _flag(node, "ceil_mode")
        sizes = [_window(x.shape[-2 + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(2)]
        if any(s is None for s in sizes):
            return None
        out = TensorType(x.dtype, x.shape[:-2] + tuple(sizes))
        return [out, out.with_dtype(DType.i64)] if with_indices else [out]

    return infer


def _permutation(node, rank: int) -> list[int]:
    """A permute's dims, each in [0, rank); an error unless they are a permutation of the rank's dims."""
    dims = _attr(node, "dims")
    if not isinstance(dims, list):
        raise IRError(f"dims must be a list of integers, got {dims!r}")
    normalized = [_dim(d, rank) for d in dims]
    if sorted(normalized) != list(range(rank)):
        raise IRError(f"dims {dims} is not a permutation of {rank} dims")
    return normalized


def _permute(node):
    x = _tensor(node.operands[0])
    return None if x is None else [TensorType(x.dtype, tuple(x.shape[d] for d in _permutation(node, x.rank)))]


def _view(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    size = _attr(node, "shape" if node.op == "aten.reshape" else "size")  # (reshape's argument is its shape)
    if not isinstance(size, list) or not all(_is_int(d) or isinstance(d, Value) for d in size):
        raise IRError(f"size must be a list of sizes, got {size!r}")
    if any(_is_int(d) and d < -1 for d in size) or size.count(-1) > 1:
        raise IRError(f"size {size} has a size below 0 other than one -1")
    if not all(_is_int(d) for d in size):
        return None
    if -1 in size:
        known = math.prod(d for d in size if d != -1)
        total = x.numel()
        if total is None or known == 0:
            return None
        if total % known:
            raise IRError(f"size {size} does not fit the input's {total} elements")
        size = [total // known if d == -1 else d for d in size]
    return [TensorType(x.dtype, tuple(size))]


def _as_strided(node):
    """as_strided_copy: the result has the shape ``size``, the input's dtype (not inferred when a
    size is a value computed at run time)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    size, stride = _attr(node, "size"), _attr(node, "stride")
    for name, dims in (("size", size), ("stride", stride)):
        if not isinstance(dims, list) or not all((_is_int(d) and d >= 0) or isinstance(d, Value) for d in dims):
            raise IRError(f"{name} must be a list of non-negative sizes, got {dims!r}")
    if len(size) != len(stride):
        raise IRError(f"size {size} and stride {stride} have different lengths")
    if not all(_is_int(d) for d in size):
        return None  # (a size computed at run time: the importer gives the type)
    return [TensorType(x.dtype, tuple(size))]


def _expand_copy(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    size = _attr(node, "size")
    if not isinstance(size, list) or not all(_is_int(d) or isinstance(d, Value) for d in size):
        raise IRError(f"size must be a list of sizes, got {size!r}")
    if len(size) < x.rank:
        raise IRError(f"size {size} has fewer dims than the input's {x.rank}")
    offset = len(size) - x.rank
    shape = []
    for i, d in enumerate(size):
        old = x.shape[i - offset] if i >= offset else None
        if _is_int(d) and (d < -1 or (d == -1 and old is None)):
            raise IRError(f"size {size}: {d} at dim {i} is not a size (-1 keeps one of the input's dims)")
        if _is_int(d) and isinstance(old, int) and old != 1 and d not in (-1, old):
            raise IRError(f"cannot expand dim {i - offset} of size {old} to {d}")
        shape.append(old if d == -1 else d)
    return None if any(isinstance(d, Value) for d in shape) else [TensorType(x.dtype, tuple(shape))]


def _unsqueeze(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim = _dim(_attr(node, "dim"), x.rank + 1)
    return [TensorType(x.dtype, x.shape[:dim] + (1,) + x.shape[dim:])]


def _squeeze(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dims = _attr(node, "dim", None)
    dims = range(x.rank) if dims is None else _dims(dims, max(x.rank, 1))
    drop = {d for d in dims if x.rank and x.shape[d] == 1}
    return [TensorType(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in drop))]


def _slice(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank == 0:
        raise IRError("cannot slice a 0-D tensor")
    dim = _dim(_attr(node, "dim", 0), x.rank)
    start, end, step = _attr(node, "start", 0), _attr(node, "end", None), _attr(node, "step", 1)
    if not all(v is None or _is_int(v) or isinstance(v, Value) for v in (start, end, step)):
        raise IRError(f"start, end and step must be integers, got {start!r}, {end!r}, {step!r}")
    if _is_int(step) and step < 1:
        raise IRError(f"step must be at least 1, got {step}")
    size = x.shape[dim]
    if (
        not isinstance(size, int)
        or not all(_is_int(v) for v in (start, step))
        or not isinstance(end, (int, type(None)))
    ):
        return None
    first, stop, _ = slice(start, end, step).indices(size)
    length = max(0, (stop - first + step - 1) // step)
    return [TensorType(x.dtype, x.shape[:dim] + (length,) + x.shape[dim + 1 :])]


def _cat(node):
    tensors = [_tensor(v) for v in node.operands]
    if not tensors:
        raise IRError("concatenates no tensors (it needs at least one)")
    if any(t is None for t in tensors):
        return None
    tensors = [t for t in tensors if t.shape != (0,)] or tensors  # (PyTorch skips legacy empty 1-D tensors)
    rank = tensors[0].rank
    if rank == 0 or any(t.rank != rank for t in tensors):
        raise IRError(
            f"cannot concatenate tensors of ranks {', '.join(str(t.rank) for t in tensors)} "
            "(all must have the same rank, at least 1)"
        )
    dim = _dim(_attr(node, "dim", 0), rank)
    first = tensors[0].shape
    if not all(dims_agree(t.shape[i], first[i]) for t in tensors for i in range(rank) if i != dim):
        raise IRError(f"operand shapes {', '.join(show_shape(t.shape) for t in tensors)} differ outside dim {dim}")
    sizes = [t.shape[dim] for t in tensors]
    if not all(isinstance(s, int) for s in sizes) or len({t.dtype for t in tensors}) != 1:
        return None  # (operands of several dtypes: PyTorch promotes them, not modelled here)
    return [TensorType(tensors[0].dtype, first[:dim] + (sum(sizes),) + first[dim + 1 :])]


def _constant_pad(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    pad = _attr(node, "pad")
    if not isinstance(pad, list) or len(pad) % 2 or not all(_is_int(p) or isinstance(p, Value) for p in pad):
        raise IRError(f"pad must be a list of an even number of integers, got {pad!r}")
    if len(pad) // 2 > x.rank:
        raise IRError(f"pad {pad} pads {len(pad) // 2} dims of a tensor of rank {x.rank}")
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        if not isinstance(shape[d], int) or not all(_is_int(p) for p in pad[2 * i : 2 * i + 2]):
            return None
        shape[d] += pad[2 * i] + pad[2 * i + 1]
        if shape[d] < 0:
            raise IRError(f"pad {pad} leaves dim {d} of {x} with {shape[d]} elements")
    return [TensorType(x.dtype, tuple(shape))]


def _reduce(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dims = _attr(node, "dim")
    dims = set(range(x.rank) if dims in (None, []) else _dims(dims, max(x.rank, 1)))
    keep = _flag(node, "keepdim")
    if _dtype(node, "dtype", None) is not None or not x.dtype.is_float:
        return None
    shape = (
        tuple(1 if i in dims else d for i, d in enumerate(x.shape))
        if keep
        else tuple(d for i, d in enumerate(x.shape) if i not in dims)
    )
    return [TensorType(x.dtype, shape)]


def _max_dim(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim = _dim(_attr(node, "dim"), max(x.rank, 1))
    keep = _flag(node, "keepdim")
    shape = (
        tuple(1 if i == dim else d for i, d in enumerate(x.shape))
        if keep
        else tuple(d for i, d in enumerate(x.shape) if i != dim)
    )
    return [TensorType(x.dtype, shape), TensorType(DType.i64, shape)]


def _batch_norm(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x, TensorType(x.dtype, (0,)), TensorType(x.dtype, (0,))]


def _layer_norm(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    normalized = _attr(node, "normalized_shape")
    static = _sizes(normalized, "normalized_shape")
    if len(normalized) > x.rank or (
        static is not None and not all(map(dims_agree, static, x.shape[x.rank - len(static) :]))
    ):
        raise IRError(f"normalized_shape {normalized} is not the last dims of the input's {show_shape(x.shape)}")
    if x.dtype is not DType.f32:
        return None
    axis = x.rank - len(normalized)
    stats = TensorType(DType.f32, x.shape[:axis] + (1,) * len(normalized))
    return [x, stats, stats]


def _quantize(node):
    x = _tensor(node.operands[0])
    dtype = _dtype(node, "dtype", None)
    return None if x is None or dtype is None else [x.with_dtype(dtype)]


def _dequantize(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x.with_dtype(_dtype(node, "out_dtype", DType.f32))]


def _upsample(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank != 4:
        raise IRError(f"input must be 4-D, got {x}")
    size, scales = _attr(node, "output_size"), _attr(node, "scale_factors")
    if size is not None:
        static = _sizes(size, "output_size")
        if len(size) != 2 or (static is not None and min(static) < 1):
            raise IRError(f"output_size must be two sizes of at least 1, got {size}")
        return None if static is None else [TensorType(x.dtype, x.shape[:2] + static)]
    if scales is None:
        raise IRError("needs output_size or scale_factors")
    if (
        not isinstance(scales, list)
        or len(scales) != 2
        or not all(_is_number(s) and math.isfinite(s) and s > 0 for s in scales)
    ):
        raise IRError(f"scale_factors must be two positive numbers, got {scales!r}")
    if not all(isinstance(d, int) for d in x.shape[2:]):
        return None
    sizes = [d * s for d, s in zip(x.shape[2:], scales)]
    if not all(math.isfinite(s) for s in sizes):
        raise IRError(f"scale_factors {scales} overflow the input's {show_shape(x.shape)}")
    return [TensorType(x.dtype, x.shape[:2] + tuple(int(s) for s in sizes))]


def _transpose(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank > 2:
        raise IRError(f"transposes a tensor of at most 2 dims, got {x}")
    return [TensorType(x.dtype, tuple(reversed(x.shape)))]


def _embedding(node):
    weight, indices = _tensor(node.operands[0]), _tensor(node.operands[1])
    if weight is None or indices is None:
        return None
    if weight.rank != 2:
        raise IRError(f"weight must be 2-D, got {weight}")
    return [TensorType(weight.dtype, indices.shape + weight.shape[1:])]


# creation ops: the type their attributes give, so that a declared type that disagrees fails
# verification (and fold-constants never evaluates one whose size is not the declared one)


def _full(node):
    shape = _sizes(_attr(node, "size"))
    dtype = _scalar_dtype(_attr(node, "fill_value"), "fill_value")
    dtype = _dtype(node, "dtype", dtype)
    return None if shape is None or dtype is None else [TensorType(dtype, shape)]


def _zeros_or_ones(node):
    shape = _sizes(_attr(node, "size"))
    return None if shape is None else [TensorType(_dtype(node, "dtype", DType.f32), shape)]


def _like(node):
    """full_like, zeros_like, ones_like: the input's shape, and its dtype unless one is named."""
    x = _tensor(node.operands[0])
    if "fill_value" in node.attributes:
        _scalar_dtype(node.attributes["fill_value"], "fill_value")  # a number, or a value known at run time
    return None if x is None else [TensorType(_dtype(node, "dtype", x.dtype), x.shape)]


def _scalar_tensor(node):
    _scalar_dtype(_attr(node, "s"), "s")
    return [TensorType(_dtype(node, "dtype", DType.f32), ())]


def _arange(node):
    """arange(start=0, end, step=1): the length PyTorch computes (in integers when the dtype is i64
    or the bounds are integers, else ceil((end - start) / step)); as in PyTorch, a step of 0 or one
    that does not go from start towards end is an error."""
    bounds = start, end, step = _attr(node, "start", 0), _attr(node, "end"), _attr(node, "step", 1)
    if any(isinstance(v, Value) for v in bounds):
        return None
    if not all(_is_number(v) and math.isfinite(v) for v in bounds):
        raise IRError(f"start, end and step must be finite numbers, got {start!r}, {end!r}, {step!r}")
    if step == 0 or (end - start) * step < 0:
        raise IRError(f"a step of {step} does not go from {start} to {end}")
    integers = all(_is_int(v) for v in bounds)
    dtype = _dtype(node, "dtype", DType.i64 if integers else DType.f32)
    if dtype is DType.i64 or integers:
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise IRError(f"step {bounds[2]} is 0 as an integer")
        length = (end - start + step - (1 if step > 0 else -1)) // step
    else:
        span = (end - start) / step
        if not math.isfinite(span):
            raise IRError(f"the range from {start} to {end} by {step} overflows")
        length = math.ceil(span)
    return [TensorType(dtype, (length,))]


# the ops whose operand names and attributes come from torch's schemas (xir.op_schemas)


def _reduced_shape(shape, dims, keep: bool) -> tuple:
    """``shape`` reduced over ``dims``: each kept as 1 (keepdim) or dropped."""
    return (
        tuple(1 if i in dims else d for i, d in enumerate(shape))
        if keep
        else tuple(d for i, d in enumerate(shape) if i not in dims)
    )


def _same_dtype_broadcast(tensors, dtype_ok) -> list[Type] | None:
    """The one dtype of ``tensors`` (None for several, or one ``dtype_ok`` refuses: PyTorch's
    promotion is not modelled), of their shapes broadcast; shapes that do not broadcast are an error."""
    if any(t is None for t in tensors) or len({t.dtype for t in tensors}) != 1 or not dtype_ok(tensors[0].dtype):
        return None
    shape = _broadcast_shapes([t.shape for t in tensors])
    if shape is None:
        raise IRError(f"operand shapes {', '.join(show_shape(t.shape) for t in tensors)} do not broadcast")
    return [TensorType(tensors[0].dtype, shape)]


def _bitwise(node):
    """bitwise_and, bitwise_or of integer or bool tensors of one dtype, broadcast."""
    return _same_dtype_broadcast(
        [_tensor(v) for v in node.operands], lambda dtype: dtype.is_integer or dtype is DType.bool
    )


def _where(node):
    """where(condition, input, other): input's and other's dtype (when they have one), of the three
    shapes broadcast."""
    condition, x, other = (_tensor(v) for v in node.operands)
    if condition is None or x is None or other is None or x.dtype != other.dtype:
        return None
    shape = _broadcast_shapes([condition.shape, x.shape, other.shape])
    if shape is None:
        raise IRError(
            f"operand shapes {show_shape(condition.shape)}, {show_shape(x.shape)}, "
            f"{show_shape(other.shape)} do not broadcast"
        )
    return [TensorType(x.dtype, shape)]


def _any(node):
    """any, any.dim: bool (u8 for a u8 input, as in PyTorch), reduced over all dims or over one."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dtype = DType.u8 if x.dtype is DType.u8 else DType.bool
    if "dim" not in node.definition.attributes:
        return [TensorType(dtype, ())]
    dims = {_dim(_attr(node, "dim"), max(x.rank, 1))}
    return [TensorType(dtype, _reduced_shape(x.shape, dims, _flag(node, "keepdim")))]


def _arg_reduce(node):
    """argmax, argmin: i64 indices over one dim, or over the flattened input (dim none: a 0-D
    result, or all ones with keepdim)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim, keep = _attr(node, "dim"), _flag(node, "keepdim")
    if dim is None:
        return [TensorType(DType.i64, (1,) * x.rank if keep else ())]
    return [TensorType(DType.i64, _reduced_shape(x.shape, {_dim(dim, max(x.rank, 1))}, keep))]


def _var_mean(node):
    """var_mean: (variance, mean) of a float input, over dim (all dims when none)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dims = _attr(node, "dim")
    dims = set(range(x.rank) if dims in (None, []) else _dims(dims, max(x.rank, 1)))
    if not x.dtype.is_float:
        return None
    out = TensorType(x.dtype, _reduced_shape(x.shape, dims, _flag(node, "keepdim")))
    return [out, out]


def _cumsum(node):
    """cumsum: the input's shape; the dtype named, else i64 for an integer or bool input."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    _dim(_attr(node, "dim"), max(x.rank, 1))
    default = x.dtype if x.dtype.is_float else DType.i64 if x.dtype.is_integer or x.dtype is DType.bool else None
    dtype = _dtype(node, "dtype", default)
    return None if dtype is None else [x.with_dtype(dtype)]


def _sort(node):
    """sort, topk: (values, i64 indices); topk's k replaces the size of dim."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim = _dim(_attr(node, "dim", -1), max(x.rank, 1))
    shape = x.shape
    if "k" in node.definition.attributes:
        k = _attr(node, "k")
        if isinstance(k, Value):
            return None
        size = x.shape[dim] if x.rank else 1
        if not _is_int(k) or k < 0 or (isinstance(size, int) and k > size):
            raise IRError(f"k must be an integer in [0, {size}], got {k!r}")
        shape = x.shape[:dim] + (k,) + x.shape[dim + 1 :] if x.rank else ()
    return [TensorType(x.dtype, shape), TensorType(DType.i64, shape)]


def _bucketize(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x.with_dtype(DType.i32 if _flag(node, "out_int32") else DType.i64)]


def _gather(node):
    """gather: the index's shape, the input's dtype."""
    x, index = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or index is None:
        return None
    _dim(_attr(node, "dim"), max(x.rank, 1))
    return [TensorType(x.dtype, index.shape)]


def _index_select(node):
    """index_select: dim takes the size of the (0-D or 1-D) index."""
    x, index = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or index is None:
        return None
    if index.rank > 1:
        raise IRError(f"index must be 0-D or 1-D, got {index}")
    dim = _dim(_attr(node, "dim"), max(x.rank, 1))
    if x.rank == 0:
        return [x]
    return [TensorType(x.dtype, x.shape[:dim] + (index.shape[0] if index.rank else 1,) + x.shape[dim + 1 :])]


def _index(node):
    """index.Tensor (advanced indexing) by integer index tensors: the indexed dims become the index
    shapes broadcast, in place when the indexed dims are adjacent, else first. A bool (mask)
    index gives a size known only at run time: not inferred."""
    x = _tensor(node.operands[0])
    indices = _attr(node, "indices")
    if not isinstance(indices, list) or not all(i is None or isinstance(i, Value) for i in indices):
        raise IRError(f"indices must be a list of tensors or none, got {indices!r}")
    if x is None:
        return None
    if len(indices) > x.rank:
        raise IRError(f"{len(indices)} indices for a tensor of rank {x.rank}")
    types = {i: _tensor(v) for i, v in enumerate(indices) if v is not None}
    if not types or any(t is None or not t.dtype.is_integer or t.dtype is DType.u8 for t in types.values()):
        return None  # (no index, or a mask)
    shape = _broadcast_shapes([t.shape for t in types.values()])
    if shape is None:
        raise IRError(f"index shapes {', '.join(show_shape(t.shape) for t in types.values())} do not broadcast")
    first, last = min(types), max(types)
    rest = [d for i, d in enumerate(x.shape) if i not in types]
    if last - first + 1 == len(types):  # adjacent: in place of the indexed dims
        return [TensorType(x.dtype, x.shape[:first] + shape + x.shape[last + 1 :])]
    return [TensorType(x.dtype, shape + tuple(rest))]


def _select(node):
    """select_copy.int: the input without dim (index, as in PyTorch, may count from the end)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank == 0:
        raise IRError("cannot select from a 0-D tensor")
    dim = _dim(_attr(node, "dim"), x.rank)
    index, size = _attr(node, "index"), x.shape[dim]
    if not (_is_int(index) or isinstance(index, Value)):
        raise IRError(f"index must be an integer, got {index!r}")
    if _is_int(index) and isinstance(size, int) and not -size <= index < size:
        raise IRError(f"index {index} is out of range for dim {dim} of size {size}")
    return [TensorType(x.dtype, x.shape[:dim] + x.shape[dim + 1 :])]


def _split(node):
    """split_copy.Tensor (pieces of split_size, the last smaller) and split_with_sizes_copy: one
    result per piece; not inferred when the split dim or a size is symbolic."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank == 0:
        raise IRError("cannot split a 0-D tensor")
    dim = _dim(_attr(node, "dim", 0), x.rank)
    total = x.shape[dim]
    if "split_sizes" in node.definition.attributes:
        sizes = _sizes(_attr(node, "split_sizes"), "split_sizes")
        if sizes is None or not isinstance(total, int):
            return None
        if sum(sizes) != total:
            raise IRError(f"split_sizes {list(sizes)} do not add up to dim {dim}'s size {total}")
    else:
        size = _attr(node, "split_size")
        if isinstance(size, Value) or not isinstance(total, int):
            return None
        if not _is_int(size) or size < 0 or (size == 0 and total):
            raise IRError(f"split_size must be an integer of at least 1, got {size!r}")
        sizes = [min(size, total - start) for start in range(0, total, size)] if total else [0]
    return [TensorType(x.dtype, x.shape[:dim] + (s,) + x.shape[dim + 1 :]) for s in sizes]


def _sym_size(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    _dim(_attr(node, "dim"), max(x.rank, 1))
    return [ScalarType("int")]


def _native_dropout(node):
    """native_dropout: (output, bool mask), both the input's shape."""
    x = _tensor(node.operands[0])
    return None if x is None else [x, x.with_dtype(DType.bool)]


def _batch_norm_no_stats(node):
    """_native_batch_norm_legit.no_stats: (output, mean, inverse std), the statistics one per channel."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank < 2:
        raise IRError(f"input must have a channel dim, got {x}")
    stats = TensorType(x.dtype, (x.shape[1],))
    return [x, stats, stats]


def _group_norm(node):
    """native_group_norm: (output, mean, inverse std), the statistics of shape (N, group)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    if x.rank < 2:
        raise IRError(f"input must have a batch and a channel dim, got {x}")
    group = _attr(node, "group")
    if isinstance(group, Value):
        return None
    if not _is_int(group) or group < 1 or (isinstance(x.shape[1], int) and x.shape[1] % group):
        raise IRError(f"group must be an integer of at least 1 that divides the {x.shape[1]} channels, got {group!r}")
    stats = TensorType(x.dtype, (x.shape[0], group))
    return [x, stats, stats]


def _output_size_2d(node):
    """adaptive_avg_pool2d and upsample_nearest2d (default overload): the last two dims become
    output_size (for pooling, a 3-D or 4-D input; for upsampling, a 4-D one)."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    ranks = (4,) if node.op == "aten.upsample_nearest2d" else (3, 4)
    if x.rank not in ranks:
        raise IRError(f"input must be {' or '.join(f'{r}-D' for r in ranks)}, got {x}")
    size = _attr(node, "output_size")
    static = _sizes(size, "output_size")
    if len(size) != 2:
        raise IRError(f"output_size must be two sizes, got {size}")
    return None if static is None else [TensorType(x.dtype, x.shape[:-2] + static)]


def _pixel_shuffle(node):
    """pixel_shuffle (upscale_factor r: (..., C r^2, H, W) -> (..., C, H r, W r)) and
    pixel_unshuffle (downscale_factor r: the inverse); not inferred when one of those dims is symbolic."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    shuffle = "upscale_factor" in node.definition.attributes
    name = "upscale_factor" if shuffle else "downscale_factor"
    r = _attr(node, name)
    if isinstance(r, Value):
        return None
    if not _is_int(r) or r < 1:
        raise IRError(f"{name} must be an integer of at least 1, got {r!r}")
    if x.rank < 3:
        raise IRError(f"input must have at least 3 dims, got {x}")
    c, h, w = x.shape[-3:]
    if not all(isinstance(d, int) for d in (c, h, w)):
        return None
    if shuffle:
        if c % (r * r):
            raise IRError(f"{c} channels are not divisible by {name} {r} squared")
        return [TensorType(x.dtype, x.shape[:-3] + (c // (r * r), h * r, w * r))]
    if h % r or w % r:
        raise IRError(f"height {h} and width {w} are not both divisible by {name} {r}")
    return [TensorType(x.dtype, x.shape[:-3] + (c * r * r, h // r, w // r))]


def _repeat(node):
    """repeat: the input (padded with leading 1s to len(repeats) dims) times repeats, dim by dim."""
    x = _tensor(node.operands[0])
    if x is None:
        return None
    repeats = _sizes(_attr(node, "repeats"), "repeats")
    if repeats is None:
        return None
    if len(repeats) < x.rank:
        raise IRError(f"repeats {list(repeats)} has fewer dims than the input's {x.rank}")
    shape = (1,) * (len(repeats) - x.rank) + x.shape
    if any(not isinstance(d, int) and r != 1 for d, r in zip(shape, repeats)):
        return None  # (a symbolic dim repeated)
    return [TensorType(x.dtype, tuple(d if r == 1 else d * r for d, r in zip(shape, repeats)))]


def _hardtanh_backward(node):
    """hardtanh_backward(grad_output, input): float operands of one dtype, broadcast."""
    return _same_dtype_broadcast([_tensor(v) for v in node.operands], lambda dtype: dtype.is_float)


# ------------------------------------------------------------------------ operand checks


def _same_dtype(node, count=None) -> str | None:
    tensors = [_tensor(v) for v in node.operands[:count]]
    if any(t is None for t in tensors):
        return "an operand is not a tensor"
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        return f"operands have different dtypes: {', '.join(sorted(d.value for d in dtypes))}"
    return None


def linear_shapes(node) -> str | None:
    """A linear's operand shapes: a 2-D weight, the input's last dim its in-features, a 1-D bias
    of its out-features (public: a backend's linear-like op checks its shapes with it)."""
    x, w = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or w is None:
        return "an operand is not a tensor"
    if w.rank != 2:
        return f"weight must be 2-D, got {w}"
    if x.rank < 1 or not dims_agree(x.shape[-1], w.shape[1]):
        return f"input's last dim {x.shape[-1] if x.rank else '?'} does not match the weight's in-features {w.shape[1]}"
    if len(node.operands) > 2:
        b = _tensor(node.operands[2])
        if b is None or b.rank != 1 or not dims_agree(b.shape[0], w.shape[0]):
            return f"bias must be 1-D with {w.shape[0]} elements"
    return None


def _check_linear(node) -> str | None:
    return linear_shapes(node) or _same_dtype(node)


def _check_matrices(first: int):
    def check(node) -> str | None:
        a, b = _tensor(node.operands[first]), _tensor(node.operands[first + 1])
        if a is None or b is None:
            return "an operand is not a tensor"
        if a.rank != 2 or b.rank != 2:
            return f"matrix operands must be 2-D, got {a} and {b}"
        if not dims_agree(a.shape[1], b.shape[0]):
            return f"inner dims differ: {a.shape[1]} and {b.shape[0]}"
        return _same_dtype(node)

    return check


def _check_bmm(node) -> str | None:
    a, b = _tensor(node.operands[0]), _tensor(node.operands[1])
    if a is None or b is None:
        return "an operand is not a tensor"
    if a.rank != 3 or b.rank != 3:
        return f"operands must be 3-D, got {a} and {b}"
    if not dims_agree(a.shape[0], b.shape[0]) or not dims_agree(a.shape[2], b.shape[1]):
        return f"cannot multiply {show_shape(a.shape)} by {show_shape(b.shape)}"
    return _same_dtype(node)


def _check_matmul(node) -> str | None:
    a, b = _tensor(node.operands[0]), _tensor(node.operands[1])
    if a is None or b is None:
        return "an operand is not a tensor"
    if a.rank < 1 or b.rank < 1:
        return "operands must have at least one dim"
    inner_b = b.shape[-2] if b.rank >= 2 else b.shape[0]
    if not dims_agree(a.shape[-1], inner_b):
        return f"inner dims differ: {a.shape[-1]} and {inner_b}"
    return _same_dtype(node)


def _check_convolution(node) -> str | None:
    x, w = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or w is None:
        return "an operand is not a tensor"
    if x.rank != w.rank:
        return f"input rank {x.rank} differs from weight rank {w.rank}"
    if x.rank < 3:
        return f"input must have a batch dim, a channel dim and spatial dims, got {x}"
    groups = _groups(node)
    if _flag(node, "transposed"):  # weight (in, out / groups, ...)
        if not dims_agree(x.shape[1], w.shape[0]):
            return f"input has {x.shape[1]} channels, the transposed weight expects {w.shape[0]}"
        out_channels = w.shape[1] * groups if isinstance(w.shape[1], int) else w.shape[1]
    else:
        if isinstance(w.shape[1], int) and isinstance(x.shape[1], int) and x.shape[1] != w.shape[1] * groups:
            return f"input has {x.shape[1]} channels, weight expects {w.shape[1]} x {groups} groups"
        out_channels = w.shape[0]
    out = _tensor(node.results[0]) if node.results else None
    if out is None or out.rank != x.rank:
        return f"result must be a tensor of rank {x.rank}"
    if not dims_agree(out.shape[1], out_channels):
        return f"result has {out.shape[1]} channels, weight gives {out_channels}"
    if len(node.operands) > 2:
        b = _tensor(node.operands[2])
        if b is None or b.rank != 1 or not dims_agree(b.shape[0], out_channels):
            return f"bias must be 1-D with {out_channels} elements"
    return None


def _check_batch_norm(node) -> str | None:
    x = _tensor(node.operands[0])
    if x is None or x.rank < 2:
        return f"input must have a channel dim, got {node.operands[0].type}"
    for operand in node.operands[1:]:
        t = _tensor(operand)
        if t is None or t.rank != 1 or not dims_agree(t.shape[0], x.shape[1]):
            return f"per-channel operands must be 1-D with {x.shape[1]} elements (the input's dim 1)"
    return None


def _check_permute(node) -> str | None:
    x = _tensor(node.operands[0])
    if x is None:
        return "its operand is not a tensor"
    _permutation(node, x.rank)
    return None


def _check_dim(node) -> str | None:
    """The ``dim`` attribute names a dim of the input (a 0-D input has one, as in PyTorch)."""
    x = _tensor(node.operands[0])
    if x is None:
        return "its operand is not a tensor"
    _dim(_attr(node, "dim"), max(x.rank, 1))
    return None


def _check_view(node) -> str | None:
    x = _tensor(node.operands[0])
    out = _tensor(node.results[0]) if node.results else None
    if x is None or out is None:
        return "operand and result must be tensors"
    if out.dtype != x.dtype:
        return f"result dtype is {out.dtype}, expected {x.dtype}"
    if x.is_static and out.is_static and x.numel() != out.numel():
        return f"view changes the element count: {show_shape(x.shape)} has {x.numel()}, {show_shape(out.shape)} has {out.numel()}"
    return None


def _check_quantize(node) -> str | None:
    x = _tensor(node.operands[0])
    if x is None or not x.dtype.is_float:
        return f"quantizes a {node.operands[0].type} value; expected a float tensor"
    return None


def _check_dequantize(node) -> str | None:
    x = _tensor(node.operands[0])
    dtype = _attr(node, "dtype")
    if x is not None and isinstance(dtype, DType) and x.dtype != dtype:
        return f"input dtype {x.dtype} differs from its dtype attribute {dtype}"
    return None


# ----------------------------------------------------------------------------- the table

ELEMENTWISE_PURE = PURE | ELEMENTWISE

for _name in (
    "abs",
    "ceil",
    "floor",
    "neg",
    "sqrt",
    "rsqrt",
    "exp",
    "log",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "relu",
    "hardswish",
    "hardsigmoid",
    "erf",
    "reciprocal",
    "round",
    "sign",
    "logical_not",
    "bitwise_not",
    "silu",
    "square",
    "trunc",
    "log1p",
    "expm1",
):
    define_op(f"aten.{_name}", operands=("input",), traits=ELEMENTWISE_PURE, infer=same_as_input)
define_op(
    "aten.elu",
    operands=("input",),
    attributes={"alpha": 1, "scale": 1, "input_scale": 1},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
)
define_op(
    "aten.leaky_relu",
    operands=("input",),
    attributes={"negative_slope": 0.01},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
)
define_op(
    "aten.hardtanh",
    operands=("input",),
    attributes={"min_val": -1.0, "max_val": 1.0},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
)
define_op(
    "aten.clamp",
    operands=("input",),
    attributes={"min": None, "max": None},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
)


def _one_of(name: str, choices: tuple):
    """A check that the enum attribute ``name`` is one of ``choices`` (a string attribute is an
    enum when torch's schema takes a closed set: another string is no value of it)."""

    def check(node) -> str | None:
        value = node.attribute(name)
        if value not in choices:
            return f"{name}={value!r} is none of {', '.join(repr(c) for c in choices)}"
        return None

    return check


define_op(
    "aten.gelu",
    operands=("input",),
    attributes={"approximate": "none"},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
    check=_one_of("approximate", ("none", "tanh")),
)
define_op(
    "aten.pow",
    overloads=("Tensor_Scalar",),
    operands=("input",),
    attributes={"exponent": REQUIRED},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
    identity={"exponent": 1},
)
# identity and absorbing elements by argument (x + 0, x - 0, x * 1, 1 * x, x / 1, x ** 1; x * 0):
# canonicalization data (xir.ops.OpDef.identity)
for _name in ("add", "sub"):
    define_op(
        f"aten.{_name}",
        overloads=("Tensor",),
        operands=("input", "other?"),
        attributes={"alpha": 1},
        traits=ELEMENTWISE_PURE | (COMMUTATIVE if _name == "add" else frozenset()),
        infer=broadcast,
        identity={"other": 0},
    )  # (0 + x is alpha * x)
    define_op(
        f"aten.{_name}",
        overloads=("Scalar",),
        operands=("input",),
        attributes={"other": REQUIRED, "alpha": 1},
        traits=ELEMENTWISE_PURE,
        infer=same_as_input,
        identity={"other": 0},
    )
for _name in ("mul", "div"):
    _commutes = _name == "mul"
    define_op(
        f"aten.{_name}",
        overloads=("Tensor",),
        operands=("input", "other?"),
        traits=ELEMENTWISE_PURE | (COMMUTATIVE if _commutes else frozenset()),
        infer=broadcast,
        identity={"other": 1, **({"input": 1} if _commutes else {})},
        absorbing={"other": 0, "input": 0} if _commutes else None,
    )
    define_op(
        f"aten.{_name}",
        overloads=("Scalar",),
        operands=("input",),
        attributes={"other": REQUIRED},
        traits=ELEMENTWISE_PURE,
        infer=same_as_input,
        identity={"other": 1},
        absorbing={"other": 0} if _commutes else None,
    )
for _name in ("fmod", "remainder"):  # (torch.roll's index: fmod(arange + shift, size), which fold-constants folds)
    define_op(
        f"aten.{_name}", overloads=("Tensor",), operands=("input", "other"), traits=ELEMENTWISE_PURE, infer=broadcast
    )
    define_op(
        f"aten.{_name}",
        overloads=("Scalar",),
        operands=("input",),
        attributes={"other": REQUIRED},
        traits=ELEMENTWISE_PURE,
        infer=same_as_input,
    )
define_op(
    "aten.rsub",
    overloads=("Scalar",),
    operands=("input",),
    attributes={"other": REQUIRED, "alpha": 1},
    traits=ELEMENTWISE_PURE,
    infer=same_as_input,
)
for _name in ("minimum", "maximum"):
    define_op(f"aten.{_name}", operands=("input", "other"), traits=ELEMENTWISE_PURE | COMMUTATIVE, infer=broadcast)
define_op(
    "aten.where", overloads=("self",), operands=("condition", "input", "other"), traits=ELEMENTWISE_PURE, infer=_where
)

# matrix multiplies and convolution: the view a linear layer gives (input, weight, bias)
define_op(
    "aten.linear",
    operands=("input", "weight", "bias?"),
    traits=PURE | LINEAR,
    weights=("weight", "bias"),
    infer=_linear,
    check=_check_linear,
)
define_op(
    "aten.mm",
    operands=("input", "weight"),
    traits=PURE | LINEAR,
    weights=("weight",),
    infer=_mm,
    check=_check_matrices(0),
)
define_op(
    "aten.addmm",
    operands=("bias", "input", "weight"),
    attributes={"beta": 1, "alpha": 1},
    traits=PURE | LINEAR,
    weights=("weight", "bias"),
    infer=_addmm,
    check=_check_matrices(1),
)
define_op("aten.bmm", operands=("input", "mat2"), traits=PURE | MATMUL, infer=_bmm(), check=_check_bmm)
define_op("aten.matmul", operands=("input", "other"), traits=PURE | MATMUL, infer=_matmul, check=_check_matmul)
define_op(
    "aten.convolution",
    operands=("input", "weight", "bias?"),
    attributes={
        "stride": [1],
        "padding": [0],
        "dilation": [1],
        "transposed": False,
        "output_padding": [0],
        "groups": 1,
    },
    traits=PURE,
    weights=("weight", "bias"),
    infer=_convolution,
    check=_check_convolution,
)
define_op("aten.prelu", operands=("input", "weight"), traits=PURE, weights=("weight",), infer=same_as_input)

# normalization, pooling, reductions
define_op(
    "aten._native_batch_norm_legit_no_training",
    operands=("input", "weight?", "bias?", "running_mean", "running_var"),
    attributes={"momentum": 0.1, "eps": 1e-5},
    traits=PURE,
    weights=("weight", "bias", "running_mean", "running_var"),
    infer=_batch_norm,
    check=_check_batch_norm,
)
define_op(
    "aten.native_layer_norm",
    operands=("input", "weight?", "bias?"),
    attributes={"normalized_shape": REQUIRED, "eps": 1e-5},
    traits=PURE,
    weights=("weight", "bias"),
    infer=_layer_norm,
)
define_op(
    "aten.max_pool2d",
    operands=("input",),
    attributes={"kernel_size": REQUIRED, "stride": [], "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False},
    traits=PURE,
    infer=_pool(False, True),
)
define_op(
    "aten.max_pool2d_with_indices",
    operands=("input",),
    attributes={"kernel_size": REQUIRED, "stride": [], "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False},
    traits=PURE,
    infer=_pool(True, True),
)
define_op(
    "aten.avg_pool2d",
    operands=("input",),
    attributes={
        "kernel_size": REQUIRED,
        "stride": [],
        "padding": [0, 0],
        "ceil_mode": False,
        "count_include_pad": True,
        "divisor_override": None,
    },
    traits=PURE,
    infer=_pool(False, False),
)
define_op(
    "aten.mean",
    overloads=("dim",),
    operands=("input",),
    attributes={"dim": None, "keepdim": False, "dtype": None},
    traits=PURE,
    infer=_reduce,
)
define_op(
    "aten.sum",
    overloads=("dim_IntList",),
    operands=("input",),
    attributes={"dim": None, "keepdim": False, "dtype": None},
    traits=PURE,
    infer=_reduce,
)
define_op("aten.amax", operands=("input",), attributes={"dim": [], "keepdim": False}, traits=PURE, infer=_reduce)
define_op("aten.amin", operands=("input",), attributes={"dim": [], "keepdim": False}, traits=PURE, infer=_reduce)
define_op(
    "aten.max",
    overloads=("dim",),
    operands=("input",),
    attributes={"dim": REQUIRED, "keepdim": False},
    traits=PURE,
    infer=_max_dim,
    doc="the maximum along one dim and its index (values, indices)",
)
define_op(
    "aten._softmax",
    operands=("input",),
    attributes={"dim": REQUIRED, "half_to_float": False},
    traits=PURE | SOFTMAX,
    infer=same_as_input,
    check=_check_dim,
)
define_op(
    "aten._log_softmax",
    operands=("input",),
    attributes={"dim": REQUIRED, "half_to_float": False},
    traits=PURE | SOFTMAX,
    infer=same_as_input,
    check=_check_dim,
)
define_op(
    "aten.upsample_bilinear2d",
    overloads=("vec",),
    operands=("input",),
    attributes={"output_size": None, "align_corners": False, "scale_factors": None},
    traits=PURE,
    infer=_upsample,
)
define_op(
    "aten.upsample_nearest2d",
    overloads=("vec",),
    operands=("input",),
    attributes={"output_size": None, "scale_factors": None},
    traits=PURE,
    infer=_upsample,
)

# data movement
define_op("aten.cat", operands=("tensors*",), attributes={"dim": 0}, traits=PURE, infer=_cat)
define_op(
    "aten.slice_copy",
    overloads=("Tensor",),
    operands=("input",),
    attributes={"dim": 0, "start": None, "end": None, "step": 1},
    traits=PURE,
    infer=_slice,
)
define_op(
    "aten.constant_pad_nd",
    operands=("input",),
    attributes={"pad": REQUIRED, "value": 0},
    traits=PURE,
    infer=_constant_pad,
)
for _name in ("permute_copy", "permute"):
    define_op(
        f"aten.{_name}",
        operands=("input",),
        attributes={"dims": REQUIRED},
        traits=PURE | VIEW,
        infer=_permute,
        check=_check_permute,
    )
for _name in ("view_copy", "view", "reshape", "_unsafe_view"):
    define_op(
        f"aten.{_name}",
        operands=("input",),
        attributes={"shape" if _name == "reshape" else "size": REQUIRED},
        traits=PURE | VIEW | RESHAPE,
        infer=_view,
        check=_check_view,
    )
define_op(
    "aten.expand_copy",
    operands=("input",),
    attributes={"size": REQUIRED, "implicit": False},
    traits=PURE | VIEW,
    infer=_expand_copy,
)
# functional writes (a window mask built by slice assignment exports as these, from constants)
define_op("aten.copy", operands=("input", "src"), attributes={"non_blocking": False}, traits=PURE, infer=same_as_input)
define_op(
    "aten.slice_scatter",
    operands=("input", "src"),
    attributes={"dim": 0, "start": None, "end": None, "step": 1},
    traits=PURE,
    infer=same_as_input,
)
define_op(
    "aten.as_strided_copy",
    operands=("input",),
    attributes={"size": REQUIRED, "stride": REQUIRED, "storage_offset": None},
    traits=PURE,
    infer=_as_strided,
)
define_op(
    "aten.unsqueeze_copy", operands=("input",), attributes={"dim": REQUIRED}, traits=PURE | VIEW, infer=_unsqueeze
)
define_op(
    "aten.squeeze_copy",
    overloads=("dims", "dim", "default"),
    operands=("input",),
    attributes={"dim": None},
    traits=PURE | VIEW,
    infer=_squeeze,
)
define_op("aten.t_copy", operands=("input",), traits=PURE | VIEW, infer=_transpose)
define_op("aten.alias_copy", operands=("input",), traits=PURE | VIEW, infer=same_as_input)
define_op(
    "aten.contiguous", operands=("input",), attributes={"memory_format": None}, traits=PURE | VIEW, infer=same_as_input
)
define_op(
    "aten.clone", operands=("input",), attributes={"memory_format": None}, traits=PURE | VIEW, infer=same_as_input
)
define_op(
    "dim_order_ops._clone_dim_order",
    operands=("input",),
    attributes={"non_blocking": False, "dim_order": None},
    traits=PURE | VIEW,
    infer=same_as_input,
)
# dtype conversions (layout-only when the dtype does not change: remove-no-ops knows)
define_op(
    "dim_order_ops._to_dim_order_copy",
    operands=("input",),
    attributes={
        "dtype": None,
        "layout": None,
        "device": None,
        "pin_memory": None,
        "non_blocking": False,
        "dim_order": None,
    },
    traits=PURE | ELEMENTWISE | CAST,
    infer=_to_dtype,
)
define_op(
    "aten._to_copy",
    operands=("input",),
    attributes={
        "dtype": None,
        "layout": None,
        "device": None,
        "pin_memory": None,
        "non_blocking": False,
        "memory_format": None,
    },
    traits=PURE | ELEMENTWISE | CAST,
    infer=_to_dtype,
)
# ATen's Tensor.to(dtype), before to_edge makes it a _to_copy (what ops_to_not_decompose plans on)
define_op(
    "aten.to",
    overloads=("dtype",),
    operands=("input",),
    attributes={"dtype": REQUIRED, "non_blocking": False, "copy": False, "memory_format": None},
    traits=PURE | ELEMENTWISE,
    infer=_to_dtype,
)
define_op(
    "aten.embedding",
    operands=("weight", "indices"),
    attributes={"padding_idx": -1, "scale_grad_by_freq": False, "sparse": False},
    traits=PURE,
    weights=("weight",),
    infer=_embedding,
)

# creation ops
_FACTORY = {"dtype": None, "layout": None, "device": None, "pin_memory": None}
define_op(
    "aten.full",
    operands=(),
    attributes={"size": REQUIRED, "fill_value": REQUIRED, **_FACTORY},
    traits=PURE,
    infer=_full,
)
for _name in ("zeros", "ones"):
    define_op(
        f"aten.{_name}", operands=(), attributes={"size": REQUIRED, **_FACTORY}, traits=PURE, infer=_zeros_or_ones
    )
define_op(
    "aten.arange",
    overloads=("default", "start", "start_step"),
    operands=(),
    attributes={"start": 0, "end": REQUIRED, "step": 1, **_FACTORY},
    traits=PURE,
    infer=_arange,
)
define_op("aten.scalar_tensor", operands=(), attributes={"s": REQUIRED, **_FACTORY}, traits=PURE, infer=_scalar_tensor)
define_op(
    "aten.full_like",
    operands=("input",),
    attributes={"fill_value": REQUIRED, **_FACTORY, "memory_format": None},
    traits=PURE,
    infer=_like,
)
for _name in ("zeros_like", "ones_like"):
    define_op(
        f"aten.{_name}", operands=("input",), attributes={**_FACTORY, "memory_format": None}, traits=PURE, infer=_like
    )


def _predicate(node):
    """A comparison or a logical op: bool, of the operands' shapes broadcast."""
    tensors = [_tensor(v) for v in node.operands]
    if not tensors or any(t is None for t in tensors):
        return None
    shape = _broadcast_shapes([t.shape for t in tensors])
    if shape is None:
        raise IRError(f"operand shapes {', '.join(show_shape(t.shape) for t in tensors)} do not broadcast")
    return [TensorType(DType.bool, shape)]


# ops whose operand names and attributes come from torch's schemas (xir.op_schemas, generated and
# checked against torch), each with its inference (tests/test_op_inference.py checks every one
# against what torch computes)
_PREDICATES = tuple(
    f"aten.{op}.{overload}" for op in ("eq", "ne", "lt", "gt", "le", "ge") for overload in ("Scalar", "Tensor")
) + ("aten.logical_and", "aten.logical_or")
_CATCH_ALL_INFER = {
    **{name: _predicate for name in _PREDICATES},
    **{name: same_as_input for name in ("aten.flip", "aten.tril", "aten.triu", "aten.alias")},
    "aten.sym_size.int": _sym_size,
    "aten.index.Tensor": _index,
    "aten.bitwise_or.Tensor": _bitwise,
    "aten.bitwise_and.Tensor": _bitwise,
    "aten.any.dim": _any,
    "aten.any": _any,
    "aten.select_copy.int": _select,
    "aten.split_with_sizes_copy": _split,
    "aten.split_copy.Tensor": _split,
    "aten.var_mean.correction": _var_mean,
    "aten.native_group_norm": _group_norm,
    "aten._native_batch_norm_legit.no_stats": _batch_norm_no_stats,
    "aten.hardtanh_backward": _hardtanh_backward,
    "aten.repeat": _repeat,
    "aten.index_select": _index_select,
    "aten.gather": _gather,
    "aten.sort": _sort,
    "aten.topk": _sort,
    "aten.argmax": _arg_reduce,
    "aten.argmin": _arg_reduce,
    "aten.min.dim": _max_dim,
    "aten.cumsum": _cumsum,
    "aten.upsample_nearest2d": _output_size_2d,
    "aten._adaptive_avg_pool2d": _output_size_2d,
    "aten.adaptive_avg_pool2d": _output_size_2d,
    "aten.native_dropout": _native_dropout,
    "aten.pixel_shuffle": _pixel_shuffle,
    "aten.pixel_unshuffle": _pixel_shuffle,
    "aten.bucketize.Tensor": _bucketize,
}
_RANDOM = {"aten.native_dropout"}  # (a dropout draws its mask)
for _full in CATCH_ALL:
    _operands, _attributes = SCHEMAS[_full]
    _namespace, _name, *_overload = _full.split(".")
    define_op(
        f"{_namespace}.{_name}",
        overloads=(_overload[0] if _overload else "default",),
        operands=_operands,
        attributes=_attributes,
        traits=(ELEMENTWISE_PURE if _full in _PREDICATES else PURE) | (RANDOM if _full in _RANDOM else frozenset()),
        infer=_CATCH_ALL_INFER[_full],
    )

# quantization
_QPARAMS = {"scale": REQUIRED, "zero_point": REQUIRED, "quant_min": REQUIRED, "quant_max": REQUIRED, "dtype": REQUIRED}
define_op(
    "quantized_decomposed.quantize_per_tensor",
    operands=("input",),
    attributes=_QPARAMS,
    traits=PURE | QUANTIZE,
    infer=_quantize,
    check=_check_quantize,
)
define_op(
    "quantized_decomposed.dequantize_per_tensor",
    operands=("input",),
    attributes={**_QPARAMS, "out_dtype": None},
    traits=PURE | DEQUANTIZE,
    infer=_dequantize,
    check=_check_dequantize,
)
_TENSOR_QPARAMS = {"quant_min": REQUIRED, "quant_max": REQUIRED, "dtype": REQUIRED}
define_op(
    "quantized_decomposed.quantize_per_tensor",
    overloads=("tensor",),
    operands=("input", "scale", "zero_point"),
    attributes=_TENSOR_QPARAMS,
    traits=PURE | QUANTIZE,
    infer=_quantize,
    check=_check_quantize,
)
define_op(
    "quantized_decomposed.dequantize_per_tensor",
    overloads=("tensor",),
    operands=("input", "scale", "zero_point"),
    attributes={**_TENSOR_QPARAMS, "out_dtype": None},
    traits=PURE | DEQUANTIZE,
    infer=_dequantize,
    check=_check_dequantize,
)
define_op(
    "quantized_decomposed.quantize_per_channel",
    operands=("input", "scales", "zero_points"),
    attributes={"axis": REQUIRED, **_TENSOR_QPARAMS},
    traits=PURE | QUANTIZE,
    infer=_quantize,
    check=_check_quantize,
)
define_op(
    "quantized_decomposed.dequantize_per_channel",
    operands=("input", "scales", "zero_points?"),
    attributes={"axis": REQUIRED, **_TENSOR_QPARAMS, "out_dtype": None},
    traits=PURE | DEQUANTIZE,
    infer=_dequantize,
    check=_check_dequantize,
)
define_op(
    "quantized_decomposed.choose_qparams",
    overloads=("tensor",),
    operands=("input",),
    attributes={"quant_min": REQUIRED, "quant_max": REQUIRED, "eps": REQUIRED, "dtype": REQUIRED},
    traits=PURE | CHOOSE_QPARAMS,
    infer=lambda node: [TensorType(DType.f64, (1,)), TensorType(DType.i64, (1,))],
)


def _dequantize_affine(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x.with_dtype(_dtype(node, "output_dtype", DType.f32))]


def _choose_qparams_affine(node):
    """torchao's shapes: a dim of block 1 is kept, a dim of one whole block is reduced (kept as 1
    with keepdim), a dim of several blocks keeps one entry per block; None (not checked) for a
    zero point without a given dtype."""
    x, block = _tensor(node.operands[0]), node.attributes.get("block_size")
    zero_dtype = _dtype(node, "zero_point_dtype", None)
    if x is None or zero_dtype is None or not isinstance(block, list) or len(block) != x.rank:
        return None
    shape = []
    for size, b in zip(x.shape, block):
        if b == 1:
            shape.append(size)
        elif b == size:
            shape += [1] if node.attributes.get("keepdim", False) else []
        elif isinstance(size, int) and isinstance(b, int) and b > 0 and size % b == 0:
            shape.append(size // b)
        else:
            return None
    return [TensorType(_dtype(node, "scale_dtype", x.dtype), tuple(shape)), TensorType(zero_dtype, tuple(shape))]


def _quantize_affine(node):
    x = _tensor(node.operands[0])
    return None if x is None else [x.with_dtype(_dtype(node, "output_dtype", DType.i8))]


# torchao's affine quantization (8da4w, 8da8w: the weight's int data, its per-group scales and zero
# points; the activation's per-token ones): hoist-row-select makes the activation's ops on one row,
# xnnpack.fuse-sibling-linears stacks weights' dequantizations
define_op(
    "torchao.choose_qparams_affine",
    operands=("input",),
    attributes={
        "mapping_type": REQUIRED,
        "block_size": REQUIRED,
        "target_dtype": REQUIRED,
        "quant_min": None,
        "quant_max": None,
        "eps": None,
        "scale_dtype": None,
        "zero_point_dtype": None,
        "keepdim": False,
    },
    traits=PURE | CHOOSE_QPARAMS,
    infer=_choose_qparams_affine,
    doc="a scale and zero point per block of block_size elements of input (its min and max)",
)
define_op(
    "torchao.quantize_affine",
    operands=("input", "scale", "zero_point?"),
    attributes={"block_size": REQUIRED, "output_dtype": REQUIRED, "quant_min": None, "quant_max": None},
    traits=PURE | QUANTIZE,
    infer=_quantize_affine,
    doc="input quantized with a scale and zero point per block of block_size elements",
)
define_op(
    "torchao.dequantize_affine",
    operands=("input", "scale", "zero_point?"),
    attributes={
        "block_size": REQUIRED,
        "input_dtype": REQUIRED,
        "quant_min": None,
        "quant_max": None,
        "output_dtype": DType.f32,
    },
    traits=PURE | DEQUANTIZE,
    infer=_dequantize_affine,
    doc="input (int data) dequantized with a scale and zero point per block of block_size elements",
)
