"""Two defects of issue 29 (#7): the partitioner overwrote an ``enable_bf16=`` written in the
pipeline text; ``FUSED_ACTIVATIONS`` was defined twice with different members."""

from __future__ import annotations

import pytest

import lowering
from lowering import Options, plan_partition
from lowering.capability import FUSED_ACTIVATIONS
from xir import parse_graph


def test_an_enable_bf16_written_in_the_pipeline_that_disagrees_is_an_error():
    with pytest.raises(ValueError, match=r"xnnpack.bf16-in-fp32\{enable_bf16=true\}.*enable_bf16=False"):
        lowering.XnnpackPartitioner(pipeline="xnnpack.bf16-in-fp32{enable_bf16=true}")
    with pytest.raises(ValueError, match=r"xnnpack.bmm-distinct-operands\{enable_bf16=false\}"):
        lowering.XnnpackPartitioner(enable_bf16=True, pipeline="+xnnpack.bmm-distinct-operands{enable_bf16=false}")


@pytest.mark.parametrize("enable_bf16", [False, True])
def test_passes_follow_the_partitioner_where_the_pipeline_agrees_or_is_silent(enable_bf16):
    written = "xnnpack.bf16-in-fp32{enable_bf16=true}," if enable_bf16 else ""
    partitioner = lowering.XnnpackPartitioner(
        enable_bf16=enable_bf16, pipeline=written + "xnnpack.bf16-bmm-f32-output,remove-no-ops"
    )
    bf16_passes = [p for p in partitioner.pipeline if hasattr(p, "enable_bf16")]
    assert bf16_passes and all(p.enable_bf16 is enable_bf16 for p in bf16_passes)


QUANTIZED_LINEAR = """graph @g {
  input %x: f32[2,8]
  param %w: i8[4,8]
  %0: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  %1: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%0) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  %2: f32[4,8] = quantized_decomposed.dequantize_per_tensor(%w) {scale=0.05, zero_point=0, quant_min=-127, quant_max=127, dtype=i8}
  %3: f32[2,4] = aten.linear(%1, %2)
  %4: f32[2,4] = ACTIVATION
  %5: i8[2,4] = quantized_decomposed.quantize_per_tensor(%4) {scale=0.2, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  %6: f32[2,4] = quantized_decomposed.dequantize_per_tensor(%5) {scale=0.2, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  return %6
}
"""


def test_fused_activations_are_what_xnnpacks_fuse_pass_fuses():
    from executorch.backends.xnnpack._passes.fuse_activation_pass import FuseActivationPass

    from xir.fx_import import op_name

    assert set(FUSED_ACTIVATIONS) == {op_name(op) for op in FuseActivationPass.FUSEABLE_ACTIVATIONS}


@pytest.mark.parametrize(
    "activation, fused",
    [
        ("aten.relu(%3)", True),
        ("aten.hardtanh(%3) {min_val=0.0, max_val=6.0}", True),
        ("aten.clamp(%3) {min=0.0, max=6.0}", False),  # XNNPACK does not fuse a clamp into the linear
    ],
)
def test_the_quantize_after_a_fused_activation_is_the_linears(activation, fused):
    plan = plan_partition(parse_graph(QUANTIZED_LINEAR.replace("ACTIVATION", activation)), Options())
    linear_units = [u for g in plan.groups for u in g.units if u.anchor.op == "aten.linear"]
    if fused:
        (unit,) = linear_units
        assert unit.kind == "static" and activation.split("(")[0] in [n.op for n in unit.nodes]
        assert "quantized_decomposed.quantize_per_tensor" in [n.op for n in unit.nodes]
    else:
        assert not linear_units
        assert any(r.node.op == "aten.linear" and "output is not" in r.reason for r in plan.rejected)


def test_the_partitioner_times_its_own_steps(monkeypatch):
    """``partitioner.timings``: seconds of xir's own steps in a lowering (import, plan, passes,
    write-back, tags) and ``step_counts`` how often each ran; the lowering is run and compared.
    Each program ExecuTorch hands xir is imported once: ExecuTorch asks ops_to_not_decompose twice
    about the same program, and the second answer is the first one's."""
    import torch

    import xir
    from xir_tools import harness

    imported = []
    real_import = xir.from_exported_program

    def spy(ep, *args, **kwargs):
        imported.append(ep.graph)
        return real_import(ep, *args, **kwargs)

    monkeypatch.setattr(xir, "from_exported_program", spy)

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x * 1.0 + 2.0).unsqueeze(1)  # (x*1 and the unsqueeze: rewrites, so a write-back)

    x = torch.randn(2, 8)
    edge, partitioner = harness.lower_edge(harness.export(Model().eval(), (x,)), "xir")
    _, method = harness.load_method(harness.to_buffer(edge))
    assert harness.max_error(harness.run_method(method, [x]), [Model()(x)]) == 0
    assert harness.delegate_count(edge) == 1
    assert set(partitioner.timings) == {"import", "plan", "passes", "write-back", "tags"}
    assert all(seconds > 0 for seconds in partitioner.timings.values())
    # ops_to_not_decompose (before and during decomposition), the rewrite pass and partition()
    # each import a program of their own; all but the rewrite pass plan
    assert partitioner.step_counts["import"] == len(imported) == 4
    assert len({id(graph) for graph in imported}) == 4
    assert partitioner.step_counts["plan"] == 3
    assert partitioner.step_counts["passes"] == partitioner.step_counts["write-back"] == 1


def test_an_xir_op_left_outside_is_left_to_the_next_partitioner():
    """xir's own ops (made by its passes for XNNPACK) have no kernel outside it, but one the plan
    leaves outside (here: fp32 is not among the partitioner's precisions, as in the LLM flow's
    DQ-only first stage) does not stop the lowering: the next partitioner of the list may take it,
    and what none takes is written back as ATen ops (lowering.fx.xir_ops_as_aten, tested end to end
    in test_partitioner_lists.py)."""
    from lowering.rules import STATIC

    graph = parse_graph("""
    graph @g {
      input %x: f32[s0,8]
      %a: f32[s0,4] = xir.slice(%x) {dim=1, start=0, end=4}
      return %a
    }""")
    plan = plan_partition(graph, Options(precisions=frozenset({STATIC})))
    assert [r.node.op for r in plan.rejected] == ["xir.slice"] and not plan.groups
    assert "fp32 is not among config_precisions" in plan.rejected[0].reason
    assert not plan.unlowerable
    plan.raise_if_unlowerable()
    assert "xir's own ops left outside (xir.slice) go to the next partitioner" in plan.report()
    assert [n.op for n in plan_partition(graph, Options()).delegated_nodes] == ["xir.slice"]  # (with fp32)
