"""Element types of tensors, named as they are printed in IR text."""

import enum


class DType(enum.Enum):
    """A tensor element type. The value is the name used in IR text."""

    f64 = "f64"
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i64 = "i64"
    i32 = "i32"
    i16 = "i16"
    i8 = "i8"
    u8 = "u8"
    bool = "bool"
    c64 = "c64"
    # quantized types of the edge dialect (torch.qint8 and friends)
    qi8 = "qi8"
    qu8 = "qu8"
    qi32 = "qi32"
    qu4x2 = "qu4x2"
    # float8 types the edge dialect can carry
    f8e4m3 = "f8e4m3"
    f8e5m2 = "f8e5m2"

    def __str__(self) -> str:
        return self.value

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_integer(self) -> bool:
        return self in _INTEGERS

    @property
    def is_quantized(self) -> bool:
        return self in _QUANTIZED

    @classmethod
    def parse(cls, text: str) -> "DType":
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown dtype {text!r}; expected one of: {', '.join(d.value for d in cls)}") from None


_FLOATS = {DType.f64, DType.f32, DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2}
_INTEGERS = {DType.i64, DType.i32, DType.i16, DType.i8, DType.u8}
_QUANTIZED = {DType.qi8, DType.qu8, DType.qi32, DType.qu4x2}
