"""Lowering xir's IR to ExecuTorch's XNNPACK backend: capability rules, partitioning, emission
(a drop-in Partitioner plus the transform passes that carry xir's rewrites). The tools around it
(the ``xir`` command, the report page, the fuzzer) are in :mod:`xir_tools`.

Its passes are in :mod:`lowering.passes`, one per file, each named ``xnnpack.*`` (and
``fold-constants``); importing this package declares their table to the registry (no pass module is
imported until a pipeline names it, and no installed metadata is needed). The rewrite pipeline is
data, in :mod:`lowering.pipeline` (its phases, and ``DEFAULT_PIPELINE``: torch-free).

Its rooms: :mod:`lowering.fx` is the ExecuTorch boundary (the partitioner class, tags, write-back,
recipes, the LLM flow), the only folder that touches torch.fx and ExecuTorch;
``XnnpackPartitioner``, ``to_edge_transform_and_lower``, ``XirRecipeType`` and ``xir_partitioner``
are read from it on first use. The rest is pure IR: the backend's ops (:mod:`lowering.ops`),
rules, capability, the partition plan, the pipeline and the passes.
"""

from passes.registry import register_backend_passes

from . import ops  # noqa: F401  (the backend's own ops: defined before anything reads them)
from .capability import Options
from .partition import PartitionPlan, plan_partition
from .passes import PASSES
from .pipeline import DEFAULT_PIPELINE

register_backend_passes(__name__, PASSES)

# the ExecuTorch side (lowering.fx), imported on first use: ``import lowering`` stays torch-free
_FROM_FX = {
    "XnnpackPartitioner": "lowering.fx.partitioner",
    "to_edge_transform_and_lower": "lowering.fx.lower",
    "XirRecipeType": "lowering.fx.recipes",
    "xir_partitioner": "lowering.fx.recipes",
}


def __getattr__(name: str):
    if name in _FROM_FX:
        import importlib  # (allowed in-function: the lazy door to lowering.fx; tests/test_rooms.py)

        return getattr(importlib.import_module(_FROM_FX[name]), name)
    raise AttributeError(f"module 'lowering' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_FX))


__all__ = [
    "DEFAULT_PIPELINE",
    "Options",
    "PartitionPlan",
    "XirRecipeType",
    "XnnpackPartitioner",
    "plan_partition",
    "to_edge_transform_and_lower",
    "xir_partitioner",
]
