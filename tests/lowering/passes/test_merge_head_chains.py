"""IR-text tests of ``xnnpack.merge-head-chains``: two head-split tensors read by chains of the same
per-head ops (Qwen3's q and k norms and rotary embedding) become one chain on their heads
concatenated, with a slice per value read outside it. At the boundaries: a chain value that is also
a graph output and one read by another op, graph inputs as the two tensors, per-branch constants
(one row per head) and equal ones (shared), static and symbolic shapes; and the cases it declines.
End to end (a Qwen3-style attention on the runtime, several lengths): tests/lowering/test_merge_head_chains.py."""

from __future__ import annotations

import re

import pytest
import torch

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from lowering.passes.merge_head_chains import RULE
from passes.testing import check_declined, check_pipeline, graph_with_data

PIPELINE = "xnnpack.merge-head-chains"

HEADER = """
  input %x: f32[1,{s},32]
  const %wq: f32[32,32]
  const %wk: f32[16,32]
  const %row: f32[1,8]
  const %eps_q: f32[]
  const %eps_k: f32[]
  const %nq: f32[8]
  const %nk: f32[8]
  input %cos: f32[{s},1,8]"""
PROJECT = """
  %lq: f32[1,{s},32] = aten.linear(%x, %wq)
  %lk: f32[1,{s},16] = aten.linear(%x, %wk)
  %q: f32[1,{s},4,8] = aten.view_copy(%lq) {{size=[1, -1, 4, 8]}}
  %k: f32[1,{s},2,8] = aten.view_copy(%lk) {{size=[1, -1, 2, 8]}}"""
# a per-head RMSNorm (mean as a linear with a row of 1/8) and a product with a table shared by the heads
CHAIN = """
  %{p}2: f32[1,{s},{h},8] = aten.mul.Tensor(%{p}, %{p})
  %{p}m: f32[1,{s},{h},1] = aten.linear(%{p}2, %row)
  %{p}e: f32[1,{s},{h},1] = aten.add.Tensor(%{p}m, %eps_{p})
  %{p}r: f32[1,{s},{h},1] = aten.rsqrt(%{p}e)
  %{p}n: f32[1,{s},{h},8] = aten.mul.Tensor(%{p}, %{p}r)
  %{p}w: f32[1,{s},{h},8] = aten.mul.Tensor(%{p}n, %n{p})
  %{p}c: f32[1,{s},{h},8] = aten.mul.Tensor(%{p}w, %cos)"""
MERGED_HEADER = (
    HEADER
    + """
  param %nq_by_head: f32[6,8]"""
)
MERGED_PROJECT = """
  %0: f32[1,{s},32] = aten.linear(%x, %wq)
  %1: f32[1,{s},16] = aten.linear(%x, %wk)
  %2: f32[1,{s},4,8] = aten.view_copy(%0) {{size=[1, -1, 4, 8]}}
  %3: f32[1,{s},2,8] = aten.view_copy(%1) {{size=[1, -1, 2, 8]}}"""
MERGED_CHAIN = """
  %4: f32[1,{s},6,8] = aten.cat(%2, %3) {{dim=2}}
  %5: f32[1,{s},6,8] = aten.mul.Tensor(%4, %4)
  %6: f32[1,{s},6,1] = aten.linear(%5, %row)
  %7: f32[1,{s},6,1] = aten.add.Tensor(%6, %eps_q)
  %8: f32[1,{s},6,1] = aten.rsqrt(%7)
  %9: f32[1,{s},6,8] = aten.mul.Tensor(%4, %8)
  %10: f32[1,{s},6,8] = aten.mul.Tensor(%9, %nq_by_head)
  %11: f32[1,{s},6,8] = aten.mul.Tensor(%10, %cos)"""


def data(eps_k=1e-6):
    torch.manual_seed(0)
    return dict(
        wq=torch.randn(32, 32),
        wk=torch.randn(16, 32),
        row=torch.full((1, 8), 0.125),
        eps_q=torch.tensor(1e-6),
        eps_k=torch.tensor(eps_k),
        nq=torch.randn(8),
        nk=torch.randn(8),
    )


def graph(body: str, s: str = "s0", **overrides):
    return graph_with_data("graph @g {" + HEADER.format(s=s) + body + "\n}", **{**data(), **overrides})


def q_and_k(s: str = "s0") -> str:
    return PROJECT.format(s=s) + CHAIN.format(p="q", h=4, s=s) + CHAIN.format(p="k", h=2, s=s)


def test_q_and_k_norms_and_tables_run_once_on_both_sets_of_heads():
    # the norm weights become one row per head; the two equal eps constants one
    merged = check_pipeline(
        graph(q_and_k() + "\n  return %qc, %kc"),
        PIPELINE,
        "graph @g {"
        + MERGED_HEADER.format(s="s0")
        + MERGED_PROJECT.format(s="s0")
        + MERGED_CHAIN.format(s="s0")
        + """
      %12: f32[1,s0,4,8] = xir.slice(%11) {dim=2, start=0, end=4}
      %13: f32[1,s0,2,8] = xir.slice(%11) {dim=2, start=4, end=6}
      return %12, %13
    }""",
        changed=True,
    )
    rows = merged.input_named("nq_by_head").data
    assert torch.equal(rows[:4], data()["nq"].expand(4, 8)) and torch.equal(rows[4:], data()["nk"].expand(2, 8))


def test_static_shapes_slice_with_slice_copy():
    check_pipeline(
        graph(q_and_k("7") + "\n  return %qc, %kc", s="7"),
        PIPELINE,
        "graph @g {"
        + MERGED_HEADER.format(s="7")
        + MERGED_PROJECT.format(s="7")
        + MERGED_CHAIN.format(s="7")
        + """
      %12: f32[1,7,4,8] = aten.slice_copy.Tensor(%11) {dim=2, start=0, end=4, step=1}
      %13: f32[1,7,2,8] = aten.slice_copy.Tensor(%11) {dim=2, start=4, end=6, step=1}
      return %12, %13
    }""",
        changed=True,
    )


def test_values_read_outside_the_chain_and_graph_outputs_get_their_slices():
    # q's normed value is also a graph output, k's is read by a neg; the tensors themselves stay as they are
    body = (
        q_and_k()
        + """
  %kneg: f32[1,s0,2,8] = aten.neg(%kn)
  %qa: f32[1,s0,4,8] = aten.abs(%q)
  return %qc, %kc, %qn, %kneg, %qa"""
    )
    check_pipeline(
        graph(body),
        PIPELINE,
        "graph @g {"
        + MERGED_HEADER.format(s="s0")
        + MERGED_PROJECT.format(s="s0")
        + MERGED_CHAIN.format(s="s0")
        + """
      %12: f32[1,s0,4,8] = xir.slice(%9) {dim=2, start=0, end=4}
      %13: f32[1,s0,2,8] = xir.slice(%9) {dim=2, start=4, end=6}
      %14: f32[1,s0,4,8] = xir.slice(%11) {dim=2, start=0, end=4}
      %15: f32[1,s0,2,8] = xir.slice(%11) {dim=2, start=4, end=6}
      %16: f32[1,s0,2,8] = aten.neg(%13)
      %17: f32[1,s0,4,8] = aten.abs(%2)
      return %14, %15, %12, %16, %17
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "t, options, slices",
    [
        ("f32", "", "xir.slice(%5) {{dim=2, start={start}, end={end}}}"),
        ("bf16", "", "xir.slice(%5) {{dim=2, start={start}, end={end}}}"),
        # bf16 without enable_bf16 stays outside XNNPACK, where xir.slice has no kernel: slice_copy (written back
        # at a symbolic length: tests/lowering/test_symbolic_passes.py)
        ("bf16", "{enable_bf16=false}", "aten.slice_copy.Tensor(%5) {{dim=2, start={start}, end={end}, step=1}}"),
    ],
)
def test_graph_inputs_as_the_two_tensors(t, options, slices):
    """The two tensors graph inputs, the norm weights constants, the chains' ends graph outputs; the
    slices of the merged chain are slice_op's (xir.slice where XNNPACK takes it)."""
    # (five ops: a concatenation and two slices for five)
    text = """graph @g {
      input %q: f32[1,s0,4,8]
      input %k: f32[1,s0,2,8]
      input %cos: f32[s0,1,8]
      const %nq: f32[8]
      const %nk: f32[8]
      %qw: f32[1,s0,4,8] = aten.mul.Tensor(%q, %nq)
      %qc: f32[1,s0,4,8] = aten.mul.Tensor(%qw, %cos)
      %qs: f32[1,s0,4,8] = aten.sigmoid(%qc)
      %qt: f32[1,s0,4,8] = aten.add.Tensor(%qs, %qc)
      %qu: f32[1,s0,4,8] = aten.neg(%qt)
      %kw: f32[1,s0,2,8] = aten.mul.Tensor(%k, %nk)
      %kc: f32[1,s0,2,8] = aten.mul.Tensor(%kw, %cos)
      %ks: f32[1,s0,2,8] = aten.sigmoid(%kc)
      %kt: f32[1,s0,2,8] = aten.add.Tensor(%ks, %kc)
      %ku: f32[1,s0,2,8] = aten.neg(%kt)
      return %qu, %ku
    }"""
    dtype = torch.float32 if t == "f32" else torch.bfloat16
    expected = """graph @g {
      input %q: f32[1,s0,4,8]
      input %k: f32[1,s0,2,8]
      input %cos: f32[s0,1,8]
      const %nq: f32[8]
      const %nk: f32[8]
      param %nq_by_head: f32[6,8]
      %0: f32[1,s0,6,8] = aten.cat(%q, %k) {dim=2}
      %1: f32[1,s0,6,8] = aten.mul.Tensor(%0, %nq_by_head)
      %2: f32[1,s0,6,8] = aten.mul.Tensor(%1, %cos)
      %3: f32[1,s0,6,8] = aten.sigmoid(%2)
      %4: f32[1,s0,6,8] = aten.add.Tensor(%3, %2)
      %5: f32[1,s0,6,8] = aten.neg(%4)
      %6: f32[1,s0,4,8] = {first}
      %7: f32[1,s0,2,8] = {second}
      return %6, %7
    }"""
    expected = expected.replace("{first}", slices.format(start=0, end=4)).replace(
        "{second}", slices.format(start=4, end=6)
    )
    check_pipeline(
        graph_with_data(text.replace("f32", t), nq=torch.ones(8, dtype=dtype), nk=torch.full((8,), 2.0, dtype=dtype)),
        PIPELINE + options,
        expected.replace("f32", t),
        changed=True,
    )


def declined(body: str, reason: str) -> None:
    """The pass leaves ``body`` as it is, and says ``reason`` (a plain phrase) for some pair."""
    check_declined(graph(body), PIPELINE, RULE, re.escape(reason))


def test_declines_chains_that_differ():
    # k's chain takes a sigmoid where q's takes an rsqrt: the chains share 2 ops, which would save nothing
    body = q_and_k().replace("%kr: f32[1,s0,2,1] = aten.rsqrt(%ke)", "%kr: f32[1,s0,2,1] = aten.sigmoid(%ke)")
    declined(body + "\n  return %qc, %kc", "would save")


def test_declines_an_op_that_mixes_the_heads():
    # a softmax over the heads: what each head gets depends on the others
    body = (
        PROJECT.format(s="s0")
        + """
  %qs: f32[1,s0,4,8] = aten._softmax(%q) {dim=2, half_to_float=false}
  %qa: f32[1,s0,4,8] = aten.abs(%qs)
  %qb: f32[1,s0,4,8] = aten.neg(%qa)
  %qd: f32[1,s0,4,8] = aten.sigmoid(%qb)
  %ks: f32[1,s0,2,8] = aten._softmax(%k) {dim=2, half_to_float=false}
  %ka: f32[1,s0,2,8] = aten.abs(%ks)
  %kb: f32[1,s0,2,8] = aten.neg(%ka)
  %kd: f32[1,s0,2,8] = aten.sigmoid(%kb)
  return %qd, %kd"""
    )
    declined(body, "merging 0 ops")


def test_declines_when_a_chain_value_is_read_before_the_other_tensor_exists():
    # q's whole chain and a reader of its result come before k's projection
    body = (
        PROJECT.format(s="s0").split("  %lk")[0]
        + """
  %q: f32[1,s0,4,8] = aten.view_copy(%lq) {size=[1, -1, 4, 8]}"""
        + CHAIN.format(p="q", h=4, s="s0")
        + """
  %early: f32[1,s0,4,8] = aten.neg(%qc)
  %lk: f32[1,s0,16] = aten.linear(%x, %wk)
  %k: f32[1,s0,2,8] = aten.view_copy(%lk) {size=[1, -1, 2, 8]}"""
        + CHAIN.format(p="k", h=2, s="s0")
        + "\n  return %early, %kc"
    )
    declined(body, "is read by aten.neg before the merged chain could run")


def test_declines_a_shared_operand_that_varies_over_the_heads():
    # k and v have the same heads, and both are multiplied by one [1, s, 2, 8] tensor: merged, k's heads
    # and v's would need it twice
    body = (
        """
  %lk: f32[1,s0,16] = aten.linear(%x, %wk)
  %lv: f32[1,s0,16] = aten.linear(%x, %wk)
  %k: f32[1,s0,2,8] = aten.view_copy(%lk) {size=[1, -1, 2, 8]}
  %v: f32[1,s0,2,8] = aten.view_copy(%lv) {size=[1, -1, 2, 8]}
  %lt: f32[1,s0,16] = aten.linear(%x, %wk)
  %t: f32[1,s0,2,8] = aten.view_copy(%lt) {size=[1, -1, 2, 8]}
"""
        + "".join(
            f"""
  %{p}0: f32[1,s0,2,8] = aten.mul.Tensor(%{p}, %t)
  %{p}1: f32[1,s0,2,8] = aten.abs(%{p}0)
  %{p}2: f32[1,s0,2,8] = aten.neg(%{p}1)
  %{p}3: f32[1,s0,2,8] = aten.sigmoid(%{p}2)
  %{p}4: f32[1,s0,2,8] = aten.exp(%{p}3)"""
            for p in ("k", "v")
        )
        + "\n  return %k4, %v4"
    )
    declined(body, "merging 0 ops")


def pair_rotation(p: str, h: int) -> str:
    """Llama's rotation as ``xnnpack.rope-as-pair-swap`` writes it: heads and tokens flattened into
    rows for the pair-swap product, unflattened, then the tables."""
    return f"""
  %{p}f: f32[{h}*s0,8] = aten.view_copy(%{p}) {{size=[-1, 8]}}
  %{p}m: f32[{h}*s0,8] = aten.mm(%{p}f, %swap)
  %{p}u: f32[1,s0,{h},4,2] = aten.view_copy(%{p}m) {{size=[1, -1, {h}, 4, 2]}}
  %{p}c: f32[1,s0,{h},4,2] = aten.mul.Tensor(%{p}, %cos)
  %{p}s: f32[1,s0,{h},4,2] = aten.mul.Tensor(%{p}u, %sin)
  %{p}a: f32[1,s0,{h},4,2] = aten.add.Tensor(%{p}c, %{p}s)
  %{p}o: f32[1,s0,{h},8] = aten.view_copy(%{p}a) {{size=[1, -1, {h}, 8]}}"""


PAIRS = (
    """graph @g {
  input %q: f32[1,s0,4,4,2]
  input %k: f32[1,s0,2,4,2]
  input %cos: f32[1,s0,1,4,1]
  input %sin: f32[1,s0,1,4,2]
  const %swap: f32[8,8]"""
    + pair_rotation("q", 4)
    + pair_rotation("k", 2)
)


def test_rows_that_flatten_heads_and_tokens_run_once_for_both():
    # 5-D heads at dim 2; the pair-swap product over rows of (token, head) takes both sets of heads'
    # rows; the view back and the final view get the merged head count
    check_pipeline(
        graph_with_data(PAIRS + "\n  return %qo, %ko\n}", swap=torch.eye(8)),
        PIPELINE,
        """graph @g {
      input %q: f32[1,s0,4,4,2]
      input %k: f32[1,s0,2,4,2]
      input %cos: f32[1,s0,1,4,1]
      input %sin: f32[1,s0,1,4,2]
      const %swap: f32[8,8]
      %0: f32[1,s0,6,4,2] = aten.cat(%q, %k) {dim=2}
      %1: f32[6*s0,8] = aten.view_copy(%0) {size=[-1, 8]}
      %2: f32[6*s0,8] = aten.mm(%1, %swap)
      %3: f32[1,s0,6,4,2] = aten.view_copy(%2) {size=[1, -1, 6, 4, 2]}
      %4: f32[1,s0,6,4,2] = aten.mul.Tensor(%0, %cos)
      %5: f32[1,s0,6,4,2] = aten.mul.Tensor(%3, %sin)
      %6: f32[1,s0,6,4,2] = aten.add.Tensor(%4, %5)
      %7: f32[1,s0,6,8] = aten.view_copy(%6) {size=[1, -1, 6, 8]}
      %8: f32[1,s0,4,8] = xir.slice(%7) {dim=2, start=0, end=4}
      %9: f32[1,s0,2,8] = xir.slice(%7) {dim=2, start=4, end=6}
      return %8, %9
    }""",
        changed=True,
    )


def test_declines_rows_read_outside_the_chain():
    # q's pair-swapped rows are also a graph output: its rows interleave tokens and heads, no slice takes them out
    check_declined(
        graph_with_data(PAIRS + "\n  return %qo, %ko, %qm\n}", swap=torch.eye(8)),
        PIPELINE,
        RULE,
        re.escape("flattened into rows) is read outside the chain"),
    )


SLICED = """graph @g {{
  input %qkv: f32[1,s0,{heads},8]
  input %cos: f32[s0,1,8]
  %q: f32[1,s0,4,8] = xir.slice(%qkv) {{dim=2, start=0, end=4}}
  %k: f32[1,s0,2,8] = xir.slice(%qkv) {{dim=2, start=4, end=6}}
  %qc: f32[1,s0,4,8] = aten.mul.Tensor(%q, %cos)
  %qs: f32[1,s0,4,8] = aten.sigmoid(%qc)
  %qn: f32[1,s0,4,8] = aten.neg(%qs)
  %qa: f32[1,s0,4,8] = aten.abs(%qn)
  %qt: f32[1,s0,4,8] = aten.tanh(%qa)
  %qe: f32[1,s0,4,8] = aten.exp(%qt)
  %kc: f32[1,s0,2,8] = aten.mul.Tensor(%k, %cos)
  %ks: f32[1,s0,2,8] = aten.sigmoid(%kc)
  %kn: f32[1,s0,2,8] = aten.neg(%ks)
  %ka: f32[1,s0,2,8] = aten.abs(%kn)
  %kt: f32[1,s0,2,8] = aten.tanh(%ka)
  %ke: f32[1,s0,2,8] = aten.exp(%kt)
  return %qe, %ke
}}"""
SLICED_CHAIN = """
  %{n}: f32[1,s0,6,8] = aten.mul.Tensor(%{x}, %cos)
  %{n1}: f32[1,s0,6,8] = aten.sigmoid(%{n})
  %{n2}: f32[1,s0,6,8] = aten.neg(%{n1})
  %{n3}: f32[1,s0,6,8] = aten.abs(%{n2})
  %{n4}: f32[1,s0,6,8] = aten.tanh(%{n3})
  %{n5}: f32[1,s0,6,8] = aten.exp(%{n4})
  %{n6}: f32[1,s0,4,8] = xir.slice(%{n5}) {{dim=2, start=0, end=4}}
  %{n7}: f32[1,s0,2,8] = xir.slice(%{n5}) {{dim=2, start=4, end=6}}
  return %{n6}, %{n7}
}}"""


def test_heads_that_are_adjacent_slices_of_one_tensor_need_no_concatenation():
    # q's and k's heads are slices of one fused projection's (xnnpack.fuse-sibling-linears): the merged
    # chain reads the tensor itself when they are all of it, else one slice of both
    check_pipeline(
        SLICED.format(heads=6),
        PIPELINE,
        """graph @g {
      input %qkv: f32[1,s0,6,8]
      input %cos: f32[s0,1,8]"""
        + SLICED_CHAIN.format(x="qkv", n=0, n1=1, n2=2, n3=3, n4=4, n5=5, n6=6, n7=7),
        changed=True,
    )
    check_pipeline(
        SLICED.format(heads=8),
        PIPELINE,
        """graph @g {
      input %qkv: f32[1,s0,8,8]
      input %cos: f32[s0,1,8]
      %0: f32[1,s0,6,8] = xir.slice(%qkv) {dim=2, start=0, end=6}"""
        + SLICED_CHAIN.format(x=0, n=1, n1=2, n2=3, n3=4, n4=5, n5=6, n6=7, n7=8),
        changed=True,
    )


# the flow's bf16 Llama: q's and k's heads are bf16 slices of the fused projection, each converted to
# fp32 and viewed as pairs (a view to more dims, after the heads), rotated, viewed back and
# converted to bf16; {extra} is an operand of the product with cos
BF16_PAIRS = """graph @g {{
  input %qkv: bf16[1,s0,8,8]
  input %cos: f32[{cos}]
  %q: bf16[1,s0,4,8] = xir.slice(%qkv) {{dim=2, start=0, end=4}}
  %k: bf16[1,s0,2,8] = xir.slice(%qkv) {{dim=2, start=4, end=6}}
  %qf: f32[1,s0,4,8] = xir.convert(%q) {{dtype=f32}}
  %kf: f32[1,s0,2,8] = xir.convert(%k) {{dtype=f32}}
  %q5: f32[1,s0,4,4,2] = aten.view_copy(%qf) {{size=[1, -1, 4, 4, 2]}}
  %k5: f32[1,s0,2,4,2] = aten.view_copy(%kf) {{size=[1, -1, 2, 4, 2]}}
  %qc: {qc} = aten.mul.Tensor(%q5, %cos)
  %kc: {kc} = aten.mul.Tensor(%k5, %cos)
  %qs: {qc} = aten.sigmoid(%qc)
  %ks: {kc} = aten.sigmoid(%kc)
  %qv: f32[1,s0,4,8] = aten.view_copy(%qs) {{size=[1, -1, 4, 8]}}
  %kv: f32[1,s0,2,8] = aten.view_copy(%ks) {{size=[1, -1, 2, 8]}}
  %qb: bf16[1,s0,4,8] = xir.convert(%qv) {{dtype=bf16}}
  %kb: bf16[1,s0,2,8] = xir.convert(%kv) {{dtype=bf16}}
  return %qb, %kb
}}"""


def test_converted_heads_viewed_to_more_dims_run_once_for_both():
    check_pipeline(
        BF16_PAIRS.format(cos="1,s0,1,4,1", qc="f32[1,s0,4,4,2]", kc="f32[1,s0,2,4,2]"),
        PIPELINE,
        """graph @g {
      input %qkv: bf16[1,s0,8,8]
      input %cos: f32[1,s0,1,4,1]
      %0: bf16[1,s0,6,8] = xir.slice(%qkv) {dim=2, start=0, end=6}
      %1: f32[1,s0,6,8] = xir.convert(%0) {dtype=f32}
      %2: f32[1,s0,6,4,2] = aten.view_copy(%1) {size=[1, -1, 6, 4, 2]}
      %3: f32[1,s0,6,4,2] = aten.mul.Tensor(%2, %cos)
      %4: f32[1,s0,6,4,2] = aten.sigmoid(%3)
      %5: f32[1,s0,6,8] = aten.view_copy(%4) {size=[1, -1, 6, 8]}
      %6: bf16[1,s0,6,8] = xir.convert(%5) {dtype=bf16}
      %7: bf16[1,s0,4,8] = xir.slice(%6) {dim=2, start=0, end=4}
      %8: bf16[1,s0,2,8] = xir.slice(%6) {dim=2, start=4, end=6}
      return %7, %8
    }""",
        changed=True,
    )


def test_a_broadcast_to_more_dims_ends_the_chain():
    # the product with a 6-D cos puts a new dim in front: the heads move to dim 3, so the chain ends
    # before it (the views and converts are too short a chain to merge)
    check_declined(
        BF16_PAIRS.format(cos="2,1,s0,1,4,1", qc="f32[2,1,s0,4,4,2]", kc="f32[2,1,s0,2,4,2]"),
        PIPELINE,
        RULE,
        "merging 2 ops would save",
    )
