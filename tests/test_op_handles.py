"""Ops as handles (issue 29): a misspelt op fails where it is named (so a module naming one fails
on import), handles are the op names, the attribute schema is closed, one accessor reads a scalar
however the program spells it, and readers are users without the return node."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from lowering.ops import xir_ops
from xir import IRError, VerificationError, parse_graph, verify
from xir.ops import aten, quantized_decomposed


def test_handles_are_the_op_names():
    assert aten.mul.Tensor == "aten.mul.Tensor" and aten.relu == "aten.relu"
    assert xir_ops.convert == "xir.convert" and quantized_decomposed.quantize_per_tensor.tensor.definition is not None
    assert {aten.add.Tensor: 1}["aten.add.Tensor"] == 1 and "aten.relu" in (aten.relu, aten.gelu)


def test_a_misspelt_op_fails_where_it_is_named():
    with pytest.raises(AttributeError, match="no op aten.mull is defined.*did you mean aten.mul"):
        aten.mull  # noqa: B018
    with pytest.raises(
        AttributeError, match="no op aten.mul.Tesnor is defined.*overloads of aten.mul are Scalar, Tensor"
    ):
        aten.mul.Tesnor  # noqa: B018


@pytest.mark.parametrize(
    "source, error",
    [
        ("from xir.ops import aten\nRELU_LIKE = (aten.relu, aten.relu6x)\n", AttributeError),
        (
            "from passes import rewrite_pattern\n\n@rewrite_pattern('aten.mull.Tensor')\ndef rule(node, rewriter):\n    return False\n",
            IRError,
        ),
    ],
)
def test_a_module_naming_a_misspelt_op_fails_on_import(tmp_path, source, error):
    path = tmp_path / "my_passes.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("my_passes", path)
    with pytest.raises(error, match="mull|relu6x"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_an_unknown_attribute_fails_verification():
    text = """graph @g {
      input %x: f32[1,2,4,4]
      %0: f32[1,2,2,2] = aten.max_pool2d(%x) {kernel_size=[2,2], stide=[2,2]}
      return %0
    }"""
    with pytest.raises(VerificationError, match="has no attribute 'stide'") as failure:
        verify(parse_graph(textwrap.dedent(text)))
    assert failure.value.line == 3
    verify(parse_graph(textwrap.dedent(text).replace("stide", "stride")))  # (the same with the real name verifies)


def test_create_node_takes_handles_and_stores_the_name():
    graph = parse_graph("graph @g {\n  input %x: f32[2]\n  return %x\n}\n")
    node = graph.create_node(aten.relu, [graph.inputs[0]])
    assert type(node.op) is str and node.op == "aten.relu"


def test_one_accessor_reads_a_scalar_however_it_is_spelt():
    import numpy

    graph = parse_graph(
        textwrap.dedent("""
    graph @g {
      input %x: f32[2]
      param %two: f32[]
      %a: f32[2] = aten.mul.Scalar(%x) {other=2.0}
      %b: f32[2] = aten.mul.Tensor(%a) {other=2.0}
      %c: f32[2] = aten.mul.Tensor(%b, %two)
      %d: f32[2] = aten.mul.Tensor(%c, %x)
      return %d, %a
    }""")
    )
    graph.input_named("two").data = numpy.asarray(2.0, dtype=numpy.float32)
    a, b, c, d = graph.nodes
    assert a.scalar("other") == b.scalar("other") == c.scalar("other") == 2.0
    assert d.scalar("other") is None  # a computed tensor
    with pytest.raises(AttributeError, match="'other' is an attribute of aten.mul.Scalar: read it with node.scalar"):
        a.operand("other")
    # readers: the nodes that read a value, without the return node (a graph output is a use)
    assert graph.inputs[0].readers == [a, d] and a.result.readers == [b] and len(a.result.users) == 2
    assert d.readers == []
