"""End to end: ``XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True)`` runs a bf16
CNN, a bf16 attention block and a decoder's feed-forward half (a symbolic sequence length) in fp32
inside one delegate, converting at its ends only. Each program is lowered once (with and without the option), run on
ExecuTorch's runtime and compared with eager bf16 and with the fp32 model."""

from __future__ import annotations

import pytest
import torch

from xir_tools import harness


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y  # (y: read by the conv and the residual add)
        return self.fc(y.mean((2, 3)))


class Attention(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.up, self.down = torch.nn.Linear(dim, 2 * dim), torch.nn.Linear(2 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        h = x + self.out((attention @ v).transpose(1, 2).reshape(b, s, d))
        return h + self.down(torch.nn.functional.gelu(self.up(h)))


class Mlp(torch.nn.Module):
    """A decoder's feed-forward half: RMSNorm, gated SiLU MLP, residual."""

    def __init__(self, dim=32):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(dim) + 0.5)
        self.gate, self.up, self.down = torch.nn.Linear(dim, 64), torch.nn.Linear(dim, 64), torch.nn.Linear(64, dim)

    def forward(self, x):
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        h = x + self.down(torch.nn.functional.silu(self.gate(n)) * self.up(n))
        return h, h * 2  # (h: an output, and read again)


CASES = {
    "cnn": (Cnn, [torch.randn(1, 3, 16, 16)], None),
    "attention": (Attention, [torch.randn(1, 7, 32)], None),
    "mlp": (
        Mlp,
        [torch.randn(1, 7, 32), torch.randn(1, 1, 32), torch.randn(1, 12, 32)],
        ({1: torch.export.Dim("seq", min=1, max=64)},),
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def lowered(request):
    make, inputs, dynamic_shapes = CASES[request.param]
    torch.manual_seed(0)
    model = make().eval()
    model_bf16 = make().eval()
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)
    ep = torch.export.export(model_bf16, (inputs[0].to(torch.bfloat16),), dynamic_shapes=dynamic_shapes)
    programs = {}
    for option in (False, True):
        edge, _ = harness.lower_edge(ep, "xir", enable_bf16=True, bf16_activations_in_fp32=option)
        programs[option] = edge, harness.load_method(harness.to_buffer(edge))  # (program, method: keep both)
    return model, model_bf16, inputs, programs


def test_one_delegate_computing_in_fp32(lowered):
    _, _, _, programs = lowered
    edge, _ = programs[True]
    assert harness.delegate_count(edge) == 1 and not harness.outside_ops(edge)
    assert harness.delegated_bf16_ops(edge) == []
    converts = harness.delegated_ops(edge)["xir.convert"]
    assert converts <= 3  # the input, the output(s)
    default, _ = programs[False]
    assert harness.delegated_ops(default)["xir.convert"] > converts


def test_matches_eager_bf16_and_is_as_close_to_fp32(lowered):
    model, model_bf16, inputs, programs = lowered
    _, (_, method) = programs[True]
    for x in inputs:  # (several sequence lengths on one program for the MLP)
        x16 = x.to(torch.bfloat16)
        outputs = harness.run_method(method, [x16])
        eager = harness.as_list(model_bf16(x16))
        fp32 = harness.as_list(model(x16.float()))
        assert harness.max_error(outputs, eager) <= harness.allowed_error(eager, "bf16")
        # the fp32 computation on bf16 inputs and weights: no further from the fp32 model than
        # eager bf16 is (up to the last rounding to bf16 of each output)
        ulp = max(t.float().abs().max().item() for t in fp32) * 2**-8
        assert harness.max_error(outputs, fp32) <= harness.max_error(eager, fp32) + ulp


def test_the_option_needs_enable_bf16_and_is_placed_after_the_converts():
    import lowering

    with pytest.raises(ValueError, match="bf16_activations_in_fp32=True needs enable_bf16=True"):
        lowering.XnnpackPartitioner(bf16_activations_in_fp32=True)
    names = [p.name for p in lowering.XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True).pipeline]
    at = names.index("xnnpack.bf16-activations-in-fp32")
    assert at > max(
        names.index(n) for n in ("xnnpack.casts-as-converts", "xnnpack.bf16-in-fp32", "xnnpack.layer-norm-in-fp32")
    )
    assert "xnnpack.bf16-activations-in-fp32" not in [
        p.name for p in lowering.XnnpackPartitioner(enable_bf16=True).pipeline
    ]


class TiedHead(torch.nn.Module):
    """An embedding whose table the head linear shares (tied), a projection whose result is a
    graph output and read again, and a linear with a weight beyond fp16's range."""

    def __init__(self, vocab=128, dim=64):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.proj, self.big = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim, bias=False)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight
        with torch.no_grad():
            self.big.weight[0, 0] = 2.0**17  # (fp16 holds up to 65504)

    def forward(self, tokens, x):
        y = self.proj(x + self.emb(tokens))
        return y, self.head(torch.relu(self.big(y)) * 1e-3)


def test_linear_weights_stored_in_fp16_at_the_boundaries():
    """With the option, the linears' bf16 weights are fp16 constants in the program (half the
    bytes of fp32; XNNPACK's fully connected widens them when the program loads): the tied head
    reads its own fp16 twin while the embedding outside keeps the bf16 table; the weight beyond
    fp16's range stays fp32. The program matches eager bf16, and the one with fp32 weights
    (``f16_weights=false``) within a bf16 rounding, at fewer bytes by 2 per fp16 weight."""
    import attrs

    import lowering

    torch.manual_seed(0)
    model = TiedHead().eval().to(torch.bfloat16)
    tokens, x = torch.randint(0, 128, (1, 5)), torch.randn(1, 5, 64).to(torch.bfloat16)
    ep = torch.export.export(model, (tokens, x))
    outputs, sizes = {}, {}
    for f16 in (True, False):
        partitioner = lowering.XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True)
        partitioner.pipeline = [
            attrs.evolve(p, f16_weights=f16) if p.name == "xnnpack.bf16-activations-in-fp32" else p
            for p in partitioner.pipeline
        ]
        edge, _ = harness.lower_edge(ep, partitioner=partitioner)
        inside = harness.delegated_ops(edge)
        if f16:
            assert inside["xir.linear_f16w"] == 2 and inside["aten.linear"] == 1  # (proj and head; big)
            assert set(harness.outside_ops(edge)) == {"aten.embedding"}
        else:
            assert inside["xir.linear_f16w"] == 0 and inside["aten.linear"] == 3
        buffer = harness.to_buffer(edge)
        sizes[f16] = len(buffer)
        _, method = harness.load_method(buffer)
        outputs[f16] = harness.run_method(method, [tokens, x])
    eager = harness.as_list(model(tokens, x))
    assert harness.max_error(outputs[True], eager) <= harness.allowed_error(eager, "bf16")
    ulp = max(t.float().abs().max().item() for t in eager) * 2**-8
    assert harness.max_error(outputs[True], outputs[False]) <= ulp
    fp16_weights = model.proj.weight.numel() + model.head.weight.numel()
    assert sizes[False] - sizes[True] >= 2 * fp16_weights * 0.95
