"""IR-text tests of xnnpack.mean-keepdim, and of xnnpack.remove-no-ops: remove-no-ops keeping the
views of a linear that to_edge decomposed (XNNPACK's preprocessing rebuilds the linear from them)."""

import pytest

from passes.testing import check_pipeline


def test_mean_keepdim():
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %m: f32[2,8] = aten.mean.dim(%x) {dim=[2, 3]}
      %n: f32[2,8,1,1] = aten.mean.dim(%x) {dim=[-1, -2], keepdim=true}
      return %m, %n
    }""",
        "xnnpack.mean-keepdim",
        """
    graph @g {
      input %x: f32[2,8,4,4]
      %k: f32[2,8,1,1] = aten.mean.dim(%x) {dim=[2, 3], keepdim=true}
      %m: f32[2,8] = aten.view_copy(%k) {size=[2, 8]}
      %n: f32[2,8,1,1] = aten.mean.dim(%x) {dim=[-1, -2], keepdim=true}
      return %m, %n
    }""",
        changed=True,
    )


LINEAR = """
    graph @g {
      input %x: f32[2,3,8]
      param %w: f32[8,4]
      %v: f32[6,8] = aten.view_copy(%x) {size=[6, 8]}
      %m: f32[6,4] = aten.mm(%v, %w)
      %o: f32[2,3,4] = aten.view_copy(%m) {size=[2, 3, 4]}
      %p: f32[2,3,4] = aten.view_copy(%o) {size=[2, 3, 4]}
      %q: f32[24] = aten.view_copy(%p) {size=[24]}
      return %q
    }"""


@pytest.mark.parametrize(
    "pipeline, expected",
    [
        # generic: the identity view goes, and the view chain after the mm folds into one view
        (
            "remove-no-ops,dead-code-elimination",
            """
    graph @g {
      input %x: f32[2,3,8]
      param %w: f32[8,4]
      %v: f32[6,8] = aten.view_copy(%x) {size=[6, 8]}
      %m: f32[6,4] = aten.mm(%v, %w)
      %q: f32[24] = aten.view_copy(%m) {size=[24]}
      return %q
    }""",
        ),
        # XNNPACK's: the view right after the mm stays (the rebuild reads it); the identity view after it goes
        (
            "xnnpack.remove-no-ops,dead-code-elimination",
            """
    graph @g {
      input %x: f32[2,3,8]
      param %w: f32[8,4]
      %v: f32[6,8] = aten.view_copy(%x) {size=[6, 8]}
      %m: f32[6,4] = aten.mm(%v, %w)
      %o: f32[2,3,4] = aten.view_copy(%m) {size=[2, 3, 4]}
      %q: f32[24] = aten.view_copy(%o) {size=[24]}
      return %q
    }""",
        ),
    ],
)
def test_views_of_a_decomposed_linear(pipeline, expected):
    check_pipeline(LINEAR, pipeline, expected, changed=True)


@pytest.mark.parametrize("order", ["[0, 1]", "[1, 0]"])
def test_dim_order_clone_of_an_unknown_dim_order_stays(order):
    """IR text carries no traced dim order: xnnpack.remove-no-ops cannot tell the clone keeps it."""
    text = f"""
    graph @g {{
      input %x: f32[2,3]
      %a: f32[2,3] = aten.neg(%x)
      %b: f32[2,3] = dim_order_ops._clone_dim_order(%a) {{dim_order={order}}}
      %c: f32[2,3] = aten.neg(%b)
      return %c
    }}"""
    check_pipeline(text, "xnnpack.remove-no-ops", text, changed=False)


Q = "{scale=0.5, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8}"
Q2 = "{scale=0.25, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8}"
WITH_DCE = "xnnpack.remove-no-ops,dead-code-elimination"


def requantized(dq_attrs: str, q_attrs: str, dq_read_again: bool = False, returned: bool = False) -> str:
    """A quantized tensor dequantized and quantized again (what a dropped clone between them leaves),
    its dequantize read by ``dq_read_again`` another op too, the quantize's result ``returned``."""
    return f"""
    graph @g {{
      input %x: f32[2,3]
      %q: i8[2,3] = quantized_decomposed.quantize_per_tensor(%x) {Q}
      %d: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%q) {dq_attrs}
      %r: i8[2,3] = quantized_decomposed.quantize_per_tensor(%d) {q_attrs}
      %e: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%r) {q_attrs}
      %n: f32[2,3] = aten.neg({"%d" if dq_read_again else "%e"})
      return %n{", %r" if returned else ""}
    }}"""


def without_the_requantize(returned: bool) -> str:
    return f"""
    graph @g {{
      input %x: f32[2,3]
      %q: i8[2,3] = quantized_decomposed.quantize_per_tensor(%x) {Q}
      %e: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%q) {Q}
      %n: f32[2,3] = aten.neg(%e)
      return %n{", %q" if returned else ""}
    }}"""


@pytest.mark.parametrize("returned", [False, True], ids=["inside", "returned"])
def test_a_requantize_to_the_same_grid_is_dropped(returned):
    """quantize(dequantize(q)) on one grid is q (ds_cnn's dropped clones left this pair, which
    XNNPACK ran as two converts); a returned quantize's result becomes q, which is no input."""
    check_pipeline(requantized(Q, Q, returned=returned), WITH_DCE, without_the_requantize(returned))


def test_a_requantize_whose_dequantize_is_read_again_drops_only_the_quantize():
    before = requantized(Q, Q, dq_read_again=True)
    expected = """
    graph @g {
      input %x: f32[2,3]
      %q: i8[2,3] = quantized_decomposed.quantize_per_tensor(%x) {scale=0.5, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8}
      %d: f32[2,3] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.5, zero_point=-128, quant_min=-128, quant_max=127, dtype=i8}
      %n: f32[2,3] = aten.neg(%d)
      return %n
    }"""
    check_pipeline(before, WITH_DCE, expected)


def test_a_requantize_to_another_grid_stays():
    text = requantized(Q, Q2)
    check_pipeline(text, "xnnpack.remove-no-ops", text, changed=False)
