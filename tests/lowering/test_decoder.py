"""A 1-layer Qwen2-style decoder (grouped-query attention), exported as ExecuTorch's LLM flow does
(transformers' TorchExportableModuleForDecoderOnlyLM, static KV cache, one-token decode step),
lowered with xir in fp32 and bf16, run on the runtime and compared with eager.

Each decoder pass shows here: shape-ops-as-views (no unsqueeze left outside),
xnnpack.mean-over-last-dims (RMSNorm's mean inside, as a product with a constant column), xnnpack.scalar-operands-as-constants (the
attention scale inside), xnnpack.casts-as-converts (bf16 <-> f32 casts of RMSNorm and rotary
embeddings inside, as xir.convert), xnnpack.expand-as-broadcast (grouped-query attention's repeat
of K/V heads inside), xnnpack.safe-softmax (the masked softmax's fully-masked-row fix-up inside),
xnnpack.rotate-half-sign-in-sin (the rotary embedding's rotate_half without a negation)."""

import functools

import pytest
import torch

from xir_tools.harness import lower

CACHE = 16
# what stays outside: embedding, the KV-cache updates, position and mask arithmetic (int64, bool)
ALLOWED_OUTSIDE = {
    "aten.embedding",
    "aten.index_put",
    "aten.arange.start_step",
    "aten.add.Tensor",
    "aten.select_copy.int",
    "aten.copy",
    "aten.le.Tensor",
    "aten.where.self",
    "aten.scalar_tensor",
    "aten.view_copy",
    "dim_order_ops._to_dim_order_copy",
}


@functools.lru_cache(maxsize=None)
def decoder(dtype_name: str):
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    config = Qwen2Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = Qwen2ForCausalLM(config).eval().to(dtype)
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": CACHE}
    )
    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=CACHE)
    ids, position = torch.tensor([[7]]), torch.tensor([3])
    ep = wrapper.export(input_ids=ids, cache_position=position)
    reference = ep.module()(input_ids=ids, cache_position=position)
    return ep, (ids, position), reference, lower(ep, (ids, position), "xir", enable_bf16=dtype is torch.bfloat16)


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_one_layer_decoder_step(dtype_name):
    ep, inputs, reference, ours = decoder(dtype_name)
    assert ours.ran, ours.error
    error = (ours.outputs[0].float() - reference.float()).abs().max().item()
    scale = max(1.0, reference.float().abs().max().item())
    assert error <= (1e-5 if dtype_name == "float32" else 2**-6) * scale
    # stock: 9 delegates in fp32 and 17 in bf16 for this model (measured). xir: one before the KV-cache
    # update (norm, q/k/v projections, rotary embeddings), one after it (attention, MLP, final norm, head)
    assert ours.delegates == 2, ours.partitioner.report()
    for op in (
        "aten.unsqueeze_copy",
        "aten.mean.dim",
        "aten.mul.Scalar",
        "aten.rsqrt",
        "aten.bmm",
        "aten.linear",
        "aten.addmm",
        "aten.mm",
        "aten._softmax",
    ):
        assert op not in ours.outside, (op, dict(ours.outside))
    # two RMSNorms in the layer, one before the head: their fp32 means are linears with a 1/width row
    # (besides q/k/v as one linear on their stacked weights: xnnpack.fuse-sibling-linears; o, gate,
    # up, down and the head), and the program has no mm
    assert ours.delegated["aten.linear"] == 6 + 3 and "aten.mean.dim" not in ours.delegated
    assert "aten.mm" not in ours.delegated
    assert set(ours.outside) <= ALLOWED_OUTSIDE, set(ours.outside) - ALLOWED_OUTSIDE
    assert (
        ours.outside["dim_order_ops._to_dim_order_copy"] == 1
    )  # the int64 -> f32 position cast of the rotary embedding
    # xnnpack.fold-repeat-into-bmm: the two KV heads are not repeated for the four query heads (no expand, no multiply by ones)
    graph = ours.partitioner.last_graph
    assert not any(node.op == "aten.expand_copy" for node in graph.nodes)
    assert not any("expand_ones" in value.name for value in graph.inputs)
    assert ours.delegated["aten.bmm"] + ours.delegated["xir.bmm_f32out"] == 2
    # xnnpack.rotate-half-sign-in-sin: rotate_half's negation is in the sine table, for q and k
    assert "aten.neg" not in ours.delegated and "aten.neg" not in ours.outside
    assert any(value.name.startswith("rotate_half_sign") for value in graph.inputs)
    if dtype_name == "bfloat16":
        assert ours.delegated["xir.convert"] >= 6  # RMSNorm and rotary embeddings upcast to f32 and back, inside


@functools.lru_cache(maxsize=None)
def other_decoder(name: str, dtype_name: str, partial_rotary_factor: float | None = None):
    """A 1-layer decoder of another family, exported and lowered as above (the bench's builder)."""
    from bench.llm import Sizes, build_decoder, export_decoder

    sizes = Sizes(hidden=64, intermediate=128, heads=4, vocab=128, cache=CACHE, layers=1, prefill=4, steps=1)
    overrides = {} if partial_rotary_factor is None else {"partial_rotary_factor": partial_rotary_factor}
    model = build_decoder(name, sizes, getattr(torch, dtype_name), **overrides)
    ep = export_decoder(model, CACHE, 1)
    ids, position = torch.tensor([[7]]), torch.tensor([0])
    import copy

    reference = copy.deepcopy(ep.module())(input_ids=ids, cache_position=position)
    return reference, lower(ep, (ids, position), "xir", enable_bf16=dtype_name == "bfloat16")


@pytest.mark.parametrize(
    "name, dtype_name, passes",
    [
        ("gemma", "float32", "multi-query attention (one K/V head); RMSNorm's 1 + weight folds (fold-constants)"),
        (
            "phi3",
            "float32",
            "fused QKV and gate/up projections split (xnnpack.split-as-slices); rotary cat of an "
            "empty pass-through part (remove-no-ops)",
        ),
        ("phi3", "bfloat16", "the same in bf16"),
    ],
)
def test_other_decoder_families_in_two_delegates(name, dtype_name, passes):
    reference, ours = other_decoder(name, dtype_name)
    assert ours.ran, ours.error
    error = (ours.outputs[0].float() - reference.float()).abs().max().item()
    assert error <= (1e-5 if dtype_name == "float32" else 2**-6) * max(1.0, reference.float().abs().max().item())
    assert ours.delegates == 2, ours.partitioner.report()
    assert set(ours.outside) <= ALLOWED_OUTSIDE, set(ours.outside) - ALLOWED_OUTSIDE


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_phi3_partial_rotary_over_the_whole_head(dtype_name):
    """Transformers' Phi-3 with ``partial_rotary_factor=0.5`` (Phi-4-mini's kind of rotation: 8 of
    each head's 16 dims rotated, the rest concatenated back), static shapes:
    xnnpack.partial-rotary-whole-head rotates q and k over the whole head (one swap mm each, the
    two tables widened by one mm each); the one concatenation left builds the tables (cat(freqs,
    freqs) before cos and sin), no negation; eager's logits."""
    reference, ours = other_decoder("phi3", dtype_name, partial_rotary_factor=0.5)
    assert ours.ran, ours.error
    error = (ours.outputs[0].float() - reference.float()).abs().max().item()
    assert error <= (1e-5 if dtype_name == "float32" else 2**-6) * max(1.0, reference.float().abs().max().item())
    assert ours.delegates == 2, ours.partitioner.report()
    assert set(ours.outside) <= ALLOWED_OUTSIDE, set(ours.outside) - ALLOWED_OUTSIDE
    assert ours.delegated["aten.cat"] == 1 and "aten.neg" not in ours.delegated, ours.delegated
    assert ours.delegated["aten.mm"] >= 2 + 2, ours.delegated
    assert any(value.name.startswith("partial_rotary_swap_8_of_16") for value in ours.partitioner.last_graph.inputs)
