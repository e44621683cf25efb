"""The backend's own ops: what XNNPACK runs that no ATen op says, defined here, in the backend,
with the same :func:`xir.ops.define_op` as the core's ops (the core defines none of them).

* ``xir.convert``: a dtype conversion XNNPACK runs (f32 <-> bf16);
* ``xir.slice``: ``input[start:end]`` along one dim, XNNPACK's slice (the other dims whole);
* ``xir.bmm_f32out``: a bf16 batched matmul with the f32 result XNNPACK computes;
* ``xir.linear_f16w``: a linear on an f16 weight, as XNNPACK's fully connected takes it.

Passes make them (``lowering.passes``); their torch ops and XNNPACK serialization are in
``lowering.fx.xnnpack_ops``; ``lowering.fx.xir_ops_as_aten`` writes back as ATen those no delegate
took. Importing :mod:`lowering` defines them (torch-free).
"""

from __future__ import annotations

from xir import DType, IRError, TensorType
from xir.op_definitions import linear_shapes
from xir.ops import ELEMENTWISE, MATMUL, PURE, REQUIRED, Namespace, define_op, lookup

xir_ops = Namespace("xir")  # handles of the ops below: xir_ops.slice, xir_ops.convert, ...

NAMES = ("xir.convert", "xir.slice", "xir.bmm_f32out", "xir.linear_f16w")


def _tensor(value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _converted(node):
    x, dtype = _tensor(node.operands[0]), node.attributes.get("dtype")
    if dtype is not None and not isinstance(dtype, DType):
        raise IRError(f"dtype must be a dtype such as f32, got {dtype!r}")
    return None if x is None else [x.with_dtype(dtype or x.dtype)]


def _sliced(node):
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim, start, end = (node.attributes.get(name) for name in ("dim", "start", "end"))
    if not all(_is_int(v) for v in (dim, start, end)) or not 0 <= dim < x.rank:
        raise IRError(f"dim, start and end must be integers and dim in [0, {x.rank}), got {dim!r}, {start!r}, {end!r}")
    size = x.shape[dim]
    if not 0 <= start <= end or (isinstance(size, int) and end > size):
        raise IRError(f"[{start}:{end}] is not in range of dim {dim} (size {size})")
    return [TensorType(x.dtype, x.shape[:dim] + (end - start,) + x.shape[dim + 1 :])]


def _bmm_f32(node):
    """aten.bmm's result shape, in f32."""
    result = lookup("aten.bmm").infer(node)
    return None if result is None else [t.with_dtype(DType.f32) for t in result]


def _check_bmm(node) -> str | None:
    """aten.bmm's operand check (bf16 or f32 matrices, one dtype)."""
    return lookup("aten.bmm").check(node)


def _check_linear_f16w(node) -> str | None:
    """An f32 input and bias, an f16 weight, a linear's shapes."""
    x, w = _tensor(node.operands[0]), _tensor(node.operands[1])
    if x is None or w is None:
        return "an operand is not a tensor"
    if x.dtype is not DType.f32 or w.dtype is not DType.f16:
        return f"input must be f32 and weight f16, got {x.dtype} and {w.dtype}"
    if len(node.operands) > 2 and (
        _tensor(node.operands[2]) is None or _tensor(node.operands[2]).dtype is not DType.f32
    ):
        return "bias must be an f32 tensor"
    return linear_shapes(node)


def _linear_f16w(node):
    """aten.linear's result shape (f32: the input's dtype)."""
    return lookup("aten.linear").infer(node)


def define_backend_ops() -> None:
    """Define the four ops (once: importing this module does)."""
    if lookup("xir.convert") is not None:
        return
    define_op(
        "xir.convert",
        operands=("input",),
        attributes={"dtype": REQUIRED},
        traits=PURE | ELEMENTWISE,
        infer=_converted,
        doc="a dtype conversion XNNPACK runs (f32 <-> bf16)",
    )
    define_op(
        "xir.slice",
        operands=("input",),
        attributes={"dim": REQUIRED, "start": REQUIRED, "end": REQUIRED},
        traits=PURE,
        infer=_sliced,
        doc="input[start:end] along dim, in range (XNNPACK's slice; the other dims, symbolic or not, whole)",
    )
    define_op(
        "xir.bmm_f32out",
        operands=("input", "mat2"),
        traits=PURE | MATMUL,
        infer=_bmm_f32,
        check=_check_bmm,
        doc="batched matmul of bf16 (or f32) matrices with an f32 result, as XNNPACK computes it",
    )
    define_op(
        "xir.linear_f16w",
        operands=("input", "weight", "bias?"),
        # (a matmul, and not of the linear family: capability's rules for ATen linears do not apply)
        traits=PURE | MATMUL,
        weights=("weight", "bias"),
        infer=_linear_f16w,
        check=_check_linear_f16w,
        doc="linear of an f32 input on an f16 weight (f32 bias and result), as XNNPACK's fully connected takes it",
    )


define_backend_ops()

__all__ = ["NAMES", "define_backend_ops", "xir_ops"]
