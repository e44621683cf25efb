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
    view = g.append(
        g.create_node("aten.view_copy", [x], [TensorType(DType.f32, (Symbol("s0"), 4))], {"size": [size.result, 4]})
    )
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
    clone.set_attribute(clone.nodes[1], "alpha", 5)
    assert g.nodes[1].attributes["alpha"] == 1
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


# ----------------------------------------------------------------- graph outputs are uses


def test_graph_outputs_are_uses():
    g, x, relu, add = small_graph()
    g.outputs = [add.result, relu.result]
    assert relu.result.is_graph_output() and add.result.is_graph_output() and not x.is_graph_output()
    assert relu.result.uses == [add, add, g.return_node]
    assert add.result.has_one_use() and add.result.single_user() is None  # its one use is being returned
    assert x.single_user() is relu and not relu.result.is_unused()
    with pytest.raises(IRError, match="still used by aten.add.Tensor, the graph outputs"):
        g.erase(relu)
    verify(g)


def test_replace_all_uses_moves_outputs_unless_told_not_to():
    g, x, relu, add = small_graph()
    neg = g.insert_after(add, g.create_node("aten.neg", [x]))
    mul = g.insert_after(neg, g.create_node("aten.mul.Tensor", [add.result, x]))
    g.replace_all_uses(add.result, neg.result, outputs=False)
    assert g.outputs == (add.result,) and mul.operands == (neg.result, x)  # the node moved, the output did not
    g.replace_all_uses(add.result, neg.result)
    assert g.outputs == (neg.result,) and add.result.is_unused()
    verify(g)


def test_replace_node_takes_none_for_unused_results_only():
    g = Graph()
    x = g.add_input("x", F32(2, 3))
    pool = g.append(
        g.create_node(
            "aten.max_pool2d_with_indices", [g.add_input("y", F32(1, 1, 4, 4))], attributes={"kernel_size": [2, 2]}
        )
    )
    g.outputs = [pool.results[0], pool.results[1]]
    with pytest.raises(IRError, match="result 1 is used but has no replacement"):
        g.replace_node(pool, [x, None])
    g.outputs = [pool.results[0]]
    relu = g.insert_before(pool, g.create_node("aten.relu", [x]))
    g.replace_node(pool, [relu.result, None])
    assert g.outputs == (relu.result,) and len(g) == 1
    verify(g)


def test_verifier_checks_output_bookkeeping():
    g, x, relu, add = small_graph()
    add.result.uses.remove(g.return_node)  # an output the use-list forgot
    with pytest.raises(Exception, match="output bookkeeping of %1 is inconsistent"):
        verify(g)


def test_rollback_restores_everything():
    g, x, relu, add = small_graph()
    text = print_graph(g)
    saved = g.checkpoint()
    neg = g.insert_before(relu, g.create_node("aten.neg", [x]))
    g.set_operand(relu, 0, neg.result)
    g.set_attribute(add, "alpha", 2)
    g.outputs = [relu.result]
    g.erase(add)
    g.add_constant("c", F32(1), None)
    g.rollback(saved)
    assert print_graph(g) == text and g.nodes == [relu, add] and neg.graph is None
    assert x.uses == [relu] and add.result.uses == [g.return_node]
    verify(g)
    with pytest.raises(ValueError):
        with g.transaction():
            g.set_attribute(add, "alpha", 3)
            raise ValueError("undo")
    assert print_graph(g) == text
