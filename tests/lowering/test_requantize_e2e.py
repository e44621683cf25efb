"""ExecuTorch's ds_cnn example in int8 (as its example list quantizes it): its two dim-order clones
sit between a dequantize and a quantize on one grid. xir drops the clones (xnnpack.remove-no-ops)
and then the quantize of the dequantize, so XNNPACK's graph is stock's (whose preprocessing removes
the clone with its pair); before, XNNPACK ran each pair as two converts, int8 to fp32 and back (4
converts more, 1.06x stock's latency in fresh processes). Both programs return the converted
model's output exactly."""

from __future__ import annotations

import pytest
import torch
from executorch.exir.lowered_backend_module import get_lowered_submodules

from bench.example_zoo import entries, quantize
from xir_tools import harness

QUANTIZE = "quantized_decomposed.quantize_per_tensor"


@pytest.fixture(scope="module")
def lowered():
    entry = next(e for e in entries() if e.name == "ds_cnn")
    torch.manual_seed(0)
    module, inputs = entry.make().eval(), entry.inputs()
    module = quantize(module, inputs, entry.quantization)
    with torch.no_grad():
        expected = [module(*inputs)]
    ep = torch.export.export(module, inputs, strict=False)
    result = {}
    for which in ("stock", "xir"):
        edge, _ = harness.lower_edge(ep, which)
        (payload,) = [
            bytes(m.processed_bytes) for _, m, _ in get_lowered_submodules(edge.exported_program().graph_module)
        ]
        buffer = harness.to_buffer(edge)
        result[which] = (
            harness.delegated_ops(edge),
            harness.outside_ops(edge),
            payload,
            harness.run_pte(buffer, list(inputs)),
        )
    return result, expected


def test_the_requantized_pairs_are_gone_and_xnnpacks_graph_is_stocks_size(lowered):
    result, expected = lowered
    (stock_ops, stock_outside, stock_payload, stock_out), (ops, outside, payload, out) = result["stock"], result["xir"]
    assert harness.max_error(out, expected) == harness.max_error(stock_out, expected) == 0
    assert not outside and not stock_outside
    assert stock_ops["dim_order_ops._clone_dim_order"] == 2 and "dim_order_ops._clone_dim_order" not in ops
    assert ops[QUANTIZE] == stock_ops[QUANTIZE] - 2  # (each clone's quantize of its dequantize)
    assert len(payload) == len(stock_payload)
