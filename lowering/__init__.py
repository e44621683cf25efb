"""Lowering xir's IR to ExecuTorch's XNNPACK backend: capability rules, partitioning, emission
(a drop-in Partitioner plus the transform passes that carry xir's rewrites), and the CLI."""

import logging as _logging

# torchao (imported by ExecuTorch) warns on every import about CUDA kernels a CPU machine cannot
# load, and torch's pytree about an enum registration: noise for every xir command.
for _name in ("torchao", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)

from . import fold_constants  # noqa: E402,F401  (registers fold-constants)
from .capability import Options  # noqa: E402
from .partition import PartitionPlan, plan_partition  # noqa: E402
from .partitioner import DEFAULT_PIPELINE, XnnpackPartitioner, to_edge_transform_and_lower

__all__ = ["DEFAULT_PIPELINE", "Options", "PartitionPlan", "XnnpackPartitioner", "plan_partition",
           "to_edge_transform_and_lower"]
