"""Partitioning in the IR (convex groups, per-op mode, the report) and the drop-in paths."""

import pytest
import torch

from lowering.capability import Options
from lowering.partition import plan_partition
from xir import parse_graph
from xir_tools.harness import lower, reference

CYCLE = """graph @g {
  input %x: f32[4,8]
  %0: f32[4,8] = aten.relu(%x)
  %1: f32[4,8] = aten.cumsum(%0) {dim=1}
  %2: f32[4,8] = aten.add.Tensor(%0, %1)
  %3: f32[4,8] = aten.neg(%0)
  return %2, %3
}
"""


def test_graph_mode_keeps_groups_convex():
    graph = parse_graph(CYCLE)
    plan = plan_partition(graph, Options())
    groups = [g.ops() for g in plan.groups]
    # relu and add cannot share a group: relu -> cumsum (outside) -> add would be a cycle
    assert ["aten.relu", "aten.add.Tensor"] not in groups
    relu_group = next(g for g in plan.groups if "aten.relu" in g.ops())
    assert "aten.add.Tensor" not in relu_group.ops()
    assert "aten.neg" in relu_group.ops()  # neg only depends on relu: same group
    assert [r.node.op for r in plan.rejected] == ["aten.cumsum"]
    assert plan.rejected[0].rule == "op"


def test_per_op_mode_one_group_per_op():
    plan = plan_partition(parse_graph(CYCLE), Options(per_op_mode=True))
    assert [g.ops() for g in plan.groups] == [["aten.relu"], ["aten.add.Tensor"], ["aten.neg"]]


def test_report_gives_rule_and_reason():
    graph = parse_graph("""graph @g {
  input %x: f32[2,3,1,1,1,1,1,4]
  input %y: f32[4,8]
  %0: f32[2,3,1,1,1,1,1,4] = aten.permute_copy(%x) {dims=[0, 1, 2, 3, 4, 5, 6, 7]}
  %1: f32[4,8] = aten._softmax(%y) {dim=0, half_to_float=false}
  %2: bf16[4,8] = aten._to_copy(%y) {dtype=bf16}
  %3: bf16[4,8] = aten.relu(%2)
  %4: f32[4,8] = aten.relu(%y)
  return %0, %1, %3, %4
}
""")
    plan = plan_partition(graph, Options())
    report = plan.report()
    reasons = {r.node.op + ":" + str(r.node.results[0].type): (r.rule, r.reason) for r in plan.rejected}
    assert reasons["aten.permute_copy:f32[2,3,1,1,1,1,1,4]"][0] == "rank"
    assert "8-D" in reasons["aten.permute_copy:f32[2,3,1,1,1,1,1,4]"][1]
    assert reasons["aten._softmax:f32[4,8]"] == ("constraint", "softmax over dim 0, not the last dim")
    assert reasons["aten.relu:bf16[4,8]"] == ("dtype", "bf16 (pass enable_bf16=True to delegate bf16 ops)")
    assert "1 node(s) delegated to XNNPACK in 1 group(s)" in report
    assert "XNNPACK takes at most 6-D tensors" in report and "left outside:" in report


class Branches(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x)
        b = torch.cumsum(a, 1)  # not an XNNPACK op
        return a + b, torch.sigmoid(a)


@pytest.mark.parametrize("per_op_mode", [False, True])
def test_convex_groups_load_and_match(per_op_mode):
    inputs = (torch.randn(4, 8),)
    ep = torch.export.export(Branches(), inputs)
    ours = lower(ep, inputs, per_op_mode=per_op_mode)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) < 1e-5
    assert ours.delegated == {"aten.relu": 1, "aten.add.Tensor": 1, "aten.sigmoid": 1}
    assert ours.outside == {"aten.cumsum": 1}
    assert ours.delegates == (3 if per_op_mode else 2)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("via", ["etal", "bare", "to_backend"])
def test_drop_in_paths(via):
    """ExecuTorch's to_edge_transform_and_lower with xir's partitioner alone, xir's helper, and
    to_edge(...).transform(...).to_backend(...): all load and match."""
    inputs = (torch.randn(3, 8),)
    ep = torch.export.export(Mlp().eval(), inputs)
    ours = lower(ep, inputs, via=via)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) < 1e-5
    assert not ours.outside
    expected = {"aten.linear": 2, "aten.relu": 1} if via != "to_backend" else {"aten.addmm": 2, "aten.relu": 1}
    assert {k: v for k, v in ours.delegated.items() if k not in ("aten.permute_copy",)} == expected


def test_pipeline_option_and_instruments(tmp_path):
    from passes import DumpIR

    inputs = (torch.randn(2, 3, 4),)

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x.permute(0, 1, 2).reshape(2, 3, 4))

    ep = torch.export.export(M(), inputs)
    import lowering

    partitioner = lowering.XnnpackPartitioner(pipeline="remove-no-ops", instruments=[DumpIR(tmp_path)])
    edge = lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00-input.xir", "01-remove-no-ops.xir"]
    assert "permute" not in (tmp_path / "01-remove-no-ops.xir").read_text()
    assert partitioner.pipeline_text == "remove-no-ops"
    from xir_tools.harness import run_pte, to_buffer

    out = run_pte(to_buffer(edge), inputs)[0]
    assert torch.allclose(out, torch.relu(inputs[0]))


def test_unknown_pipeline_pass_is_a_clear_error():
    import lowering
    from passes import PipelineError

    with pytest.raises(PipelineError, match="unknown pass 'fold-everything'"):
        lowering.XnnpackPartitioner(pipeline="fold-everything")


def test_independent_groups_share_a_delegate():
    graph = parse_graph("""graph @g {
  input %x: f32[4,8]
  input %y: f32[4,8]
  %0: f32[4,8] = aten.cumsum(%x) {dim=1}
  %1: f32[4,8] = aten.relu(%0)
  %2: f32[4,8] = aten.cumsum(%y) {dim=1}
  %3: f32[4,8] = aten.neg(%2)
  %4: f32[4,8] = aten.cumsum(%1) {dim=0}
  %5: f32[4,8] = aten.sigmoid(%4)
  return %3, %5
}
""")
    plan = plan_partition(graph, Options())
    # relu and neg are independent: one delegate; sigmoid depends on relu through a cumsum: its own
    assert [g.ops() for g in plan.groups] == [["aten.relu", "aten.neg"], ["aten.sigmoid"]]


def test_lowering_leaves_the_callers_program_whole():
    """xir's rewrites remove constants from the edge program only, never from the program it came from."""

    class AddConstant(torch.nn.Module):
        def __init__(self, constant):
            super().__init__()
            self.register_buffer("_constant2", constant, persistent=False)
            self.register_parameter("_constant3", torch.nn.Parameter(constant))

        def forward(self, x):
            return x + self._constant2 + self._constant3

    inputs = (torch.randn(4, 4),)
    ep = torch.export.export(AddConstant(torch.randn(4, 4)), inputs)
    expected = ep.module()(*inputs)
    ours = lower(ep, inputs)
    assert ours.ran and ours.err([expected]) < 1e-6
    assert torch.allclose(ep.module()(*inputs), expected)  # the exported program still runs


def test_max_pool_whose_indices_are_an_output_stays_outside():
    graph = parse_graph("""graph @g {
  input %x: f32[1,2,4,4]
  %0: f32[1,2,2,2], %1: i64[1,2,2,2] = aten.max_pool2d_with_indices(%x) {kernel_size=[2, 2], stride=[2, 2]}
  return %0, %1
}
""")
    plan = plan_partition(graph, Options())
    assert not plan.groups and "indices are used" in plan.rejected[0].reason


def test_quantized_slice_with_different_input_and_output_quantization_runs_in_fp32():
    text = """graph @g {{
  input %x: f32[4,8]
  %0: i8[4,8] = quantized_decomposed.quantize_per_tensor(%x) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %1: f32[4,8] = quantized_decomposed.dequantize_per_tensor(%0) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %2: f32[4,4] = aten.slice_copy.Tensor(%1) {{dim=1, start=0, end=4, step=1}}
  %3: i8[4,4] = quantized_decomposed.quantize_per_tensor(%2) {{scale={scale}, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %4: f32[4,4] = quantized_decomposed.dequantize_per_tensor(%3) {{scale={scale}, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  return %4
}}
"""
    same = plan_partition(parse_graph(text.format(scale=0.1)), Options())
    assert any("aten.slice_copy.Tensor" in g.ops() for g in same.groups)
    assert any(u.kind == "static" and u.anchor.op == "aten.slice_copy.Tensor" for g in same.groups for u in g.units)
    # quantized differently, XNNPACK's quantized slice cannot take it: it runs in fp32 between
    # conversions (dequantize, slice, quantize), none of the Q/DQ folded
    different = plan_partition(parse_graph(text.format(scale=0.2)), Options())
    (group,) = different.groups
    assert "aten.slice_copy.Tensor" in group.ops() and not group.implicit
    assert not different.rejected


@pytest.mark.parametrize("returned", ["operand-is-an-input", "operand-also-leaves", "operand-inside"])
def test_a_copy_that_would_return_a_value_twice_from_a_delegate_stays_outside(returned):
    """XNNPACK's preprocessing drops identity clones (except a copy of a delegate input to a
    delegate output): a delegated clone whose result leaves the delegate must not copy a value
    computed in the delegate that leaves it as well."""
    body = {
        "operand-is-an-input": "%c: f32[2,3] = aten.clone(%x)\n  %r: f32[2,3] = aten.relu(%c)\n  return %r, %c",
        "operand-also-leaves": "%a: f32[2,3] = aten.abs(%x)\n  %c: f32[2,3] = aten.clone(%a)\n  return %a, %c",
        "operand-inside": "%a: f32[2,3] = aten.abs(%x)\n  %c: f32[2,3] = aten.clone(%a)\n  return %c",
    }[returned]
    graph = parse_graph(f"graph @g {{\n  input %x: f32[2,3]\n  {body}\n}}\n")
    plan = plan_partition(graph, Options())
    clone = next(n for n in graph if n.op == "aten.clone")
    if returned in ("operand-inside", "operand-is-an-input"):
        assert plan.group_of(clone) is not None
    else:
        assert plan.group_of(clone) is None
        assert any("return one value twice" in r.reason for r in plan.rejected if r.node is clone)
