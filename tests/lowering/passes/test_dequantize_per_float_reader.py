"""IR-text tests of xnnpack.dequantize-per-float-reader: an op that runs in fp32 on a dequantized
tensor shared with other readers gets a dequantize of its own. One case per graph boundary (the
dequantized value also a graph output, a dequantize of a graph input, of a constant, several
readers, a graph output or a reader left outside beside only quantized readers) and the cases the pass declines. End to end (the programs on the runtime against the
converted pt2e model): tests/lowering/test_float_between_conversions.py."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from passes.testing import case, check_pipeline

PIPELINE = "xnnpack.dequantize-per-float-reader"
Q = "scale=0.5, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8"
Q2 = "scale=0.25, zero_point=0, quant_min=-128, quant_max=127, dtype=i8"


CASES = [
    case(
        "shared-with-a-quantized-add-and-a-graph-output",
        f"""
    graph @g {{
      input %x: f32[2,3]
      %q: i8[2,3] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %d: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %a: f32[2,3] = aten.add.Tensor(%d, %d)
      %b: i8[2,3] = quantized_decomposed.quantize_per_tensor(%a) {{{Q2}}}
      %c: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%b) {{{Q2}}}
      %e: f32[2,3] = aten.abs(%d)
      return %c, %e, %d
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,3]
      %0: i8[2,3] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %1: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %2: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %3: f32[2,3] = aten.add.Tensor(%2, %2)
      %4: i8[2,3] = quantized_decomposed.quantize_per_tensor(%3) {{{Q2}}}
      %5: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%4) {{{Q2}}}
      %6: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %7: f32[2,3] = aten.abs(%6)
      return %5, %7, %1
    }}""",
    ),
    # (the graph output keeps the original, the quantized add reads a copy, the float abs its own:
    # fuzz static seeds 2679, 42158)
    case(
        "a-graph-output-and-a-quantized-slice-only",
        f"""
    graph @g {{
      input %x: f32[2,4]
      %q: i8[2,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %d: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %s: f32[2,2] = aten.slice_copy.Tensor(%d) {{dim=1, start=0, end=2}}
      %t: i8[2,2] = quantized_decomposed.quantize_per_tensor(%s) {{{Q}}}
      %u: f32[2,2] = quantized_decomposed.dequantize_per_tensor(%t) {{{Q}}}
      return %d, %u
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,4]
      %0: i8[2,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %1: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %2: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %3: f32[2,2] = aten.slice_copy.Tensor(%2) {{dim=1, start=0, end=2}}
      %4: i8[2,2] = quantized_decomposed.quantize_per_tensor(%3) {{{Q}}}
      %5: f32[2,2] = quantized_decomposed.dequantize_per_tensor(%4) {{{Q}}}
      return %1, %5
    }}""",
    ),
    case(
        "a-reader-left-outside-and-a-quantized-slice",
        f"""
    graph @g {{
      input %x: f32[2,4]
      %q: i8[2,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %d: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %s: f32[2,2] = aten.slice_copy.Tensor(%d) {{dim=1, start=0, end=2}}
      %t: i8[2,2] = quantized_decomposed.quantize_per_tensor(%s) {{{Q}}}
      %u: f32[2,2] = quantized_decomposed.dequantize_per_tensor(%t) {{{Q}}}
      %m: f32[2] = aten.unknown_op(%d)
      return %u, %m
    }}""",
        f"""
    graph @g {{
      input %x: f32[2,4]
      %0: i8[2,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %1: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %2: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
      %3: f32[2,2] = aten.slice_copy.Tensor(%2) {{dim=1, start=0, end=2}}
      %4: i8[2,2] = quantized_decomposed.quantize_per_tensor(%3) {{{Q}}}
      %5: f32[2,2] = quantized_decomposed.dequantize_per_tensor(%4) {{{Q}}}
      %6: f32[2] = aten.unknown_op(%1)
      return %5, %6
    }}""",
    ),
    # (an op XNNPACK runs neither quantized nor in fp32 keeps the original: fuzz static seed 43094)
    case(
        "dequantize-of-a-graph-input-read-by-two-float-ops",
        f"""
    graph @g {{
      input %q: i8[4]
      %d: f32[4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %a: f32[4] = aten.abs(%d)
      %l: f32[4] = aten.log(%d)
      return %a, %l
    }}""",
        f"""
    graph @g {{
      input %q: i8[4]
      %0: f32[4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %1: f32[4] = aten.abs(%0)
      %2: f32[4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %3: f32[4] = aten.log(%2)
      return %1, %3
    }}""",
    ),
    case(
        "dequantize-of-a-constant-read-by-a-float-op-and-returned",
        f"""
    graph @g {{
      param %w: i8[4]
      input %x: f32[4]
      %d: f32[4] = quantized_decomposed.dequantize_per_tensor(%w) {{{Q}}}
      %s: f32[4] = aten.sub.Tensor(%x, %d)
      return %s, %d
    }}""",
        f"""
    graph @g {{
      param %w: i8[4]
      input %x: f32[4]
      %0: f32[4] = quantized_decomposed.dequantize_per_tensor(%w) {{{Q}}}
      %1: f32[4] = quantized_decomposed.dequantize_per_tensor(%w) {{{Q}}}
      %2: f32[4] = aten.sub.Tensor(%x, %1)
      return %2, %0
    }}""",
    ),
    case(
        "declined-read-twice-by-one-op",
        f"""
    graph @g {{
      input %q: i8[4]
      %d: f32[4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %m: f32[4] = aten.mul.Tensor(%d, %d)
      return %m
    }}""",
    ),
    case(
        "declined-shared-by-quantized-ops-only",
        f"""
    graph @g {{
      input %q: i8[4]
      %d: f32[4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %a: f32[4] = aten.add.Tensor(%d, %d)
      %b: i8[4] = quantized_decomposed.quantize_per_tensor(%a) {{{Q2}}}
      %r: f32[4] = aten.relu(%d)
      %s: i8[4] = quantized_decomposed.quantize_per_tensor(%r) {{{Q}}}
      return %b, %s
    }}""",
    ),
]


@pytest.mark.parametrize("before,expected,changed", CASES)
def test_dequantize_per_float_reader(before, expected, changed):
    check_pipeline(before, PIPELINE, expected, changed=changed)
