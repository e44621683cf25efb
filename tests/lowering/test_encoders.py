"""Transformer encoders whole in one XNNPACK delegate: a tiny SigLIP vision tower (layer norms,
attention, tanh GELU MLP) from a transformers config with random weights, lowered with xir in
fp32 and bf16, run on the runtime and compared with eager. Nothing stays outside: the position
embedding lookup of constant ids folds (fold-constants), the layer norms decompose
(xnnpack.decompose-layer-norm), the tanh GELU computes in fp32 (xnnpack.decompose-gelu-tanh)."""

import functools

import pytest
import torch

from xir_tools.harness import lower, reference


@functools.lru_cache(maxsize=None)
def siglip(dtype_name: str):
    from transformers import SiglipVisionConfig, SiglipVisionModel

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    config = SiglipVisionConfig(
        image_size=32, patch_size=8, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4
    )

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = SiglipVisionModel(config)

        def forward(self, pixels):
            return self.model(pixels).last_hidden_state

    inputs = (torch.randn(1, 3, 32, 32, dtype=dtype),)
    ep = torch.export.export(Tower().eval().to(dtype), inputs)
    return reference(ep, inputs)[0], lower(ep, inputs, "xir", enable_bf16=dtype is torch.bfloat16)


@pytest.mark.parametrize("dtype_name, tolerance", [("float32", 1e-5), ("bfloat16", 2**-5)])
def test_siglip_encoder_is_one_delegate(dtype_name, tolerance):
    expected, ours = siglip(dtype_name)
    assert ours.ran, ours.error
    assert ours.outputs[0].dtype == expected.dtype
    error = (ours.outputs[0].float() - expected.float()).abs().max().item()
    assert error <= tolerance * max(1.0, expected.float().abs().max().item()), error
    assert ours.delegates == 1, ours.partitioner.report()
    assert not ours.outside, dict(ours.outside)  # the position embedding lookup (constant ids) folds too
    assert "aten.native_layer_norm" not in ours.delegated  # decomposed: means, rsqrt, multiplies, adds
    assert ours.delegated["aten.rsqrt"] == 3  # two layer norms in the layer, one after it
    assert ours.delegated["aten.tanh"] == 1  # the MLP's tanh GELU, in fp32 also for the bf16 model


class BucketedPositions(torch.nn.Module):
    """SmolVLM's patch embeddings: position ids computed in the graph by bucketize from constant
    fractional coordinates (not core ATen; ExecuTorch has no kernel for it), then looked up."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fractions", torch.linspace(0, 1, 9)[:-1])
        self.register_buffer("boundaries", torch.arange(1, 4) / 4)
        self.positions = torch.nn.Embedding(16, 8)

    def forward(self, x):
        rows = torch.bucketize(self.fractions, self.boundaries, right=True)
        ids = (rows[:, None] * 4 + rows[None, :]).flatten()
        return x + self.positions(ids)


def test_position_ids_from_constants_fold_where_the_runtime_has_no_kernel():
    from executorch.exir import EdgeCompileConfig

    from xir_tools.harness import delegated_ops, lower_edge, outside_ops, run_pte, to_buffer

    torch.manual_seed(0)
    inputs = (torch.randn(64, 8),)
    module = BucketedPositions().eval()
    ep = torch.export.export(module, inputs)
    config = EdgeCompileConfig(_core_aten_ops_exception_list=[torch.ops.aten.bucketize.Tensor])
    edge, _ = lower_edge(ep, "xir", compile_config=config)
    assert outside_ops(edge) == {} and delegated_ops(edge) == {"aten.add.Tensor": 1}
    (out,) = run_pte(to_buffer(edge), inputs)
    assert torch.equal(out, module(*inputs))


# ------------------------------------------------------------------ a fill-mask encoder of a dynamic length

BERT_LENGTHS = (1, 5, 17, 63)  # (63: the example length, as optimum-executorch exports fill-mask)
# what stays outside the delegate, as in the static export: the lookups of the token, position
# and token-type embeddings and the integer/bool path that turns the attention mask into the
# additive float mask (a where), with its view to the scores' rank; no norm, no float math
BERT_FLOAT_OUTSIDE = {"aten.embedding": 3, "aten.where.self": 1, "aten.view_copy": 1}


class FillMask(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids, attention_mask).logits


@pytest.fixture(scope="module")
def dynamic_bert():
    """A two-layer BertForMaskedLM (random weights) exported as optimum-executorch exports
    fill-mask: input_ids and attention_mask with a dynamic dim 1, lowered once with xir."""
    from transformers import BertConfig, BertForMaskedLM

    from xir_tools.harness import delegate_count, delegated_ops, load_method, lower_edge, to_buffer

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    module = FillMask(BertForMaskedLM(config).eval())
    length = BERT_LENGTHS[-1]
    inputs = (torch.randint(3, 100, (1, length)), torch.ones(1, length, dtype=torch.long))
    dynamic = {"input_ids": {1: torch.export.Dim.AUTO}, "attention_mask": {1: torch.export.Dim.AUTO}}
    with torch.no_grad():
        ep = torch.export.export(module, inputs, dynamic_shapes=dynamic, strict=True)
    edge, partitioner = lower_edge(ep, "xir")
    graph = edge.exported_program().graph
    outside = [
        n
        for n in graph.nodes
        if n.op == "call_function"
        and "executorch_call_delegate" not in str(n.target)
        and "getitem" not in str(n.target)
        and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    _, method = load_method(to_buffer(edge))
    return module, method, delegate_count(edge), delegated_ops(edge), outside, partitioner


def test_dynamic_bert_is_one_delegate_with_its_norms(dynamic_bert):
    from collections import Counter

    from xir.fx_import import op_name

    _, _, delegates, delegated, outside, partitioner = dynamic_bert
    assert delegates == 1, partitioner.report()
    floats = Counter(op_name(n.target) for n in outside if n.meta["val"].dtype.is_floating_point)
    assert floats == BERT_FLOAT_OUTSIDE, (floats, partitioner.report())
    # the six layer norms (embeddings, two per layer, the head's transform), decomposed inside
    assert delegated["aten.rsqrt"] == 6 and "aten.native_layer_norm" not in delegated
    assert delegated["aten._softmax"] == 2 and delegated["aten.bmm"] == 4


@pytest.mark.parametrize("length", BERT_LENGTHS)
def test_dynamic_bert_runs_every_length_and_matches_eager(dynamic_bert, length):
    from xir_tools.harness import run_method

    module, method, *_ = dynamic_bert
    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(3, 100, (1, length), generator=generator)
    mask = torch.ones(1, length, dtype=torch.long)
    mask[0, length // 2 + 1 :] = 0  # padding at the end: the mask path matters
    with torch.no_grad():
        expected = module(ids, mask)
    (actual,) = run_method(method, (ids, mask))
    assert actual.shape == expected.shape
    assert (actual - expected).abs().max().item() <= 1e-5 * max(1.0, expected.abs().max().item())
