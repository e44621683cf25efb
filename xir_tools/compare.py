"""Lower a program with the stock partitioner or xir's, load it with ExecuTorch's runtime, run it,
and compare with eager PyTorch. Used by the tests, the demo and the benchmarks."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field


import executorch.kernels.quantized  # noqa: F401  (Q/DQ left outside delegates need these kernels)
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner
from executorch.exir import EdgeCompileConfig, to_edge
from executorch.exir import to_edge_transform_and_lower as et_to_edge_transform_and_lower

import lowering
from xir_tools.programs import LoadError, delegate_count, delegated_ops, max_error, outside_ops, run_pte


@dataclass
class Lowered:
    delegated: Counter = field(default_factory=Counter)
    outside: Counter = field(default_factory=Counter)
    delegates: int = 0
    outputs: list | None = None
    error: str | None = None  # lowering or load failure
    partitioner: object = None
    seconds: float = 0.0  # lowering time
    buffer: bytes | None = None

    def err(self, reference) -> float:
        assert self.outputs is not None, f"did not run: {self.error}"
        return max_error(self.outputs, reference)

    @property
    def ran(self) -> bool:
        return self.outputs is not None


def lower(ep, inputs, which: str = "xir", via: str = "etal", **options) -> Lowered:
    """Lower ``ep`` with the stock partitioner or xir's (``via`` to_edge_transform_and_lower or
    to_backend), serialize, load, run on ``inputs``. Failures are recorded, not raised."""
    result = Lowered()
    start = time.perf_counter()
    try:
        if which == "stock":
            partitioner = StockPartitioner(**options)
            if via == "etal":
                edge = et_to_edge_transform_and_lower(ep, partitioner=[partitioner])
            else:
                edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_backend(partitioner)
        else:
            partitioner = lowering.XnnpackPartitioner(**options)
            if via == "etal":
                edge = lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
            elif via == "bare":
                edge = et_to_edge_transform_and_lower(ep, partitioner=[partitioner])
            else:
                edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
                edge = edge.transform(partitioner.transform_passes()).to_backend(partitioner)
        result.partitioner = partitioner
        result.delegated, result.outside, result.delegates = delegated_ops(edge), outside_ops(edge), delegate_count(edge)
        buffer = edge.to_executorch().buffer
        result.seconds, result.buffer = time.perf_counter() - start, buffer
        result.outputs = run_pte(buffer, inputs)
    except LoadError as e:
        result.error = f"load failed: {e.reason}"
    except Exception as e:  # lowering failure: recorded so a test can assert stock's failure
        result.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return result


def reference(ep, inputs):
    out = ep.module()(*inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def compute_count(counter: Counter) -> int:
    return sum(counter.values())
