"""The plan's repairs (lowering.partition.REPAIRS): one IR-text program per check, in which that
check, and only that one, finds something, and the repair it makes."""

from __future__ import annotations

import attrs
import pytest

from lowering import Options, partition
from xir import parse_graph

Q = "scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8"
QP = "quant_min=-128, quant_max=127, dtype=i8"
CONV2D = "stride=[1,1], padding=[0,0], dilation=[1,1], transposed=false, output_padding=[0,0], groups=1"

# name -> (program, the position of the node that stays outside (drop, detach) or gets a
# delegate of its own (isolate))
CASES = {
    "zero-d-output": (
        f"""graph @g {{
  input %x: f32[]
  param %q: i8[]
  %0: f32[] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %1: f32[] = aten.mul.Tensor(%0, %x)
  return %1
}}""",
        1,
    ),
    "folded-dequantize-read-outside": (
        f"""graph @g {{
  input %x: f32[2,8]
  param %w: i8[4,8]
  %0: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %1: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
  %2: f32[4,8] = quantized_decomposed.dequantize_per_tensor(%w) {{scale=0.05, zero_point=0, quant_min=-127, quant_max=127, dtype=i8}}
  %3: f32[2,4] = aten.linear(%1, %2)
  %4: i8[2,4] = quantized_decomposed.quantize_per_tensor(%3) {{{Q}}}
  %5: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%4) {{{Q}}}
  %6: f32[2,8] = aten.unknown_op(%1)
  return %5, %6
}}""",
        1,
    ),
    "clone-passes-through": (
        """graph @g {
  input %x: f32[2,3]
  %a: f32[2,3] = aten.abs(%x)
  %c: f32[2,3] = aten.clone(%a)
  return %a, %c
}""",
        1,
    ),
    "quantizes-0d-input": (
        f"""graph @g {{
  input %x: f32[]
  %0: i8[] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %1: f32[] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
  %2: f32[] = aten.abs(%1)
  return %2
}}""",
        0,
    ),
    "select-at-the-edge": (  # (x[1] of a graph input: the slice and view stay outside)
        """graph @g {
  input %x: f32[4,3]
  %0: f32[1,3] = aten.slice_copy.Tensor(%x) {dim=0, start=1, end=2, step=1}  # by xnnpack.select-as-slice
  %1: f32[3] = aten.view_copy(%0) {size=[3]}  # by xnnpack.select-as-slice
  %2: f32[3] = aten.abs(%1)
  return %2
}""",
        0,
    ),
    "dynamic-unit-misread-by-channels-last": (
        f"""graph @g {{
  input %x: f32[1,2,4,4]
  param %w: f32[2,2,1,1]
  param %lw: i8[3,4]
  param %ls: f32[3]
  param %lz: i64[3]
  %0: f32[1,2,4,4] = aten.convolution(%x, %w) {{{CONV2D}}}
  %s: f64[1], %z: i64[1] = quantized_decomposed.choose_qparams.tensor(%0) {{{QP}, eps=1e-05}}
  %q: i8[1,2,4,4] = quantized_decomposed.quantize_per_tensor.tensor(%0, %s, %z) {{{QP}}}
  %d: f32[1,2,4,4] = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {{{QP}}}
  %2: f32[3,4] = quantized_decomposed.dequantize_per_channel(%lw, %ls, %lz) {{axis=0, quant_min=-127, quant_max=127, dtype=i8}}
  %3: f32[1,2,4,3] = aten.linear(%d, %2)
  return %3
}}""",
        5,
    ),
    # (x is read by the dynamically quantized conv through its quantize/dequantize, and viewed as rows)
    "reader-of-converted-conv-input": (
        f"""graph @g {{
  input %x: f32[1,4,6,10]
  param %cw: i8[2,4,1,1]
  param %cs: f32[2]
  param %cz: i64[2]
  param %lw: i8[3,4]
  param %ls: f32[3]
  param %lz: i64[3]
  %s: f64[1], %z: i64[1] = quantized_decomposed.choose_qparams.tensor(%x) {{{QP}, eps=1e-05}}
  %q: i8[1,4,6,10] = quantized_decomposed.quantize_per_tensor.tensor(%x, %s, %z) {{{QP}}}
  %d: f32[1,4,6,10] = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {{{QP}}}
  %w: f32[2,4,1,1] = quantized_decomposed.dequantize_per_channel(%cw, %cs, %cz) {{axis=0, quant_min=-127, quant_max=127, dtype=i8}}
  %c: f32[1,2,6,10] = aten.convolution(%d, %w) {{{CONV2D}}}
  %v: f32[60,4] = aten.view_copy(%x) {{size=[60, -1]}}
  %s2: f64[1], %z2: i64[1] = quantized_decomposed.choose_qparams.tensor(%v) {{{QP}, eps=1e-05}}
  %q2: i8[60,4] = quantized_decomposed.quantize_per_tensor.tensor(%v, %s2, %z2) {{{QP}}}
  %d2: f32[60,4] = quantized_decomposed.dequantize_per_tensor.tensor(%q2, %s2, %z2) {{{QP}}}
  %lw2: f32[3,4] = quantized_decomposed.dequantize_per_channel(%lw, %ls, %lz) {{axis=0, quant_min=-127, quant_max=127, dtype=i8}}
  %l: f32[60,3] = aten.linear(%d2, %lw2)
  return %c, %l
}}""",
        5,
    ),
    "pad-of-computed-conversion": (
        """graph @g {
  input %x: bf16[2,3]
  %0: bf16[2,3] = aten.relu(%x)
  %1: f32[2,3] = xir.convert(%0) {dtype=f32}
  %2: f32[2,5] = aten.constant_pad_nd(%1) {pad=[1,1], value=-1.0}
  return %2
}""",
        2,
    ),
    "softmax-after-channels-last-op": (
        f"""graph @g {{
  input %x: f32[1,2,4,4]
  param %w: f32[2,2,1,1]
  %0: f32[1,2,4,4] = aten.convolution(%x, %w) {{{CONV2D}}}
  %1: f32[1,2,4,4] = aten._softmax(%0) {{dim=3, half_to_float=false}}
  return %1
}}""",
        1,
    ),
    "dequantize-of-float-conv1d": (
        f"""graph @g {{
  input %x: f32[1,2,8]
  param %w: f32[2,2,3]
  %0: i8[1,2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %1: f32[1,2,8] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
  %2: f32[1,2,6] = aten.convolution(%1, %w) {{stride=[1], padding=[0], dilation=[1], transposed=false, output_padding=[0], groups=1}}
  return %2
}}""",
        1,
    ),
    "zero-pad-quantized-by-preprocessing": (
        f"""graph @g {{
  input %x: f32[2,8]
  %0: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %1: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%0) {{{Q}}}
  %2: f32[2,10] = aten.constant_pad_nd(%1) {{pad=[1,1], value=0.0}}
  %3: i16[2,10] = quantized_decomposed.quantize_per_tensor(%2) {{scale=0.1, zero_point=0, quant_min=-32768, quant_max=32767, dtype=i16}}
  %4: f32[2,10] = quantized_decomposed.dequantize_per_tensor(%3) {{scale=0.1, zero_point=0, quant_min=-32768, quant_max=32767, dtype=i16}}
  %5: f32[2,10] = aten.abs(%4)
  return %5
}}""",
        2,
    ),  # (the i16 quantize reading the pad stays outside: in the delegate nothing quantizes the pad)
}


def plan_and_fired(text: str):
    """The graph of ``text``, its plan (bf16 enabled), and the names of the repairs that found something."""
    fired = []

    def recording(repair):
        def find(group):
            found = repair.find(group)
            if found:
                fired.append(repair.name)
            return found

        return find

    saved = partition.REPAIRS
    partition.REPAIRS = tuple(attrs.evolve(r, find=recording(r)) for r in saved)
    try:
        graph = parse_graph(text + "\n")
        plan = partition.plan_partition(graph, Options(enable_bf16=True))
    finally:
        partition.REPAIRS = saved
    return graph, plan, fired


def test_every_repair_has_a_case():
    assert [r.name for r in partition.REPAIRS] == list(CASES)


@pytest.mark.parametrize("repair", partition.REPAIRS, ids=lambda r: r.name)
def test_the_repair_finds_its_case_and_repairs_it(repair):
    text, position = CASES[repair.name]
    graph, plan, fired = plan_and_fired(text)
    assert set(fired) == {repair.name}
    target = list(graph)[position]
    if repair.action == "isolate":
        (group,) = [g for g in plan.groups if target in g.nodes]
        assert len(group.units) == 1 and all(r.node is not target for r in plan.rejected)
    else:
        (rejection,) = [r for r in plan.rejected if r.node is target]
        assert rejection.rule == repair.rule
        assert not isinstance(repair.reason, str) or rejection.reason == repair.reason
        assert all(target not in g.nodes for g in plan.groups)


def test_the_folded_dequantize_reason_names_the_reader_outside():
    _, plan, _ = plan_and_fired(CASES["folded-dequantize-read-outside"][0])
    (rejection,) = [r for r in plan.rejected if r.rule == "quant" and r.node.op.endswith("dequantize_per_tensor")]
    assert "read by aten.unknown_op outside" in rejection.reason
