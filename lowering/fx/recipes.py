"""xir's recipes for ExecuTorch's export recipe API (``executorch.export``).

Importing this module registers :class:`XirRecipeProvider` with ExecuTorch's recipe registry
(backend name ``"xir"``); then

    import lowering.fx.recipes
    from executorch.export import ExportRecipe, export
    from lowering.fx.recipes import XirRecipeType

    session = export(model, [inputs], export_recipe=ExportRecipe.get_recipe(XirRecipeType.FP32))
    session.save_to_pte("model.pte")

:class:`XirRecipeType` mirrors ExecuTorch's ``XNNPackRecipeType`` member for member (same names,
values with an ``xir_`` prefix instead of ``xnnpack_``, the same kwargs: ``group_size`` for the
8da4w per-group one). A recipe of it is XNNPACK's recipe of the same type with only the lowering
changed: its quantization stage (quantizer or torchao config), edge compile config and ExecuTorch
backend config are the ones XNNPACK's provider builds; its partitioner is xir's
:class:`lowering.XnnpackPartitioner`, and xir's rewrites (the partitioner's ``transform_passes()``)
are the lowering recipe's ``edge_transform_passes``, which ExecuTorch runs before partitioning
(in ``to_edge_transform_and_lower``, or in the edge transform stage before ``to_backend``).

The partitioner a recipe holds is ``recipe.lowering_recipe.partitioners[0]``: after an export
its ``report()`` says what xir delegated and why the rest stayed outside, and
``rewrites_applied`` which rewrites changed the program.
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

from executorch.backends.xnnpack.recipes.xnnpack_recipe_provider import XNNPACKRecipeProvider
from executorch.backends.xnnpack.recipes.xnnpack_recipe_types import XNNPackRecipeType
from executorch.export import (
    BackendRecipeProvider,
    ExportRecipe,
    LoweringRecipe,
    RecipeType,
    recipe_registry,
)

from .partitioner import XnnpackPartitioner

logger = logging.getLogger("xir")

BACKEND_NAME = "xir"

# the one kwarg a recipe takes (the 8da4w per-group one); others are ignored with a warning, as XNNPACK does
GROUP_SIZE = "group_size"


class XirRecipeType(RecipeType):
    """xir's recipe types: one per ``XNNPackRecipeType``, with the same name and meaning."""

    FP32 = "xir_fp32"

    # PT2E int8 (XNNPACKQuantizer, symmetric): dynamic activations, per-channel weights
    PT2E_INT8_DYNAMIC_PER_CHANNEL = "xir_pt2e_int8_dynamic_per_channel"
    # PT2E int8 static: calibrated on the example inputs
    PT2E_INT8_STATIC_PER_CHANNEL = "xir_pt2e_int8_static_per_channel"
    PT2E_INT8_STATIC_PER_TENSOR = "xir_pt2e_int8_static_per_tensor"

    # torchao int8 dynamic activations, int4 weights: per output channel
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL = "xir_torchao_int8da_int4w_per_channel"
    # ... per group of ``group_size`` (default 32) input channels (XNNPACK names it per-tensor)
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR = "xir_torchao_int8da_int4w_per_tensor"

    @classmethod
    def get_backend_name(cls) -> str:
        return BACKEND_NAME

    @property
    def xnnpack(self) -> XNNPackRecipeType:
        """The ``XNNPackRecipeType`` this type mirrors."""
        return XNNPackRecipeType[self.name]

    @classmethod
    def from_xnnpack(cls, recipe_type: XNNPackRecipeType) -> "XirRecipeType":
        """xir's type for an ``XNNPackRecipeType`` (``XirRecipeType.from_xnnpack(XNNPackRecipeType.FP32)``)."""
        if not isinstance(recipe_type, XNNPackRecipeType):
            raise TypeError(f"expected an XNNPackRecipeType, got {type(recipe_type).__name__}: {recipe_type!r}")
        if recipe_type.name not in cls.__members__:
            raise ValueError(f"xir has no recipe for XNNPACK's {recipe_type.value!r}; it has {[t.value for t in cls]}")
        return cls[recipe_type.name]


def _accepted_kwargs(recipe_type: XirRecipeType) -> frozenset:
    if recipe_type is XirRecipeType.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR:
        return frozenset({GROUP_SIZE})
    return frozenset()


def validate_recipe_kwargs(recipe_type: XirRecipeType, **kwargs: Any) -> dict:
    """The kwargs of ``recipe_type`` that it uses, checked as XNNPACK's provider checks them:
    kwargs a recipe does not take are ignored with a warning; ``group_size`` must be an integer
    (and, where XNNPACK would fail later inside torchao, a positive one)."""
    accepted = _accepted_kwargs(recipe_type)
    unexpected = sorted(set(kwargs) - accepted)
    if unexpected:
        takes = (
            f"Only {', '.join(repr(k) for k in sorted(accepted))} is supported for this recipe."
            if accepted
            else "This recipe does not accept any parameters."
        )
        logger.warning("xir recipe '%s' ignoring unexpected parameters: %s. %s", recipe_type.value, unexpected, takes)
    used = {k: v for k, v in kwargs.items() if k in accepted}
    if GROUP_SIZE in used:
        group_size = used[GROUP_SIZE]
        if not isinstance(group_size, int) or isinstance(group_size, bool):
            raise ValueError(
                f"Parameter 'group_size' must be an integer, got {type(group_size).__name__}: {group_size}"
            )
        if group_size <= 0:
            raise ValueError(f"Parameter 'group_size' must be a positive integer, got {group_size}")
    return used


class XirRecipeProvider(BackendRecipeProvider):
    """ExecuTorch ``BackendRecipeProvider`` for xir (backend ``"xir"``): XNNPACK's recipes, lowered
    with xir's partitioner and rewrites.

    ``partitioner_options`` are passed to every :class:`lowering.XnnpackPartitioner` it makes
    (e.g. ``{"verbose": True}``; register a provider made with them to use them through
    ``ExportRecipe.get_recipe``). XNNPACK's recipes build their partitioner with every precision
    enabled (the precision they name is not one of the stock partitioner's options), and so does
    this provider.
    """

    def __init__(self, **partitioner_options: Any) -> None:

        super().__init__()
        XnnpackPartitioner(**partitioner_options)  # (bad options fail here, not at the first recipe)
        self.partitioner_options = dict(partitioner_options)
        self._xnnpack = XNNPACKRecipeProvider()

    @property
    def backend_name(self) -> str:
        return BACKEND_NAME

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(XirRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> Optional[ExportRecipe]:
        if not isinstance(recipe_type, XirRecipeType):
            return None
        used = validate_recipe_kwargs(recipe_type, **kwargs)
        stock = self._xnnpack.create_recipe(recipe_type.xnnpack, **used)
        if stock is None:
            raise RuntimeError(
                f"ExecuTorch's XNNPACK provider made no recipe for {recipe_type.xnnpack.value!r}, "
                f"which xir's {recipe_type.value!r} is built on"
            )
        return self._with_xir_lowering(stock, recipe_type)

    def _with_xir_lowering(self, stock: ExportRecipe, recipe_type: XirRecipeType) -> ExportRecipe:

        partitioner = XnnpackPartitioner(**self.partitioner_options)

        def xir_rewrites(method_name: str, exported_program: Any) -> list:
            return partitioner.transform_passes()

        stock_lowering = stock.lowering_recipe
        edge_compile_config = stock_lowering.edge_compile_config if stock_lowering is not None else None
        return ExportRecipe(
            name=recipe_type.value,
            quantization_recipe=stock.quantization_recipe,
            aten_transform_passes=stock.aten_transform_passes,
            lowering_recipe=LoweringRecipe(
                partitioners=[partitioner],
                edge_transform_passes=[xir_rewrites],
                edge_compile_config=edge_compile_config,
            ),
            executorch_backend_config=stock.executorch_backend_config,
            pipeline_stages=stock.pipeline_stages,
            mode=stock.mode,
            strict=stock.strict,
        )


def xir_partitioner(recipe: ExportRecipe):
    """The xir partitioner of a recipe made by :class:`XirRecipeProvider` (for its ``report()``)."""

    lowering_recipe = recipe.lowering_recipe
    partitioners = lowering_recipe.partitioners if lowering_recipe is not None else None
    if isinstance(partitioners, dict):
        partitioners = [p for ps in partitioners.values() for p in ps]
    found = [p for p in partitioners or [] if isinstance(p, XnnpackPartitioner)]
    if not found:
        raise ValueError(f"recipe {recipe.name!r} has no xir partitioner")
    return found[0]


recipe_registry.register_backend_recipe_provider(XirRecipeProvider())

__all__ = ["BACKEND_NAME", "XirRecipeProvider", "XirRecipeType", "validate_recipe_kwargs", "xir_partitioner"]
