"""xir's recipes for ExecuTorch's export recipe API (lowering.fx.recipes), end to end: a small
conv + linear model exported with ``executorch.export.export`` and an xir recipe, its program
run by ExecuTorch's runtime against eager, what is delegated, and that xir did the lowering."""

from __future__ import annotations

import logging

import pytest
import torch

import lowering.fx.recipes  # noqa: F401  (registers xir's provider)
from lowering import XnnpackPartitioner
from lowering.fx.recipes import XirRecipeProvider, XirRecipeType, xir_partitioner

DELEGATE = "executorch_call_delegate"
# ops that must not run outside a delegate (a gELU tanh is what xir rewrites for XNNPACK)
NOT_OUTSIDE = ("linear", "convolution", "addmm", "mm", "gelu", "tanh", "relu")


class ConvLinear(torch.nn.Module):
    """conv -> relu -> flatten (64 features) -> linear -> gELU(tanh) -> linear; both linears have
    in_features a multiple of 32, the 8da4w recipe's group size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc1 = torch.nn.Linear(64, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.nn.functional.gelu(self.fc1(y), approximate="tanh"))


def _sqnr(reference: torch.Tensor, actual: torch.Tensor) -> float:
    return float(10 * torch.log10(reference.pow(2).mean() / (reference - actual).pow(2).mean()))


# recipe type, kwargs, max |runtime - the exported (quantized) program|, min SQNR (dB) vs float eager
# (the outputs are within +-0.17; measured: 5e-8 / 8e-4 / 6e-4 and 135 / 46 / 24 dB)
CASES = [
    (XirRecipeType.FP32, {}, 1e-5, 80.0),
    (XirRecipeType.PT2E_INT8_DYNAMIC_PER_CHANNEL, {}, 5e-3, 30.0),
    (XirRecipeType.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, {"group_size": 32}, 5e-3, 15.0),
]


@pytest.mark.parametrize("recipe_type,kwargs,atol,min_sqnr", CASES, ids=[c[0].name for c in CASES])
def test_export_with_xir_recipe_runs_in_executorch(recipe_type, kwargs, atol, min_sqnr):
    from executorch.exir.schema import DelegateCall
    from executorch.export import ExportRecipe, StageType, export
    from executorch.runtime import Runtime, Verification

    torch.manual_seed(0)
    model = ConvLinear().eval()
    x = torch.randn(2, 3, 6, 6)
    recipe = ExportRecipe.get_recipe(recipe_type, **kwargs)
    assert recipe.name == recipe_type.value
    with torch.no_grad():
        session = export(model=model, example_inputs=[(x,)], export_recipe=recipe)

    # xir's partitioner did the partitioning, after xir's rewrites ran in the edge program
    partitioner = xir_partitioner(recipe)
    assert isinstance(partitioner, XnnpackPartitioner)
    assert partitioner.last_plan is not None, "xir's partition() never ran"
    assert "xnnpack.decompose-gelu-tanh" in partitioner.rewrites_applied
    report = partitioner.report()
    assert "0 left outside" in report and "aten.linear" in report and "aten.convolution" in report, report

    # what is outside the delegates: no compute op
    graph = session.get_edge_program_manager().exported_program().graph
    outside = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    assert sum(DELEGATE in t for t in outside) == 1, outside
    assert not [t for t in outside if any(f"aten.{op}." in t for op in NOT_OUTSIDE)], outside
    instructions = session.get_executorch_program().execution_plan[0].chains[0].instructions
    assert len(instructions) == 1 and isinstance(instructions[0].instr_args, DelegateCall)

    # the program's buffer, loaded and run by ExecuTorch's runtime
    program = Runtime.get().load_program(session.get_pte_buffer(), verification=Verification.Minimal)
    (actual,) = program.load_method("forward").execute((x,))
    with torch.no_grad():
        expected = model(x)
        exported = session.get_stage_artifacts()[StageType.TORCH_EXPORT].data["forward"].module()(x)
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, exported, atol=atol, rtol=0)
    assert _sqnr(expected, actual) > min_sqnr


def test_xir_types_mirror_xnnpack_types():
    from executorch.backends.xnnpack.recipes import XNNPackRecipeType
    from executorch.export import recipe_registry

    assert [t.name for t in XirRecipeType] == [t.name for t in XNNPackRecipeType]
    assert "xir" in recipe_registry.list_backends()
    assert list(recipe_registry.get_supported_recipes("xir")) == list(XirRecipeType)
    for t in XNNPackRecipeType:
        assert XirRecipeType.from_xnnpack(t).xnnpack is t
    # XNNPACK's types are not xir's: its provider answers them, xir's does not
    assert XirRecipeProvider().create_recipe(XNNPackRecipeType.FP32) is None


def test_quantization_stage_is_xnnpacks():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer
    from executorch.export import ExportRecipe

    static = ExportRecipe.get_recipe(XirRecipeType.PT2E_INT8_STATIC_PER_TENSOR)
    (quantizer,) = static.quantization_recipe.quantizers
    assert isinstance(quantizer, XNNPACKQuantizer)
    assert not quantizer.global_config.input_activation.is_dynamic
    dynamic = ExportRecipe.get_recipe(XirRecipeType.PT2E_INT8_DYNAMIC_PER_CHANNEL)
    assert dynamic.quantization_recipe.quantizers[0].global_config.input_activation.is_dynamic
    grouped = ExportRecipe.get_recipe(XirRecipeType.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, group_size=64)
    (config,) = grouped.quantization_recipe.ao_quantization_configs
    assert config.ao_base_config.weight_granularity.group_size == 64
    assert config.ao_base_config.weight_dtype == torch.int4
    assert ExportRecipe.get_recipe(XirRecipeType.FP32).quantization_recipe is None


class _Warnings(logging.Handler):
    """The warnings logged (on the root logger, which xir's and XNNPACK's reach) while active
    (the suite runs with pytest's logging plugin off: no caplog)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "_Warnings":
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)

    @property
    def text(self) -> str:
        return "\n".join(self.messages)


def test_kwargs_validation_as_xnnpack():
    from executorch.backends.xnnpack.recipes import XNNPACKRecipeProvider, XNNPackRecipeType
    from executorch.export import ExportRecipe

    xir, stock = XirRecipeProvider(), XNNPACKRecipeProvider()
    grouped = "TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR"

    # a group_size that is not an integer: both refuse it, with the same message
    for provider, types in ((xir, XirRecipeType), (stock, XNNPackRecipeType)):
        with pytest.raises(ValueError, match="Parameter 'group_size' must be an integer, got str: 32"):
            provider.create_recipe(types[grouped], group_size="32")
        with pytest.raises(ValueError, match="must be an integer, got float: 32.0"):
            provider.create_recipe(types[grouped], group_size=32.0)
    with pytest.raises(ValueError, match="Parameter 'group_size' must be an integer, got str"):
        ExportRecipe.get_recipe(XirRecipeType[grouped], group_size="32")
    # ... nor one that is not positive (XNNPACK would fail later, inside torchao)
    with pytest.raises(ValueError, match="'group_size' must be a positive integer, got 0"):
        xir.create_recipe(XirRecipeType[grouped], group_size=0)

    # a parameter a recipe does not take: ignored with a warning naming it, as XNNPACK does
    for name in ("FP32", "PT2E_INT8_STATIC_PER_CHANNEL", grouped):
        for provider, types in ((xir, XirRecipeType), (stock, XNNPackRecipeType)):
            with _Warnings() as warned:
                assert provider.create_recipe(types[name], bogus=1) is not None
            assert "ignoring unexpected parameters: ['bogus']" in warned.text, (name, warned.text)
    # group_size is for the per-group recipe only
    with _Warnings() as warned:
        recipe = xir.create_recipe(XirRecipeType.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL, group_size=32)
    assert "['group_size']" in warned.text and "does not accept any parameters" in warned.text, warned.text
    assert recipe.quantization_recipe.ao_quantization_configs[0].ao_base_config.weight_granularity.axis == 0

    with pytest.raises(TypeError, match="expected an XNNPackRecipeType, got str"):
        XirRecipeType.from_xnnpack("xnnpack_fp32")


def test_provider_partitioner_options():
    provider = XirRecipeProvider(per_op_mode=True, enable_bf16=True)
    partitioner = xir_partitioner(provider.create_recipe(XirRecipeType.FP32))
    assert partitioner.options.per_op_mode and partitioner.options.enable_bf16
    with pytest.raises(TypeError, match="unknown keyword argument.*bogus"):
        XirRecipeProvider(bogus=1)


def test_rewrites_run_before_to_backend_in_a_staged_pipeline():
    """With the recipe's pipeline as separate stages (to_edge, the edge transform, to_backend), xir's
    rewrites run in the edge transform stage, before xir's partitioner tags."""
    from executorch.export import ExportRecipe, StageType, export
    from executorch.runtime import Runtime

    torch.manual_seed(1)
    model = ConvLinear().eval()
    x = torch.randn(2, 3, 6, 6)
    recipe = ExportRecipe.get_recipe(XirRecipeType.FP32)
    recipe.pipeline_stages = [
        StageType.TORCH_EXPORT,
        StageType.TO_EDGE,
        StageType.EDGE_PROGRAM_MANAGER_TRANSFORM,
        StageType.TO_BACKEND,
        StageType.TO_EXECUTORCH,
    ]
    session = export(model=model, example_inputs=[(x,)], export_recipe=recipe)
    partitioner = xir_partitioner(recipe)
    assert "xnnpack.decompose-gelu-tanh" in partitioner.rewrites_applied
    assert "0 left outside" in partitioner.report(), partitioner.report()
    graph = session.get_edge_program_manager().exported_program().graph
    outside = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    assert not [t for t in outside if any(f"aten.{op}." in t for op in NOT_OUTSIDE)], outside
    (actual,) = Runtime.get().load_program(session.get_pte_buffer()).load_method("forward").execute((x,))
    with torch.no_grad():
        torch.testing.assert_close(actual, model(x), atol=1e-5, rtol=1e-5)
