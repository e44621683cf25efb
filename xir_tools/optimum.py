"""xir in optimum-executorch: the recipe ``xnnpack-xir`` and the command ``xir optimum``.

Importing this module registers the recipe with optimum-executorch's own ``register_recipe``::

    import xir_tools.optimum  # registers "xnnpack-xir"
    from optimum.executorch import ExecuTorchModelForCausalLM

    model = ExecuTorchModelForCausalLM.from_pretrained(model_dir, export=True, recipe="xnnpack-xir")

The recipe is optimum's ``xnnpack`` recipe (the same export of the task's methods, metadata as
constant methods, optimum's ``RemovePaddingIdxEmbeddingPass``, the same edge and backend configs)
with xir's partitioner, and xir's rewrites as transform passes after optimum's own. A bfloat16
model is lowered with ``enable_bf16=True``, so its ops run in XNNPACK in bf16.

``xir optimum ARGS`` takes ``optimum-cli export executorch``'s arguments (optimum's own parser and
command), with ``--recipe`` defaulting to ``xnnpack-xir``. optimum-executorch is an optional
dependency: ``pip install 'xir[optimum]'``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

RECIPE = "xnnpack-xir"
INSTALL_HINT = "pip install 'xir[optimum]'"


class OptimumNotInstalled(ImportError):
    """optimum-executorch (the optional extra ``xir[optimum]``) is not importable."""


def _require_optimum():
    try:
        from optimum.exporters.executorch import recipe_registry
    except ImportError as error:
        raise OptimumNotInstalled(
            f"optimum-executorch is not installed ({error}); install it with: {INSTALL_HINT}"
        ) from error
    return recipe_registry


def program_dtypes(programs) -> set:
    """The floating-point dtypes of the parameters and buffers of ``programs`` (name -> ExportedProgram)."""
    dtypes = set()
    for program in programs.values():
        for value in list(program.state_dict.values()) + list(program.constants.values()):
            if hasattr(value, "dtype") and value.dtype.is_floating_point:
                dtypes.add(value.dtype)
    return dtypes


def model_is_bf16(model, programs) -> bool:
    """Whether the model optimum exports is bfloat16: its ``dtype`` (optimum's exportable modules
    wrap the Hugging Face model as ``.model``), else its exported weights."""
    import torch

    inner = getattr(model, "model", model)
    dtype = getattr(inner, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype == torch.bfloat16
    return torch.bfloat16 in program_dtypes(programs)


def lower(programs, metadata=None, *, enable_bf16: bool = False, **partitioner_options):
    """Lower optimum's exported programs (method name -> ExportedProgram) with xir, the way optimum's
    ``xnnpack`` recipe lowers them with ExecuTorch's partitioner. Returns (ExecutorchProgramManager,
    the xir partitioner)."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from optimum.executorch.passes.remove_padding_idx_embedding_pass import RemovePaddingIdxEmbeddingPass

    from lowering import XnnpackPartitioner, to_edge_transform_and_lower

    if not programs:
        raise ValueError("the model exported no program to lower")
    if len(programs) == 1:  # one program is the .pte's "forward", whatever optimum called it
        programs = {"forward": next(iter(programs.values()))}
    partitioner = XnnpackPartitioner(enable_bf16=enable_bf16, **partitioner_options)
    # lowering.to_edge_transform_and_lower appends the partitioner's rewrites after optimum's pass
    edge = to_edge_transform_and_lower(
        programs,
        partitioner=[partitioner],
        transform_passes=[RemovePaddingIdxEmbeddingPass()],
        constant_methods=metadata,
        compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
    )
    executorch_program = edge.to_executorch(
        config=ExecutorchBackendConfig(
            extract_delegate_segments=True,
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
            do_quant_fusion_and_const_prop=True,
        )
    )
    return executorch_program, partitioner


def _uses_custom_sdpa(model) -> bool:
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) in ("custom_sdpa", "custom_sdpa_ring_kv_cache")


def export_with_xir(model, **kwargs):
    """The ``xnnpack-xir`` recipe: ``model`` is one of optimum-executorch's exportable modules
    (its ``export()`` gives the methods, ``metadata`` the constant methods). Returns {"model": program},
    which optimum writes as model.pte. ``kwargs`` (optimum's ``recipe_kwargs``) go to xir's
    XnnpackPartitioner, e.g. ``bf16_activations_in_fp32=True``; ``enable_bf16`` there overrides the
    model's dtype."""
    if not hasattr(model, "export"):
        raise TypeError(
            f"the {RECIPE} recipe takes an optimum-executorch exportable module, not {type(model).__name__}"
        )
    programs = model.export()
    if _uses_custom_sdpa(model) and not any(
        node.op == "call_function" and "custom_sdpa" in str(node.target)
        for program in programs.values()
        for node in program.graph.nodes
    ):
        raise ValueError(
            "the model was loaded with custom_sdpa attention but its exported programs have no custom_sdpa op"
        )
    bf16 = kwargs.pop("enable_bf16", None)
    if bf16 is None:
        bf16 = model_is_bf16(model, programs)
    start = time.perf_counter()
    program, partitioner = lower(programs, getattr(model, "metadata", None), enable_bf16=bf16, **kwargs)
    export_with_xir.last_partitioner = partitioner  # (for callers that want its report or timings)
    export_with_xir.last_lowering_seconds = time.perf_counter() - start
    return {"model": program}


export_with_xir.last_partitioner = None
export_with_xir.last_lowering_seconds = None


def register() -> None:
    """Register ``xnnpack-xir`` in optimum-executorch's recipe registry (done on import; a recipe
    already registered under the name, e.g. a caller's wrapper of it, is kept)."""
    recipe_registry = _require_optimum()
    if RECIPE not in recipe_registry.recipe_registry:
        recipe_registry.register_recipe(RECIPE)(export_with_xir)


def registered_recipes() -> list[str]:
    recipe_registry = _require_optimum()
    recipe_registry.discover_recipes()
    return sorted(recipe_registry.recipe_registry)


# ------------------------------------------------------------------------------------------ command
def _parser():
    from optimum.commands.export.executorch import parse_args_executorch

    parser = argparse.ArgumentParser(
        prog="xir optimum",
        description="optimum-executorch's export (the arguments of 'optimum-cli export executorch') with xir's "
        f"recipe {RECIPE!r} by default: xir's XNNPACK partitioner and rewrites.",
    )
    parse_args_executorch(parser)
    parser.set_defaults(recipe=RECIPE)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``xir optimum ARGS``: run optimum-executorch's own export command with ARGS. The .pte files
    are written to a temporary folder next to ``--output_dir`` and moved in when the export is done."""
    _require_optimum()
    register()
    from optimum.commands.export.executorch import ExecuTorchExportCommand

    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.output_dir is None:
        parser.error("the following arguments are required: -o/--output_dir")
    recipes = registered_recipes()
    if args.recipe not in recipes:
        parser.error(f"unknown recipe {args.recipe!r}; registered recipes: {', '.join(recipes)}")
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        parser.error(f"--output_dir {output_dir} exists and is not a folder")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}-", dir=output_dir.parent))
    try:
        args.output_dir = staging
        ExecuTorchExportCommand(None, args, from_defaults_factory=True, parser=parser).run()
        output_dir.mkdir(exist_ok=True)
        written = sorted(staging.iterdir())
        if not any(path.suffix == ".pte" for path in written):
            raise RuntimeError(f"optimum's export wrote no .pte file (recipe {args.recipe})")
        for path in written:
            os.replace(path, output_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for path in written:
        print(output_dir / path.name)
    return 0


try:
    register()
except OptimumNotInstalled:  # importable without the extra: main() and register() say what to install
    pass
