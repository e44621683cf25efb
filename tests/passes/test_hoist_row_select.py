"""hoist-row-select: a select of one row moves up through row-wise ops, which then compute that row
only. At the boundaries: a graph input and a constant (the row picked from them), a value read by
several narrowed ops (narrowed once), a value that is also a graph output or that a row-mixing op
reads (the row picked there, the value kept whole), symbolic rows, torchao's per-token quantization
(two results), and the ops that stop the walk."""

from __future__ import annotations

import pytest

from passes.testing import check_pipeline

PASS = "hoist-row-select"


def test_a_decoder_tail_computes_its_last_row_only():
    # the last layer after the attention: output projection, residual, RMSNorm, feed-forward,
    # residual, then h[:, -1, :]; %r is read by four narrowed ops, %a and %h are graph inputs
    check_pipeline(
        """
    graph @g {
      input %a: f32[1,s0,2,4]
      input %h: f32[1,s0,8]
      param %wo: f32[8,8]
      param %g: f32[8]
      param %w1: f32[16,8]
      param %w2: f32[8,16]
      %v: f32[1,s0,8] = aten.view_copy(%a) {size=[1, -1, 8]}
      %o: f32[1,s0,8] = aten.linear(%v, %wo)
      %r: f32[1,s0,8] = aten.add.Tensor(%h, %o)
      %sq: f32[1,s0,8] = aten.mul.Tensor(%r, %r)
      %m: f32[1,s0,1] = aten.mean.dim(%sq) {dim=[-1], keepdim=true}
      %n: f32[1,s0,1] = aten.rsqrt(%m)
      %x: f32[1,s0,8] = aten.mul.Tensor(%r, %n)
      %y: f32[1,s0,8] = aten.mul.Tensor(%x, %g)
      %u: f32[1,s0,16] = aten.linear(%y, %w1)
      %s: f32[1,s0,16] = aten.silu(%u)
      %d: f32[1,s0,8] = aten.linear(%s, %w2)
      %out: f32[1,s0,8] = aten.add.Tensor(%r, %d)
      %last: f32[1,8] = aten.select_copy.int(%out) {dim=1, index=-1}
      return %last
    }""",
        PASS,
        """
    graph @g {
      input %a: f32[1,s0,2,4]
      input %h: f32[1,s0,8]
      param %wo: f32[8,8]
      param %g: f32[8]
      param %w1: f32[16,8]
      param %w2: f32[8,16]
      %a1: f32[1,2,4] = aten.select_copy.int(%a) {dim=1, index=-1}
      %a2: f32[1,1,2,4] = aten.view_copy(%a1) {size=[1, 1, 2, 4]}
      %v: f32[1,1,8] = aten.view_copy(%a2) {size=[1, 1, 8]}
      %o: f32[1,1,8] = aten.linear(%v, %wo)
      %h1: f32[1,8] = aten.select_copy.int(%h) {dim=1, index=-1}
      %h2: f32[1,1,8] = aten.view_copy(%h1) {size=[1, 1, 8]}
      %r: f32[1,1,8] = aten.add.Tensor(%h2, %o)
      %sq: f32[1,1,8] = aten.mul.Tensor(%r, %r)
      %m: f32[1,1,1] = aten.mean.dim(%sq) {dim=[-1], keepdim=true}
      %n: f32[1,1,1] = aten.rsqrt(%m)
      %x: f32[1,1,8] = aten.mul.Tensor(%r, %n)
      %y: f32[1,1,8] = aten.mul.Tensor(%x, %g)
      %u: f32[1,1,16] = aten.linear(%y, %w1)
      %s: f32[1,1,16] = aten.silu(%u)
      %d: f32[1,1,8] = aten.linear(%s, %w2)
      %out: f32[1,1,8] = aten.add.Tensor(%r, %d)
      %last: f32[1,8] = aten.view_copy(%out) {size=[1, 8]}
      return %last
    }""",
        changed=True,
    )


def test_the_row_is_picked_from_an_output_a_row_mixing_reader_and_a_constant():
    # %r is also a graph output, %e is also read by a softmax over the rows, %c is a constant:
    # each stays whole and gives its row to the narrowed ops
    check_pipeline(
        """
    graph @g {
      input %x: f32[4,8]
      param %c: f32[4,8]
      param %w: f32[8,8]
      %r: f32[4,8] = aten.relu(%x)
      %e: f32[4,8] = aten.exp(%x)
      %sm: f32[4,8] = aten._softmax(%e) {dim=0, half_to_float=false}
      %p: f32[4,8] = aten.add.Tensor(%r, %c)
      %q: f32[4,8] = aten.mul.Tensor(%p, %e)
      %l: f32[4,8] = aten.linear(%q, %w)
      %row: f32[8] = aten.select_copy.int(%l) {dim=0, index=2}
      return %row, %r, %sm
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[4,8]
      param %c: f32[4,8]
      param %w: f32[8,8]
      %r: f32[4,8] = aten.relu(%x)
      %e: f32[4,8] = aten.exp(%x)
      %sm: f32[4,8] = aten._softmax(%e) {dim=0, half_to_float=false}
      %r1: f32[8] = aten.select_copy.int(%r) {dim=0, index=2}
      %r2: f32[1,8] = aten.view_copy(%r1) {size=[1, 8]}
      %c1: f32[8] = aten.select_copy.int(%c) {dim=0, index=2}
      %c2: f32[1,8] = aten.view_copy(%c1) {size=[1, 8]}
      %p: f32[1,8] = aten.add.Tensor(%r2, %c2)
      %e1: f32[8] = aten.select_copy.int(%e) {dim=0, index=2}
      %e2: f32[1,8] = aten.view_copy(%e1) {size=[1, 8]}
      %q: f32[1,8] = aten.mul.Tensor(%p, %e2)
      %l: f32[1,8] = aten.linear(%q, %w)
      %row: f32[8] = aten.view_copy(%l) {size=[8]}
      return %row, %r, %sm
    }""",
        changed=True,
    )


def test_the_walk_stops_at_a_view_that_merges_the_rows():
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,3,4]
      param %w: f32[4,4]
      %v: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %l: f32[6,4] = aten.linear(%v, %w)
      %row: f32[4] = aten.select_copy.int(%l) {dim=0, index=1}
      return %row
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[2,3,4]
      param %w: f32[4,4]
      %v: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %v1: f32[4] = aten.select_copy.int(%v) {dim=0, index=1}
      %v2: f32[1,4] = aten.view_copy(%v1) {size=[1, 4]}
      %l: f32[1,4] = aten.linear(%v2, %w)
      %row: f32[4] = aten.view_copy(%l) {size=[4]}
      return %row
    }""",
        changed=True,
    )


def test_per_token_dynamic_quantization_is_row_wise():
    # 8da4w's linear: the activation's scale and zero point (two results of one op) are per row
    check_pipeline(
        """
    graph @g {
      input %x: f32[1,s0,8]
      param %wq: i8[4,8]
      param %ws: f32[4,1]
      param %wz: i8[4,1]
      %s: f32[1,s0], %z: i8[1,s0] = torchao.choose_qparams_affine(%x) {mapping_type="ASYMMETRIC", block_size=[1, 1, 8], target_dtype=i8, quant_min=-128, quant_max=127}
      %q: i8[1,s0,8] = torchao.quantize_affine(%x, %s, %z) {block_size=[1, 1, 8], output_dtype=i8, quant_min=-128, quant_max=127}
      %dq: f32[1,s0,8] = torchao.dequantize_affine(%q, %s, %z) {block_size=[1, 1, 8], input_dtype=i8, quant_min=-128, quant_max=127}
      %w: f32[4,8] = torchao.dequantize_affine(%wq, %ws, %wz) {block_size=[1, 8], input_dtype=i8, quant_min=-8, quant_max=7}
      %l: f32[1,s0,4] = aten.linear(%dq, %w)
      %last: f32[1,4] = aten.select_copy.int(%l) {dim=1, index=-1}
      return %last
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[1,s0,8]
      param %wq: i8[4,8]
      param %ws: f32[4,1]
      param %wz: i8[4,1]
      %x1: f32[1,8] = aten.select_copy.int(%x) {dim=1, index=-1}
      %x2: f32[1,1,8] = aten.view_copy(%x1) {size=[1, 1, 8]}
      %s: f32[1,1], %z: i8[1,1] = torchao.choose_qparams_affine(%x2) {mapping_type="ASYMMETRIC", block_size=[1, 1, 8], target_dtype=i8, quant_min=-128, quant_max=127}
      %q: i8[1,1,8] = torchao.quantize_affine(%x2, %s, %z) {block_size=[1, 1, 8], output_dtype=i8, quant_min=-128, quant_max=127}
      %dq: f32[1,1,8] = torchao.dequantize_affine(%q, %s, %z) {block_size=[1, 1, 8], input_dtype=i8, quant_min=-128, quant_max=127}
      %w: f32[4,8] = torchao.dequantize_affine(%wq, %ws, %wz) {block_size=[1, 8], input_dtype=i8, quant_min=-8, quant_max=7}
      %l: f32[1,1,4] = aten.linear(%dq, %w)
      %last: f32[1,4] = aten.view_copy(%l) {size=[1, 4]}
      return %last
    }""",
        changed=True,
    )


def test_a_permute_a_bmm_and_a_cat_pass_the_row_on():
    check_pipeline(
        """
    graph @g {
      input %q: f32[2,4,3]
      input %k: f32[2,3,5]
      %p: f32[4,2,3] = aten.permute_copy(%q) {dims=[1, 0, 2]}
      %n: f32[4,2,3] = aten.neg(%p)
      %c: f32[4,2,6] = aten.cat(%p, %n) {dim=2}
      %t: f32[2,4,6] = aten.permute_copy(%c) {dims=[1, 0, 2]}
      %s: f32[2,4,3] = aten.slice_copy.Tensor(%t) {dim=2, start=0, end=3, step=1}
      %b: f32[2,4,5] = aten.bmm(%s, %k)
      %last: f32[2,5] = aten.select_copy.int(%b) {dim=1, index=3}
      return %last
    }""",
        PASS,
        """
    graph @g {
      input %q: f32[2,4,3]
      input %k: f32[2,3,5]
      %q1: f32[2,3] = aten.select_copy.int(%q) {dim=1, index=3}
      %q2: f32[2,1,3] = aten.view_copy(%q1) {size=[2, 1, 3]}
      %p: f32[1,2,3] = aten.permute_copy(%q2) {dims=[1, 0, 2]}
      %n: f32[1,2,3] = aten.neg(%p)
      %c: f32[1,2,6] = aten.cat(%p, %n) {dim=2}
      %t: f32[2,1,6] = aten.permute_copy(%c) {dims=[1, 0, 2]}
      %s: f32[2,1,3] = aten.slice_copy.Tensor(%t) {dim=2, start=0, end=3, step=1}
      %b: f32[2,1,5] = aten.bmm(%s, %k)
      %last: f32[2,5] = aten.view_copy(%b) {size=[2, 5]}
      return %last
    }""",
        changed=True,
    )


def test_a_matmul_decomposition_s_expand_and_view_to_their_own_shape():
    # torch.export writes q @ k^T as expand -> view -> bmm -> view, each to the shape it has; the
    # expand's size becomes -1s (the input's size), the views' sizes the one row
    check_pipeline(
        """
    graph @g {
      input %q: f32[1,s0,8]
      input %kt: f32[1,8,s0]
      %n: int = aten.sym_size.int(%q) {dim=1}
      %e: f32[1,s0,8] = aten.expand_copy(%q) {size=[1, %n, 8]}
      %v: f32[1,s0,8] = aten.view_copy(%e) {size=[1, %n, 8]}
      %b: f32[1,s0,s0] = aten.bmm(%v, %kt)
      %w: f32[1,s0,s0] = aten.view_copy(%b) {size=[1, %n, %n]}
      %p: f32[1,s0,s0] = aten._softmax(%w) {dim=-1, half_to_float=false}
      %last: f32[1,s0] = aten.select_copy.int(%p) {dim=1, index=-1}
      return %last
    }""",
        PASS,
        """
    graph @g {
      input %q: f32[1,s0,8]
      input %kt: f32[1,8,s0]
      %n: int = aten.sym_size.int(%q) {dim=1}
      %q1: f32[1,8] = aten.select_copy.int(%q) {dim=1, index=-1}
      %q2: f32[1,1,8] = aten.view_copy(%q1) {size=[1, 1, 8]}
      %e: f32[1,1,8] = aten.expand_copy(%q2) {size=[-1, -1, -1]}
      %v: f32[1,1,8] = aten.view_copy(%e) {size=[1, 1, 8]}
      %b: f32[1,1,s0] = aten.bmm(%v, %kt)
      %w: f32[1,1,s0] = aten.view_copy(%b) {size=[1, 1, -1]}
      %p: f32[1,1,s0] = aten._softmax(%w) {dim=-1, half_to_float=false}
      %last: f32[1,s0] = aten.view_copy(%p) {size=[1, -1]}
      return %last
    }""",
        changed=True,
    )


def test_a_linear_on_a_dequantized_weight_passes_the_row_on():
    # a pt2e dequantize of the weight (read whole) does not stop the walk; one of the activation does
    # (test_left_alone's "a-pt2e-dynamically-quantized-linear")
    check_pipeline(
        """
    graph @g {
      input %x: f32[3,5,32]
      param %wq: i8[4,32]
      param %ws: f32[4]
      param %wz: i64[4]
      %w: f32[4,32] = quantized_decomposed.dequantize_per_channel(%wq, %ws, %wz) {axis=0, quant_min=-127, quant_max=127, dtype=i8}
      %l: f32[3,5,4] = aten.linear(%x, %w)
      %r: f32[3,5,4] = aten.relu(%l)
      %row: f32[5,4] = aten.select_copy.int(%r) {dim=0, index=2}
      return %row
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[3,5,32]
      param %wq: i8[4,32]
      param %ws: f32[4]
      param %wz: i64[4]
      %0: f32[4,32] = quantized_decomposed.dequantize_per_channel(%wq, %ws, %wz) {axis=0, quant_min=-127, quant_max=127, dtype=i8}
      %1: f32[5,32] = aten.select_copy.int(%x) {dim=0, index=2}
      %2: f32[1,5,32] = aten.view_copy(%1) {size=[1, 5, 32]}
      %3: f32[1,5,4] = aten.linear(%2, %0)
      %4: f32[1,5,4] = aten.relu(%3)
      %5: f32[5,4] = aten.view_copy(%4) {size=[5, 4]}
      return %5
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            """
    graph @g {
      input %x: f32[3,5,32]
      param %w: f32[4,32]
      %s: f64[1], %z: i64[1] = quantized_decomposed.choose_qparams.tensor(%x) {quant_min=-128, quant_max=127, eps=0.000244140625, dtype=i8}
      %q: i8[3,5,32] = quantized_decomposed.quantize_per_tensor.tensor(%x, %s, %z) {quant_min=-128, quant_max=127, dtype=i8}
      %dq: f32[3,5,32] = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {quant_min=-128, quant_max=127, dtype=i8}
      %l: f32[3,5,4] = aten.linear(%dq, %w)
      %row: f32[5,4] = aten.select_copy.int(%l) {dim=0, index=2}
      return %row
    }""",
            id="a-pt2e-dynamically-quantized-linear",
        ),  # (fuzz dynamic 97034: its Q/DQ left outside XNNPACK)
        pytest.param(
            """
    graph @g {
      input %x: f32[1,s0,8]
      %s: f32[1,s0,8] = aten._softmax(%x) {dim=1, half_to_float=false}
      %last: f32[1,8] = aten.select_copy.int(%s) {dim=1, index=-1}
      return %last
    }""",
            id="softmax-over-the-rows",
        ),
        pytest.param(
            """
    graph @g {
      input %x: f32[2,3,4]
      %v: f32[6,4] = aten.view_copy(%x) {size=[6, 4]}
      %row: f32[4] = aten.select_copy.int(%v) {dim=0, index=1}
      return %row
    }""",
            id="a-view-merging-the-rows",
        ),
        pytest.param(
            """
    graph @g {
      input %x: f32[1,s0,8]
      %e: f32[1,s0,8] = aten.exp(%x)
      %last: f32[1,8] = aten.select_copy.int(%e) {dim=1, index=-1}
      return %last, %e
    }""",
            id="the-whole-value-is-an-output",
        ),
        pytest.param(
            """
    graph @g {
      input %x: f32[1,s0,8]
      param %w: f32[8,8]
      %l: f32[1,s0,8] = aten.linear(%x, %w)
      %col: f32[1,s0] = aten.select_copy.int(%l) {dim=2, index=0}
      return %col
    }""",
            id="a-linear's-output-column",
        ),
        pytest.param(
            """
    graph @g {
      input %x: f32[3,1,8]
      %e: f32[3,1,8] = aten.exp(%x)
      %one: f32[3,8] = aten.select_copy.int(%e) {dim=1, index=0}
      return %one
    }""",
            id="a-dim-of-one-row",
        ),
        pytest.param(
            """
    graph @g {
      input %q: f32[2,4,3]
      input %k: f32[2,3,5]
      %b: f32[2,4,5] = aten.bmm(%q, %k)
      %col: f32[2,4] = aten.select_copy.int(%b) {dim=2, index=1}
      return %col
    }""",
            id="a-bmm's-column",
        ),
        pytest.param(
            """
    graph @g {
      input %q: bf16[2,4,3]
      input %k: bf16[2,3,5]
      %b: bf16[2,4,5] = aten.bmm(%q, %k)
      %row: bf16[2,5] = aten.select_copy.int(%b) {dim=1, index=3}
      return %row
    }""",
            id="a-bf16-bmm's-row",
        ),
        pytest.param(
            """
    graph @g {
      input %x: f32[1,s0,8]
      %e: f32[1,s0,8] = aten.exp(%x)
      %m: f32[1,s0,1] = aten.mean.dim(%e) {dim=[-1], keepdim=true}
      %d: f32[1,s0,8] = aten.sub.Tensor(%e, %m)
      %last: f32[1,8] = aten.select_copy.int(%d) {dim=1, index=-1}
      return %last
    }""",
            id="no-linear-or-matmul-to-save",
        ),
    ],
)
def test_left_alone(text):
    check_pipeline(text, PASS, text, changed=False)
