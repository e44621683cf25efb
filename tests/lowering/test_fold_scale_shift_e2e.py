"""``fold-scale-shift-into-linears`` end to end on ExecuTorch's runtime: a pre-norm block (RMSNorm's
weight into q, k and v; a LayerNorm's weight and bias into fc1; attention's q and k scale into
their projections) lowered by xir, run, compared
with eager, with the folded multiplies and adds
gone from the delegate; and at the boundaries: a normalized value that is also returned, one a
residual reads too, and a graph input scaled straight into a linear (the input is the ``n``)."""

import torch
import torch.nn.functional as F

from xir_tools.harness import export, lower, reference

MUL, ADD = "aten.mul.Tensor", "aten.add.Tensor"


class PreNormBlock(torch.nn.Module):
    def __init__(self, dim=32, heads=4, return_norm=False, residual_reads_norm=False):
        super().__init__()
        self.heads, self.return_norm, self.residual_reads_norm = heads, return_norm, residual_reads_norm
        self.rms_weight = torch.nn.Parameter(torch.rand(dim) + 0.5)
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.o = torch.nn.Linear(dim, dim)
        self.ln = torch.nn.LayerNorm(dim)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.rms_weight
        b, t, d = x.shape
        q, k, v = (p(n).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        h = x + self.o(a) + (n if self.residual_reads_norm else 0)
        m = self.ln(h)
        out = h + self.fc2(F.relu(self.fc1(m)))
        return (out, n) if self.return_norm else out


def _run(module, inputs):
    """``module`` lowered by xir with its default pipeline and without the fold, both run;
    (folded, unfolded, eager reference)."""
    ep = export(module.eval(), inputs)
    ref = reference(ep, inputs, module)
    folded, unfolded = lower(ep, inputs), lower(ep, inputs, pipeline=_without_fold())
    assert folded.ran and unfolded.ran, (folded.error, unfolded.error)
    return folded, unfolded, ref


def test_pre_norm_block_folds_and_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 9, 32),)
    folded, unfolded, ref = _run(PreNormBlock(), inputs)
    assert folded.err(ref) < 2e-5 and unfolded.err(ref) < 2e-5, (folded.err(ref), unfolded.err(ref))
    assert folded.delegates == 1 and not [op for op in folded.outside if op not in ("aten.embedding",)]
    # the RMSNorm weight (1), the LayerNorm weight and bias (1 mul, 1 add) and q's and k's
    # attention scale (2 muls) are gone from the delegate; the eps of the RMSNorm and of the
    # LayerNorm's variance stay adds (xir's pipeline leaves bias_shifts off: stock's numbers); the
    # linears are the same 6 (+ the means)
    assert unfolded.delegated[MUL] - folded.delegated[MUL] == 4, (unfolded.delegated, folded.delegated)
    assert unfolded.delegated[ADD] - folded.delegated[ADD] == 1
    assert folded.delegated["aten.linear"] == unfolded.delegated["aten.linear"]


def _without_fold():
    from lowering.pipeline import DEFAULT_PIPELINE

    return ",".join(p for p in DEFAULT_PIPELINE.split(",") if p != "fold-scale-shift-into-linears")


def test_normalized_value_returned_or_read_by_a_residual_keeps_its_multiply():
    torch.manual_seed(1)
    inputs = (torch.randn(1, 5, 32),)
    for options in ({"return_norm": True}, {"residual_reads_norm": True}):
        result, plain, ref = _run(PreNormBlock(**options), inputs)
        assert result.err(ref) < 2e-5, (options, result.err(ref))
        # the RMSNorm multiply stays (its result is returned, or read by the residual); the
        # LayerNorm's and the attention scale's still fold
        assert plain.delegated[MUL] - result.delegated[MUL] == 3, (options, plain.delegated, result.delegated)


class InputScaled(torch.nn.Module):
    """A graph input scaled per feature and read by two linears, one of them sharing its weight
    with a third linear on another input."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(16) + 0.5)
        self.a, self.b = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8, bias=False)

    def forward(self, x, y):
        s = x * self.scale
        return self.a(s), self.b(s) + self.b(y)


def test_graph_input_scaled_into_linears_and_a_shared_weight_declined():
    torch.manual_seed(2)
    inputs = (torch.randn(3, 16), torch.randn(3, 16))
    result, _, ref = _run(InputScaled(), inputs)
    assert result.err(ref) < 1e-5
    # b's weight is also read by b(y): no scaled copy, the multiply stays
    assert result.delegated[MUL] == 1
