"""IR-text tests of ``xnnpack.eager-scalar-promotion``: a 0-D bf16/fp16 tensor that ExecuTorch's
to_edge cast to fp32 for an op with a Python number gets the op's result rounded to its dtype, for a
graph output (eager's dtype) and for the op's other readers (eager's value, in fp32). At the
boundaries: a result that is a graph output and read again, a chain of two such ops, the number on
either side, fp16; declined: a cast the user wrote (other provenance), a 0-D fp32 tensor the user
wrote (not ExecuTorch's number constant), a node with no FX node, a result that is not 0-D.

The IR text cannot hold FX metadata, so the tests give the nodes stand-ins for their FX nodes with
the ``from_node`` provenance ExecuTorch's promotion leaves (the cast shares its op's)."""

from __future__ import annotations

from types import SimpleNamespace

from passes.testing import check_pipeline, graph_with_data

PASS = "xnnpack.eager-scalar-promotion,dead-code-elimination"


def _with_provenance(graph, *sources):
    """Give the graph's nodes, in order, FX stand-ins whose first ``from_node`` entry names the
    source given for it (None: no FX node)."""
    assert len(sources) == len(graph.nodes)
    for node, source in zip(graph.nodes, sources):
        if source is not None:
            node.fx_node = SimpleNamespace(meta={"from_node": [SimpleNamespace(name=source, target="aten.op")]})
    return graph


def test_a_promoted_division_chain_an_output_read_again_and_fp16():
    graph = _with_provenance(graph_with_data("""
    graph @g {
      input %x: bf16[3,4]
      input %h: f16[]
      buffer %_lifted_tensor_constant0: f32[]
      buffer %_lifted_tensor_constant1: f32[]
      %s: bf16[] = aten.sum.dim_IntList(%x) {dim=[]}
      %c: f32[] = dim_order_ops._to_dim_order_copy(%s) {dtype=f32, dim_order=[]}
      %d: f32[] = aten.div.Tensor(%c, %_lifted_tensor_constant0)
      %e: f32[] = aten.div.Tensor(%d, %_lifted_tensor_constant1)
      %ch: f32[] = dim_order_ops._to_dim_order_copy(%h) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%_lifted_tensor_constant0, %ch)
      return %d, %e, %m
    }"""), "sum", "div", "div", "div_1", "mul", "mul")
    check_pipeline(graph, PASS, """
    graph @g {
      input %x: bf16[3,4]
      input %h: f16[]
      buffer %_lifted_tensor_constant0: f32[]
      buffer %_lifted_tensor_constant1: f32[]
      %s: bf16[] = aten.sum.dim_IntList(%x) {dim=[]}
      %c: f32[] = dim_order_ops._to_dim_order_copy(%s) {dtype=f32, dim_order=[]}
      %d: f32[] = aten.div.Tensor(%c, %_lifted_tensor_constant0)
      %0: bf16[] = dim_order_ops._to_dim_order_copy(%d) {dtype=bf16, dim_order=[]}
      %1: f32[] = dim_order_ops._to_dim_order_copy(%0) {dtype=f32, dim_order=[]}
      %e: f32[] = aten.div.Tensor(%1, %_lifted_tensor_constant1)
      %2: bf16[] = dim_order_ops._to_dim_order_copy(%e) {dtype=bf16, dim_order=[]}
      %ch: f32[] = dim_order_ops._to_dim_order_copy(%h) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%_lifted_tensor_constant0, %ch)
      %3: f16[] = dim_order_ops._to_dim_order_copy(%m) {dtype=f16, dim_order=[]}
      return %0, %2, %3
    }""", changed=True)


USER_WROTE = """
    graph @g {
      input %x: bf16[]
      buffer %_lifted_tensor_constant0: f32[]
      const %c_lifted_tensor_0: f32[]
      input %v: bf16[2]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[]}
      %a: f32[] = aten.add.Tensor(%c, %_lifted_tensor_constant0)
      %t: f32[] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[]}
      %b: f32[] = aten.mul.Tensor(%t, %c_lifted_tensor_0)
      %w: f32[2] = dim_order_ops._to_dim_order_copy(%v) {dtype=f32, dim_order=[0]}
      %n: f32[2] = aten.sub.Tensor(%w, %_lifted_tensor_constant0)
      return %a, %b, %n
    }"""


def test_a_users_cast_a_users_tensor_and_a_vector_stay_fp32():
    """``x.float() + 2.0`` (the cast's provenance is the user's ``float``), ``x * torch.tensor(2.0)``
    (not ExecuTorch's number constant) and a 1-D tensor are fp32 in eager too."""
    graph = _with_provenance(graph_with_data(USER_WROTE), "float_1", "add", "mul", "mul", "sub", "sub")
    check_pipeline(graph, PASS, USER_WROTE, changed=False)


def test_a_node_with_no_fx_node_is_declined():
    text = """
    graph @g {
      input %x: bf16[]
      buffer %_lifted_tensor_constant0: f32[]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[]}
      %a: f32[] = aten.add.Tensor(%c, %_lifted_tensor_constant0)
      return %a
    }"""
    check_pipeline(graph_with_data(text), PASS, text, changed=False)
