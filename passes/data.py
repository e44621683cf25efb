"""Constant data in passes: the data of a constant is a tensor object whose methods the passes
call (they never import torch). One table says how to cast it to an IR float dtype."""

from __future__ import annotations

from typing import Any

from xir import DType

CAST_METHODS = {DType.f32: "float", DType.bf16: "bfloat16", DType.f16: "half", DType.f64: "double"}


def cast_data(data: Any, dtype: DType) -> Any:
    """``data`` as a contiguous tensor of the float ``dtype``."""
    return getattr(data, CAST_METHODS[dtype])().contiguous()
