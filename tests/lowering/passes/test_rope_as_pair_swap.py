"""IR-text tests of ``xnnpack.rope-as-pair-swap``: the interleaved rotary embedding (pairs split by
slices and squeezes, or selects; rotated; interleaved by unsqueezes and a concatenation) becomes
x5*c5 + swap(x5)*s5, the swap an mm with a 0/1 matrix (one per head width and run). At the
boundaries: a symbolic sequence length, tables that are graph inputs, the result a graph output
also read again, the products in either order, two rotations sharing a width (one matrix);
declined: a difference the other way round, a sum of other tables, a rotated half read elsewhere,
bf16."""

from __future__ import annotations

import textwrap

import pytest
import torch

from passes import parse_pipeline
from passes.testing import check_declined, check_pipeline
from xir import parse_graph

PASS = "xnnpack.rope-as-pair-swap,dead-code-elimination"

ROPE = """
    graph @g {{
      input %x: {t}[1,s0,2,8]
      input %c: {t}[s0,4]
      input %s: {t}[s0,4]
      %x5: {t}[1,s0,2,4,2] = aten.view_copy(%x) {{size=[1, -1, 2, 4, 2]}}
      %a: {t}[1,s0,2,4,1] = aten.slice_copy.Tensor(%x5) {{dim=4, start=0, end=1}}
      %b: {t}[1,s0,2,4,1] = aten.slice_copy.Tensor(%x5) {{dim=4, start=1, end=2}}
      %r: {t}[1,s0,2,4] = aten.squeeze_copy.dims(%a) {{dim=[4]}}
      %i: {t}[1,s0,2,4] = aten.squeeze_copy.dims(%b) {{dim=[4]}}
      %c4: {t}[1,s0,1,4] = aten.view_copy(%c) {{size=[1, -1, 1, 4]}}
      %s4: {t}[1,s0,1,4] = aten.view_copy(%s) {{size=[1, -1, 1, 4]}}
      %rc: {t}[1,s0,2,4] = aten.mul.Tensor(%r, %c4)
      %is: {t}[1,s0,2,4] = aten.mul.Tensor(%i, %s4)
      %re: {t}[1,s0,2,4] = aten.sub.Tensor({first}, {second})
      %rs: {t}[1,s0,2,4] = aten.mul.Tensor(%s4, %r)
      %ic: {t}[1,s0,2,4] = aten.mul.Tensor(%i, {ic_table})
      %im: {t}[1,s0,2,4] = aten.add.Tensor(%ic, %rs)
      %re5: {t}[1,s0,2,4,1] = aten.unsqueeze_copy(%re) {{dim=-1}}
      %im5: {t}[1,s0,2,4,1] = aten.unsqueeze_copy(%im) {{dim=4}}
      %y5: {t}[1,s0,2,4,2] = aten.cat(%re5, %im5) {{dim=-1}}
      %y: {t}[1,s0,2,8] = aten.view_copy(%y5) {{size=[1, -1, 2, 8]}}
      return %y, %y5{extra}
    }}"""


def rope(t="f32", first="%rc", second="%is", ic_table="%c4", extra=""):
    return ROPE.format(t=t, first=first, second=second, ic_table=ic_table, extra=extra)


def test_the_rotation_as_a_pair_swap_symbolic_and_an_output_read_again():
    graph = check_pipeline(
        rope(),
        PASS,
        """
    graph @g {
      input %x: f32[1,s0,2,8]
      input %c: f32[s0,4]
      input %s: f32[s0,4]
      param %rope_pair_swap_8: f32[8,8]
      param %rope_pair_sign_8: f32[2]
      %x5: f32[1,s0,2,4,2] = aten.view_copy(%x) {size=[1, -1, 2, 4, 2]}
      %c4: f32[1,s0,1,4] = aten.view_copy(%c) {size=[1, -1, 1, 4]}
      %s4: f32[1,s0,1,4] = aten.view_copy(%s) {size=[1, -1, 1, 4]}
      %0: f32[s0*2,8] = aten.view_copy(%x5) {size=[-1, 8]}
      %1: f32[1,s0,1,4,1] = aten.view_copy(%c4) {size=[1, -1, 1, 4, 1]}
      %2: f32[1,s0,1,4,1] = aten.view_copy(%s4) {size=[1, -1, 1, 4, 1]}
      %3: f32[s0*2,8] = aten.mm(%0, %rope_pair_swap_8)
      %4: f32[1,s0,2,4,2] = aten.view_copy(%3) {size=[1, -1, 2, 4, 2]}
      %5: f32[1,s0,1,4,2] = aten.mul.Tensor(%2, %rope_pair_sign_8)
      %6: f32[1,s0,2,4,2] = aten.mul.Tensor(%x5, %1)
      %7: f32[1,s0,2,4,2] = aten.mul.Tensor(%4, %5)
      %y5: f32[1,s0,2,4,2] = aten.add.Tensor(%6, %7)
      %y: f32[1,s0,2,8] = aten.view_copy(%y5) {size=[1, -1, 2, 8]}
      return %y, %y5
    }""",
        changed=True,
    )
    swap = graph.input_named("rope_pair_swap_8").data
    x = torch.arange(8.0)
    assert torch.equal(x @ swap, torch.tensor([1.0, 0, 3, 2, 5, 4, 7, 6]))
    assert torch.equal(graph.input_named("rope_pair_sign_8").data, torch.tensor([-1.0, 1.0]))


def _model_and_rewrite(x, c, s, swap):
    """(the model's rotation, the rewrite's) of ``x`` [1, n, 2, 8] by the tables ``c``, ``s`` [n, 4]
    (bf16 tables promote to fp32 in the model's products, and are widened in the rewrite's), the
    pairs swapped by ``swap``, run with torch."""
    n = x.shape[1]
    x5 = x.view(1, n, 2, 4, 2)
    r, i = x5.unbind(-1)
    c4, s4 = c.view(1, n, 1, 4), s.view(1, n, 1, 4)
    model = torch.stack([r * c4 - i * s4, i * c4 + s4 * r], -1)
    swapped = (x5.reshape(-1, 8) @ swap).view(1, n, 2, 4, 2)
    rewrite = x5 * c4.float().unsqueeze(-1) + swapped * (s4.float().unsqueeze(-1) * torch.tensor([-1.0, 1.0]))
    return model, rewrite


def test_the_rewrite_computes_the_same_numbers():
    """The rotation and its rewrite, run on the same tensors with torch: equal bit for bit."""
    swap = torch.zeros(8, 8)
    for k in range(0, 8, 2):
        swap[k, k + 1] = swap[k + 1, k] = 1.0
    expected, actual = _model_and_rewrite(torch.randn(1, 5, 2, 8), torch.randn(5, 4), torch.randn(5, 4), swap)
    assert torch.equal(actual, expected)


def test_two_rotations_of_one_width_share_the_swap():
    text = textwrap.dedent("""
    graph @g {
      input %q: f32[3,4,2]
      input %k: f32[3,4,2]
      input %c: f32[3,4]
      input %s: f32[3,4]
    """)
    for name in ("q", "k"):
        text += textwrap.dedent(f"""
          %{name}r: f32[3,4] = aten.select_copy.int(%{name}) {{dim=-1, index=0}}
          %{name}i: f32[3,4] = aten.select_copy.int(%{name}) {{dim=2, index=1}}
          %{name}1: f32[3,4] = aten.mul.Tensor(%{name}r, %c)
          %{name}2: f32[3,4] = aten.mul.Tensor(%{name}i, %s)
          %{name}re: f32[3,4] = aten.sub.Tensor(%{name}1, %{name}2)
          %{name}3: f32[3,4] = aten.mul.Tensor(%{name}r, %s)
          %{name}4: f32[3,4] = aten.mul.Tensor(%c, %{name}i)
          %{name}im: f32[3,4] = aten.add.Tensor(%{name}3, %{name}4)
          %{name}5: f32[3,4,1] = aten.view_copy(%{name}re) {{size=[3, 4, 1]}}
          %{name}6: f32[3,4,1] = aten.view_copy(%{name}im) {{size=[3, 4, 1]}}
          %{name}y: f32[3,4,2] = aten.cat(%{name}5, %{name}6) {{dim=2}}
        """)
    text += "  return %qy, %ky\n}\n"
    (rewrite,) = [p for p in parse_pipeline(PASS) if p.name == "xnnpack.rope-as-pair-swap"]
    graph = parse_graph(text)
    assert rewrite.run(graph)
    assert rewrite.last_stats.fired["rope_as_pair_swap"] == 2
    assert [v.name for v in graph.inputs if v.name.startswith("rope_pair")] == ["rope_pair_swap_8", "rope_pair_sign_8"]
    assert [n.op for n in graph].count("aten.mm") == 2


@pytest.mark.parametrize(
    "variant, reason",
    [
        (dict(first="%is", second="%rc"), "not the two halves|not r\\*c - i\\*s"),
        (dict(ic_table="%s4"), "not r\\*s \\+ i\\*c"),
        (dict(extra=", %re"), "read elsewhere"),
        (dict(t="bf16"), "not an fp32"),
    ],
)
def test_declined(variant, reason):
    check_declined(rope(**variant), PASS, "rope_as_pair_swap", reason)


# the flow's bf16 recipe: fp32 halves, bf16 tables, and to_edge's cast of a table for each product
# on its own (four casts of two tables); {ic} is what the sum's i*c reads
ROPE_BF16_TABLES = """
    graph @g {{
      input %x: f32[1,s0,2,8]
      input %c: bf16[s0,4]
      input %s: bf16[s0,4]
      %x5: f32[1,s0,2,4,2] = aten.view_copy(%x) {{size=[1, -1, 2, 4, 2]}}
      %r: f32[1,s0,2,4] = aten.select_copy.int(%x5) {{dim=4, index=0}}
      %i: f32[1,s0,2,4] = aten.select_copy.int(%x5) {{dim=4, index=1}}
      %c4: bf16[1,s0,1,4] = aten.view_copy(%c) {{size=[1, -1, 1, 4]}}
      %s4: bf16[1,s0,1,4] = aten.view_copy(%s) {{size=[1, -1, 1, 4]}}
      %c_a: f32[1,s0,1,4] = aten._to_copy(%c4) {{dtype=f32}}
      %s_a: f32[1,s0,1,4] = aten._to_copy(%s4) {{dtype=f32}}
      %s_b: f32[1,s0,1,4] = aten._to_copy(%s4) {{dtype=f32}}
      %c_b: f32[1,s0,1,4] = aten._to_copy({ic}) {{dtype=f32}}
      %rc: f32[1,s0,2,4] = aten.mul.Tensor(%r, %c_a)
      %is: f32[1,s0,2,4] = aten.mul.Tensor(%i, %s_a)
      %re: f32[1,s0,2,4] = aten.sub.Tensor(%rc, %is)
      %rs: f32[1,s0,2,4] = aten.mul.Tensor(%r, %s_b)
      %ic: f32[1,s0,2,4] = aten.mul.Tensor(%i, %c_b)
      %im: f32[1,s0,2,4] = aten.add.Tensor(%rs, %ic)
      %re5: f32[1,s0,2,4,1] = aten.unsqueeze_copy(%re) {{dim=-1}}
      %im5: f32[1,s0,2,4,1] = aten.unsqueeze_copy(%im) {{dim=-1}}
      %y5: f32[1,s0,2,4,2] = aten.cat(%re5, %im5) {{dim=-1}}
      return %y5
    }}"""


def test_bf16_tables_cast_for_each_product_are_one_table_each():
    """A cast of a table is that table: the rewrite reads the difference's casts (the sum's become
    dead), and computes the numbers the model does (the casts widen bf16 exactly)."""
    graph = check_pipeline(
        ROPE_BF16_TABLES.format(ic="%c4"),
        PASS,
        """
    graph @g {
      input %x: f32[1,s0,2,8]
      input %c: bf16[s0,4]
      input %s: bf16[s0,4]
      param %rope_pair_swap_8: f32[8,8]
      param %rope_pair_sign_8: f32[2]
      %x5: f32[1,s0,2,4,2] = aten.view_copy(%x) {size=[1, -1, 2, 4, 2]}
      %c4: bf16[1,s0,1,4] = aten.view_copy(%c) {size=[1, -1, 1, 4]}
      %s4: bf16[1,s0,1,4] = aten.view_copy(%s) {size=[1, -1, 1, 4]}
      %c_a: f32[1,s0,1,4] = aten._to_copy(%c4) {dtype=f32}
      %s_a: f32[1,s0,1,4] = aten._to_copy(%s4) {dtype=f32}
      %0: f32[s0*2,8] = aten.view_copy(%x5) {size=[-1, 8]}
      %1: f32[1,s0,1,4,1] = aten.view_copy(%c_a) {size=[1, -1, 1, 4, 1]}
      %2: f32[1,s0,1,4,1] = aten.view_copy(%s_a) {size=[1, -1, 1, 4, 1]}
      %3: f32[s0*2,8] = aten.mm(%0, %rope_pair_swap_8)
      %4: f32[1,s0,2,4,2] = aten.view_copy(%3) {size=[1, -1, 2, 4, 2]}
      %5: f32[1,s0,1,4,2] = aten.mul.Tensor(%2, %rope_pair_sign_8)
      %6: f32[1,s0,2,4,2] = aten.mul.Tensor(%x5, %1)
      %7: f32[1,s0,2,4,2] = aten.mul.Tensor(%4, %5)
      %y5: f32[1,s0,2,4,2] = aten.add.Tensor(%6, %7)
      return %y5
    }""",
        changed=True,
    )
    tables = torch.randn(5, 4).bfloat16(), torch.randn(5, 4).bfloat16()
    expected, actual = _model_and_rewrite(torch.randn(1, 5, 2, 8), *tables, graph.input_named("rope_pair_swap_8").data)
    assert expected.dtype is torch.float32
    assert torch.equal(actual, expected)


def test_casts_of_different_tables_are_not_one_table():
    check_declined(ROPE_BF16_TABLES.format(ic="%s4"), PASS, "rope_as_pair_swap", "not r\\*s \\+ i\\*c")
