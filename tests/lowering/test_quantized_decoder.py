"""Quantized LLM weights (part of issue 14): 1-layer Llama and Qwen2 decoders quantized as
ExecuTorch's LLM export quantizes them (``bench.llm.quantize_decoder``: torchao's ``quantize_`` with
``Int8DynamicActivationIntxWeightConfig`` before ``torch.export``; int8 activations per token,
"8da4w" int4 weights in groups of 32 input channels, "8da8w" int8 weights per output channel, which
is ExecuTorch's default for 8da8w), exported as its LLM flow exports them (static KV cache, a
one-token decode program and a 4-token prefill program), lowered with xir, serialized, loaded
with ExecuTorch's runtime and run against the quantized program run eagerly.

Every linear (q/k/v/o, gate/up/down, the head) is a dynamically quantized linear inside XNNPACK,
with its torchao choose_qparams/quantize/dequantize ops (q, k and v one linear on their stacked
weights: ``xnnpack.fuse-sibling-linears``); the layer is two delegates, as in fp32
(before and after the KV-cache update). Stock on the same programs (measured): 9 delegates, 51
compute ops outside (unsqueeze/expand copies, RMSNorm means, the masked softmax's fix-up, ...),
the same error against eager.

XNNPACK groups int4 weights only: int8 weights in groups of 32 lower with neither partitioner
(stock: ``AssertionError: Only 4b group quantization is supported``; xir: ``NotLowerable``, naming
the linears, before ExecuTorch's preprocessing).

Int8 weight-only ("8w", torchao's ``IntxWeightOnlyConfig`` per channel): every linear an fp32 x qc8w
fully connected in XNNPACK, within 1e-5 of eager (stock: wrong by ~1000, the weights' scales dropped).
"""

from __future__ import annotations

import copy

import pytest
import torch

from bench.llm import Sizes, build_decoder, export_decoder, quantize_decoder
from lowering.partition import NotLowerable
from xir_tools.harness import load_method, lower

CACHE, PREFILL = 16, 4
SIZES = Sizes(hidden=64, intermediate=128, heads=4, vocab=128, cache=CACHE, layers=1, prefill=PREFILL, steps=1)
LINEARS = 6  # q/k/v as one (xnnpack.fuse-sibling-linears), o, gate, up, down, lm_head
MEANS = (
    3  # RMSNorm's fp32 means (two in the layer, the final one), linears with a 1/64 row: xnnpack.mean-over-last-dims
)
# what stays outside, as in fp32 (test_decoder.py): the embedding, the KV-cache updates, position and
# mask arithmetic (int64, bool)
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
# ExecuTorch's XNNPACK op tests (test_linear.py): qd8 x int4 group-wise linears atol = rtol = 5e-3;
# qd8 x int8 per-channel linears atol 5e-2
TOLERANCE = {"8da4w": (5e-3, 5e-3), "8da8w": (5e-2, 0.0)}
CASES = [("llama", "8da4w"), ("llama", "8da8w"), ("qwen2", "8da4w"), ("qwen2", "8da8w")]
# the programs lowered per scheme (each lowering takes ExecuTorch some 15 s of CPU): the prefill runs
# XNNPACK's int4 group-wise kernels on several rows; int8 per-channel ones are the well-trodden qd8 x qc8w
PHASES = {"8da4w": ("decode", "prefill"), "8da8w": ("decode",)}


def _quantized(name: str, scheme: str):
    return quantize_decoder(build_decoder(name, SIZES, torch.float32), scheme)


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{s}" for n, s in CASES])
def lowered(request):
    """One quantized model, its decode (and prefill) programs each lowered once with xir (shared by
    the tests of this case)."""
    name, scheme = request.param
    model = _quantized(name, scheme)
    programs = {}
    for phase in PHASES[scheme]:
        tokens = 1 if phase == "decode" else PREFILL
        ep = export_decoder(model, CACHE, tokens)
        inputs = (torch.arange(tokens).view(1, -1) + 5, torch.arange(tokens))
        programs[phase] = (ep, lower(ep, inputs, "xir"))
    return name, scheme, programs


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, scheme: str, what: str) -> None:
    atol, rtol = TOLERANCE[scheme]
    excess = ((actual - expected).abs() - (atol + rtol * expected.abs())).max().item()
    assert excess <= 0, f"{what}: max error {(actual - expected).abs().max().item():.3g} over atol {atol}, rtol {rtol}"


def test_prefill_and_decode_match_the_quantized_eager_model(lowered):
    """The prefill program on 4 tokens (8da4w), then the decode program one token at a time at
    positions 0..4 (its KV cache persisting between runs): every output within the op tests'
    tolerance of the quantized program run eagerly on the same inputs."""
    name, scheme, programs = lowered
    torch.manual_seed(0)
    ids = torch.randint(0, SIZES.vocab, (1, PREFILL + 1))
    if "prefill" in programs:
        ep, result = programs["prefill"]
        assert result.ran, result.error
        keep, method = load_method(result.buffer)
        eager = copy.deepcopy(ep.module())
        inputs = (ids[:, :PREFILL], torch.arange(PREFILL))
        expected = eager(input_ids=inputs[0], cache_position=inputs[1])
        _assert_close(method.execute(list(inputs))[0], expected, scheme, "prefill")
        del keep

    ep, result = programs["decode"]
    assert result.ran, result.error
    keep, method = load_method(result.buffer)
    eager = copy.deepcopy(ep.module())
    for position in range(PREFILL + 1):
        inputs = (ids[:, position : position + 1], torch.tensor([position]))
        expected = eager(input_ids=inputs[0], cache_position=inputs[1])
        _assert_close(method.execute(list(inputs))[0], expected, scheme, f"decode at position {position}")
    del keep


def test_every_quantized_linear_in_two_delegates(lowered):
    """In each program, each of the 6 linears (8 projections, q/k/v stacked) is delegated with its dynamic quantization (torchao's
    per-token choose_qparams/quantize/dequantize and the weight's dequantize); two delegates for the
    layer; outside only what stays outside in fp32."""
    name, scheme, programs = lowered
    for phase, (_, result) in programs.items():
        _assert_delegation(phase, result)


def _assert_delegation(phase: str, result) -> None:
    report = result.partitioner.report()
    assert result.delegates == 2 * SIZES.layers, (phase, report)
    assert result.delegated["aten.linear"] == LINEARS + MEANS, (dict(result.delegated), report)
    assert result.delegated["torchao.choose_qparams_affine"] == LINEARS
    assert result.delegated["torchao.quantize_affine"] == LINEARS
    assert result.delegated["torchao.dequantize_affine"] == 2 * LINEARS  # the activation's and the weight's
    assert not any(op.startswith("torchao.") for op in result.outside), dict(result.outside)
    assert set(result.outside) <= ALLOWED_OUTSIDE, set(result.outside) - ALLOWED_OUTSIDE
    for op in ("aten.mean.dim", "aten.mul.Scalar", "aten.unsqueeze_copy", "aten.expand_copy", "aten._softmax"):
        assert op not in result.outside, (op, dict(result.outside))


def test_int8_weights_in_groups_of_32_are_not_lowerable():
    """8da8w with groups of 32: XNNPACK has no int8 group-wise weights, and torchao's quantize and
    dequantize ops have no ExecuTorch kernel outside a delegate, so no program can run. xir raises
    (an AssertionError, as stock does) naming each linear and why."""
    import lowering

    model = quantize_decoder(build_decoder("qwen2", SIZES, torch.float32), "8da8w-g32")
    ep = export_decoder(model, CACHE, 1)
    with pytest.raises(NotLowerable, match="int8 weight in groups of 32 input channels") as raised:
        lowering.to_edge_transform_and_lower(ep, partitioner=[lowering.XnnpackPartitioner()])
    assert str(raised.value).count("aten.linear") == 8  # (each projection: raised while planning, before the rewrites)


# ---------------------------------------------------------------- int8 weight-only ("8w")
# torchao's IntxWeightOnlyConfig (int8 per output channel, fp32 activations), ExecuTorch's "8w":
# every linear an fp32 x qc8w fully connected in XNNPACK (its dequantize_affine folded in, Qwen2's
# q/k/v biases added after the linear by xnnpack.weight-only-linear-bias). Stock on the 1-layer Qwen2
# decode step (measured): 9 delegates, every linear rebuilt from the raw int8 weight by XNNPACK's
# ConvertToLinearPass, wrong by ~1000 (the logits are below 1).
WEIGHT_ONLY_CASES = [("qwen2", ("decode", "prefill")), ("llama", ("decode",))]


@pytest.mark.parametrize("name,phases", WEIGHT_ONLY_CASES, ids=[n for n, _ in WEIGHT_ONLY_CASES])
def test_int8_weight_only_decoder(name, phases):
    """Decode one token at positions 0..4 (and a 4-token prefill): within 1e-5 of the quantized
    model run eagerly; two delegates; every linear delegated with its weight's dequantize; nothing of
    torchao's outside."""
    model = _quantized(name, "8w")
    torch.manual_seed(0)
    ids = torch.randint(0, SIZES.vocab, (1, PREFILL + 1))
    for phase in phases:
        tokens = 1 if phase == "decode" else PREFILL
        ep = export_decoder(model, CACHE, tokens)
        result = lower(ep, (torch.arange(tokens).view(1, -1) + 5, torch.arange(tokens)), "xir")
        assert result.ran, result.error
        report = result.partitioner.report()
        assert result.delegates == 2 * SIZES.layers, (phase, report)
        assert result.delegated["aten.linear"] == LINEARS + MEANS, (dict(result.delegated), report)
        assert result.delegated["torchao.dequantize_affine"] == LINEARS
        assert not any(op.startswith("torchao.") for op in result.outside), dict(result.outside)
        assert set(result.outside) <= ALLOWED_OUTSIDE, set(result.outside) - ALLOWED_OUTSIDE
        keep, method = load_method(result.buffer)
        eager = copy.deepcopy(ep.module())
        steps = [(0, PREFILL)] if phase == "prefill" else [(p, p + 1) for p in range(PREFILL + 1)]
        for start, stop in steps:
            inputs = (ids[:, start:stop], torch.arange(start, stop))
            expected = eager(input_ids=inputs[0], cache_position=inputs[1])
            error = (method.execute(list(inputs))[0] - expected).abs().max().item()
            assert error < 1e-5, f"{name} {phase} at {start}: max error {error:.3g}"
        del keep
