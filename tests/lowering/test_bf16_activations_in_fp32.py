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
    "mlp": (Mlp, [torch.randn(1, 7, 32), torch.randn(1, 1, 32), torch.randn(1, 12, 32)],
            ({1: torch.export.Dim("seq", min=1, max=64)},)),
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
        ulp = max(t.float().abs().max().item() for t in fp32) * 2 ** -8
        assert harness.max_error(outputs, fp32) <= harness.max_error(eager, fp32) + ulp


def test_the_option_needs_enable_bf16_and_is_placed_after_the_converts():
    import lowering

    with pytest.raises(ValueError, match="bf16_activations_in_fp32=True needs enable_bf16=True"):
        lowering.XnnpackPartitioner(bf16_activations_in_fp32=True)
    names = [p.name for p in lowering.XnnpackPartitioner(enable_bf16=True, bf16_activations_in_fp32=True).pipeline]
    at = names.index("xnnpack.bf16-activations-in-fp32")
    assert at > max(names.index(n) for n in ("xnnpack.casts-as-converts", "xnnpack.bf16-in-fp32", "xnnpack.layer-norm-in-fp32"))
    assert "xnnpack.bf16-activations-in-fp32" not in [p.name for p in lowering.XnnpackPartitioner(enable_bf16=True).pipeline]
