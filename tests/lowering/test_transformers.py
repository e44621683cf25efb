"""bf16 transformers match eager: a BERT encoder built from a transformers config with random
weights. ExecuTorch 1.5.1's portable bf16 layer norm is wrong at this width (stock's result is
off by whole units); xir computes layer norms in fp32."""

import torch

from bench.zoo import OutputOf
from xir_tools.harness import lower, reference

BF16 = torch.bfloat16


def test_bert_encoder_bf16_matches_eager():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=128,
        hidden_size=768,
        num_hidden_layers=1,
        num_attention_heads=12,
        intermediate_size=256,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    model = OutputOf(BertModel(config).eval().to(BF16), key="last_hidden_state")
    inputs = (torch.randint(0, 128, (1, 8)),)
    ep = torch.export.export(model, inputs)
    ref = reference(ep, inputs)
    scale = ref[0].abs().max().item()
    stock, ours = lower(ep, inputs, "stock", enable_bf16=True), lower(ep, inputs, "xir", enable_bf16=True)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 2**-6 * scale, f"xir differs from eager bf16 by {ours.err(ref)} (outputs up to {scale})"
    assert stock.ran and stock.err(ref) > 0.1 * scale  # the portable bf16 layer norm
    # query/key/value as one linear (xnnpack.fuse-sibling-linears), the attention output, the two of the
    # MLP; and the three layer norms' six means as linears with a 1/768 row
    assert ours.delegated["aten.linear"] == 4 + 6
    assert "aten.native_layer_norm" not in ours.outside  # embeddings + 2 per layer, each decomposed in fp32
    assert ours.delegated["aten.rsqrt"] == 3
