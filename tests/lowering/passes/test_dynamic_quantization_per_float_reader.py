"""``xnnpack.dequantize-per-float-reader``'s dynamic rule: a dynamic quantization read by a
dynamically quantized op and by something else (a float op, a graph output) gives the quantized op
a copy of the chain, so XNNPACK can fold it while the others keep the original (fuzz dynamic 30924;
end to end in tests/lowering/test_fuzz_regressions.py)."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (the backend's passes)
from passes.testing import case, check_declined, check_pipeline

QP = "quant_min=-128, quant_max=127, dtype=i8"
WEIGHT = """param %w: i8[4,8]
      param %ws: f32[4]
      param %wz: i64[4]
      %w2: f32[4,8] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {axis=0, quant_min=-127, quant_max=127, dtype=i8}"""
CHAIN = f"""%s: f64[1], %z: i64[1] = quantized_decomposed.choose_qparams.tensor(%x) {{{QP}, eps=1e-05}}
      %q: i8[2,8] = quantized_decomposed.quantize_per_tensor.tensor(%x, %s, %z) {{{QP}}}
      %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {{{QP}}}"""
COPY = f"""%0: f64[1], %1: i64[1] = quantized_decomposed.choose_qparams.tensor(%x) {{{QP}, eps=1e-05}}
      %2: i8[2,8] = quantized_decomposed.quantize_per_tensor.tensor(%x, %0, %1) {{{QP}}}
      %3: f32[2,8] = quantized_decomposed.dequantize_per_tensor.tensor(%2, %0, %1) {{{QP}}}"""

CASES = [
    case(  # the dequantized tensor is also a graph output
        "returned",
        f"""
    graph @g {{
      input %x: f32[2,8]
      {WEIGHT}
      {CHAIN}
      %y: f32[2,4] = aten.linear(%d, %w2)
      return %y, %d
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,8]
      {WEIGHT}
      {CHAIN}
      {COPY}
      %y: f32[2,4] = aten.linear(%3, %w2)
      return %y, %d
    }}""",
    ),
    case(  # several readers: the linear and a float op
        "read-by-a-float-op",
        f"""
    graph @g {{
      input %x: f32[2,8]
      {WEIGHT}
      {CHAIN}
      %y: f32[2,4] = aten.linear(%d, %w2)
      %r: f32[2,8] = aten.relu(%d)
      return %y, %r
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,8]
      {WEIGHT}
      {CHAIN}
      {COPY}
      %y: f32[2,4] = aten.linear(%3, %w2)
      %r: f32[2,8] = aten.relu(%d)
      return %y, %r
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CASES)
def test_the_quantized_reader_gets_a_copy_of_the_chain(before, expected, changed):
    check_pipeline(before, "xnnpack.dequantize-per-float-reader", expected, changed=changed)


def test_declined_when_only_the_quantized_op_reads_it():
    before = f"""
    graph @g {{
      input %x: f32[2,8]
      {WEIGHT}
      {CHAIN}
      %y: f32[2,4] = aten.linear(%d, %w2)
      return %y
    }}"""
    check_declined(
        before, "xnnpack.dequantize-per-float-reader", "dynamic_quantization_per_float_reader", "read by one op"
    )
