"""The op registry is what the verifier, DCE, Graph.create_node, named operands and the
lowering's capability rules read: defining an op in one place is all it takes."""

import pytest

from lowering.capability import Options, float_verdict
from passes import PassManager
from xir import DType, Graph, IRError, TensorType, VerificationError, parse_graph, print_graph, verify
from xir.ops import ELEMENTWISE, PURE, define_op, has_trait, lookup, same_as_input, undefine_op

F32 = lambda *shape: TensorType(DType.f32, shape)  # noqa: E731


@pytest.fixture
def softsign():
    """A new op, defined in one place."""
    definition = define_op(
        "test.softsign",
        operands=("input", "scale?"),
        attributes={"eps": 0.0},
        traits=PURE | ELEMENTWISE,
        infer=same_as_input,
        check=lambda node: None if node.input.rank <= 4 else "at most 4-D",
    )
    yield definition
    undefine_op("test.softsign")


TEXT = """graph @g {
  input %x: f32[2,3]
  %0: f32[2,3] = test.softsign(%x) {eps=0.5}
  %1: f32[2,3] = test.softsign(%x)
  return %1
}
"""


def test_a_new_op_verifies_prints_parses_and_is_pure(softsign):
    graph = parse_graph(TEXT)
    assert verify(graph) == []  # nothing opaque
    assert print_graph(parse_graph(print_graph(graph))) == print_graph(graph)
    node = graph.nodes[0]
    assert node.definition is softsign and node.input is graph.inputs[0] and node.scale is None
    assert node.operand("input") is graph.inputs[0]
    assert node.attribute("eps") == 0.5 and graph.nodes[1].attribute("eps") == 0.0  # the schema's default
    # DCE reads the pure trait: the unused first node goes, the returned one stays
    assert PassManager("dead-code-elimination").run(graph).changed
    assert [n.op for n in graph] == ["test.softsign"] and graph.nodes[0].result is graph.outputs[0]


def test_a_new_op_infers_result_types_and_is_checked(softsign):
    graph = Graph()
    x = graph.add_input("x", F32(2, 3))
    node = graph.append(graph.create_node("test.softsign", [x]))  # no result types: inferred
    assert node.result.type == F32(2, 3)
    graph.outputs = [node.result]
    verify(graph)
    wrong = parse_graph(TEXT.replace("%1: f32[2,3] = test.softsign(%x)", "%1: f32[2,4] = test.softsign(%x)"))
    with pytest.raises(VerificationError, match=r"test.softsign: result shape is \[2,4\], expected \[2,3\]"):
        verify(wrong)
    big = parse_graph(
        "graph @g {\n  input %x: f32[1,1,1,1,1]\n  %0: f32[1,1,1,1,1] = test.softsign(%x)\n  return %0\n}\n"
    )
    with pytest.raises(VerificationError, match="at most 4-D"):
        verify(big)
    many = parse_graph("graph @g {\n  input %x: f32[2]\n  %0: f32[2] = test.softsign(%x, %x, %x)\n  return %0\n}\n")
    with pytest.raises(VerificationError, match=r"takes 1 to 2 operands \(input, scale\?\), got 3"):
        verify(many)


def test_a_new_op_gets_a_capability_verdict(softsign):
    graph = parse_graph(TEXT)
    verdict = float_verdict(graph.nodes[0], Options())
    assert not verdict.supported and verdict.reason == "XNNPACK has no rule for this op"
    undefine_op("test.softsign")
    try:
        opaque = float_verdict(parse_graph(TEXT).nodes[0], Options())
        assert not opaque.supported and "opaque op" in opaque.reason
    finally:
        define_op(
            "test.softsign", operands=("input", "scale?"), attributes={"eps": 0.0}, traits=PURE, infer=same_as_input
        )


def test_opaque_ops_round_trip_are_named_by_the_verifier_and_kept_by_dce():
    text = "graph @g {\n  input %x: f32[2]\n  %0: f32[2] = custom.thing(%x) {k=1}\n  %1: f32[2] = aten.relu(%x)\n  return %x\n}\n"
    graph = parse_graph(text)
    assert print_graph(graph) == text
    assert verify(graph) == ["custom.thing"]
    with pytest.raises(VerificationError, match="opaque ops .*: custom.thing"):
        verify(graph, allow_opaque=False)
    PassManager("dead-code-elimination").run(graph)
    assert [n.op for n in graph] == ["custom.thing"]  # may have side effects: kept; the pure relu went
    with pytest.raises(IRError, match="opaque op"):
        graph.create_node("custom.thing", [graph.inputs[0]])  # no definition: result types must be given


def test_defining_an_op_twice_is_an_error(softsign):
    with pytest.raises(IRError, match="already defined"):
        define_op("test.softsign", operands=("input",))


def test_traits_and_named_operands_of_built_in_ops():
    assert has_trait("aten.add.Tensor", "commutative") and has_trait("aten.add.Tensor", "elementwise")
    assert has_trait("aten.view_copy", "view") and not has_trait("aten.linear", "view")
    assert lookup("aten.addmm").weights == ("weight", "bias")
    graph = parse_graph(
        """graph @g {
      input %x: f32[4,8]
      param %w: f32[8,16]
      param %b: f32[16]
      %0: f32[4,16] = aten.addmm(%b, %x, %w)
      %1: f32[1,2,3,3] = aten.convolution(%x) {bias=none}
      return %0
    }""".replace("      %1: f32[1,2,3,3] = aten.convolution(%x) {bias=none}\n", "")
    )
    addmm = graph.nodes[0]
    assert (addmm.input.name, addmm.weight.name, addmm.bias.name) == ("x", "w", "b")
    with pytest.raises(AttributeError, match="operands: bias, input, weight"):
        addmm.kernel  # noqa: B018


@pytest.mark.parametrize(
    "op, attributes",
    [
        ("aten.full", {"size": [2, 3], "fill_value": 1.5}),
        ("aten.full", {"size": [4], "fill_value": 7}),
        ("aten.full", {"size": [], "fill_value": True}),
        ("aten.full", {"size": [0, 5], "fill_value": 1, "dtype": DType.bf16}),
        ("aten.zeros", {"size": [3, 1]}),
        ("aten.ones", {"size": [2], "dtype": DType.i8}),
        ("aten.scalar_tensor", {"s": 3}),
        ("aten.arange", {"end": 5}),
        ("aten.arange", {"end": 2.5}),
        ("aten.arange.start", {"start": -3, "end": 4}),
        ("aten.arange.start_step", {"start": 0, "end": 10, "step": 3}),
        ("aten.arange.start_step", {"start": 10, "end": 0, "step": -3}),
        ("aten.arange.start_step", {"start": 0, "end": 1.0, "step": 0.1}),
        ("aten.arange.start_step", {"start": 0.5, "end": 7.9, "step": 1.5, "dtype": DType.i64}),
        ("aten.arange.start_step", {"start": 0.5, "end": 7.9, "step": 1.5, "dtype": DType.i32}),
        ("aten.arange.start_step", {"start": 4, "end": 4, "step": 1}),
    ],
)
def test_creation_ops_infer_the_type_pytorch_makes(op, attributes):
    """The result type the creation ops' definitions give is the one PyTorch's op returns: a declared
    type that disagrees fails verification, and fold-constants checks sizes by it."""

    from lowering.fx.writeback import resolve_op
    from xir.fx_import import TORCH_TO_DTYPE, op_arguments

    node = Graph().create_node(op, [], attributes=attributes)  # the result type inferred
    args, kwargs = op_arguments(resolve_op(op)._schema, node, None)
    made = resolve_op(op)(*args, **kwargs)
    assert node.result.type == TensorType(TORCH_TO_DTYPE[made.dtype], tuple(made.shape))
