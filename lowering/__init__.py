"""Lowering xir's IR to ExecuTorch's XNNPACK backend: capability rules, partitioning, emission
(a drop-in Partitioner plus the transform passes that carry xir's rewrites), and the CLI.

Importing the package registers every pass (``fold-constants`` and the ``xnnpack.*`` rewrites)
without importing torch or ExecuTorch; ``XnnpackPartitioner``, ``to_edge_transform_and_lower``
and ``DEFAULT_PIPELINE`` import them on first use (so that ``xir passes`` starts fast).
"""

import logging as _logging

# torchao (imported by ExecuTorch) warns on every import about CUDA kernels a CPU machine cannot
# load, and torch's pytree about an enum registration: noise for every xir command.
for _name in ("torchao", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)

from . import fold_constants, rewrites  # noqa: E402,F401  (register fold-constants and the xnnpack.* passes)
from .capability import Options  # noqa: E402
from .partition import PartitionPlan, plan_partition  # noqa: E402

_FROM_PARTITIONER = ("DEFAULT_PIPELINE", "XnnpackPartitioner", "to_edge_transform_and_lower")


def __getattr__(name: str):
    if name in _FROM_PARTITIONER:
        from . import partitioner

        return getattr(partitioner, name)
    raise AttributeError(f"module 'lowering' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_PARTITIONER))


__all__ = ["DEFAULT_PIPELINE", "Options", "PartitionPlan", "XnnpackPartitioner", "plan_partition",
           "to_edge_transform_and_lower"]
