"""xir's partitioner in ExecuTorch's own LLM export flow (``executorch.examples.models.llama``).

The flow lowers with ``_to_edge_and_lower_llama_xnnpack``: stock's dynamically quantized
partitioner, then (``xnnpack_extended_ops``) stock's ``XnnpackPartitioner``, handed to its
builder's ``to_edge_transform_and_lower``. That builder takes ``transform_passes=`` and hands
them to ExecuTorch's ``to_edge_transform_and_lower``, which is where xir's rewrites go:

    from executorch.examples.models.llama import export_llama_lib as flow
    from lowering.fx.llm import llm_partitioners, to_edge_and_lower_llama_xnnpack

    builder = flow._prepare_for_llama_export(llm_config).export()
    builder.run_canonical_optimizations()
    partitioners = llm_partitioners("dq+xir", enable_bf16=False)
    builder = to_edge_and_lower_llama_xnnpack(builder, partitioners)   # as the flow's, plus xir's rewrites
    builder.save_to_pte("model.pte")

The whole flow, from export_llm's own arguments (``--config FILE`` and ``key=value``), lowered
by xir's partitioner alone and saved where the flow saves it:

    python -m lowering.fx.llm --config llm.yaml [key=value ...] [xir.partitioners=xir|dq+xir|xir-dq+xir|stock]
                           [xir.bf16_linears_as_f16=true] [xir.bf16_activations_in_fp32=true]

(``main``; ``run(argv)`` returns the builder, ``export_llama(llm_config)`` takes an LlmConfig).
Nothing here patches ExecuTorch: the flow's builder and functions are used as they are.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Sequence

import hydra
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackDynamicallyQuantizedPartitioner
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner
from executorch.examples.models.llama import export_llama_lib as flow
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from executorch.extension.llm.export import export_llm as et
from executorch.extension.llm.export.config.llm_config import LlmConfig
from omegaconf import OmegaConf

from .partitioner import XnnpackPartitioner

# the partitioner sets: "stock" is what the flow builds with xnnpack + xnnpack_extended_ops;
# "xir-dq+xir" is the flow's two stages with xir's partitioner in both
PARTITIONER_SETS = ("stock", "xir", "dq+xir", "xir-dq+xir")
# xir's partitioner's bf16 options the flow passes on (``xir.NAME=true``; see XnnpackPartitioner):
# bf16 linears as XNNPACK's fp16 GEMM, and the delegated bf16 ops computed in fp32
XIR_BF16_OPTIONS = ("bf16_linears_as_f16", "bf16_activations_in_fp32")


def _xir_options(options: dict) -> dict:
    unknown = set(options) - set(XIR_BF16_OPTIONS)
    if unknown:
        raise TypeError(f"unknown xir option(s) {', '.join(sorted(unknown))}; expected {', '.join(XIR_BF16_OPTIONS)}")
    return {name: bool(value) for name, value in options.items()}


def llm_partitioners(kind: str, enable_bf16: bool = False, **xir_options: bool) -> list:
    """``stock``: [stock XnnpackDynamicallyQuantizedPartitioner, stock XnnpackPartitioner] (the
    flow's own, in its order); ``xir``: [xir's XnnpackPartitioner]; ``dq+xir``: stock's dynamically
    quantized stage, then xir's partitioner; ``xir-dq+xir``: the flow's two stages, each xir's
    (``config_precisions=DYNAMIC_QUANT``, then all). ``xir_options`` (:data:`XIR_BF16_OPTIONS`:
    ``bf16_linears_as_f16``, ``bf16_activations_in_fp32``) go to xir's partitioner."""

    xir_options = _xir_options(xir_options)
    if kind == "stock":
        chosen = [name for name, value in xir_options.items() if value]
        if chosen:
            raise ValueError(f"{chosen[0]} is an option of xir's partitioner, not of stock's")
        return [
            XnnpackDynamicallyQuantizedPartitioner(enable_bf16=enable_bf16),
            StockPartitioner(enable_bf16=enable_bf16),
        ]
    if kind == "xir":
        return [XnnpackPartitioner(enable_bf16=enable_bf16, **xir_options)]
    if kind == "dq+xir":
        return [
            XnnpackDynamicallyQuantizedPartitioner(enable_bf16=enable_bf16),
            XnnpackPartitioner(enable_bf16=enable_bf16, **xir_options),
        ]
    if kind == "xir-dq+xir":
        return [
            XnnpackPartitioner(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT, enable_bf16=enable_bf16),
            XnnpackPartitioner(enable_bf16=enable_bf16, **xir_options),
        ]
    raise ValueError(f"unknown partitioner set {kind!r}; expected one of {', '.join(PARTITIONER_SETS)}")


def transform_passes(partitioners: Sequence[Any]) -> list:
    """The transform passes of every xir partitioner in ``partitioners`` (in order): what
    ExecuTorch's ``to_edge_transform_and_lower`` must run before partitioning."""

    passes: list = []
    for p in partitioners:
        if isinstance(p, XnnpackPartitioner):
            passes.extend(p.transform_passes())
    return passes


def to_edge_transform_and_lower_llama(
    builder_exported, partitioners: Sequence[Any], quantizers=None, with_rewrites: bool = True
):
    """The first half of the flow's ``_to_edge_and_lower_llama_xnnpack``: pt2e quantizers (if
    any), then the builder's ``to_edge_transform_and_lower`` with ``partitioners`` and, unless
    ``with_rewrites`` is False, xir's rewrites as its ``transform_passes``. Returns the builder."""
    builder = builder_exported.pt2e_quantize(list(quantizers or []))
    passes = transform_passes(partitioners) if with_rewrites else []
    return builder.to_edge_transform_and_lower(list(partitioners), transform_passes=passes or None)


def to_edge_and_lower_llama_xnnpack(
    builder_exported, partitioners: Sequence[Any], additional_passes=(), quantizers=None, with_rewrites: bool = True
):
    """The flow's ``_to_edge_and_lower_llama_xnnpack`` with a given partitioner list: lower, then
    the builder's ``to_executorch(passes=additional_passes)``. Returns the builder
    (``builder.export_program`` is the ExecutorchProgramManager)."""
    builder = to_edge_transform_and_lower_llama(builder_exported, partitioners, quantizers, with_rewrites)
    return builder.to_executorch(passes=list(additional_passes))


# ------------------------------------------------------------------ export_llm with xir's partitioner
#
#     python -m lowering.fx.llm --config llm.yaml [key=value ...] [xir.partitioners=xir|dq+xir|xir-dq+xir|stock]
#
# takes what ``python -m executorch.extension.llm.export.export_llm`` takes (parsed by ExecuTorch's
# own code: its ``export_llm`` helpers and hydra's ``llm_config`` schema) and runs the flow's
# ``_export_llama`` step for step, but lowers to XNNPACK with xir's partitioner.

#: what ``xir.partitioners=`` takes: xir alone (the default), stock's DQ stage then xir, the flow's
#: two stages both xir's, or the flow's own stock pair (for comparison, the same program the flow writes)
COMMAND_SETS = ("xir", "dq+xir", "xir-dq+xir", "stock")

#: LlmConfig options the flow supports that this command refuses, with why
_OTHER_BACKENDS = ("coreml", "vulkan", "qnn", "openvino", "tosa", "ethosu", "vgf", "mlx")


class UnsupportedOption(ValueError):
    """An LlmConfig option the flow supports and ``python -m lowering.fx.llm`` does not."""


def check_supported(llm_config) -> None:
    """Refuse, naming the option, what this command does not run as the flow does."""
    for name in _OTHER_BACKENDS:
        if getattr(llm_config.backend, name).enabled:
            raise UnsupportedOption(
                f"backend.{name}.enabled=true is not supported: xir lowers to XNNPACK only "
                f"(use ExecuTorch's export_llm for {name})"
            )
    if llm_config.multimethod.enabled:
        raise UnsupportedOption(
            "multimethod.methods is not supported (multimethod export); use ExecuTorch's export_llm for it"
        )
    if llm_config.export.foundation_weights_file is not None or llm_config.export.lora_weights_file is not None:
        option = (
            "foundation_weights_file" if llm_config.export.foundation_weights_file is not None else "lora_weights_file"
        )
        raise UnsupportedOption(
            f"export.{option} is not supported (weights in an external file, "
            "tagged with gen_tag_fn); use ExecuTorch's export_llm for it"
        )
    if llm_config.debug.profile_path is not None:
        raise UnsupportedOption("debug.profile_path is not supported (the cProfile flame graph of export_llama)")


def partitioners_for_config(kind: str, llm_config, **xir_options: bool) -> list:
    """The partitioners for ``kind`` as the flow would build them for ``llm_config``:
    ``backend.xnnpack.enable_bf16`` goes to every partitioner; without
    ``backend.xnnpack.extended_ops`` the flow delegates only dynamically quantized linears, and
    so does xir then (``config_precisions=DYNAMIC_QUANT``)."""
    enable_bf16 = llm_config.backend.xnnpack.enable_bf16
    if llm_config.backend.xnnpack.extended_ops:
        return llm_partitioners(kind, enable_bf16=enable_bf16, **xir_options)

    if kind in ("xir", "xir-dq+xir"):
        return [XnnpackPartitioner(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT, enable_bf16=enable_bf16)]
    if kind in ("stock", "dq+xir"):
        return [XnnpackDynamicallyQuantizedPartitioner(enable_bf16=enable_bf16)]
    raise ValueError(f"unknown partitioner set {kind!r}; expected one of {', '.join(COMMAND_SETS)}")


def _download_checkpoint_if_needed(llm_config) -> None:
    """``export_llama``'s first step: an HF model named without a checkpoint is downloaded and
    converted (the flow's own ``download_and_convert_hf_checkpoint`` and converters)."""

    name = llm_config.base.model_class.value
    if llm_config.base.checkpoint or name not in flow.HUGGING_FACE_REPO_IDS:
        return
    prefixes = (
        ("qwen2_5", "qwen2_5"),
        ("qwen3_5", "qwen3_5"),
        ("qwen3", "qwen3"),
        ("phi_4_mini", "phi_4_mini"),
        ("smollm2", "smollm2"),
        ("lfm2", "lfm2"),
    )
    package = next((pkg for prefix, pkg in prefixes if name.startswith(prefix)), None)
    if package is None:
        raise ValueError(f"Converting weights to meta format for {name} is not yet supported")
    convert_weights = importlib.import_module(f"executorch.examples.models.{package}.convert_weights")
    llm_config.base.checkpoint = flow.download_and_convert_hf_checkpoint(
        flow.HUGGING_FACE_REPO_IDS[name], convert_weights
    )


def export_llama(llm_config, partitioners: str = "xir", **xir_options: bool):
    """ExecuTorch's ``_export_llama`` (``export_llm``) with xir's partitioner: validation,
    quantizers, ``_prepare_for_llama_export``, export, canonical optimizations, the flow's
    additional passes for ``to_executorch``, and the flow's output name and ``save_to_pte``; the
    XNNPACK lowering is ``partitioners_for_config(partitioners, llm_config)`` with xir's rewrites
    as transform passes. With ``backend.xnnpack.enabled`` false (and no pt2e quantizer forcing it
    on, as in the flow) nothing is delegated: the flow's portable lowering. Returns the builder
    (``builder.get_saved_pte_filename()``, ``builder.edge_manager``). ``xir_options``
    (:data:`XIR_BF16_OPTIONS`) go to xir's partitioner: ``bf16_linears_as_f16`` runs bf16 linears
    as XNNPACK's fp16 GEMM, ``bf16_activations_in_fp32`` the delegated bf16 ops in fp32 (both
    ``XnnpackPartitioner``'s options; they need ``backend.xnnpack.enable_bf16``)."""

    if partitioners not in COMMAND_SETS:
        raise ValueError(f"unknown partitioner set {partitioners!r}; expected one of {', '.join(COMMAND_SETS)}")
    check_supported(llm_config)
    xir_options = _xir_options(xir_options)
    for name, value in xir_options.items():
        if value and (
            partitioners == "stock"
            or not llm_config.backend.xnnpack.enable_bf16
            or not llm_config.backend.xnnpack.extended_ops
        ):
            raise UnsupportedOption(
                f"xir.{name}=true needs xir's partitioner (xir.partitioners=xir, dq+xir or xir-dq+xir), "
                "backend.xnnpack.enable_bf16=true and backend.xnnpack.extended_ops=true "
                "(with model.dtype_override=bf16)"
            )
    _download_checkpoint_if_needed(llm_config)
    flow._validate_args(llm_config)
    if llm_config.model.static_quantize_kv_cache:
        flow._ensure_static_kvq_out_variants(llm_config)
    pt2e_quant_params, quantizers, quant_dtype = flow.get_quantizer_and_quant_params(llm_config)

    passes = additional_passes(llm_config)
    builder_manager = flow._prepare_for_llama_export(llm_config)
    if llm_config.model.static_quantize_kv_cache:
        flow._calibrate_static_kv_cache(builder_manager, llm_config)
    builder_exported = builder_manager.export()
    builder_exported.run_canonical_optimizations()
    modelname = builder_exported.modelname
    if llm_config.export.export_only:
        raise SystemExit(0)  # the flow's exit() after saving the exported program

    if pt2e_quant_params is not None and pt2e_quant_params.quantize_linear is not None:
        llm_config.backend.xnnpack.enabled = True  # as the flow: pt2e linear quantization is XNNPACK's
    if llm_config.backend.xnnpack.enabled:
        chosen = partitioners_for_config(partitioners, llm_config, **xir_options)
        if llm_config.debug.generate_etrecord:
            builder_exported.generate_etrecord = True
        builder = to_edge_transform_and_lower_llama(builder_exported, chosen, quantizers)
        if llm_config.debug.verbose:
            flow.print_delegation_info(builder.edge_manager.exported_program().graph_module)
        builder = builder.to_executorch(passes=passes)
    else:
        builder = flow._to_edge_and_lower_llama(
            builder_exported,
            modelname,
            passes,
            pt2e_quant_params,
            quantizers,
            quant_dtype,
            dtype_override=llm_config.model.dtype_override.value,
            enable_dynamic_shape=llm_config.model.enable_dynamic_shape,
            use_kv_cache=llm_config.model.use_kv_cache,
            embedding_quantize=llm_config.quantization.embedding_quantize,
            pt2e_quantize=llm_config.quantization.pt2e_quantize.value
            if llm_config.quantization.pt2e_quantize
            else None,
            generate_etrecord=llm_config.debug.generate_etrecord,
            verbose=llm_config.debug.verbose,
        )

    if llm_config.debug.profile_memory:
        flow.generate_memory_trace(builder.export_program, "memory_profile.json")
    _save(flow, builder, llm_config, modelname)
    return builder


def additional_passes(llm_config) -> list:
    """The passes ``_export_llama`` hands to ``to_executorch`` for this config (the Arm backends'
    KV-cache pass is not here: check_supported refuses those backends)."""

    passes = []
    if llm_config.base.model_class.value in flow.TORCHTUNE_DEFINED_MODELS:
        passes = [InitializedMutableBufferPass(["kv_cache_pos"])]
    if llm_config.model.use_attention_sink:
        passes.append(InitializedMutableBufferPass(["cache_positions"]))
    return passes


def _save(flow, builder, llm_config, modelname) -> None:
    """The flow's output name and ``save_to_pte``; an OSError when no file was written."""
    output_file = flow._get_output_filename(llm_config, modelname, builder.output_dir, builder.dtype)
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)  # (the flow's save logs and goes on)
    builder.save_to_pte(output_file)
    saved = builder.get_saved_pte_filename()
    if not saved or not os.path.isfile(saved):
        raise OSError(f"could not write {output_file} (save_to_pte's error is in the log above)")
    flow._save_etrecord_if_generated(builder)


def parse_args(argv: Sequence[str]):
    """``argv`` as ``export_llm`` reads it (``--config FILE`` and hydra ``key=value`` overrides,
    through ExecuTorch's own ``export_llm`` helpers and hydra's ``llm_config`` schema), plus
    ``xir.partitioners=KIND`` and ``xir.NAME=true|false`` for each of :data:`XIR_BF16_OPTIONS`.
    Returns (LlmConfig, partitioner set, {option: bool} for every one of them)."""

    kind, options, rest = "xir", {name: False for name in XIR_BF16_OPTIONS}, []
    for arg in argv:
        if arg.startswith("xir."):
            key, _, value = arg.partition("=")
            if key[len("xir.") :] in XIR_BF16_OPTIONS:
                if value.lower() not in ("true", "false"):
                    raise UnsupportedOption(f"{key}={value!r}: expected true or false")
                options[key[len("xir.") :]] = value.lower() == "true"
                continue
            if key != "xir.partitioners":
                raise UnsupportedOption(
                    f"unknown option {key!r}; xir takes xir.partitioners={'|'.join(COMMAND_SETS)} and "
                    + " and ".join(f"xir.{name}=true|false" for name in XIR_BF16_OPTIONS)
                )
            if value not in COMMAND_SETS:
                raise UnsupportedOption(f"xir.partitioners={value!r}: expected one of {', '.join(COMMAND_SETS)}")
            kind = value
        else:
            rest.append(arg)
    parsed: list = []

    def hydra_main(llm_config) -> None:  # export_llm's hydra_main, keeping the config
        merged = OmegaConf.merge(OmegaConf.structured(LlmConfig), llm_config)
        parsed.append(OmegaConf.to_object(merged))

    saved = sys.argv
    sys.argv = [saved[0] if saved else "lowering.fx.llm", *rest]
    try:
        config, _ = et.parse_config_arg()
        if config:
            et.add_hydra_config_args(et.pop_config_arg())
        hydra.main(version_base=None, config_name="llm_config", config_path=None)(hydra_main)()
    finally:
        sys.argv = saved
    if not parsed:
        raise SystemExit(1)  # hydra printed --help or --cfg and returned
    return parsed[0], kind, options


def run(argv: Sequence[str]):
    """Parse ``argv`` as ``export_llm`` does and export with xir; returns the flow's builder."""
    llm_config, kind, options = parse_args(argv)
    return export_llama(llm_config, kind, **options)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lowering.fx.llm``: export_llm's arguments; writes the .pte the flow would write
    and prints its path."""

    builder = run(list(sys.argv[1:] if argv is None else argv))
    print(builder.get_saved_pte_filename())
    return 0


if __name__ == "__main__":
    import sys

    try:
        sys.exit(main())
    except UnsupportedOption as error:
        print(f"lowering.fx.llm: error: {error}", file=sys.stderr)
        sys.exit(2)
