"""Lowering xir's IR to ExecuTorch's XNNPACK backend: capability rules, partitioning, emission
(a drop-in Partitioner plus the transform passes that carry xir's rewrites), and the CLI."""

from .capability import Options
from .partition import PartitionPlan, plan_partition
from .partitioner import DEFAULT_PIPELINE, XnnpackPartitioner, to_edge_transform_and_lower

__all__ = ["DEFAULT_PIPELINE", "Options", "PartitionPlan", "XnnpackPartitioner", "plan_partition",
           "to_edge_transform_and_lower"]
