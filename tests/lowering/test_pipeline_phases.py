"""The pipeline as data (lowering.pipeline): the phases give the very pipeline the partitioner ran
before the table (its text for every option combination, as a literal), the ordering the passes
declare holds in it and is enforced on user pipelines, and the planner's rewrites come from it."""

from __future__ import annotations

import itertools
import re

import pytest

import lowering  # noqa: F401  (declares the XNNPACK passes)
from lowering.pipeline import (
    DEFAULT_PIPELINE,
    PHASES,
    Step,
    Switches,
    describe,
    float_op_passes,
    option_passes,
    pipeline_passes,
    pipeline_text,
)
from passes import PipelineError, check_order, get_pass_class, parse_pipeline, pass_names

# XnnpackPartitioner(...).pipeline_text at 1cb0341, before the table: the regression guard (since,
# xnnpack.rotate-half-sign-in-sin became a float-op pass, and it and merge-head-chains take
# enable_bf16, and drop-leading-unit-dims came after a dead-code-elimination: issue 58)
DEFAULT = (
    "hoist-row-select,xnnpack.eager-scalar-promotion,xnnpack.remove-no-ops,"
    "xnnpack.weight-only-int8-linear,xnnpack.merge-clamps,xnnpack.pow-as-multiplies,"
    "xnnpack.avg-pool-padding-as-pad{enable_bf16=false},fold-batch-norm,xnnpack.mean-keepdim,"
    "xnnpack.decompose-gelu-tanh{enable_bf16=false},xnnpack.decompose-conv3d,xnnpack.rope-as-pair-swap,"
    "xnnpack.rotate-half-sign-in-sin{enable_bf16=false},shape-ops-as-views,xnnpack.split-as-slices{enable_bf16=false},"
    "xnnpack.select-as-slice{enable_bf16=false},xnnpack.slices-as-xir-slices{enable_bf16=false},"
    "xnnpack.fold-repeat-into-bmm,common-subexpression-elimination,xnnpack.partial-rotary-whole-head,"
    "xnnpack.bmm-distinct-operands{enable_bf16=false},xnnpack.expand-as-broadcast,xnnpack.safe-softmax,"
    "fold-constants,xnnpack.index-select-as-slices{enable_bf16=false},"
    "xnnpack.step-slice-as-view{enable_bf16=false},xnnpack.as-strided-as-view{enable_bf16=false},"
    "xnnpack.scalar-operands-as-constants{enable_bf16=false},xnnpack.weight-only-linear-bias,"
    "xnnpack.dynamic-mm-as-bmm{enable_bf16=false},xnnpack.mean-over-last-dims{enable_bf16=false},xnnpack.remove-no-ops,dead-code-elimination,xnnpack.drop-leading-unit-dims,xnnpack.bf16-bmm-f32-output,"
    "xnnpack.bf16-in-fp32,xnnpack.bf16-rounded-arithmetic,xnnpack.patch-conv-as-matmul,"
    "xnnpack.layer-norm-in-fp32,xnnpack.decompose-layer-norm,xnnpack.decompose-group-norm,"
    "xnnpack.mean-over-last-dims{enable_bf16=false},fold-scale-shift-into-linears,"
    "xnnpack.casts-as-converts,common-subexpression-elimination,dead-code-elimination,"
    "xnnpack.fuse-sibling-linears{enable_bf16=false},xnnpack.merge-head-chains{enable_bf16=false},"
    "xnnpack.dequantize-per-float-reader,xnnpack.saturate-portable-quantize,dead-code-elimination"
)

ENABLE_BF16 = (
    "hoist-row-select,xnnpack.eager-scalar-promotion,xnnpack.remove-no-ops,"
    "xnnpack.weight-only-int8-linear,xnnpack.merge-clamps,xnnpack.pow-as-multiplies,"
    "xnnpack.avg-pool-padding-as-pad,fold-batch-norm,xnnpack.mean-keepdim,xnnpack.decompose-gelu-tanh,"
    "xnnpack.decompose-conv3d,xnnpack.rope-as-pair-swap,xnnpack.rotate-half-sign-in-sin,"
    "shape-ops-as-views,xnnpack.split-as-slices,xnnpack.select-as-slice,xnnpack.slices-as-xir-slices,"
    "xnnpack.fold-repeat-into-bmm,common-subexpression-elimination,xnnpack.partial-rotary-whole-head,"
    "xnnpack.bmm-distinct-operands,xnnpack.expand-as-broadcast,xnnpack.safe-softmax,fold-constants,"
    "xnnpack.index-select-as-slices,xnnpack.step-slice-as-view,xnnpack.as-strided-as-view,"
    "xnnpack.scalar-operands-as-constants,xnnpack.weight-only-linear-bias,xnnpack.dynamic-mm-as-bmm,xnnpack.mean-over-last-dims,"
    "xnnpack.remove-no-ops,dead-code-elimination,xnnpack.drop-leading-unit-dims,xnnpack.bf16-bmm-f32-output{enable_bf16=true},"
    "xnnpack.bf16-in-fp32{enable_bf16=true},xnnpack.bf16-rounded-arithmetic{enable_bf16=true},"
    "xnnpack.patch-conv-as-matmul,xnnpack.layer-norm-in-fp32,xnnpack.decompose-layer-norm,"
    "xnnpack.decompose-group-norm,xnnpack.mean-over-last-dims,fold-scale-shift-into-linears,"
    "xnnpack.casts-as-converts{enable_bf16=true},common-subexpression-elimination,dead-code-elimination,"
    "xnnpack.fuse-sibling-linears,xnnpack.merge-head-chains,xnnpack.dequantize-per-float-reader,"
    "xnnpack.saturate-portable-quantize,dead-code-elimination"
)

BF16_LINEARS_AS_F16 = (
    "hoist-row-select,xnnpack.eager-scalar-promotion,xnnpack.remove-no-ops,"
    "xnnpack.weight-only-int8-linear,xnnpack.merge-clamps,xnnpack.pow-as-multiplies,"
    "xnnpack.avg-pool-padding-as-pad,fold-batch-norm,xnnpack.mean-keepdim,xnnpack.decompose-gelu-tanh,"
    "xnnpack.decompose-conv3d,xnnpack.rope-as-pair-swap,xnnpack.rotate-half-sign-in-sin,"
    "shape-ops-as-views,xnnpack.split-as-slices,xnnpack.select-as-slice,xnnpack.slices-as-xir-slices,"
    "xnnpack.fold-repeat-into-bmm,common-subexpression-elimination,xnnpack.partial-rotary-whole-head,"
    "xnnpack.bmm-distinct-operands,xnnpack.expand-as-broadcast,xnnpack.safe-softmax,fold-constants,"
    "xnnpack.index-select-as-slices,xnnpack.step-slice-as-view,xnnpack.as-strided-as-view,"
    "xnnpack.scalar-operands-as-constants,xnnpack.weight-only-linear-bias,xnnpack.dynamic-mm-as-bmm,xnnpack.mean-over-last-dims,"
    "xnnpack.remove-no-ops,dead-code-elimination,xnnpack.drop-leading-unit-dims,xnnpack.bf16-bmm-f32-output{enable_bf16=true},"
    "xnnpack.bf16-linear-as-f16{enable_bf16=true},xnnpack.bf16-in-fp32{enable_bf16=true},"
    "xnnpack.bf16-rounded-arithmetic{enable_bf16=true},xnnpack.patch-conv-as-matmul,"
    "xnnpack.layer-norm-in-fp32,xnnpack.decompose-layer-norm,xnnpack.decompose-group-norm,"
    "xnnpack.mean-over-last-dims,fold-scale-shift-into-linears,"
    "xnnpack.casts-as-converts{enable_bf16=true},common-subexpression-elimination,dead-code-elimination,"
    "xnnpack.fuse-sibling-linears,xnnpack.merge-head-chains,xnnpack.dequantize-per-float-reader,"
    "xnnpack.saturate-portable-quantize,dead-code-elimination"
)

BF16_ACTIVATIONS_IN_FP32 = (
    "hoist-row-select,xnnpack.eager-scalar-promotion,xnnpack.remove-no-ops,"
    "xnnpack.weight-only-int8-linear,xnnpack.merge-clamps,xnnpack.pow-as-multiplies,"
    "xnnpack.avg-pool-padding-as-pad,fold-batch-norm,xnnpack.mean-keepdim,xnnpack.decompose-gelu-tanh,"
    "xnnpack.decompose-conv3d,xnnpack.rope-as-pair-swap,xnnpack.rotate-half-sign-in-sin,"
    "shape-ops-as-views,xnnpack.split-as-slices,xnnpack.select-as-slice,xnnpack.slices-as-xir-slices,"
    "xnnpack.fold-repeat-into-bmm,common-subexpression-elimination,xnnpack.partial-rotary-whole-head,"
    "xnnpack.bmm-distinct-operands,xnnpack.expand-as-broadcast,xnnpack.safe-softmax,fold-constants,"
    "xnnpack.index-select-as-slices,xnnpack.step-slice-as-view,xnnpack.as-strided-as-view,"
    "xnnpack.scalar-operands-as-constants,xnnpack.weight-only-linear-bias,xnnpack.dynamic-mm-as-bmm,xnnpack.mean-over-last-dims,"
    "xnnpack.remove-no-ops,dead-code-elimination,xnnpack.drop-leading-unit-dims,xnnpack.bf16-bmm-f32-output{enable_bf16=true},"
    "xnnpack.bf16-in-fp32{enable_bf16=true},xnnpack.bf16-rounded-arithmetic{enable_bf16=true},"
    "xnnpack.patch-conv-as-matmul,xnnpack.layer-norm-in-fp32,xnnpack.decompose-layer-norm,"
    "xnnpack.decompose-group-norm,xnnpack.mean-over-last-dims,fold-scale-shift-into-linears,"
    "xnnpack.casts-as-converts{enable_bf16=true},xnnpack.bf16-activations-in-fp32{enable_bf16=true},"
    "common-subexpression-elimination,dead-code-elimination,xnnpack.fuse-sibling-linears,"
    "xnnpack.merge-head-chains,xnnpack.dequantize-per-float-reader,xnnpack.saturate-portable-quantize,"
    "dead-code-elimination"
)

DYNAMIC_QUANT = (
    "hoist-row-select,xnnpack.eager-scalar-promotion,xnnpack.remove-no-ops,"
    "xnnpack.weight-only-int8-linear,xnnpack.merge-clamps,xnnpack.pow-as-multiplies,"
    "xnnpack.avg-pool-padding-as-pad{enable_bf16=false},fold-batch-norm,xnnpack.mean-keepdim,"
    "xnnpack.decompose-gelu-tanh{enable_bf16=false},xnnpack.decompose-conv3d,"
    "shape-ops-as-views,xnnpack.split-as-slices{enable_bf16=false},"
    "xnnpack.select-as-slice{enable_bf16=false},xnnpack.fold-repeat-into-bmm,"
    "common-subexpression-elimination,xnnpack.bmm-distinct-operands{enable_bf16=false},"
    "xnnpack.expand-as-broadcast,xnnpack.safe-softmax,fold-constants,"
    "xnnpack.as-strided-as-view{enable_bf16=false},xnnpack.scalar-operands-as-constants{enable_bf16=false},"
    "xnnpack.weight-only-linear-bias,xnnpack.remove-no-ops,dead-code-elimination,xnnpack.drop-leading-unit-dims,xnnpack.patch-conv-as-matmul,"
    "xnnpack.layer-norm-in-fp32,xnnpack.decompose-layer-norm,xnnpack.decompose-group-norm,"
    "fold-scale-shift-into-linears,common-subexpression-elimination,dead-code-elimination,"
    "xnnpack.dequantize-per-float-reader,xnnpack.saturate-portable-quantize,dead-code-elimination"
)
OPTIONS = {
    "default": ({}, DEFAULT),
    "enable_bf16": ({"enable_bf16": True}, ENABLE_BF16),
    "bf16_linears_as_f16": ({"enable_bf16": True, "bf16_linears_as_f16": True}, BF16_LINEARS_AS_F16),
    "bf16_activations_in_fp32": ({"enable_bf16": True, "bf16_activations_in_fp32": True}, BF16_ACTIVATIONS_IN_FP32),
    "dynamic_quant": ({"config_precisions": "DYNAMIC_QUANT"}, DYNAMIC_QUANT),
}
SWITCHES = {
    "default": Switches(),
    "enable_bf16": Switches(),
    "bf16_linears_as_f16": Switches(bf16_linears_as_f16=True),
    "bf16_activations_in_fp32": Switches(bf16_activations_in_fp32=True),
    "dynamic_quant": Switches(float_ops=False),
}


def names(text: str) -> str:
    return re.sub(r"\{[^}]*\}", "", text)


@pytest.mark.parametrize("case", OPTIONS)
def test_the_table_gives_the_pipeline_of_before(case):
    assert pipeline_text(SWITCHES[case]) == names(OPTIONS[case][1])


@pytest.mark.parametrize("case", OPTIONS)
def test_the_partitioner_runs_the_pipeline_of_before(case):
    from lowering import XnnpackPartitioner

    options, expected = OPTIONS[case]
    assert XnnpackPartitioner(**options).pipeline_text == expected


def test_default_pipeline_is_importable_with_its_value():
    from lowering import pipeline

    assert DEFAULT_PIPELINE == lowering.DEFAULT_PIPELINE == pipeline.DEFAULT_PIPELINE == names(DEFAULT)


def test_the_side_tables_of_before_are_derived_from_the_table():
    assert float_op_passes() == {
        "xnnpack.slices-as-xir-slices",
        "xnnpack.rope-as-pair-swap",
        "xnnpack.partial-rotary-whole-head",
        "xnnpack.fuse-sibling-linears",
        "xnnpack.mean-over-last-dims",
        "xnnpack.dynamic-mm-as-bmm",
        "xnnpack.merge-head-chains",
        "xnnpack.rotate-half-sign-in-sin",
        "xnnpack.index-select-as-slices",
        "xnnpack.step-slice-as-view",
        "xnnpack.casts-as-converts",
        "xnnpack.bf16-in-fp32",
        "xnnpack.bf16-rounded-arithmetic",
        "xnnpack.bf16-bmm-f32-output",
        "xnnpack.bf16-linear-as-f16",
        "xnnpack.bf16-activations-in-fp32",
    }
    assert option_passes() == {
        "bf16_linears_as_f16": "xnnpack.bf16-linear-as-f16",
        "bf16_activations_in_fp32": "xnnpack.bf16-activations-in-fp32",
    }


def test_a_pass_switched_by_float_ops_is_switched_everywhere():
    steps = [s for phase in PHASES for s in phase.steps]
    switched = {s.name for s in steps if "float_ops" in s.when}
    assert not [s.name for s in steps if s.name in switched and "float_ops" not in s.when]


def test_an_unknown_switch_is_an_error():
    with pytest.raises(ValueError, match="unknown switch"):
        Step("xnnpack.remove-no-ops", ("fp32",))


@pytest.mark.parametrize("switches", [Switches(*flags) for flags in itertools.product((True, False), repeat=3)])
def test_every_pipeline_of_the_table_keeps_the_declared_order(switches):
    check_order(parse_pipeline(pipeline_text(switches)))


def test_every_declared_ordering_names_a_pass():
    known = set(pass_names())
    for name in pass_names():
        cls = get_pass_class(name)
        for other in cls.runs_after + cls.runs_before:
            assert other in known, f"{name} declares an order with {other!r}, which is no pass"
            assert other != name


def test_every_pass_of_the_table_is_a_pass():
    for name in pipeline_passes(Switches(True, True, True)):
        get_pass_class(name)


def test_user_pipeline_text_that_breaks_a_declared_order_fails_naming_both():
    from lowering import XnnpackPartitioner

    text = "xnnpack.mean-over-last-dims,remove-no-ops,xnnpack.decompose-layer-norm"
    with pytest.raises(
        PipelineError,
        match=re.escape(
            "xnnpack.mean-over-last-dims must run after xnnpack.decompose-layer-norm (pipeline positions 1 and 3; "
            "declared by xnnpack.decompose-layer-norm.runs_before)"
        ),
    ):
        XnnpackPartitioner(pipeline=text)
    # a constraint on a pass the pipeline leaves out holds
    XnnpackPartitioner(pipeline="xnnpack.mean-over-last-dims,remove-no-ops")
    # a later run of the pass keeps it (the default pipeline runs mean-over-last-dims twice)
    XnnpackPartitioner(pipeline=text + ",xnnpack.mean-over-last-dims")


def test_an_option_puts_its_pass_where_its_declared_order_says():
    from lowering import XnnpackPartitioner

    def run(text, **options):
        return [p.name for p in XnnpackPartitioner(enable_bf16=True, pipeline=text, **options).pipeline]

    # after the last of the passes it runs after
    assert run("xnnpack.casts-as-converts,xnnpack.layer-norm-in-fp32,remove-no-ops", bf16_activations_in_fp32=True) == [
        "xnnpack.casts-as-converts",
        "xnnpack.layer-norm-in-fp32",
        "xnnpack.bf16-activations-in-fp32",
        "remove-no-ops",
    ]
    # else before the first it runs before
    assert run("dead-code-elimination,xnnpack.fuse-sibling-linears,remove-no-ops", bf16_linears_as_f16=True) == [
        "dead-code-elimination",
        "xnnpack.bf16-linear-as-f16",
        "xnnpack.fuse-sibling-linears",
        "remove-no-ops",
    ]
    # else before a last dead-code-elimination
    assert run("remove-no-ops,dead-code-elimination", bf16_linears_as_f16=True) == [
        "remove-no-ops",
        "xnnpack.bf16-linear-as-f16",
        "dead-code-elimination",
    ]
    # the default pipeline extended: the options' passes where the table has them
    extended = run("+remove-no-ops", bf16_linears_as_f16=True, bf16_activations_in_fp32=True)
    assert extended == pipeline_passes(Switches(True, True, True)) + ["remove-no-ops"]


def test_the_planner_learns_its_rewrites_from_the_pipeline():
    from lowering import XnnpackPartitioner
    from lowering.capability import WEIGHT_ONLY_BIAS_REWRITE
    from lowering.pipeline import planned_rewrites

    pipeline = XnnpackPartitioner().pipeline
    assert planned_rewrites(pipeline) == {WEIGHT_ONLY_BIAS_REWRITE}
    assert [p.name for p in pipeline if getattr(p, "runs_for_planning", False)] == ["xnnpack.weight-only-int8-linear"]
    assert planned_rewrites(XnnpackPartitioner(pipeline="remove-no-ops").pipeline) == frozenset()


def test_describe_shows_every_phase_and_pass():
    text = describe()
    for phase in PHASES:
        assert f"{phase.name}: {phase.why}\n" in text
    assert "   1 hoist-row-select\n" in text and "  51 dead-code-elimination\n" in text
    assert "  -- xnnpack.bf16-linear-as-f16  (with float_ops and bf16_linears_as_f16)\n" in text
    assert "  36 xnnpack.bf16-linear-as-f16" in describe(Switches(bf16_linears_as_f16=True))
