"""IR-text tests of ``xnnpack.partial-rotary-whole-head``: a partial rotary embedding (rotate_half on
the first R of a head's W dims, the rest concatenated back; as ``xnnpack.rotate-half-sign-in-sin``
leaves it) becomes x*wide(c, 1) + swap(x)*wide(s', 0) over the whole head, the swap one mm with a
0/1 matrix, each table widened once by an mm (and a fill). At the boundaries: a symbolic sequence
length, the rotated tensor a graph input that is also an output, tables that are constants shared
by q and k (widened once each), the result a graph output read by another op too, bf16, the
numbers bit for bit (the rewritten graph run with torch's ops); declined: the rotated part read
elsewhere, a piece of another tensor, a tail that is not the rest of the head, a table of another
width, two symbolic dims."""

from __future__ import annotations

import textwrap

import pytest
import torch

from passes import parse_pipeline
from passes.testing import check_declined, check_pipeline
from xir import parse_graph

SIGN = "xnnpack.rotate-half-sign-in-sin,dead-code-elimination"
PASS = "xnnpack.partial-rotary-whole-head,dead-code-elimination"

# the Hugging Face partial rotation of x (W = 8, R = 4), then what rotate-half-sign-in-sin makes of it
ROTATION = """
  %a{n}: {t}[{lead},4] = aten.slice_copy.Tensor(%{x}) {{dim={dim}, start=0, end=4}}
  %b{n}: {t}[{lead},4] = aten.slice_copy.Tensor(%{tail_of}) {{dim=-1, start={tail_start}, end={tail_end}}}
  %a1{n}: {t}[{lead},2] = aten.slice_copy.Tensor(%a{n}) {{dim=-1, start=0, end=2}}
  %a2{n}: {t}[{lead},2] = aten.slice_copy.Tensor(%a{n}) {{dim=-1, start=2, end=4}}
  %n{n}: {t}[{lead},2] = aten.neg(%a2{n})
  %h{n}: {t}[{lead},4] = aten.cat(%n{n}, %a1{n}) {{dim=-1}}
  %ac{n}: {t}[{lead},4] = aten.mul.Tensor(%a{n}, %{c})
  %hs{n}: {t}[{lead},4] = aten.mul.Tensor(%s, %h{n})
  %r{n}: {t}[{lead},4] = aten.add.Tensor(%hs{n}, %ac{n})
  %y{n}: {t}[{lead},8] = aten.cat(%r{n}, %b{n}) {{dim=-1}}
"""


def rotation(
    n="", x="x", t="f32", lead="1,s0,2", dim=3, tail_of=None, tail_start=4, tail_end=9223372036854775807, c="c"
):
    return ROTATION.format(
        n=n, x=x, t=t, lead=lead, dim=dim, tail_of=tail_of or x, tail_start=tail_start, tail_end=tail_end, c=c
    )


def one(t="f32", lead="1,s0,2", table="s0,1,4", outputs="%y, %x", **variant):
    return (
        textwrap.dedent(f"""
    graph @g {{
      input %x: {t}[{lead},8]
      input %other: {t}[{lead},8]
      input %c: {t}[{table}]
      input %s: {t}[{table}]
    """)
        + rotation(t=t, lead=lead, **variant)
        + f"  return {outputs}\n}}\n"
    )


def rewritten(text: str, before: str = SIGN):
    """``text`` after rotate-half-sign-in-sin (the form the pass matches)."""
    graph = parse_graph(text)
    for rewrite in parse_pipeline(before):
        rewrite.run(graph)
    return graph


def test_the_partial_rotation_over_the_whole_head_symbolic_and_an_input_that_is_an_output():
    graph = check_pipeline(
        rewritten(one()),
        PASS,
        """
    graph @g {
      input %x: f32[1,s0,2,8]
      input %other: f32[1,s0,2,8]
      input %c: f32[s0,1,4]
      input %s: f32[s0,1,4]
      param %rotate_half_sign_4: f32[4]
      param %partial_rotary_swap_4_of_8: f32[8,8]
      param %partial_rotary_embed_4_in_8: f32[4,8]
      param %partial_rotary_fill_4_in_8: f32[8]
      %0: f32[s0,4] = aten.view_copy(%c) {size=[-1, 4]}
      %1: f32[s0,8] = aten.mm(%0, %partial_rotary_embed_4_in_8)
      %2: f32[s0,1,8] = aten.view_copy(%1) {size=[-1, 1, 8]}
      %3: f32[s0,1,8] = aten.add.Tensor(%2, %partial_rotary_fill_4_in_8)
      %4: f32[s0,1,4] = aten.mul.Tensor(%s, %rotate_half_sign_4)
      %5: f32[s0,4] = aten.view_copy(%4) {size=[-1, 4]}
      %6: f32[s0,8] = aten.mm(%5, %partial_rotary_embed_4_in_8)
      %7: f32[s0,1,8] = aten.view_copy(%6) {size=[-1, 1, 8]}
      %8: f32[s0*2,8] = aten.view_copy(%x) {size=[-1, 8]}
      %9: f32[s0*2,8] = aten.mm(%8, %partial_rotary_swap_4_of_8)
      %10: f32[1,s0,2,8] = aten.view_copy(%9) {size=[1, -1, 2, 8]}
      %11: f32[1,s0,2,8] = aten.mul.Tensor(%x, %3)
      %12: f32[1,s0,2,8] = aten.mul.Tensor(%10, %7)
      %13: f32[1,s0,2,8] = aten.add.Tensor(%11, %12)
      return %13, %x
    }""",
        changed=True,
    )
    swap = torch.zeros(8, 8)
    for j in range(2):
        swap[j, j + 2] = swap[j + 2, j] = 1.0
    assert torch.equal(graph.input_named("partial_rotary_swap_4_of_8").data, swap)
    assert torch.equal(graph.input_named("partial_rotary_embed_4_in_8").data, torch.eye(4, 8))
    assert torch.equal(graph.input_named("partial_rotary_fill_4_in_8").data, torch.tensor([0.0] * 4 + [1.0] * 4))


def test_xir_slices_after_common_subexpressions_as_the_default_pipeline_has_them():
    """In the default pipeline the pass runs after xnnpack.slices-as-xir-slices (the head's pieces
    are xir.slice on a symbolic sequence length) and common-subexpression-elimination."""
    graph = rewritten(one(), SIGN + ",xnnpack.slices-as-xir-slices,common-subexpression-elimination")
    assert sum(node.op == "xir.slice" for node in graph) == 3 and sum(node.op == "aten.cat" for node in graph) == 2
    for rewrite in parse_pipeline(PASS):
        assert rewrite.run(graph)
    ops = [node.op for node in graph]
    assert "aten.cat" not in ops and "xir.slice" not in ops and ops.count("aten.mm") == 3, ops


def _run(graph, **inputs):
    """The graph's outputs, each node run with torch's own op on the given inputs (and the
    constants the passes made)."""
    from lowering.fx.writeback import resolve_op
    from xir.fx_import import op_arguments

    values = {value: inputs[value.name] if value.name in inputs else value.data for value in graph.inputs}
    for node in graph:
        target = resolve_op(node.op)
        args, kwargs = op_arguments(target._schema, node, values.__getitem__)
        out = target(*args, **kwargs)
        for value, tensor in zip(node.results, out if isinstance(out, (list, tuple)) else [out]):
            values[value] = tensor
    return [values[value] for value in graph.outputs]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_the_rewrite_computes_the_same_numbers(dtype):
    """The model's rotation and the rewritten graph, run with torch's ops on the same tensors:
    equal bit for bit (the swap's and the widenings' sums have one non-zero product)."""
    t = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    text = one(t=t, lead="1,5,2", table="5,1,4")
    before, after = parse_graph(text), rewritten(text)
    for rewrite in parse_pipeline(PASS):
        assert rewrite.run(after)
    assert not any(node.op == "aten.cat" for node in after)
    generator = torch.Generator().manual_seed(0)
    inputs = {
        name: torch.randn(shape, generator=generator).to(dtype) * 4
        for name, shape in (("x", (1, 5, 2, 8)), ("other", (1, 5, 2, 8)), ("c", (5, 1, 4)), ("s", (5, 1, 4)))
    }
    (expected, _), (actual, _) = _run(before, **inputs), _run(after, **inputs)
    assert actual.dtype is dtype and torch.equal(actual, expected)


def test_q_and_k_share_the_widened_tables_which_are_constants_bf16():
    """q and k read the same constant tables: one widening of each, one swap matrix; the result of
    q is a graph output that another op reads too."""
    text = (
        textwrap.dedent("""
    graph @g {
      input %q: bf16[1,3,4,8]
      input %k: bf16[1,3,2,8]
      param %c: bf16[3,1,4]
      param %s: bf16[3,1,4]
    """)
        + rotation(n="q", x="q", t="bf16", lead="1,3,4")
        + rotation(n="k", x="k", t="bf16", lead="1,3,2")
        + textwrap.dedent("""
      %qq: bf16[1,3,4,8] = aten.mul.Tensor(%yq, %yq)
      return %yq, %yk, %qq
    }""")
    )
    check_pipeline(
        rewritten(text),
        PASS,
        """
    graph @g {
      input %q: bf16[1,3,4,8]
      input %k: bf16[1,3,2,8]
      param %c: bf16[3,1,4]
      param %s: bf16[3,1,4]
      param %rotate_half_sign_4: bf16[4]
      param %partial_rotary_swap_4_of_8: bf16[8,8]
      param %partial_rotary_embed_4_in_8: bf16[4,8]
      param %partial_rotary_fill_4_in_8: bf16[8]
      %0: bf16[3,4] = aten.view_copy(%c) {size=[3, 4]}
      %1: bf16[3,8] = aten.mm(%0, %partial_rotary_embed_4_in_8)
      %2: bf16[3,1,8] = aten.view_copy(%1) {size=[3, 1, 8]}
      %3: bf16[3,1,8] = aten.add.Tensor(%2, %partial_rotary_fill_4_in_8)
      %4: bf16[3,1,4] = aten.mul.Tensor(%s, %rotate_half_sign_4)
      %5: bf16[3,4] = aten.view_copy(%4) {size=[3, 4]}
      %6: bf16[3,8] = aten.mm(%5, %partial_rotary_embed_4_in_8)
      %7: bf16[3,1,8] = aten.view_copy(%6) {size=[3, 1, 8]}
      %8: bf16[12,8] = aten.view_copy(%q) {size=[12, 8]}
      %9: bf16[12,8] = aten.mm(%8, %partial_rotary_swap_4_of_8)
      %10: bf16[1,3,4,8] = aten.view_copy(%9) {size=[1, 3, 4, 8]}
      %11: bf16[1,3,4,8] = aten.mul.Tensor(%q, %3)
      %12: bf16[1,3,4,8] = aten.mul.Tensor(%10, %7)
      %13: bf16[1,3,4,8] = aten.add.Tensor(%11, %12)
      %14: bf16[6,8] = aten.view_copy(%k) {size=[6, 8]}
      %15: bf16[6,8] = aten.mm(%14, %partial_rotary_swap_4_of_8)
      %16: bf16[1,3,2,8] = aten.view_copy(%15) {size=[1, 3, 2, 8]}
      %17: bf16[1,3,2,8] = aten.mul.Tensor(%k, %3)
      %18: bf16[1,3,2,8] = aten.mul.Tensor(%16, %7)
      %19: bf16[1,3,2,8] = aten.add.Tensor(%17, %18)
      %qq: bf16[1,3,4,8] = aten.mul.Tensor(%13, %13)
      return %13, %19, %qq
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "variant, reason",
    [
        (dict(outputs="%y, %r"), "the rotated part is read elsewhere"),
        (dict(tail_of="other"), "not x\\[\\.\\.\\., :R\\]"),
        (dict(tail_start=2, tail_end=6), "the second piece is not the end of the head"),
        (dict(table="s0,1,1"), "a table is not of the head's dtype with R as its last dim"),
        (dict(lead="s1,s0,2"), "two or more symbolic dims"),
    ],
)
def test_declined(variant, reason):
    check_declined(rewritten(one(**variant)), PASS, "partial_rotary_whole_head", reason)
