"""IR text: print -> parse -> print is the identity; errors name line, column and what was expected."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xir import DType, Graph, ParseError, TensorType, parse_graph, print_graph, verify
from xir.attributes import EnumAttr

TEXT = """graph @forward {
  param %w: f32[32,16]
  param %b: f32[32]
  input %x: f32[2,16]
  %0: f32[2,32] = aten.linear(%x, %w, %b)
  %1: f32[2,32] = aten.relu(%0)
  %2: f32[2,32] = aten.clamp(%1) {min=-1.5, max=inf}
  %3: bf16[2,32] = aten._to_copy(%2) {dtype=bf16, memory_format=memory_format.preserve_format}
  %4: f32[2,32], %5: f32[0], %6: f32[0] = some.multi_output(%2) {names=["a", "b"], flag=true, nothing=none}
  return %3, %4
}
"""


def test_round_trip_of_hand_written_text():
    graph = parse_graph(TEXT)
    assert print_graph(graph) == TEXT
    assert graph.nodes[2].attributes == {"min": -1.5, "max": float("inf")}
    assert graph.nodes[3].attributes["dtype"] is DType.bf16
    assert graph.nodes[3].attributes["memory_format"] == EnumAttr("memory_format", "preserve_format")
    assert len(graph.nodes[4].results) == 3
    verify(graph)


def test_origin_is_printed_on_request_and_parsed_back():
    graph = parse_graph(TEXT)
    graph.nodes[1].origin = "my-pass"
    shown = print_graph(graph, show_origin=True)
    assert "aten.relu(%0)  # by my-pass" in shown
    again = parse_graph(shown)
    assert again.nodes[1].origin == "my-pass"
    assert print_graph(again, show_origin=True) == shown
    assert "# by" not in print_graph(graph)


def test_comments_and_blank_lines_are_ignored():
    text = "# a dump\n\n" + TEXT.replace("  %1:", "  # relu next\n  %1:")
    assert print_graph(parse_graph(text)) == TEXT


def _error(text):
    with pytest.raises(ParseError) as info:
        parse_graph(text)
    return info.value


def test_error_bad_token():
    e = _error("graph @g {\n  input %x: f32[2]\n  %0: f32[2] = aten.relu(%x) $\n  return %0\n}\n")
    assert (e.line, e.column) == (3, 30)
    assert "expected end of line, found '$'" in str(e)


def test_error_unknown_value():
    e = _error("graph @g {\n  input %x: f32[2]\n  %0: f32[2] = aten.relu(%y)\n  return %0\n}\n")
    assert (e.line, e.column) == (3, 26)
    assert "unknown value %y" in str(e)


def test_error_unknown_dtype():
    e = _error("graph @g {\n  input %x: f33[2]\n  return %x\n}\n")
    assert (e.line, e.column) == (2, 13)
    assert "unknown dtype 'f33'" in str(e)


def test_error_bad_dimension():
    e = _error("graph @g {\n  input %x: f32[2,?]\n  return %x\n}\n")
    assert e.line == 2 and "dimension" in str(e) and "'?'" in str(e)


def test_error_missing_return():
    e = _error("graph @g {\n  input %x: f32[2]\n")
    assert "expected 'return'" in str(e)


def test_error_redefinition():
    e = _error("graph @g {\n  input %x: f32[2]\n  %x: f32[2] = aten.relu(%x)\n  return %x\n}\n")
    assert e.line == 3 and "defined twice" in str(e)


def test_error_shows_the_line_with_a_caret():
    e = _error("graph @g {\n  input %x: f32[2]\n  %0: f32[2] = aten.relu(%y)\n  return %0\n}\n")
    assert "  %0: f32[2] = aten.relu(%y)" in str(e)
    assert "^" in str(e).splitlines()[-1]


# Random graphs: print -> parse -> print is the identity.
dtypes = st.sampled_from([DType.f32, DType.bf16, DType.i8, DType.i64, DType.bool])
shapes = st.lists(st.integers(0, 9), max_size=8).map(tuple)
attribute_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**12), 10**12),
        st.floats(allow_nan=False),
        st.text(max_size=5),
        dtypes,
    ),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_round_trip_random_graphs(data):
    g = Graph("random")
    values = [
        g.add_input(f"in{i}", TensorType(data.draw(dtypes), data.draw(shapes)))
        for i in range(data.draw(st.integers(1, 3)))
    ]
    for _ in range(data.draw(st.integers(0, 6))):
        operands = data.draw(st.lists(st.sampled_from(values), max_size=3))
        attributes = data.draw(
            st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), attribute_values, max_size=3)
        )
        result_types = [TensorType(data.draw(dtypes), data.draw(shapes)) for _ in range(data.draw(st.integers(0, 2)))]
        node = g.append(
            g.create_node(
                data.draw(st.sampled_from(["aten.abs", "aten.foo.bar", "my_ns.op"])), operands, result_types, attributes
            )
        )
        values.extend(node.results)
    g.outputs = data.draw(st.lists(st.sampled_from(values), max_size=2))
    text = print_graph(g)
    assert print_graph(parse_graph(text)) == text
