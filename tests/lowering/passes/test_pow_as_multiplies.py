"""``xnnpack.pow-as-multiplies``: an fp32 cube (GPT-2's ``gelu_new``) and a float-exponent square
become the multiplies eager computes, at the graph boundaries; other powers and dtypes stay. And
end to end: a GPT-2 layer is one delegate (stock: 9, its pow outside), eager's numbers."""

from __future__ import annotations

import pytest
import torch

from passes.testing import case, check_pipeline
from xir_tools.harness import lower, reference

POWERS = [
    case(
        "a-cube-of-a-graph-input-read-twice-and-returned",
        """
    graph @g {
      input %x: f32[2,3]
      %c: f32[2,3] = aten.pow.Tensor_Scalar(%x) {exponent=3.0}
      %y: f32[2,3] = aten.add.Tensor(%c, %c)
      return %y, %c
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      %0: f32[2,3] = aten.mul.Tensor(%x, %x)
      %c: f32[2,3] = aten.mul.Tensor(%0, %x)
      %y: f32[2,3] = aten.add.Tensor(%c, %c)
      return %y, %c
    }""",
    ),
    case(
        "a-float-square-of-a-constant",
        """
    graph @g {
      param %w: f32[3]
      %s: f32[3] = aten.pow.Tensor_Scalar(%w) {exponent=2.0}
      return %s
    }""",
        """
    graph @g {
      param %w: f32[3]
      %s: f32[3] = aten.mul.Tensor(%w, %w)
      return %s
    }""",
    ),
    case(
        "declined-an-integer-square-xnnpack-runs",
        """
    graph @g {
      input %x: f32[3]
      %s: f32[3] = aten.pow.Tensor_Scalar(%x) {exponent=2}
      return %s
    }""",
    ),
    case(
        "declined-bf16",
        """
    graph @g {
      input %x: bf16[3]
      %s: bf16[3] = aten.pow.Tensor_Scalar(%x) {exponent=3}
      return %s
    }""",
    ),
    case(
        "declined-another-exponent",
        """
    graph @g {
      input %x: f32[3]
      %s: f32[3] = aten.pow.Tensor_Scalar(%x) {exponent=4}
      return %s
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", POWERS)
def test_pow_as_multiplies(before, expected, changed):
    check_pipeline(before, "xnnpack.pow-as-multiplies", expected, changed=changed)


def test_gpt2_gelu_new_runs_in_xnnpack_as_eager():
    from transformers import GPT2Config, GPT2LMHeadModel

    from bench.zoo import OutputOf

    torch.manual_seed(0)
    model = OutputOf(
        GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=16, n_embd=32, n_layer=1, n_head=2)).eval(),
        use_cache=False,
    )
    inputs = (torch.randint(0, 128, (1, 8)),)
    ep = torch.export.export(model, inputs)
    expected, ours = reference(ep, inputs), lower(ep, inputs, "xir")
    assert ours.outputs is not None, ours.error
    assert ours.err(expected) < 1e-5
    assert ours.delegates == 1 and dict(ours.outside) == {"aten.embedding": 1}, ours.partitioner.report()
    assert "aten.pow.Tensor_Scalar" not in ours.delegated and ours.delegated["aten.tanh"] == 1
