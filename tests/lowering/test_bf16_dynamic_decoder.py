"""A two-layer Qwen3 decoder in bf16 with a dynamic sequence length, lowered by xir without
``enable_bf16`` (optimum-executorch's recipe as written: issue 58, where Llama, Qwen2/3, Gemma,
Phi-3, ... failed in xir's rewrite pass with "Cannot call storage_offset() on tensor with symbolic
sizes/strides"). xnnpack.rotate-half-sign-in-sin and xnnpack.merge-head-chains make slices of tensors
of a symbolic length; bf16 stays outside XNNPACK without enable_bf16, so those stay slice_copy, which
the write-back computes the shape of from the slice view they copy.

Exported as transformers' TorchExportableModuleForDecoderOnlyLM does with a static KV cache and
``dynamic_shapes`` on input ids and cache positions (3 tokens in the example), lowered once with
``lowering.to_edge_transform_and_lower`` and once with stock's partitioner (module-scoped), run on
ExecuTorch's runtime at 1, 5 and 12 tokens, each a prefill from position 0, against eager."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.export import Dim

from xir_tools import harness

CACHE, EXAMPLE, LENGTHS = 32, 3, (1, 5, 12)


def qwen3_program():
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
    )
    model = AutoModelForCausalLM.from_config(config).eval().to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": CACHE}
    )
    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=CACHE)
    seq = Dim("seq_length_dim", max=CACHE - 1)
    return wrapper.export(
        input_ids=torch.tensor([[1, 2, 3]]),
        cache_position=torch.arange(EXAMPLE),
        dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}},
    )


@pytest.fixture(scope="module")
def lowered():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as Stock
    from executorch.exir import to_edge_transform_and_lower

    import lowering

    ep = qwen3_program()
    eager = copy.deepcopy(ep.module())  # (its own KV cache)
    partitioner = lowering.XnnpackPartitioner()  # (no enable_bf16)
    ours = lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    stock = to_edge_transform_and_lower(ep, partitioner=[Stock()])  # (the same program, after xir's lowering)
    _, method = harness.load_method(harness.to_buffer(ours))
    return {"eager": eager, "ours": ours, "partitioner": partitioner, "stock": stock, "method": method}


def test_lowered_with_the_rewrites_of_symbolic_slices(lowered):
    applied = lowered["partitioner"].rewrites_applied
    assert {"xnnpack.rotate-half-sign-in-sin", "xnnpack.merge-head-chains"} <= applied, applied
    graph = lowered["partitioner"].last_graph
    assert not any(node.op == "aten.neg" for node in graph.nodes)  # (rotate_half's negation is in the sine table)
    # the slices made on the symbolic length: bf16 slice_copy (xir.slice has no kernel outside XNNPACK)
    made = [
        n
        for n in lowered["ours"].exported_program().graph.nodes
        if n.meta.get("xir_origin") and "slice" in str(n.target)
    ]
    assert made and all("slice_copy" in str(n.target) and n.meta["val"].dtype == torch.bfloat16 for n in made), made
    assert all(any(not isinstance(d, int) for d in n.meta["val"].shape) for n in made)  # (of the symbolic length)


def test_delegates_no_bf16_and_at_least_what_stock_delegates(lowered):
    ours, stock = lowered["ours"], lowered["stock"]
    assert harness.delegated_bf16_ops(ours) == []  # (bf16 stays outside without enable_bf16, as stock's)
    inside, stock_inside = harness.delegated_ops(ours), harness.delegated_ops(stock)
    assert sum(inside.values()) >= sum(stock_inside.values()), (inside, stock_inside)
    assert "xir.slice" not in harness.outside_ops(ours)
    # the fp32 parts: the nine RMSNorms (two per layer, q's and k's per layer, the final one) and the rotary
    # tables; and the fp32 means of the norms, which stock leaves outside, as linears (mean-over-last-dims)
    for op in ("aten.rsqrt", "aten.pow.Tensor_Scalar"):
        assert inside[op] == 9, (op, inside)
    assert inside["aten.cos"] == inside["aten.sin"] == 1, inside
    assert stock_inside["aten.mm"] == 0 and inside["aten.mm"] >= 9, (inside, stock_inside)


@pytest.mark.parametrize("length", LENGTHS)
def test_runs_at_other_lengths_as_eager(lowered, length):
    torch.manual_seed(length)
    ids, position = torch.randint(0, 128, (1, length)), torch.arange(length)
    with torch.no_grad():
        expected = lowered["eager"](input_ids=ids, cache_position=position)
    (got,) = harness.run_method(lowered["method"], [ids, position])
    assert tuple(got.shape) == (1, length, 128)
    error = (got.float() - expected.float()).abs().max().item()
    assert error <= 2**-6 * max(1.0, expected.float().abs().max().item()), error
