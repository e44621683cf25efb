"""Types of IR values: tensors with an explicit rank and dtype, and scalars."""

from __future__ import annotations

import re

import attrs

from .dtypes import DType

# an expression naming a symbol: these characters, at least one a letter or '_' (two checks, each
# linear in the length: one pattern for both backtracks quadratically on a long bad name)
_SYMBOL_CHARS = re.compile(r"[A-Za-z0-9_*+\-/() ]*")
_SYMBOL_LETTER = re.compile(r"[A-Za-z_]")


@attrs.frozen
class Symbol:
    """A dimension whose size is only known at run time (from torch.export's dynamic shapes).

    ``name`` is the symbolic expression as torch.export wrote it, e.g. ``s0``, ``2*s0`` or ``2*s24-1``.
    """

    name: str = attrs.field()

    @name.validator
    def _check(self, _attribute, value):
        if not isinstance(value, str) or not _SYMBOL_CHARS.fullmatch(value) or not _SYMBOL_LETTER.search(value):
            raise ValueError(f"invalid symbolic dimension {value!r}")

    def __str__(self) -> str:
        return self.name.replace(" ", "")


Dim = int | Symbol


@attrs.frozen
class TensorType:
    """A tensor of ``dtype`` with ``shape``; its rank is ``len(shape)``."""

    dtype: DType
    shape: tuple[Dim, ...] = attrs.field(converter=tuple)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def numel(self) -> int | None:
        """Number of elements, or None when a dim is symbolic."""
        if not self.is_static:
            return None
        count = 1
        for d in self.shape:
            count *= d
        return count

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape)

    def with_shape(self, shape) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@attrs.frozen
class ScalarType:
    """A non-tensor value: ``int``, ``float``, ``bool`` (symbolic scalars), ``none``, or ``opaque``.

    ``opaque`` types the results the importer could not type (e.g. a call without metadata).
    """

    kind: str = attrs.field(validator=attrs.validators.in_({"int", "float", "bool", "none", "opaque"}))

    def __str__(self) -> str:
        return self.kind


Type = TensorType | ScalarType
