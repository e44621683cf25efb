"""IR-text tests of ``xnnpack.fuse-sibling-linears``: linears that read one activation (q, k and v)
become one linear on their stacked weights, each result a slice of its output; split into heads
when every reader views a result as heads. At the boundaries: a result that is a graph output, a
result with several readers, graph inputs as the activation, biases, torchao's 8da4w weights and
per-token activation quantization (stacked data, scales and zero points; the other members' chains
erased), static and symbolic shapes; and what it leaves alone or declines.
End to end (the flow's programs on the runtime): tests/lowering/test_llm_flow.py and
tests/lowering/test_fuse_sibling_linears.py."""

from __future__ import annotations

import re

import pytest
import torch

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from lowering.passes.fuse_sibling_linears import RULE
from passes.testing import check_declined, check_pipeline, graph_with_data

PIPELINE = "xnnpack.fuse-sibling-linears"
SPLIT = "xnnpack.fuse-sibling-linears{split_last_dim=true}"  # (groups read otherwise than as heads too)


def weights(bias: bool = False):
    torch.manual_seed(0)
    found = dict(wq=torch.randn(32, 16), wk=torch.randn(16, 16), wv=torch.randn(16, 16))
    if bias:
        found.update(bq=torch.randn(32), bk=torch.randn(16), bv=torch.randn(16))
    return found


HEADER = """graph @g {{
  input %x: f32[1,{s},16]
  const %wq: f32[32,16]
  const %wk: f32[16,16]
  const %wv: f32[16,16]"""
PROJECTIONS = """
  %lq: f32[1,{s},32] = aten.linear(%x, %wq)
  %lk: f32[1,{s},16] = aten.linear(%x, %wk)
  %lv: f32[1,{s},16] = aten.linear(%x, %wv)"""
QKV = (
    PROJECTIONS
    + """
  %q: f32[1,{s},4,8] = aten.view_copy(%lq) {{size=[1, -1, 4, 8]}}
  %k: f32[1,{s},2,8] = aten.view_copy(%lk) {{size=[1, -1, 2, 8]}}
  %v: f32[1,{s},2,8] = aten.view_copy(%lv) {{size=[1, -1, 2, 8]}}"""
)


def test_q_k_and_v_become_one_linear_and_slices_of_its_heads():
    graph = check_pipeline(
        graph_with_data(
            HEADER.format(s="s0")
            + QKV.format(s="s0")
            + """
      return %q, %k, %v
    }""",
            **weights(),
        ),
        PIPELINE,
        HEADER.format(s="s0")
        + """
      param %wq_stacked: f32[64,16]
      %0: f32[1,s0,64] = aten.linear(%x, %wq_stacked)
      %1: f32[1,s0,8,8] = aten.view_copy(%0) {size=[1, -1, 8, 8]}
      %2: f32[1,s0,4,8] = xir.slice(%1) {dim=2, start=0, end=4}
      %3: f32[1,s0,2,8] = xir.slice(%1) {dim=2, start=4, end=6}
      %4: f32[1,s0,2,8] = xir.slice(%1) {dim=2, start=6, end=8}
      return %2, %3, %4
    }""",
        changed=True,
    )
    w = weights()
    assert torch.equal(graph.input_named("wq_stacked").data, torch.cat([w["wq"], w["wk"], w["wv"]]))


def test_static_shapes_slice_with_slice_copy_and_biases_stack_too():
    text = (
        HEADER.format(s="7")
        + """
      const %bq: f32[32]
      const %bk: f32[16]
      const %bv: f32[16]"""
        + QKV.format(s="7").replace("%wq)", "%wq, %bq)").replace("%wk)", "%wk, %bk)").replace("%wv)", "%wv, %bv)")
    )
    graph = check_pipeline(
        graph_with_data(text + "\n  return %q, %k, %v\n}", **weights(bias=True)),
        PIPELINE,
        HEADER.format(s="7")
        + """
      const %bq: f32[32]
      const %bk: f32[16]
      const %bv: f32[16]
      param %wq_stacked: f32[64,16]
      param %bq_stacked: f32[64]
      %0: f32[1,7,64] = aten.linear(%x, %wq_stacked, %bq_stacked)
      %1: f32[1,7,8,8] = aten.view_copy(%0) {size=[1, -1, 8, 8]}
      %2: f32[1,7,4,8] = aten.slice_copy.Tensor(%1) {dim=2, start=0, end=4, step=1}
      %3: f32[1,7,2,8] = aten.slice_copy.Tensor(%1) {dim=2, start=4, end=6, step=1}
      %4: f32[1,7,2,8] = aten.slice_copy.Tensor(%1) {dim=2, start=6, end=8, step=1}
      return %2, %3, %4
    }""",
        changed=True,
    )
    w = weights(bias=True)
    assert torch.equal(graph.input_named("bq_stacked").data, torch.cat([w["bq"], w["bk"], w["bv"]]))


def test_a_result_that_is_a_graph_output_or_read_by_another_op_is_a_slice_of_the_last_dim():
    # k is returned as it is and v read by a neg: with split_last_dim the pieces are slices of the
    # stacked output's last dim; without it (the default) the three stay apart
    body = (
        PROJECTIONS.format(s="s0")
        + """
      %q: f32[1,s0,4,8] = aten.view_copy(%lq) {size=[1, -1, 4, 8]}
      %n: f32[1,s0,16] = aten.neg(%lv)
      return %q, %lk, %n
    }"""
    )
    check_pipeline(
        graph_with_data(HEADER.format(s="s0") + body, **weights()),
        SPLIT,
        HEADER.format(s="s0")
        + """
      param %wq_stacked: f32[64,16]
      %0: f32[1,s0,64] = aten.linear(%x, %wq_stacked)
      %1: f32[1,s0,32] = xir.slice(%0) {dim=2, start=0, end=32}
      %2: f32[1,s0,16] = xir.slice(%0) {dim=2, start=32, end=48}
      %3: f32[1,s0,16] = xir.slice(%0) {dim=2, start=48, end=64}
      %4: f32[1,s0,4,8] = aten.view_copy(%1) {size=[1, -1, 4, 8]}
      %5: f32[1,s0,16] = aten.neg(%3)
      return %4, %2, %5
    }""",
        changed=True,
    )
    check_declined(graph_with_data(HEADER.format(s="s0") + body, **weights()), PIPELINE, RULE, "not all read as heads")


def test_a_result_viewed_as_heads_twice_gets_one_slice():
    body = (
        QKV.format(s="s0")
        + """
      %k2: f32[1,s0,2,8] = aten.view_copy(%lk) {size=[1, -1, 2, 8]}
      %sum: f32[1,s0,2,8] = aten.add.Tensor(%k, %k2)
      return %q, %sum, %v
    }"""
    )
    check_pipeline(
        graph_with_data(HEADER.format(s="s0") + body, **weights()),
        PIPELINE,
        HEADER.format(s="s0")
        + """
      param %wq_stacked: f32[64,16]
      %0: f32[1,s0,64] = aten.linear(%x, %wq_stacked)
      %1: f32[1,s0,8,8] = aten.view_copy(%0) {size=[1, -1, 8, 8]}
      %2: f32[1,s0,4,8] = xir.slice(%1) {dim=2, start=0, end=4}
      %3: f32[1,s0,2,8] = xir.slice(%1) {dim=2, start=4, end=6}
      %4: f32[1,s0,2,8] = xir.slice(%1) {dim=2, start=6, end=8}
      %5: f32[1,s0,2,8] = aten.add.Tensor(%3, %3)
      return %2, %5, %4
    }""",
        changed=True,
    )


def test_linears_of_different_inputs_or_weights_of_another_width_stay_apart():
    text = """graph @g {
      input %x: f32[1,s0,16]
      input %y: f32[1,s0,16]
      const %wa: f32[32,16]
      const %wb: f32[16,16]
      const %wc: f32[16,8]
      input %z: f32[1,s0,8]
      %a: f32[1,s0,32] = aten.linear(%x, %wa)
      %b: f32[1,s0,16] = aten.linear(%y, %wb)
      %c: f32[1,s0,16] = aten.linear(%z, %wc)
      return %a, %b, %c
    }"""
    check_pipeline(
        graph_with_data(text, wa=torch.randn(32, 16), wb=torch.randn(16, 16), wc=torch.randn(16, 8)),
        PIPELINE,
        text,
        changed=False,
    )


def test_a_weight_computed_at_run_time_is_not_stacked():
    text = """graph @g {
      input %x: f32[1,s0,16]
      input %w: f32[16,16]
      const %wk: f32[16,16]
      %a: f32[1,s0,16] = aten.linear(%x, %w)
      %b: f32[1,s0,16] = aten.linear(%x, %wk)
      return %a, %b
    }"""
    check_pipeline(graph_with_data(text, wk=torch.randn(16, 16)), PIPELINE, text, changed=False)


def test_gate_and_up_split_the_last_dim_only_when_told_to():
    text = """graph @g {
      input %x: f32[1,s0,16]
      const %wg: f32[48,16]
      const %wu: f32[48,16]
      %g: f32[1,s0,48] = aten.linear(%x, %wg)
      %u: f32[1,s0,48] = aten.linear(%x, %wu)
      %s: f32[1,s0,48] = aten.sigmoid(%g)
      %h: f32[1,s0,48] = aten.mul.Tensor(%s, %u)
      return %h
    }"""
    data = dict(wg=torch.randn(48, 16), wu=torch.randn(48, 16))
    check_pipeline(
        graph_with_data(text, **data),
        SPLIT,
        """graph @g {
      input %x: f32[1,s0,16]
      const %wg: f32[48,16]
      const %wu: f32[48,16]
      param %wg_stacked: f32[96,16]
      %0: f32[1,s0,96] = aten.linear(%x, %wg_stacked)
      %1: f32[1,s0,48] = xir.slice(%0) {dim=2, start=0, end=48}
      %2: f32[1,s0,48] = xir.slice(%0) {dim=2, start=48, end=96}
      %3: f32[1,s0,48] = aten.sigmoid(%1)
      %4: f32[1,s0,48] = aten.mul.Tensor(%3, %2)
      return %4
    }""",
        changed=True,
    )
    check_declined(graph_with_data(text, **data), PIPELINE, RULE, re.escape("not all read as heads"))


@pytest.mark.parametrize(
    "dtype, pipeline, reason",
    [
        ("bf16", "xnnpack.fuse-sibling-linears{enable_bf16=false}", "bf16 is not enabled"),
        # (no slice of it would run at every size: XNNPACK's xir.slice is f32 or bf16, slice_copy has no
        # shape function at a symbolic size)
        ("f16", PIPELINE, "f16 with a symbolic dim"),
    ],
)
def test_linears_whose_pieces_would_not_run_are_declined(dtype, pipeline, reason):
    text = f"""graph @g {{
      input %x: {dtype}[1,s0,16]
      const %wa: {dtype}[16,16]
      const %wb: {dtype}[16,16]
      %a: {dtype}[1,s0,16] = aten.linear(%x, %wa)
      %b: {dtype}[1,s0,16] = aten.linear(%x, %wb)
      %ha: {dtype}[1,s0,2,8] = aten.view_copy(%a) {{size=[1, -1, 2, 8]}}
      %hb: {dtype}[1,s0,2,8] = aten.view_copy(%b) {{size=[1, -1, 2, 8]}}
      return %ha, %hb
    }}"""
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    data = dict(wa=torch.randn(16, 16).to(torch_dtype), wb=torch.randn(16, 16).to(torch_dtype))
    check_declined(graph_with_data(text, **data), pipeline, RULE, reason)


# torchao's 8da4w: the activation quantized per token (choose_qparams -> quantize -> dequantize, one
# chain per linear as torchao writes it), the weight int4 in int8 storage, in groups of 8
TORCHAO_HEADER = """graph @g {
  input %x: f32[1,s0,16]
  const %dq: i8[32,16]
  const %wsq: f32[32,2]
  const %wzq: i8[32,2]
  const %dk: i8[16,16]
  const %wsk: f32[16,2]
  const %wzk: i8[16,2]"""
CHOOSE = (
    '{mapping_type="ASYMMETRIC", block_size=[1, 1, 16], target_dtype=i8, quant_min=-128, quant_max=127, '
    "eps=none, scale_dtype=none, zero_point_dtype=i8}"
)
QUANT = "{block_size=[1, 1, 16], output_dtype=i8, quant_min=-128, quant_max=127}"
DEQUANT = "{block_size=[1, 1, 16], input_dtype=i8, quant_min=-128, quant_max=127}"
WEIGHT = "{block_size=[1, 8], input_dtype=i8, quant_min=-8, quant_max=7}"


def _dq_linear(p: str, n: int) -> str:
    return f"""
  %s{p}: f32[1,s0], %z{p}: i8[1,s0] = torchao.choose_qparams_affine(%x) {CHOOSE}
  %i{p}: i8[1,s0,16] = torchao.quantize_affine(%x, %s{p}, %z{p}) {QUANT}
  %a{p}: f32[1,s0,16] = torchao.dequantize_affine(%i{p}, %s{p}, %z{p}) {DEQUANT}
  %w{p}: f32[{n},16] = torchao.dequantize_affine(%d{p}, %ws{p}, %wz{p}) {WEIGHT}
  %l{p}: f32[1,s0,{n}] = aten.linear(%a{p}, %w{p})"""


def torchao_data():
    torch.manual_seed(1)
    return dict(
        dq=torch.randint(-8, 8, (32, 16), dtype=torch.int8),
        wsq=torch.rand(32, 2),
        wzq=torch.zeros(32, 2, dtype=torch.int8),
        dk=torch.randint(-8, 8, (16, 16), dtype=torch.int8),
        wsk=torch.rand(16, 2),
        wzk=torch.zeros(16, 2, dtype=torch.int8),
    )


def test_torchao_8da4w_weights_stack_and_the_activation_is_quantized_once():
    text = (
        TORCHAO_HEADER
        + _dq_linear("q", 32)
        + _dq_linear("k", 16)
        + """
  %q: f32[1,s0,4,8] = aten.view_copy(%lq) {size=[1, -1, 4, 8]}
  %k: f32[1,s0,2,8] = aten.view_copy(%lk) {size=[1, -1, 2, 8]}
  return %q, %k
}"""
    )
    graph = check_pipeline(
        graph_with_data(text, **torchao_data()),
        PIPELINE,
        TORCHAO_HEADER
        + f"""
      param %dq_stacked: i8[48,16]
      param %wsq_stacked: f32[48,2]
      param %wzq_stacked: i8[48,2]
      %0: f32[1,s0], %1: i8[1,s0] = torchao.choose_qparams_affine(%x) {CHOOSE}
      %2: i8[1,s0,16] = torchao.quantize_affine(%x, %0, %1) {QUANT}
      %3: f32[1,s0,16] = torchao.dequantize_affine(%2, %0, %1) {DEQUANT}
      %4: f32[48,16] = torchao.dequantize_affine(%dq_stacked, %wsq_stacked, %wzq_stacked) {WEIGHT}
      %5: f32[1,s0,48] = aten.linear(%3, %4)
      %6: f32[1,s0,6,8] = aten.view_copy(%5) {{size=[1, -1, 6, 8]}}
      %7: f32[1,s0,4,8] = xir.slice(%6) {{dim=2, start=0, end=4}}
      %8: f32[1,s0,2,8] = xir.slice(%6) {{dim=2, start=4, end=6}}
      return %7, %8
    }}""",
        changed=True,
    )
    d = torchao_data()
    for name in ("dq", "wsq", "wzq"):
        assert torch.equal(graph.input_named(f"{name}_stacked").data, torch.cat([d[name], d[name[:-1] + "k"]]))


def test_torchao_weights_of_other_group_sizes_stay_apart():
    text = (
        TORCHAO_HEADER
        + _dq_linear("q", 32)
        + _dq_linear("k", 16).replace("block_size=[1, 8]", "block_size=[1, 16]")
        + """
  return %lq, %lk
}"""
    )
    text = text.replace("%wsk: f32[16,2]", "%wsk: f32[16,1]").replace("%wzk: i8[16,2]", "%wzk: i8[16,1]")
    data = {**torchao_data(), "wsk": torch.rand(16, 1), "wzk": torch.zeros(16, 1, dtype=torch.int8)}
    check_pipeline(graph_with_data(text, **data), PIPELINE, text, changed=False)


def test_heads_viewed_as_pairs_and_flat_heads_share_one_view_of_pairs():
    # Llama's q and k viewed as [.., heads, 4, 2] pairs (xnnpack.rope-as-pair-swap), v as flat heads: one
    # view of pairs; v's view reads its slice and flattens its heads back. q's flat view is dead (what
    # the rotary rewrite left): it is erased with q's linear
    body = (
        PROJECTIONS.format(s="s0")
        + """
      %v: f32[1,s0,2,8] = aten.view_copy(%lv) {size=[1, -1, 2, 8]}
      %dead: f32[1,s0,4,8] = aten.view_copy(%lq) {size=[1, -1, 4, 8]}
      %q: f32[1,s0,4,4,2] = aten.view_copy(%lq) {size=[1, -1, 4, 4, 2]}
      %k: f32[1,s0,2,4,2] = aten.view_copy(%lk) {size=[1, -1, 2, 4, 2]}
      return %q, %k, %v
    }"""
    )
    check_pipeline(
        graph_with_data(HEADER.format(s="s0") + body, **weights()),
        PIPELINE,
        HEADER.format(s="s0")
        + """
      param %wq_stacked: f32[64,16]
      %0: f32[1,s0,64] = aten.linear(%x, %wq_stacked)
      %1: f32[1,s0,8,4,2] = aten.view_copy(%0) {size=[1, -1, 8, 4, 2]}
      %2: f32[1,s0,4,4,2] = xir.slice(%1) {dim=2, start=0, end=4}
      %3: f32[1,s0,2,4,2] = xir.slice(%1) {dim=2, start=4, end=6}
      %4: f32[1,s0,2,4,2] = xir.slice(%1) {dim=2, start=6, end=8}
      %5: f32[1,s0,2,8] = aten.view_copy(%4) {size=[1, -1, 2, 8]}
      return %2, %3, %5
    }""",
        changed=True,
    )


def test_fp32_linears_on_f16_weights_stack_as_one():
    # xir.linear_f16w (the bf16 options' linears) with f16 weights and fp32 biases
    text = """graph @g {
      input %x: f32[1,s0,16]
      const %wa: f16[16,16]
      const %wb: f16[32,16]
      const %ba: f32[16]
      const %bb: f32[32]
      %a: f32[1,s0,16] = xir.linear_f16w(%x, %wa, %ba)
      %b: f32[1,s0,32] = xir.linear_f16w(%x, %wb, %bb)
      %ha: f32[1,s0,2,8] = aten.view_copy(%a) {size=[1, -1, 2, 8]}
      %hb: f32[1,s0,4,8] = aten.view_copy(%b) {size=[1, -1, 4, 8]}
      return %ha, %hb
    }"""
    data = dict(wa=torch.randn(16, 16).half(), wb=torch.randn(32, 16).half(), ba=torch.randn(16), bb=torch.randn(32))
    graph = check_pipeline(
        graph_with_data(text, **data),
        PIPELINE,
        """graph @g {
      input %x: f32[1,s0,16]
      const %wa: f16[16,16]
      const %wb: f16[32,16]
      const %ba: f32[16]
      const %bb: f32[32]
      param %wa_stacked: f16[48,16]
      param %ba_stacked: f32[48]
      %0: f32[1,s0,48] = xir.linear_f16w(%x, %wa_stacked, %ba_stacked)
      %1: f32[1,s0,6,8] = aten.view_copy(%0) {size=[1, -1, 6, 8]}
      %2: f32[1,s0,2,8] = xir.slice(%1) {dim=2, start=0, end=2}
      %3: f32[1,s0,4,8] = xir.slice(%1) {dim=2, start=2, end=6}
      return %2, %3
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("wa_stacked").data, torch.cat([data["wa"], data["wb"]]))
