"""IR-text tests of remove-no-ops (a pattern-rewrite pass) and dead-code-elimination."""

import textwrap

import pytest

from passes import PassManager, apply_patterns_greedily
from passes.remove_no_ops import RemoveNoOps
from passes.testing import check_pipeline
from xir import parse_graph


def test_identity_view_and_permute_go():
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
      %b: f32[2,3] = aten.permute_copy(%a) {dims=[0, 1]}
      %c: f32[2,3] = aten.relu(%b)
      return %c
    }""",
        "remove-no-ops",
        """
    graph @g {
      input %x: f32[2,3]
      %c: f32[2,3] = aten.relu(%x)
      return %c
    }""",
        changed=True,
    )


def test_view_chains_and_permute_chains_fold():
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %b: f32[24] = aten.view_copy(%a) {size=[24]}
      %c: f32[3,2,4] = aten.permute_copy(%x) {dims=[1, 0, 2]}
      %d: f32[4,2,3] = aten.permute_copy(%c) {dims=[2, 1, 0]}
      return %b, %d
    }""",
        "remove-no-ops,dead-code-elimination",
        """
    graph @g {
      input %x: f32[2,3,4]
      %b: f32[24] = aten.view_copy(%x) {size=[24]}
      %d: f32[4,2,3] = aten.permute_copy(%x) {dims=[2, 0, 1]}
      return %b, %d
    }""",
    )


def test_permute_then_inverse_vanishes():
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,3,4]
      %a: f32[4,2,3] = aten.permute_copy(%x) {dims=[2, 0, 1]}
      %b: f32[2,3,4] = aten.permute_copy(%a) {dims=[1, 2, 0]}
      %c: f32[2,3,4] = aten.neg(%b)
      return %c
    }""",
        "remove-no-ops,dead-code-elimination",
        """
    graph @g {
      input %x: f32[2,3,4]
      %c: f32[2,3,4] = aten.neg(%x)
      return %c
    }""",
    )


def test_kept_when_it_would_make_an_input_an_output():
    text = """
    graph @g {
      input %x: f32[2,3]
      %a: f32[2,3] = aten.clone(%x)
      return %a
    }"""
    check_pipeline(text, "remove-no-ops", text, changed=False)


def test_conversions_that_change_something_stay():
    text = """
    graph @g {
      input %x: f32[2,3]
      %a: bf16[2,3] = aten._to_copy(%x) {dtype=bf16}
      %b: bf16[2,3] = dim_order_ops._to_dim_order_copy(%a) {dtype=bf16, dim_order=[1, 0]}
      %c: bf16[2,3] = dim_order_ops._to_dim_order_copy(%b) {dtype=bf16, dim_order=[0, 1]}
      %d: bf16[2,3] = aten.neg(%c)
      return %d
    }"""
    check_pipeline(
        text,
        "remove-no-ops",
        text.replace(
            "      %c: bf16[2,3] = dim_order_ops._to_dim_order_copy(%b) {dtype=bf16, dim_order=[0, 1]}\n", ""
        ).replace("aten.neg(%c)", "aten.neg(%b)"),
    )


def test_rule_counts_and_reasons():
    graph = parse_graph("""graph @g {
  input %x: f32[2,3]
  %0: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
  %1: f32[3,2] = aten.permute_copy(%0) {dims=[1, 0]}
  %2: f32[3,2] = aten.neg(%1)
  return %2
}
""")
    stats = apply_patterns_greedily(graph, RemoveNoOps().patterns())
    assert stats.fired == {"drop_identity_reshape": 1}
    assert any("not the identity" in reason for reason in stats.declined["drop_identity_permute"])
    assert stats.summary() == "drop_identity_reshape x1"
    p = RemoveNoOps()
    PassManager([p]).run(graph)
    assert p.last_stats is not None and not p.last_stats.changed


def test_dead_code_keeps_side_effects():
    text = """
    graph @g {
      input %x: f32[2]
      %a: f32[2] = aten.neg(%x)
      %b: f32[2] = aten.add_.Tensor(%x, %x)
      %c: f32[2] = custom.thing(%x)
      %d: f32[2] = aten.relu(%x)
      return %d
    }"""
    check_pipeline(text, "dead-code-elimination", text.replace("      %a: f32[2] = aten.neg(%x)\n", ""))


# ----------------------------------------------------------------- identity elements (OpDef.identity)


def _with_data(text: str, **data):
    """``text`` parsed, each named constant given its data (numpy: the passes read it through
    ``Value.scalar``, never importing torch)."""
    import numpy

    from xir import parse_graph

    graph = parse_graph(textwrap.dedent(text))
    for name, value in data.items():
        graph.input_named(name).data = numpy.asarray(value, dtype=numpy.float32)
    return graph


@pytest.mark.parametrize(
    "line, dropped",
    [
        ("%y: f32[2,3] = aten.mul.Tensor(%x, %one)", True),  # x * 1 (a 0-D constant: the edge dialect's scalar)
        ("%y: f32[2,3] = aten.mul.Tensor(%one, %x)", True),  # 1 * x
        ("%y: f32[2,3] = aten.mul.Tensor(%x) {other=1.0}", True),  # the scalar as an attribute
        ("%y: f32[2,3] = aten.mul.Scalar(%x) {other=1}", True),
        ("%y: f32[2,3] = aten.div.Tensor(%x, %one)", True),
        ("%y: f32[2,3] = aten.add.Tensor(%x, %zero) {alpha=3}", True),  # x + 3 * 0
        ("%y: f32[2,3] = aten.sub.Scalar(%x) {other=0}", True),
        ("%y: f32[2,3] = aten.pow.Tensor_Scalar(%x) {exponent=1}", True),
        ("%y: f32[2,3] = aten.add.Tensor(%zero, %x)", False),  # 0 + alpha * x: not x unless alpha is 1
        ("%y: f32[2,3] = aten.div.Tensor(%one, %x)", False),  # 1 / x
        ("%y: f32[2,3] = aten.mul.Tensor(%x, %two)", False),
        ("%y: f32[2,3] = aten.mul.Tensor(%x, %w)", False),  # a constant of more than one element, not all 1
        ("%y: f32[2,3] = aten.mul.Tensor(%x, %ones)", True),  # ... all 1
        ("%y: f32[2,3] = aten.add.Tensor(%x, %mask)", True),  # a folded attention mask of zeros, broadcast
        ("%y: f32[2,3] = aten.add.Tensor(%x, %ones)", False),
        ("%y: f32[2,3] = aten.mul.Tensor(%x, %x)", False),  # computed, not a known number
    ],
)
def test_an_operation_by_its_identity_element_is_dropped(line, dropped):
    text = f"""
    graph @g {{
      input %x: f32[2,3]
      param %one: f32[]
      param %zero: f32[]
      param %two: f32[]
      param %w: f32[2,3]
      param %ones: f32[2,3]
      param %mask: f32[1,3]
      {line}
      %r: f32[2,3] = aten.relu(%y)
      return %r
    }}"""
    graph = _with_data(
        text, one=1.0, zero=0.0, two=2.0, w=[[1.0, 1.0, 2.0]] * 2, ones=[[1.0] * 3] * 2, mask=[[0.0] * 3]
    )
    expected = text.replace(line + "\n", "").replace("aten.relu(%y)", "aten.relu(%x)") if dropped else text
    check_pipeline(graph, "remove-no-ops", expected, changed=dropped)


def test_identity_operations_at_the_boundaries():
    # the result is a graph output and x a graph input: kept (the input would become an output);
    # the result has several readers, and x is a constant: each reader reads x
    text = """
    graph @g {
      input %x: f32[2,3]
      param %one: f32[]
      param %c: f32[2,3]
      %y: f32[2,3] = aten.mul.Tensor(%x, %one)
      %z: f32[2,3] = aten.mul.Tensor(%c, %one)
      %a: f32[2,3] = aten.relu(%z)
      %b: f32[2,3] = aten.neg(%z)
      %s: f32[2,3] = aten.add.Tensor(%a, %b)
      return %y, %s
    }"""
    graph = _with_data(text, one=1.0, c=[[2.0] * 3] * 2)
    check_pipeline(
        graph,
        "remove-no-ops",
        """
    graph @g {
      input %x: f32[2,3]
      param %one: f32[]
      param %c: f32[2,3]
      %y: f32[2,3] = aten.mul.Tensor(%x, %one)
      %a: f32[2,3] = aten.relu(%c)
      %b: f32[2,3] = aten.neg(%c)
      %s: f32[2,3] = aten.add.Tensor(%a, %b)
      return %y, %s
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "text",
    [
        # broadcast: x * ones([2, 3]) with x of [3] has a larger result than x
        """graph @g {
      input %x: f32[3]
      param %ones: f32[2,3]
      %y: f32[2,3] = aten.mul.Tensor(%x, %ones)
      return %y
    }""",
    ],
)
def test_an_identity_operation_that_changes_the_type_stays(text):
    check_pipeline(_with_data(text, ones=[[1.0] * 3] * 2), "remove-no-ops", text, changed=False)


def test_a_mask_of_zeros_at_the_boundaries():
    """A folded all-zero mask added to attention scores: the sum is dropped where the scores are
    read by one op and by several, and where the mask is read by two sums (each goes); kept where
    the sum is a graph output and the scores a graph input (the input would become an output)."""
    text = """
    graph @g {
      input %x: f32[1,2,3,3]
      param %mask: f32[1,1,3,3]
      %s: f32[1,2,3,3] = aten.relu(%x)
      %a: f32[1,2,3,3] = aten.add.Tensor(%s, %mask)
      %b: f32[1,2,3,3] = aten.add.Tensor(%x, %mask)
      %p: f32[1,2,3,3] = aten._softmax(%a) {dim=-1, half_to_float=false}
      %q: f32[1,2,3,3] = aten.neg(%a)
      return %p, %q, %b
    }"""
    check_pipeline(
        _with_data(text, mask=[[[[0.0] * 3] * 3]]),
        "remove-no-ops",
        """
    graph @g {
      input %x: f32[1,2,3,3]
      param %mask: f32[1,1,3,3]
      %s: f32[1,2,3,3] = aten.relu(%x)
      %b: f32[1,2,3,3] = aten.add.Tensor(%x, %mask)
      %p: f32[1,2,3,3] = aten._softmax(%s) {dim=-1, half_to_float=false}
      %q: f32[1,2,3,3] = aten.neg(%s)
      return %p, %q, %b
    }""",
        changed=True,
    )


def test_symbolic_shapes_alias_and_one_input_cat_go():
    """With a dynamic sequence length (ExecuTorch's LLM flow: Qwen3's q/k norm reads an alias, its
    rotary cat keeps one input once the empty pass-through part is dropped): the same symbol in
    operand and result is the same size. A view that changes the symbolic dim's place stays."""
    check_pipeline(
        """
    graph @g {
      input %x: f32[1,s0,8]
      input %p: f32[1,s0,0]
      %a: f32[1,s0,8] = aten.alias_copy(%x)
      %r: f32[1,s0,8] = aten.relu(%a)
      %c: f32[1,s0,8] = aten.cat(%r, %p) {dim=-1}
      %v: f32[s0,1,8] = aten.view_copy(%c) {size=[-1, 1, 8]}
      %n: f32[s0,1,8] = aten.neg(%v)
      return %n
    }""",
        "remove-no-ops",
        """
    graph @g {
      input %x: f32[1,s0,8]
      input %p: f32[1,s0,0]
      %r: f32[1,s0,8] = aten.relu(%x)
      %v: f32[s0,1,8] = aten.view_copy(%r) {size=[-1, 1, 8]}
      %n: f32[s0,1,8] = aten.neg(%v)
      return %n
    }""",
        changed=True,
    )
