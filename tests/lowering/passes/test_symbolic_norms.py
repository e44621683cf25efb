"""Norm decompositions on symbolic rows (a dynamic batch or sequence length), IR text in and out:
xnnpack.decompose-layer-norm and xnnpack.decompose-group-norm at the graph's boundaries (the
norm's input a graph input, its output a graph output or read several times, weight and bias
constants or absent), what they decline, and xnnpack.drop-leading-unit-dims, which keeps the
attention scores of a dynamic length at rank 3 between their views."""

from __future__ import annotations

import textwrap

from passes.testing import check_declined, check_pipeline
from xir import parse_graph

from .test_boundaries import attach_data

LN = "xnnpack.decompose-layer-norm"


def attach_data_text(text: str):
    """The graph of ``text`` with data on its constants (the passes read them)."""
    return attach_data(parse_graph(textwrap.dedent(text)))


def _norm_ops(x, rows, n, eps="%layer_norm_eps", first=0):
    """The decomposition's ops on ``x`` of shape [*rows, n] (results numbered from ``first``)."""
    r = ",".join(rows)
    i = first
    return f"""
      %{i}: f32[{r},1] = aten.mean.dim({x}) {{dim=[{len(rows)}], keepdim=true}}
      %{i + 1}: f32[{r},{n}] = aten.sub.Tensor({x}, %{i})
      %{i + 2}: f32[{r},{n}] = aten.mul.Tensor(%{i + 1}, %{i + 1})
      %{i + 3}: f32[{r},1] = aten.mean.dim(%{i + 2}) {{dim=[{len(rows)}], keepdim=true}}
      %{i + 4}: f32[{r},1] = aten.add.Tensor(%{i + 3}, {eps})
      %{i + 5}: f32[{r},1] = aten.rsqrt(%{i + 4})
      %{i + 6}: f32[{r},{n}] = aten.mul.Tensor(%{i + 1}, %{i + 5})"""


def test_layer_norm_of_a_graph_input_returned_with_symbolic_rows():
    check_pipeline(
        attach_data_text("""
    graph @g {
      param %w: f32[8]
      param %b: f32[8]
      input %x: f32[2,s0,8]
      %n: f32[2,s0,8], %mean: f32[2,s0,1], %rstd: f32[2,s0,1] = aten.native_layer_norm(%x, %w, %b) {normalized_shape=[8], eps=1e-05}
      return %n
    }"""),
        LN,
        f"""
    graph @g {{
      param %w: f32[8]
      param %b: f32[8]
      input %x: f32[2,s0,8]
      param %layer_norm_eps: f32[]{_norm_ops("%x", ["2", "s0"], 8)}
      %7: f32[2,s0,8] = aten.mul.Tensor(%6, %w)
      %8: f32[2,s0,8] = aten.add.Tensor(%7, %b)
      return %8
    }}""",
    )


def test_symbolic_rows_reach_the_means_as_a_views_inferred_dim():
    """Then xnnpack.mean-over-last-dims: each mean a product with a 1/8 column on (rows, 8),
    the symbolic rows written -1 in both views."""
    check_pipeline(
        attach_data_text("""
    graph @g {
      param %w: f32[8]
      param %b: f32[8]
      input %x: f32[1,s0,8]
      %n: f32[1,s0,8], %mean: f32[1,s0,1], %rstd: f32[1,s0,1] = aten.native_layer_norm(%x, %w, %b) {normalized_shape=[8], eps=1e-05}
      return %n
    }"""),
        f"{LN},xnnpack.mean-over-last-dims",
        """
    graph @g {
      param %w: f32[8]
      param %b: f32[8]
      input %x: f32[1,s0,8]
      param %layer_norm_eps: f32[]
      param %mean_weight_8: f32[8,1]
      %0: f32[s0,8] = aten.view_copy(%x) {size=[-1, 8]}
      %1: f32[s0,1] = aten.mm(%0, %mean_weight_8)
      %2: f32[1,s0,1] = aten.view_copy(%1) {size=[1, -1, 1]}
      %3: f32[1,s0,8] = aten.sub.Tensor(%x, %2)
      %4: f32[1,s0,8] = aten.mul.Tensor(%3, %3)
      %5: f32[s0,8] = aten.view_copy(%4) {size=[-1, 8]}
      %6: f32[s0,1] = aten.mm(%5, %mean_weight_8)
      %7: f32[1,s0,1] = aten.view_copy(%6) {size=[1, -1, 1]}
      %8: f32[1,s0,1] = aten.add.Tensor(%7, %layer_norm_eps)
      %9: f32[1,s0,1] = aten.rsqrt(%8)
      %10: f32[1,s0,8] = aten.mul.Tensor(%3, %9)
      %11: f32[1,s0,8] = aten.mul.Tensor(%10, %w)
      %12: f32[1,s0,8] = aten.add.Tensor(%11, %b)
      return %12
    }""",
    )


def test_without_weight_and_bias_an_output_read_again():
    """No weight, no bias: the normalized value itself replaces the norm, as the graph output
    and for both of its readers."""
    check_pipeline(
        """
    graph @g {
      input %x: f32[s0,8]
      %y: f32[s0,8] = aten.relu(%x)
      %n: f32[s0,8], %mean: f32[s0,1], %rstd: f32[s0,1] = aten.native_layer_norm(%y) {normalized_shape=[8], eps=1e-05}
      %a: f32[s0,8] = aten.neg(%n)
      %c: f32[s0,8] = aten.add.Tensor(%n, %a)
      return %c, %n
    }""",
        LN,
        f"""
    graph @g {{
      input %x: f32[s0,8]
      param %layer_norm_eps: f32[]
      %y: f32[s0,8] = aten.relu(%x){_norm_ops("%y", ["s0"], 8)}
      %a: f32[s0,8] = aten.neg(%6)
      %c: f32[s0,8] = aten.add.Tensor(%6, %a)
      return %c, %6
    }}""",
    )


def test_weight_only_over_two_normalized_dims():
    check_pipeline(
        attach_data_text("""
    graph @g {
      param %w: f32[4,8]
      input %x: f32[s0,4,8]
      %n: f32[s0,4,8], %mean: f32[s0,1,1], %rstd: f32[s0,1,1] = aten.native_layer_norm(%x, %w) {normalized_shape=[4, 8], eps=1e-05}
      return %n
    }"""),
        LN,
        """
    graph @g {
      param %w: f32[4,8]
      input %x: f32[s0,4,8]
      param %layer_norm_eps: f32[]
      %0: f32[s0,1,1] = aten.mean.dim(%x) {dim=[1, 2], keepdim=true}
      %1: f32[s0,4,8] = aten.sub.Tensor(%x, %0)
      %2: f32[s0,4,8] = aten.mul.Tensor(%1, %1)
      %3: f32[s0,1,1] = aten.mean.dim(%2) {dim=[1, 2], keepdim=true}
      %4: f32[s0,1,1] = aten.add.Tensor(%3, %layer_norm_eps)
      %5: f32[s0,1,1] = aten.rsqrt(%4)
      %6: f32[s0,4,8] = aten.mul.Tensor(%1, %5)
      %7: f32[s0,4,8] = aten.mul.Tensor(%6, %w)
      return %7
    }""",
    )


def test_a_computed_weight_and_bias():
    """Weight and bias graph inputs (not constants): read as they are by the product and the sum."""
    check_pipeline(
        """
    graph @g {
      input %x: f32[s0,8]
      input %w: f32[8]
      input %b: f32[8]
      %n: f32[s0,8], %mean: f32[s0,1], %rstd: f32[s0,1] = aten.native_layer_norm(%x, %w, %b) {normalized_shape=[8], eps=1e-05}
      return %n
    }""",
        LN,
        f"""
    graph @g {{
      input %x: f32[s0,8]
      input %w: f32[8]
      input %b: f32[8]
      param %layer_norm_eps: f32[]{_norm_ops("%x", ["s0"], 8)}
      %7: f32[s0,8] = aten.mul.Tensor(%6, %w)
      %8: f32[s0,8] = aten.add.Tensor(%7, %b)
      return %8
    }}""",
    )


def test_layer_norm_whose_statistics_are_returned_stays():
    check_declined(
        """
    graph @g {
      input %x: f32[s0,8]
      %n: f32[s0,8], %mean: f32[s0,1], %rstd: f32[s0,1] = aten.native_layer_norm(%x) {normalized_shape=[8], eps=1e-05}
      return %n, %rstd
    }""",
        LN,
        "decompose_layer_norm",
        "mean/rstd outputs are used",
    )


def test_group_norm_of_a_symbolic_batch():
    """The batch is the views' inferred dim; weight and bias become (C, 1) constants."""
    check_pipeline(
        attach_data_text("""
    graph @g {
      param %w: f32[4]
      param %b: f32[4]
      input %x: f32[s0,4,3]
      %s: int = aten.sym_size.int(%x) {dim=0}
      %n: f32[s0,4,3], %mean: f32[s0,2], %rstd: f32[s0,2] = aten.native_group_norm(%x, %w, %b) {N=%s, C=4, HxW=3, group=2, eps=1e-05}
      return %n
    }"""),
        "xnnpack.decompose-group-norm",
        """
    graph @g {
      param %w: f32[4]
      param %b: f32[4]
      input %x: f32[s0,4,3]
      param %group_norm_eps: f32[]
      param %group_norm_weight: f32[4,1]
      param %group_norm_bias: f32[4,1]
      %0: int = aten.sym_size.int(%x) {dim=0}
      %1: f32[s0,2,6] = aten.view_copy(%x) {size=[-1, 2, 6]}
      %2: f32[s0,2,1] = aten.mean.dim(%1) {dim=[2], keepdim=true}
      %3: f32[s0,2,6] = aten.sub.Tensor(%1, %2)
      %4: f32[s0,2,6] = aten.mul.Tensor(%3, %3)
      %5: f32[s0,2,1] = aten.mean.dim(%4) {dim=[2], keepdim=true}
      %6: f32[s0,2,1] = aten.add.Tensor(%5, %group_norm_eps)
      %7: f32[s0,2,1] = aten.rsqrt(%6)
      %8: f32[s0,2,6] = aten.mul.Tensor(%3, %7)
      %9: f32[s0,4,3] = aten.view_copy(%8) {size=[-1, 4, 3]}
      %10: f32[s0,4,3] = aten.mul.Tensor(%9, %group_norm_weight)
      %11: f32[s0,4,3] = aten.add.Tensor(%10, %group_norm_bias)
      return %11
    }""",
    )


def test_group_norm_over_a_symbolic_spatial_dim_stays():
    """Its groups would be of a symbolic size, a reduction XNNPACK's ops here cannot write."""
    check_declined(
        """
    graph @g {
      input %x: f32[2,4,s0]
      %s: int = aten.sym_size.int(%x) {dim=2}
      %n: f32[2,4,s0], %mean: f32[2,2], %rstd: f32[2,2] = aten.native_group_norm(%x) {N=2, C=4, HxW=%s, group=2, eps=1e-05}
      return %n
    }""",
        "xnnpack.decompose-group-norm",
        "decompose_group_norm",
        "symbolic dim among the normalized",
    )


# ------------------------------------------------------------------ xnnpack.drop-leading-unit-dims

DROP = "xnnpack.drop-leading-unit-dims"


def _scores(tail: str, ret: str = "%5", mask: str = "f32[1,1,s0,s0]", softmax_dim: int = -1) -> str:
    return f"""
    graph @g {{
      param %half: f32[]
      input %q: f32[4,s0,8]
      input %k: f32[4,8,s0]
      input %mask: {mask}
      %s: int = aten.sym_size.int(%q) {{dim=1}}
      %0: f32[4,s0,s0] = aten.bmm(%q, %k)
      %1: f32[1,4,s0,s0] = aten.view_copy(%0) {{size=[1, 4, %s, %s]}}
      %2: f32[1,4,s0,s0] = aten.add.Tensor(%1, %mask)
      %3: f32[1,4,s0,s0] = aten._softmax(%2) {{dim={softmax_dim}, half_to_float=false}}
      %4: f32[1,4,s0,s0] = aten.mul.Tensor(%3, %half){tail}
      return {ret}
    }}"""


BACK = "\n      %5: f32[4,s0,s0] = aten.view_copy(%4) {size=[4, %s, %s]}"


def test_attention_scores_stay_3d_the_mask_viewed_down():
    check_pipeline(
        _scores(BACK),
        DROP,
        """
    graph @g {
      param %half: f32[]
      input %q: f32[4,s0,8]
      input %k: f32[4,8,s0]
      input %mask: f32[1,1,s0,s0]
      %s: int = aten.sym_size.int(%q) {dim=1}
      %0: f32[4,s0,s0] = aten.bmm(%q, %k)
      %1: f32[1,s0,s0] = aten.view_copy(%mask) {size=[1, %s, %s]}
      %2: f32[4,s0,s0] = aten.add.Tensor(%0, %1)
      %3: f32[4,s0,s0] = aten._softmax(%2) {dim=-1, half_to_float=false}
      %4: f32[4,s0,s0] = aten.mul.Tensor(%3, %half)
      return %4
    }""",
    )


def test_a_constant_with_the_unit_dims_is_reshaped():
    check_pipeline(
        attach_data_text("""
    graph @g {
      param %c: f32[1,1,1,1]
      input %x: f32[4,s0,s0]
      %s: int = aten.sym_size.int(%x) {dim=1}
      %1: f32[1,4,s0,s0] = aten.view_copy(%x) {size=[1, 4, %s, %s]}
      %2: f32[1,4,s0,s0] = aten.mul.Tensor(%1, %c)
      %3: f32[4,s0,s0] = aten.view_copy(%2) {size=[4, %s, %s]}
      return %3
    }"""),
        DROP,
        """
    graph @g {
      param %c: f32[1,1,1,1]
      input %x: f32[4,s0,s0]
      param %c_dropped: f32[1,1,1]
      %0: int = aten.sym_size.int(%x) {dim=1}
      %1: f32[4,s0,s0] = aten.mul.Tensor(%x, %c_dropped)
      return %1
    }""",
    )


def test_scores_returned_between_the_views_stay():
    check_declined(_scores(BACK, ret="%5, %3"), DROP, "drop_leading_unit_dims", "is a graph output")


def test_a_softmax_over_the_unit_dim_stays():
    check_declined(_scores(BACK, softmax_dim=0), DROP, "drop_leading_unit_dims", "softmax over a unit dim")


def test_a_mask_that_broadcasts_over_the_unit_dim_stays():
    text = (
        _scores(BACK, mask="f32[2,1,s0,s0]")
        .replace("f32[1,4,s0,s0]", "f32[2,4,s0,s0]")
        .replace("%1: f32[2,4,s0,s0]", "%1: f32[1,4,s0,s0]")
    )
    check_declined(text, DROP, "drop_leading_unit_dims", "gives f32\\[2,4,s0,s0\\]")


def test_a_reduction_between_the_views_stays():
    tail = "\n      %5: f32[1,4,s0,1] = aten.mean.dim(%4) {dim=[3], keepdim=true}"
    check_declined(_scores(tail), DROP, "drop_leading_unit_dims", "aten.mean.dim is not elementwise")


def test_a_view_xnnpack_writes_is_left_alone():
    check_declined(
        """
    graph @g {
      input %x: f32[4,s0,8]
      %1: f32[1,4,s0,8] = aten.view_copy(%x) {size=[1, 4, -1, 8]}
      %2: f32[1,4,s0,8] = aten.relu(%1)
      %3: f32[4,s0,8] = aten.view_copy(%2) {size=[4, -1, 8]}
      return %3
    }""",
        DROP,
        "drop_leading_unit_dims",
        "a view XNNPACK writes",
    )


def test_a_contiguous_copy_between_the_views_keeps_its_order_at_the_lower_rank():
    check_pipeline(
        """
    graph @g {
      input %x: f32[4,s0,s0]
      %s: int = aten.sym_size.int(%x) {dim=1}
      %1: f32[1,4,s0,s0] = aten.view_copy(%x) {size=[1, 4, %s, %s]}
      %2: f32[1,4,s0,s0] = dim_order_ops._to_dim_order_copy(%1) {dtype=f32, dim_order=[0, 1, 2, 3]}
      %3: f32[4,s0,s0] = aten.view_copy(%2) {size=[4, %s, %s]}
      return %3
    }""",
        DROP,
        """
    graph @g {
      input %x: f32[4,s0,s0]
      %0: int = aten.sym_size.int(%x) {dim=1}
      %1: f32[4,s0,s0] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[0, 1, 2]}
      return %1
    }""",
    )
    check_declined(
        """
    graph @g {
      input %x: f32[4,s0,s0]
      %s: int = aten.sym_size.int(%x) {dim=1}
      %1: f32[1,4,s0,s0] = aten.view_copy(%x) {size=[1, 4, %s, %s]}
      %2: f32[1,4,s0,s0] = dim_order_ops._to_dim_order_copy(%1) {dtype=f32, dim_order=[0, 2, 3, 1]}
      %3: f32[4,s0,s0] = aten.view_copy(%2) {size=[4, %s, %s]}
      return %3
    }""",
        DROP,
        "drop_leading_unit_dims",
        "with the dim order",
    )
