"""``xnnpack.pow-as-products``: an fp32 cube as two multiplies (ALBERT's hand-written tanh GELU),
IR text in and out, and end to end on the runtime: inside XNNPACK, eager's result to the bit."""

from __future__ import annotations

import pytest
import torch

from passes.testing import check_declined, check_pipeline

POW = "xnnpack.pow-as-products"


@pytest.mark.parametrize("exponent", ["3", "3.0"])
def test_a_cube_is_two_products(exponent):
    check_pipeline(f"""
    graph @g {{
      input %x: f32[s0,8]
      %c: f32[s0,8] = aten.pow.Tensor_Scalar(%x) {{exponent={exponent}}}
      %y: f32[s0,8] = aten.add.Tensor(%c, %x)
      return %y, %c
    }}""", POW, """
    graph @g {
      input %x: f32[s0,8]
      %0: f32[s0,8] = aten.mul.Tensor(%x, %x)
      %1: f32[s0,8] = aten.mul.Tensor(%0, %x)
      %y: f32[s0,8] = aten.add.Tensor(%1, %x)
      return %y, %1
    }""")


@pytest.mark.parametrize("dtype, exponent, reason", [("f32", "2.5", "exponent 2.5"), ("f32", "4", "exponent 4"),
                                                     ("bf16", "3", "not an f32 power")])
def test_other_powers_stay(dtype, exponent, reason):
    check_declined(f"""
    graph @g {{
      input %x: {dtype}[4]
      %c: {dtype}[4] = aten.pow.Tensor_Scalar(%x) {{exponent={exponent}}}
      return %c
    }}""", POW, "cube_as_products", reason)


class GeluNew(torch.nn.Module):
    """ALBERT's gelu_new, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


class Cube(torch.nn.Module):
    def forward(self, x):
        return torch.pow(x, 3.0) + x


@pytest.mark.parametrize("module, exact", [(Cube, True), (GeluNew, False)], ids=["cube", "gelu-new"])
def test_inside_xnnpack_as_eager(module, exact):
    """The cube is eager's to the bit; the GELU within fp32 tolerance (XNNPACK's tanh)."""
    from xir_tools.harness import allowed_error, lower, max_error

    inputs = (torch.randn(4, 16) * 3,)
    ep = torch.export.export(module(), inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.ran, ours.error
    assert ours.delegates == 1 and not ours.outside, dict(ours.outside)
    assert ours.delegated["aten.mul.Tensor"] >= 2 and "aten.pow.Tensor_Scalar" not in ours.delegated
    expected = module()(*inputs)
    if exact:
        assert torch.equal(ours.outputs[0], expected)
    else:
        assert max_error(ours.outputs, [expected]) <= allowed_error([expected], "fp32")
