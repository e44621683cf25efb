"""Lowering xir's IR to ExecuTorch's XNNPACK backend: capability rules, partitioning, emission
(a drop-in Partitioner plus the transform passes that carry xir's rewrites). The tools around it
(the ``xir`` command, the report page, the fuzzer) are in :mod:`xir_tools`.

Its passes are in :mod:`lowering.passes`, one per file, each named ``xnnpack.*`` (and
``fold-constants``); importing this package declares their table to the registry (no pass module is
imported until a pipeline names it, and no installed metadata is needed). ``XnnpackPartitioner``,
``to_edge_transform_and_lower`` import torch and ExecuTorch on first use. The rewrite pipeline is
data, in :mod:`lowering.pipeline` (its phases, and ``DEFAULT_PIPELINE``: torch-free).
"""

from passes.registry import register_backend_passes

from . import ops  # noqa: F401  (the backend's own ops: defined before anything reads them)
from .capability import Options
from .partition import PartitionPlan, plan_partition
from .passes import PASSES
from .pipeline import DEFAULT_PIPELINE

register_backend_passes(__name__, PASSES)

_FROM_PARTITIONER = ("XnnpackPartitioner", "to_edge_transform_and_lower")


def __getattr__(name: str):
    if name in _FROM_PARTITIONER:
        from . import partitioner

        return getattr(partitioner, name)
    raise AttributeError(f"module 'lowering' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_PARTITIONER))


__all__ = [
    "DEFAULT_PIPELINE",
    "Options",
    "PartitionPlan",
    "XnnpackPartitioner",
    "plan_partition",
    "to_edge_transform_and_lower",
]
