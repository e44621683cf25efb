"""lowering.llm: the LLM flow's partitioner sets, and xir's rewrites handed to the builder as
transform_passes (the flow itself runs in ``python -m bench.llm_flow``; too slow for the suite)."""

import pytest

from lowering import XnnpackPartitioner
from lowering.llm import PARTITIONER_SETS, llm_partitioners, to_edge_transform_and_lower_llama, transform_passes


def test_partitioner_sets():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner,
    )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner

    stock, xir, dq_xir = (llm_partitioners(kind, enable_bf16=True) for kind in PARTITIONER_SETS)
    assert [type(p) for p in stock] == [XnnpackDynamicallyQuantizedPartitioner, StockPartitioner]
    assert [type(p) for p in xir] == [XnnpackPartitioner]
    assert [type(p) for p in dq_xir] == [XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner]
    assert xir[0].options.enable_bf16 and dq_xir[1].options.enable_bf16
    assert transform_passes(stock) == []
    assert len(transform_passes(xir)) == 1 and len(transform_passes(dq_xir)) == 1
    with pytest.raises(ValueError, match="unknown partitioner set"):
        llm_partitioners("xnnpack")


class _Builder:
    """The two methods of the flow's LLMEdgeManager that lowering.llm calls, recorded."""

    def __init__(self):
        self.calls = []

    def pt2e_quantize(self, quantizers):
        self.calls.append(("pt2e_quantize", quantizers))
        return self

    def to_edge_transform_and_lower(self, partitioners, transform_passes=None):
        self.calls.append(("to_edge_transform_and_lower", partitioners, transform_passes))
        return self


def test_builder_gets_xir_rewrites():
    partitioners = llm_partitioners("dq+xir")
    builder = to_edge_transform_and_lower_llama(_Builder(), partitioners)
    (_, quantizers), (_, passed, passes) = builder.calls
    assert quantizers == [] and passed == partitioners and len(passes) == 1
    bare = to_edge_transform_and_lower_llama(_Builder(), partitioners, with_rewrites=False)
    assert bare.calls[1][2] is None
