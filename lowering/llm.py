"""xir's partitioner in ExecuTorch's own LLM export flow (``executorch.examples.models.llama``).

The flow lowers with ``_to_edge_and_lower_llama_xnnpack``: stock's dynamically quantized
partitioner, then (``xnnpack_extended_ops``) stock's ``XnnpackPartitioner``, handed to its
builder's ``to_edge_transform_and_lower``. That builder takes ``transform_passes=`` and hands
them to ExecuTorch's ``to_edge_transform_and_lower``, which is where xir's rewrites go:

    from executorch.examples.models.llama import export_llama_lib as flow
    from lowering.llm import llm_partitioners, to_edge_and_lower_llama_xnnpack

    builder = flow._prepare_for_llama_export(llm_config).export()
    builder.run_canonical_optimizations()
    partitioners = llm_partitioners("dq+xir", enable_bf16=False)
    builder = to_edge_and_lower_llama_xnnpack(builder, partitioners)   # as the flow's, plus xir's rewrites
    builder.save_to_pte("model.pte")

Nothing here patches ExecuTorch: the flow's builder is used as it is.
"""

from __future__ import annotations

from typing import Any, Sequence

# the partitioner sets: "stock" is what the flow builds with xnnpack + xnnpack_extended_ops
PARTITIONER_SETS = ("stock", "xir", "dq+xir")


def llm_partitioners(kind: str, enable_bf16: bool = False) -> list:
    """``stock``: [stock XnnpackDynamicallyQuantizedPartitioner, stock XnnpackPartitioner] (the
    flow's own, in its order); ``xir``: [xir's XnnpackPartitioner]; ``dq+xir``: stock's dynamically
    quantized stage, then xir's partitioner."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner,
    )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner

    from .partitioner import XnnpackPartitioner

    if kind == "stock":
        return [XnnpackDynamicallyQuantizedPartitioner(enable_bf16=enable_bf16), StockPartitioner(enable_bf16=enable_bf16)]
    if kind == "xir":
        return [XnnpackPartitioner(enable_bf16=enable_bf16)]
    if kind == "dq+xir":
        return [XnnpackDynamicallyQuantizedPartitioner(enable_bf16=enable_bf16), XnnpackPartitioner(enable_bf16=enable_bf16)]
    raise ValueError(f"unknown partitioner set {kind!r}; expected one of {', '.join(PARTITIONER_SETS)}")


def transform_passes(partitioners: Sequence[Any]) -> list:
    """The transform passes of every xir partitioner in ``partitioners`` (in order): what
    ExecuTorch's ``to_edge_transform_and_lower`` must run before partitioning."""
    from .partitioner import XnnpackPartitioner

    passes: list = []
    for p in partitioners:
        if isinstance(p, XnnpackPartitioner):
            passes.extend(p.transform_passes())
    return passes


def to_edge_transform_and_lower_llama(builder_exported, partitioners: Sequence[Any], quantizers=None,
                                      with_rewrites: bool = True):
    """The first half of the flow's ``_to_edge_and_lower_llama_xnnpack``: pt2e quantizers (if
    any), then the builder's ``to_edge_transform_and_lower`` with ``partitioners`` and, unless
    ``with_rewrites`` is False, xir's rewrites as its ``transform_passes``. Returns the builder."""
    builder = builder_exported.pt2e_quantize(list(quantizers or []))
    passes = transform_passes(partitioners) if with_rewrites else []
    return builder.to_edge_transform_and_lower(list(partitioners), transform_passes=passes or None)


def to_edge_and_lower_llama_xnnpack(builder_exported, partitioners: Sequence[Any], additional_passes=(),
                                    quantizers=None, with_rewrites: bool = True):
    """The flow's ``_to_edge_and_lower_llama_xnnpack`` with a given partitioner list: lower, then
    the builder's ``to_executorch(passes=additional_passes)``. Returns the builder
    (``builder.export_program`` is the ExecutorchProgramManager)."""
    builder = to_edge_transform_and_lower_llama(builder_exported, partitioners, quantizers, with_rewrites)
    return builder.to_executorch(passes=list(additional_passes))
