"""IR-text tests of xnnpack.saturate-portable-quantize: a quantize of a tensor past XNNPACK's rank
limit (so on ExecuTorch's kernel, which overflows on +inf) reads its input through a hardtanh to
the range it quantizes to. One case per graph boundary (the input a graph input, also a graph
output, read by several ops, a constant) and the cases the pass declines. End to end (the
programs on the runtime against the converted pt2e model): tests/lowering/test_fuzz_regressions.py."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from passes.testing import case, check_pipeline

PIPELINE = "xnnpack.saturate-portable-quantize"
Q = "scale=0.5, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8"
S7 = "2,1,1,3,2,1,2"
# (quant_min - zero_point) * scale, (quant_max - zero_point) * scale
BOUNDS = "min_val=0.0, max_val=127.5"


CASES = [
    case(
        "an-rsqrt-then-a-quantize",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %r: f32[{S7}] = aten.rsqrt(%x)
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%r) {{{Q}}}
      %d: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      return %d
    }}""",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %0: f32[{S7}] = aten.rsqrt(%x)
      %1: f32[{S7}] = aten.hardtanh(%0) {{{BOUNDS}}}
      %2: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%1) {{{Q}}}
      %3: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%2) {{{Q}}}
      return %3
    }}""",
    ),
    case(
        "a-graph-input-also-a-graph-output",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
      %d: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      return %d, %x
    }}""",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %0: f32[{S7}] = aten.hardtanh(%x) {{{BOUNDS}}}
      %1: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%0) {{{Q}}}
      %2: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%1) {{{Q}}}
      return %2, %x
    }}""",
    ),
    # (the output, and any other reader, keeps the value unclamped)
    case(
        "several-readers",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %e: f32[{S7}] = aten.exp(%x)
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%e) {{{Q}}}
      %d: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      %n: f32[{S7}] = aten.neg(%e)
      return %d, %n
    }}""",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %0: f32[{S7}] = aten.exp(%x)
      %1: f32[{S7}] = aten.hardtanh(%0) {{{BOUNDS}}}
      %2: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%1) {{{Q}}}
      %3: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%2) {{{Q}}}
      %4: f32[{S7}] = aten.neg(%0)
      return %3, %4
    }}""",
    ),
    case(
        "a-constant",
        f"""
    graph @g {{
      const %w: f32[{S7}]
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%w) {{{Q}}}
      %d: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
      return %d
    }}""",
        f"""
    graph @g {{
      const %w: f32[{S7}]
      %0: f32[{S7}] = aten.hardtanh(%w) {{{BOUNDS}}}
      %1: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%0) {{{Q}}}
      %2: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%1) {{{Q}}}
      return %2
    }}""",
    ),
    # declined: XNNPACK may run a quantize of at most 6-D, and saturates right
    case(
        "six-d",
        f"""
    graph @g {{
      input %x: f32[2,1,3,2,1,2]
      %r: f32[2,1,3,2,1,2] = aten.rsqrt(%x)
      %q: i8[2,1,3,2,1,2] = quantized_decomposed.quantize_per_tensor(%r) {{{Q}}}
      return %q
    }}""",
    ),
    # declined: a requantize (its input a dequantize) and a clamped input are bounded already
    case(
        "a-requantize",
        f"""
    graph @g {{
      input %x: i8[{S7}]
      %d: f32[{S7}] = quantized_decomposed.dequantize_per_tensor(%x) {{{Q}}}
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%d) {{scale=0.25, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
      return %q
    }}""",
    ),
    # (a clamp with one bound is no bound against +inf)
    case(
        "a-clamp-with-only-a-lower-bound",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %h: f32[{S7}] = aten.clamp(%x) {{min=0.0}}
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%h) {{{Q}}}
      return %q
    }}""",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %0: f32[{S7}] = aten.clamp(%x) {{min=0.0}}
      %1: f32[{S7}] = aten.hardtanh(%0) {{{BOUNDS}}}
      %2: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%1) {{{Q}}}
      return %2
    }}""",
    ),
    case(
        "a-clamped-input",
        f"""
    graph @g {{
      input %x: f32[{S7}]
      %h: f32[{S7}] = aten.hardtanh(%x) {{min_val=-1.0, max_val=1.0}}
      %q: i8[{S7}] = quantized_decomposed.quantize_per_tensor(%h) {{{Q}}}
      return %q
    }}""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CASES)
def test_saturate_portable_quantize(before, expected, changed):
    check_pipeline(before, PIPELINE, expected, changed=changed)
