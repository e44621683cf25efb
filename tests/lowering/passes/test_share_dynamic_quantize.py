"""IR-text tests of xnnpack.share-dynamic-quantize: the dynamic quantizations of one activation
(torchao's choose_qparams_affine -> quantize_affine -> dequantize_affine, one per linear in
ExecuTorch's 8da4w flow) become one, read by every linear. One case per graph boundary (the
activation a graph input, also a graph output, a constant; a chain's dequantize a graph output; a
scale with another reader) and the cases the pass declines. End to end (ExecuTorch's LLM flow on
the runtime against eager): tests/lowering/test_llm_flow.py."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from passes.testing import check_pipeline

PIPELINE = "xnnpack.share-dynamic-quantize"
CHOOSE = ('mapping_type="ASYMMETRIC", block_size=[1, 8], target_dtype=i8, quant_min=-128, quant_max=127, '
          'eps=none, scale_dtype=none, zero_point_dtype=i8')
QUANT = "block_size=[1, 8], output_dtype=i8, quant_min=-128, quant_max=127"
DEQUANT = "block_size=[1, 8], input_dtype=i8, quant_min=-128, quant_max=127"


def chain(x: str, n: str) -> str:
    """The dynamic quantization of ``%x`` as the flow writes it, its dequantize ``%d{n}``."""
    return f"""
      %s{n}: f32[2], %z{n}: i8[2] = torchao.choose_qparams_affine(%{x}) {{{CHOOSE}}}
      %q{n}: i8[2,8] = torchao.quantize_affine(%{x}, %s{n}, %z{n}) {{{QUANT}}}
      %d{n}: f32[2,8] = torchao.dequantize_affine(%q{n}, %s{n}, %z{n}) {{{DEQUANT}}}"""


def case(name, before, expected=None):
    return pytest.param(before, expected if expected is not None else before, expected is not None, id=name)


KEPT = f"""
      %0: f32[2], %1: i8[2] = torchao.choose_qparams_affine(%x) {{{CHOOSE}}}
      %2: i8[2,8] = torchao.quantize_affine(%x, %0, %1) {{{QUANT}}}
      %3: f32[2,8] = torchao.dequantize_affine(%2, %0, %1) {{{DEQUANT}}}"""

CASES = [
    case("three-linears-of-a-graph-input", f"""
    graph @g {{
      input %x: f32[2,8]
      const %wq: f32[4,8]
      const %wk: f32[2,8]
      const %wv: f32[2,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %wq){chain("x", 2)}
      %b: f32[2,2] = aten.linear(%d2, %wk){chain("x", 3)}
      %c: f32[2,2] = aten.linear(%d3, %wv)
      return %a, %b, %c
    }}""", f"""
    graph @g {{
      input %x: f32[2,8]
      const %wq: f32[4,8]
      const %wk: f32[2,8]
      const %wv: f32[2,8]{KEPT}
      %4: f32[2,4] = aten.linear(%3, %wq)
      %5: f32[2,2] = aten.linear(%3, %wk)
      %6: f32[2,2] = aten.linear(%3, %wv)
      return %4, %5, %6
    }}"""),
    # (the activation is also a graph output and read by another op: they read it as before)
    case("the-activation-also-a-graph-output", f"""
    graph @g {{
      input %h: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]
      %x: f32[2,8] = aten.relu(%h){chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("x", 2)}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      %n: f32[2,8] = aten.neg(%x)
      return %a, %b, %x, %n
    }}""", f"""
    graph @g {{
      input %h: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]
      %x: f32[2,8] = aten.relu(%h){KEPT.replace("%0", "%A").replace("%1", "%B").replace("%2", "%C").replace("%3", "%D")}
      %a: f32[2,4] = aten.linear(%D, %w1)
      %b: f32[2,4] = aten.linear(%D, %w3)
      %n: f32[2,8] = aten.neg(%x)
      return %a, %b, %x, %n
    }}"""),
    case("a-constant-activation", f"""
    graph @g {{
      const %x: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("x", 2)}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      return %a, %b
    }}""", f"""
    graph @g {{
      const %x: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{KEPT}
      %4: f32[2,4] = aten.linear(%3, %w1)
      %5: f32[2,4] = aten.linear(%3, %w3)
      return %4, %5
    }}"""),
    # declined: a chain whose dequantize is a graph output, or whose scale another op reads, stays
    # whole (the two others still merge when there are two)
    case("a-dequantize-that-is-a-graph-output", f"""
    graph @g {{
      input %x: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("x", 2)}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      return %a, %b, %d2
    }}"""),
    case("a-scale-read-elsewhere", f"""
    graph @g {{
      input %x: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("x", 2)}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      %e: f32[2] = aten.neg(%s2)
      return %a, %b, %e
    }}"""),
    # declined: other attributes (another block size), or another activation
    case("other-blocks", f"""
    graph @g {{
      input %x: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("x", 2).replace("quant_max=127, eps", "quant_max=126, eps")}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      return %a, %b
    }}"""),
    case("two-activations", f"""
    graph @g {{
      input %x: f32[2,8]
      input %y: f32[2,8]
      const %w1: f32[4,8]
      const %w3: f32[4,8]{chain("x", 1)}
      %a: f32[2,4] = aten.linear(%d1, %w1){chain("y", 2)}
      %b: f32[2,4] = aten.linear(%d2, %w3)
      return %a, %b
    }}"""),
]


@pytest.mark.parametrize("before, expected, changed", CASES)
def test_share_dynamic_quantize(before, expected, changed):
    check_pipeline(before, PIPELINE, expected, changed=changed)
