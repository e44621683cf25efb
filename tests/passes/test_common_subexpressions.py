"""common-subexpression-elimination: a pure node repeating an earlier one is replaced by it. At the
boundaries: a graph input read by both, a symbolic size inside an attribute (by identity), a
repeat that is a graph output (kept), constants' layouts (kept), random and quantize ops (kept),
views read by matrix multiplies (kept), different attributes (kept)."""

from __future__ import annotations

from passes.testing import check_pipeline

PASS = "common-subexpression-elimination"


def test_repeats_merge_the_first_stays():
    check_pipeline(
        """
    graph @g {
      input %x: f32[s0,8]
      input %t: f32[s0,4]
      %n: int = aten.sym_size.int(%t) {dim=0}
      %a: f32[s0,2,4] = aten.view_copy(%x) {size=[%n, 2, 4]}
      %b: f32[s0,2,4] = aten.view_copy(%x) {size=[%n, 2, 4]}
      %c: f32[s0,8] = aten.mul.Tensor(%x, %x)
      %d: f32[s0,8] = aten.mul.Tensor(%x, %x)
      %e: f32[s0,8] = aten.add.Tensor(%c, %d)
      %f: f32[s0,2,4] = aten.add.Tensor(%a, %b)
      return %e, %f
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[s0,8]
      input %t: f32[s0,4]
      %n: int = aten.sym_size.int(%t) {dim=0}
      %a: f32[s0,2,4] = aten.view_copy(%x) {size=[%n, 2, 4]}
      %c: f32[s0,8] = aten.mul.Tensor(%x, %x)
      %e: f32[s0,8] = aten.add.Tensor(%c, %c)
      %f: f32[s0,2,4] = aten.add.Tensor(%a, %a)
      return %e, %f
    }""",
        changed=True,
    )


def test_what_stays():
    text = """
    graph @g {
      input %x: f32[4,8]
      param %w: f32[8,8]
      %w1: f32[8,8] = aten.permute_copy(%w) {dims=[1, 0]}
      %w2: f32[8,8] = aten.permute_copy(%w) {dims=[1, 0]}
      %m1: f32[4,8] = aten.mm(%x, %w1)
      %m2: f32[4,8] = aten.mm(%x, %w2)
      %d1: f32[4,8], %k1: bool[4,8] = aten.native_dropout(%x) {p=0.5, train=true}
      %d2: f32[4,8], %k2: bool[4,8] = aten.native_dropout(%x) {p=0.5, train=true}
      %s1: f32[4,8] = aten.mul.Tensor(%m1, %d1)
      %s2: f32[4,8] = aten.mul.Tensor(%m2, %d2)
      %v1: f32[2,16] = aten.view_copy(%x) {size=[2, 16]}
      %v2: f32[16,2] = aten.view_copy(%x) {size=[16, 2]}
      %r1: f32[4,8] = aten.relu(%x)
      %r2: f32[4,8] = aten.relu(%x)
      return %s1, %s2, %v1, %v2, %r1, %r2
    }"""
    check_pipeline(text, PASS, text, changed=False)


def test_views_read_by_matrix_multiplies_stay_apart():
    """Two linears decomposed from one 1-D input each read their own view of it: a backend rebuilds
    each linear from its own nodes (fuzz regression three-linears-of-one-input)."""
    text = """
    graph @g {
      input %x: f32[8]
      param %w1: f32[8,4]
      param %w2: f32[8,4]
      %a: f32[1,8] = aten.view_copy(%x) {size=[1, 8]}
      %b: f32[1,8] = aten.view_copy(%x) {size=[1, 8]}
      %m1: f32[1,4] = aten.mm(%a, %w1)
      %m2: f32[1,4] = aten.mm(%b, %w2)
      return %m1, %m2
    }"""
    check_pipeline(text, PASS, text, changed=False)


def test_two_permutes_read_by_xirs_bf16_batched_matmul_stay_apart():
    """``xnnpack.bmm-distinct-operands`` gives a batched matmul reading one permute as both operands
    a second permute (XNNPACK multiplies wrong otherwise); in bf16 the matmul is then
    ``xir.bmm_f32out``, and a CSE after that rewrite must not merge the two back (fuzz regression
    a-bmm-reading-one-permute-twice-reads-two, bf16)."""
    text = """
    graph @g {
      input %x: bf16[2,3,3]
      %a: bf16[2,3,3] = aten.permute_copy(%x) {dims=[0, 2, 1]}
      %b: bf16[2,3,3] = aten.permute_copy(%x) {dims=[0, 2, 1]}
      %m: f32[2,3,3] = xir.bmm_f32out(%a, %b)
      return %m
    }"""
    check_pipeline(text, PASS, text, changed=False)


def test_decides_from_traits_not_names():
    """An op of a third party's namespace merges or not by the traits of its definition alone: a
    ``random`` one stays twice, a ``matmul`` one keeps the views it reads."""
    from xir.ops import MATMUL, PURE, RANDOM, define_op, same_as_input, undefine_op

    define_op("thirdparty.jitter", operands=("input",), traits=PURE | RANDOM, infer=same_as_input)
    define_op("thirdparty.gemm", operands=("input", "other"), traits=PURE | MATMUL, infer=same_as_input)
    define_op("thirdparty.scale", operands=("input",), traits=PURE, infer=same_as_input)
    try:
        text = """
    graph @g {
      input %x: f32[4,4]
      %j1: f32[4,4] = thirdparty.jitter(%x)
      %j2: f32[4,4] = thirdparty.jitter(%x)
      %v1: f32[4,4] = aten.view_copy(%x) {size=[4, 4]}
      %v2: f32[4,4] = aten.view_copy(%x) {size=[4, 4]}
      %g1: f32[4,4] = thirdparty.gemm(%v1, %j1)
      %g2: f32[4,4] = thirdparty.gemm(%v2, %j2)
      %s1: f32[4,4] = thirdparty.scale(%g1)
      %s2: f32[4,4] = thirdparty.scale(%g1)
      %o: f32[4,4] = aten.add.Tensor(%s1, %s2)
      return %o, %g2
    }"""
        check_pipeline(
            text,
            PASS,
            text.replace("      %s2: f32[4,4] = thirdparty.scale(%g1)\n", "").replace("(%s1, %s2)", "(%s1, %s1)"),
            changed=True,
        )
    finally:
        for name in ("thirdparty.jitter", "thirdparty.gemm", "thirdparty.scale"):
            undefine_op(name)
