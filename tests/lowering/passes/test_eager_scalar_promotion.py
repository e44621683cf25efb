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
    graph = _with_provenance(
        graph_with_data("""
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
    }"""),
        "sum",
        "div",
        "div",
        "div_1",
        "mul",
        "mul",
    )
    check_pipeline(
        graph,
        PASS,
        """
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
    }""",
        changed=True,
    )


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


def test_two_low_precision_scalars_of_one_dtype_are_rounded_and_mixed_ones_are_not():
    """``t + 0.25 * t`` (the promotion's cast of t and the product rounded here) and ``t * 0.5 + t *
    0.25`` (two products rounded here, no cast: both were fp32 already) are bf16 in eager; their sum
    is rounded, for the output and for its reader (fuzz bf16 97001). ``h * 0.5 + t``, a rounded f16
    product and a bf16 cast, is fp32 in eager (bf16 with f16): left as it is."""
    graph = _with_provenance(
        graph_with_data("""
    graph @g {
      input %t: bf16[]
      input %h: f16[]
      buffer %_lifted_tensor_constant0: f32[]
      buffer %_lifted_tensor_constant1: f32[]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%_lifted_tensor_constant0, %c)
      %ca: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %a: f32[] = aten.add.Tensor(%ca, %m)
      %n: f32[] = aten.mul.Tensor(%a, %_lifted_tensor_constant1)
      %c2: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %p: f32[] = aten.mul.Tensor(%c2, %_lifted_tensor_constant1)
      %s: f32[] = aten.add.Tensor(%m, %p)
      %ch: f32[] = dim_order_ops._to_dim_order_copy(%h) {dtype=f32, dim_order=[]}
      %q: f32[] = aten.mul.Tensor(%ch, %_lifted_tensor_constant0)
      %cm: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %x: f32[] = aten.add.Tensor(%q, %cm)
      return %a, %n, %s, %x
    }"""),
        "mul",
        "mul",
        "add",
        "add",
        "mul_1",
        "mul_2",
        "mul_2",
        "add_1",
        "mul_3",
        "mul_3",
        "add_2",
        "add_2",
    )
    check_pipeline(
        graph,
        PASS,
        """
    graph @g {
      input %t: bf16[]
      input %h: f16[]
      buffer %_lifted_tensor_constant0: f32[]
      buffer %_lifted_tensor_constant1: f32[]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%_lifted_tensor_constant0, %c)
      %0: bf16[] = dim_order_ops._to_dim_order_copy(%m) {dtype=bf16, dim_order=[]}
      %1: f32[] = dim_order_ops._to_dim_order_copy(%0) {dtype=f32, dim_order=[]}
      %ca: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %a: f32[] = aten.add.Tensor(%ca, %1)
      %2: bf16[] = dim_order_ops._to_dim_order_copy(%a) {dtype=bf16, dim_order=[]}
      %3: f32[] = dim_order_ops._to_dim_order_copy(%2) {dtype=f32, dim_order=[]}
      %n: f32[] = aten.mul.Tensor(%3, %_lifted_tensor_constant1)
      %4: bf16[] = dim_order_ops._to_dim_order_copy(%n) {dtype=bf16, dim_order=[]}
      %c2: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %p: f32[] = aten.mul.Tensor(%c2, %_lifted_tensor_constant1)
      %5: bf16[] = dim_order_ops._to_dim_order_copy(%p) {dtype=bf16, dim_order=[]}
      %6: f32[] = dim_order_ops._to_dim_order_copy(%5) {dtype=f32, dim_order=[]}
      %s: f32[] = aten.add.Tensor(%1, %6)
      %7: bf16[] = dim_order_ops._to_dim_order_copy(%s) {dtype=bf16, dim_order=[]}
      %ch: f32[] = dim_order_ops._to_dim_order_copy(%h) {dtype=f32, dim_order=[]}
      %q: f32[] = aten.mul.Tensor(%ch, %_lifted_tensor_constant0)
      %8: f16[] = dim_order_ops._to_dim_order_copy(%q) {dtype=f16, dim_order=[]}
      %9: f32[] = dim_order_ops._to_dim_order_copy(%8) {dtype=f32, dim_order=[]}
      %cm: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %x: f32[] = aten.add.Tensor(%9, %cm)
      return %2, %4, %7, %x
    }""",
        changed=True,
    )


def test_an_elementwise_op_of_a_rounded_value_is_rounded_and_a_users_cast_is_not():
    """``exp(t * 0.5)`` is bf16 in eager (fuzz bf16 97001, shrunk again: ``exp(t + 0.25 * t)``);
    ``(t * 0.5).float()``, a cast the user wrote, is fp32 in eager: left as it is."""
    graph = _with_provenance(
        graph_with_data("""
    graph @g {
      input %t: bf16[]
      buffer %_lifted_tensor_constant0: f32[]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%c, %_lifted_tensor_constant0)
      %e: f32[] = aten.exp(%m)
      %f: f32[] = dim_order_ops._to_dim_order_copy(%m) {dtype=f32, dim_order=[]}
      return %e, %f
    }"""),
        "mul",
        "mul",
        "exp",
        "float_1",
    )
    check_pipeline(
        graph,
        PASS,
        """
    graph @g {
      input %t: bf16[]
      buffer %_lifted_tensor_constant0: f32[]
      %c: f32[] = dim_order_ops._to_dim_order_copy(%t) {dtype=f32, dim_order=[]}
      %m: f32[] = aten.mul.Tensor(%c, %_lifted_tensor_constant0)
      %0: bf16[] = dim_order_ops._to_dim_order_copy(%m) {dtype=bf16, dim_order=[]}
      %1: f32[] = dim_order_ops._to_dim_order_copy(%0) {dtype=f32, dim_order=[]}
      %e: f32[] = aten.exp(%1)
      %2: bf16[] = dim_order_ops._to_dim_order_copy(%e) {dtype=bf16, dim_order=[]}
      %f: f32[] = dim_order_ops._to_dim_order_copy(%1) {dtype=f32, dim_order=[]}
      return %2, %f
    }""",
        changed=True,
    )
