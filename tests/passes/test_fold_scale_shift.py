"""IR-text tests of ``fold-scale-shift-into-linears``: a per-feature scale and shift (RMSNorm's
weight, a layer norm's weight and bias) read only by fp32 linears goes into their weights and
biases. At the boundaries: the normalized value a graph input with a symbolic row count, several
linears reading the result (each its own scaled weight), a linear with a bias, a scale of one
number; declined: a result that is a graph output or read by another op (a residual add), a
dequantized (computed) weight, a tied weight, bf16, a constant that broadcasts the input, a
result used as a linear's weight. And a shift right after a linear into its bias (RMSNorm's eps
after its mean as a linear): a symbolic row count, an existing bias, the sum a graph output, a weight
two linears read; declined: the linear's result also returned or read by another op, a dequantized
weight, a shift that broadcasts, a bias another linear reads, bf16, an alpha; the shift left by default (``bias_shifts=false``).
The numbers are checked against the unfolded graph run by torch."""

from __future__ import annotations

import torch

from passes.testing import check_declined, check_pipeline, graph_with_data

PASS = "fold-scale-shift-into-linears,dead-code-elimination"
SHIFTS = "fold-scale-shift-into-linears{bias_shifts=true},dead-code-elimination"  # (the shift after a linear too)

torch.manual_seed(0)
WQ, WK, WO = torch.randn(4, 4), torch.randn(2, 4), torch.randn(3, 4)
SCALE, SHIFT, BIAS = torch.randn(4), torch.randn(4), torch.randn(3)


def test_rmsnorm_weight_into_three_linears_symbolic_rows():
    before = graph_with_data(
        """
    graph @g {
      input %n: f32[1,s0,4]
      param %w: f32[4]
      param %wq: f32[4,4]
      param %wk: f32[2,4]
      %y: f32[1,s0,4] = aten.mul.Tensor(%n, %w)
      %q: f32[1,s0,4] = aten.linear(%y, %wq)
      %k: f32[1,s0,2] = aten.linear(%y, %wk)
      %v: f32[1,s0,2] = aten.linear(%y, %wk)
      return %q, %k, %v
    }""",
        w=SCALE,
        wq=WQ,
        wk=WK,
    )
    # (%wk read by two of the linears: one scaled copy)
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %n: f32[1,s0,4]
      param %w: f32[4]
      param %wq: f32[4,4]
      param %wk: f32[2,4]
      param %wq_scaled: f32[4,4]
      param %wk_scaled: f32[2,4]
      %q: f32[1,s0,4] = aten.linear(%n, %wq_scaled)
      %k: f32[1,s0,2] = aten.linear(%n, %wk_scaled)
      %v: f32[1,s0,2] = aten.linear(%n, %wk_scaled)
      return %q, %k, %v
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("wq_scaled").data, WQ * SCALE)
    x = torch.randn(1, 5, 4)
    assert torch.allclose(
        torch.nn.functional.linear(x, graph.input_named("wk_scaled").data),
        torch.nn.functional.linear(x * SCALE, WK),
        atol=1e-6,
    )


def test_layer_norm_weight_and_bias_into_a_linear_with_a_bias():
    before = graph_with_data(
        """
    graph @g {
      input %n: f32[6,4]
      param %w: f32[4]
      param %b: f32[4]
      param %wo: f32[3,4]
      param %c: f32[3]
      %s: f32[6,4] = aten.mul.Tensor(%w, %n)
      %y: f32[6,4] = aten.add.Tensor(%s, %b)
      %o: f32[6,3] = aten.linear(%y, %wo, %c)
      return %o
    }""",
        w=SCALE,
        b=SHIFT,
        wo=WO,
        c=BIAS,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %n: f32[6,4]
      param %w: f32[4]
      param %b: f32[4]
      param %wo: f32[3,4]
      param %c: f32[3]
      param %wo_scaled: f32[3,4]
      param %c_shifted: f32[3]
      %o: f32[6,3] = aten.linear(%n, %wo_scaled, %c_shifted)
      return %o
    }""",
        changed=True,
    )
    x = torch.randn(6, 4)
    folded = torch.nn.functional.linear(x, graph.input_named("wo_scaled").data, graph.input_named("c_shifted").data)
    assert torch.allclose(folded, torch.nn.functional.linear(x * SCALE + SHIFT, WO, BIAS), atol=1e-5)


def test_a_shift_alone_and_a_scale_of_one_number():
    before = graph_with_data(
        """
    graph @g {
      input %n: f32[6,4]
      param %b: f32[1,4]
      param %t: f32[]
      param %wo: f32[3,4]
      param %wq: f32[4,4]
      %y: f32[6,4] = aten.add.Tensor(%n, %b)
      %o: f32[6,3] = aten.linear(%y, %wo)
      %z: f32[6,4] = aten.mul.Tensor(%n, %t)
      %p: f32[6,4] = aten.linear(%z, %wq)
      return %o, %p
    }""",
        b=SHIFT.reshape(1, 4),
        t=torch.tensor(0.5),
        wo=WO,
        wq=WQ,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %n: f32[6,4]
      param %b: f32[1,4]
      param %t: f32[]
      param %wo: f32[3,4]
      param %wq: f32[4,4]
      param %wo_shifted: f32[3]
      param %wq_scaled: f32[4,4]
      %o: f32[6,3] = aten.linear(%n, %wo, %wo_shifted)
      %p: f32[6,4] = aten.linear(%n, %wq_scaled)
      return %o, %p
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("wq_scaled").data, WQ * 0.5)
    assert torch.allclose(graph.input_named("wo_shifted").data, WO @ SHIFT, atol=1e-6)


DECLINED = """
    graph @g {{
      input %n: {dtype}[6,4]
      param %w: {dtype}[{scale}]
      {weight}
      %y: {dtype}[6,4] = aten.mul.Tensor(%n, %w)
      %o: {dtype}[6,3] = aten.linear(%y, %wo)
      {extra}
      return %o{outputs}
    }}"""


# an int8 weight dequantized in the graph: computed, not a constant
DEQUANTIZED_WEIGHT = """input %q: i8[3,4]
      %wo: f32[3,4] = quantized_decomposed.dequantize_per_tensor.default(%q) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}"""


def _declined(reason, dtype="f32", scale="4", weight="param %wo: f32[3,4]", extra="", outputs=""):
    text = DECLINED.format(dtype=dtype, scale=scale, weight=weight.replace("f32", dtype), extra=extra, outputs=outputs)
    torch_dtype = torch.float32 if dtype == "f32" else torch.bfloat16
    data = {"w": SCALE[: int(scale.split(",")[-1])].reshape([int(d) for d in scale.split(",")]).to(torch_dtype)}
    if weight.startswith("param"):
        data["wo"] = WO.to(torch_dtype)
    check_declined(
        graph_with_data(text, **data), "fold-scale-shift-into-linears", "fold_scale_shift_into_linears", reason
    )


def test_declined_a_graph_output():
    _declined("graph output", outputs=", %y")


def test_declined_read_by_a_residual_add():
    _declined("read by aten.add.Tensor", extra="%r: f32[6,4] = aten.add.Tensor(%y, %n)", outputs=", %r")


def test_declined_a_dequantized_weight():
    _declined("weight is computed", weight=DEQUANTIZED_WEIGHT)


def test_declined_a_tied_weight():
    _declined("tied weight", extra="%e: f32[3,4] = aten.mul.Tensor(%wo, %wo)", outputs=", %e")


def test_declined_bf16():
    _declined("not an fp32", dtype="bf16")


def test_declined_a_scale_that_broadcasts_the_input():
    text = """
    graph @g {
      input %n: f32[6,1]
      param %w: f32[4]
      param %wo: f32[3,4]
      %y: f32[6,4] = aten.mul.Tensor(%n, %w)
      %o: f32[6,3] = aten.linear(%y, %wo)
      return %o
    }"""
    check_declined(
        graph_with_data(text, w=SCALE, wo=WO),
        "fold-scale-shift-into-linears",
        "fold_scale_shift_into_linears",
        "broadcasts the input",
    )


def test_declined_a_result_used_as_a_weight():
    text = """
    graph @g {
      input %n: f32[3,4]
      param %w: f32[4]
      input %x: f32[6,4]
      %y: f32[3,4] = aten.mul.Tensor(%n, %w)
      %o: f32[6,3] = aten.linear(%x, %y)
      return %o
    }"""
    check_declined(
        graph_with_data(text, w=SCALE),
        "fold-scale-shift-into-linears",
        "fold_scale_shift_into_linears",
        "not only as the input of linears",
    )


# the other way round: a linear's output times one number (attention's q and k scale), through
# views and permutes, or times one number per output feature right after it (a layer scale)


def test_attention_scale_into_the_linear_through_a_view_and_a_permute_result_returned():
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[1,s0,4]
      param %wq: f32[4,4]
      param %c: f32[4]
      param %s: f32[]
      %q: f32[1,s0,4] = aten.linear(%x, %wq, %c)
      %v: f32[1,s0,2,2] = aten.view_copy(%q) {size=[1, -1, 2, 2]}
      %p: f32[1,2,s0,2] = aten.permute_copy(%v) {dims=[0, 2, 1, 3]}
      %m: f32[1,2,s0,2] = aten.mul.Tensor(%p, %s)
      return %m
    }""",
        wq=WQ,
        c=SHIFT,
        s=torch.tensor(0.42),
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: f32[1,s0,4]
      param %wq: f32[4,4]
      param %c: f32[4]
      param %s: f32[]
      param %wq_scaled: f32[4,4]
      param %c_scaled: f32[4]
      %q: f32[1,s0,4] = aten.linear(%x, %wq_scaled, %c_scaled)
      %v: f32[1,s0,2,2] = aten.view_copy(%q) {size=[1, -1, 2, 2]}
      %p: f32[1,2,s0,2] = aten.permute_copy(%v) {dims=[0, 2, 1, 3]}
      return %p
    }""",
        changed=True,
    )
    x = torch.randn(1, 3, 4)
    assert torch.allclose(
        torch.nn.functional.linear(x, graph.input_named("wq_scaled").data, graph.input_named("c_scaled").data),
        torch.nn.functional.linear(x, WQ, SHIFT) * 0.42,
        atol=1e-6,
    )


def test_a_layer_scale_per_feature_right_after_the_linear():
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[6,4]
      param %wo: f32[3,4]
      param %g: f32[3]
      %o: f32[6,3] = aten.linear(%x, %wo)
      %m: f32[6,3] = aten.mul.Tensor(%g, %o)
      %r: f32[6,3] = aten.relu(%m)
      return %r
    }""",
        wo=WO,
        g=BIAS,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: f32[6,4]
      param %wo: f32[3,4]
      param %g: f32[3]
      param %wo_scaled: f32[3,4]
      %o: f32[6,3] = aten.linear(%x, %wo_scaled)
      %r: f32[6,3] = aten.relu(%o)
      return %r
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("wo_scaled").data, WO * BIAS.reshape(3, 1))


PRODUCER = """
    graph @g {{
      input %x: f32[6,4]
      {weight}
      param %s: f32[{scale}]
      %o: f32[6,3] = aten.linear(%x, %wo)
      {between}
      %m: {mtype} = aten.mul.Tensor({read}, %s)
      return %m{outputs}
    }}"""


def _producer_declined(
    reason, weight="param %wo: f32[3,4]", scale="", between="", mtype="f32[6,3]", read="%o", outputs=""
):
    text = PRODUCER.format(weight=weight, scale=scale, between=between, mtype=mtype, read=read, outputs=outputs)
    data = {"s": torch.tensor(0.5) if not scale else BIAS}
    if weight.startswith("param"):
        data["wo"] = WO
    check_declined(
        graph_with_data(text, **data), "fold-scale-shift-into-linears", "fold_scale_into_producing_linear", reason
    )


def test_producer_declined_a_linear_output_read_by_another_op_or_returned():
    _producer_declined("not made by a linear", outputs=", %o")


def test_producer_declined_a_scale_per_feature_after_a_permute():
    _producer_declined(
        "per feature after views",
        scale="3",
        between="%t: f32[1,6,3] = aten.view_copy(%o) {size=[1, 6, 3]}",
        mtype="f32[1,6,3]",
        read="%t",
    )


def test_producer_declined_a_dequantized_weight():
    _producer_declined("not an f32 \\[out, in\\] constant", weight=DEQUANTIZED_WEIGHT)


def test_producer_declined_a_tied_weight():
    _producer_declined("tied weight", between="%e: f32[3,4] = aten.relu(%wo)", outputs=", %e")


def test_producer_chain_with_a_dead_view_an_earlier_rewrite_left():
    # (%d reads the view but nothing reads %d: dead-code-elimination removes it after the fold)
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[6,4]
      param %wq: f32[4,4]
      param %s: f32[]
      %q: f32[6,4] = aten.linear(%x, %wq)
      %v: f32[6,2,2] = aten.view_copy(%q) {size=[6, 2, 2]}
      %d: f32[2,6,2] = aten.permute_copy(%v) {dims=[1, 0, 2]}
      %p: f32[2,2,6] = aten.permute_copy(%v) {dims=[1, 2, 0]}
      %m: f32[2,2,6] = aten.mul.Tensor(%p, %s)
      return %m
    }""",
        wq=WQ,
        s=torch.tensor(0.25),
    )
    check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: f32[6,4]
      param %wq: f32[4,4]
      param %s: f32[]
      param %wq_scaled: f32[4,4]
      %q: f32[6,4] = aten.linear(%x, %wq_scaled)
      %v: f32[6,2,2] = aten.view_copy(%q) {size=[6, 2, 2]}
      %p: f32[2,2,6] = aten.permute_copy(%v) {dims=[1, 2, 0]}
      return %p
    }""",
        changed=True,
    )


# ------------------------------------------------------------------ a shift after a linear into its bias


def test_rmsnorm_eps_into_the_mean_linear_as_its_bias_symbolic_rows():
    row, eps = torch.full((1, 4), 0.25), torch.tensor(1e-6)
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[1,s0,4]
      param %row: f32[1,4]
      param %eps: f32[]
      %sq: f32[1,s0,4] = aten.mul.Tensor(%x, %x)
      %m: f32[1,s0,1] = aten.linear(%sq, %row)
      %a: f32[1,s0,1] = aten.add.Tensor(%m, %eps)
      %r: f32[1,s0,1] = aten.rsqrt(%a)
      %y: f32[1,s0,4] = aten.mul.Tensor(%x, %r)
      return %y
    }""",
        row=row,
        eps=eps,
    )
    graph = check_pipeline(
        before,
        SHIFTS,
        """
    graph @g {
      input %x: f32[1,s0,4]
      param %row: f32[1,4]
      param %eps: f32[]
      param %row_bias: f32[1]
      %sq: f32[1,s0,4] = aten.mul.Tensor(%x, %x)
      %m: f32[1,s0,1] = aten.linear(%sq, %row, %row_bias)
      %r: f32[1,s0,1] = aten.rsqrt(%m)
      %y: f32[1,s0,4] = aten.mul.Tensor(%x, %r)
      return %y
    }""",
        changed=True,
    )
    x = torch.randn(1, 5, 4)
    assert torch.allclose(
        torch.nn.functional.linear(x * x, row, graph.input_named("row_bias").data),
        torch.nn.functional.linear(x * x, row) + eps,
        rtol=1e-6,
        atol=1e-7,
    )


def test_a_shift_per_feature_into_an_existing_bias_the_sum_returned_the_weight_shared():
    # (the sum is a graph output: the linear's result takes its place; %wo is read by two linears,
    # which is fine: only the bias changes)
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[6,4]
      param %wo: f32[3,4]
      param %c: f32[3]
      param %s: f32[3]
      %o: f32[6,3] = aten.linear(%x, %wo, %c)
      %a: f32[6,3] = aten.add.Tensor(%s, %o)
      %p: f32[6,3] = aten.linear(%x, %wo)
      return %a, %p
    }""",
        wo=WO,
        c=BIAS,
        s=SHIFT[:3],
    )
    graph = check_pipeline(
        before,
        SHIFTS,
        """
    graph @g {
      input %x: f32[6,4]
      param %wo: f32[3,4]
      param %c: f32[3]
      param %s: f32[3]
      param %c_shifted: f32[3]
      %o: f32[6,3] = aten.linear(%x, %wo, %c_shifted)
      %p: f32[6,3] = aten.linear(%x, %wo)
      return %o, %p
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("c_shifted").data, BIAS + SHIFT[:3])


SHIFTED = """
    graph @g {{
      input %x: f32[6,4]
      {weight}
      param %s: {stype}
      %o: {otype} = aten.linear(%x, %wo{bias})
      {between}
      %a: {atype} = aten.add.Tensor(%o, %s){alpha}
      return %a{outputs}
    }}"""


def _shift_declined(
    reason,
    weight="param %wo: f32[3,4]",
    stype="f32[]",
    otype="f32[6,3]",
    atype="f32[6,3]",
    bias="",
    between="",
    alpha="",
    outputs="",
    **data,
):
    text = SHIFTED.format(
        weight=weight, stype=stype, otype=otype, atype=atype, bias=bias, between=between, alpha=alpha, outputs=outputs
    )
    data.setdefault("s", torch.tensor(0.5))
    if weight.startswith("param"):
        data["wo"] = WO
    check_declined(
        graph_with_data(text, **data),
        "fold-scale-shift-into-linears{bias_shifts=true}",
        "fold_shift_into_producing_linear",
        reason,
    )


def test_shift_declined_a_linear_output_also_returned_or_read_by_another_op():
    _shift_declined("not made by a linear that nothing else reads", outputs=", %o")
    _shift_declined(
        "not made by a linear that nothing else reads", between="%t: f32[6,3] = aten.tanh(%o)", outputs=", %t"
    )


def test_shift_declined_a_dequantized_weight():
    _shift_declined("not an f32 \\[out, in\\] constant", weight=DEQUANTIZED_WEIGHT)


def test_shift_declined_a_shift_that_broadcasts_the_linear_output():
    _shift_declined("broadcasts", stype="f32[2,1,3]", atype="f32[2,6,3]", s=torch.randn(2, 1, 3))


def test_shift_declined_a_bias_another_linear_reads():
    _shift_declined(
        "bias is not an f32 constant of its own",
        bias=", %c",
        weight="param %wo: f32[3,4]\n      param %c: f32[3]",
        between="%p: f32[6,3] = aten.linear(%x, %wo, %c)",
        outputs=", %p",
        c=BIAS,
    )


def test_shift_declined_bf16_and_alpha():
    text = SHIFTED.format(
        weight="param %wo: bf16[3,4]",
        stype="bf16[]",
        otype="bf16[6,3]",
        atype="bf16[6,3]",
        bias="",
        between="",
        alpha="",
        outputs="",
    ).replace("input %x: f32[6,4]", "input %x: bf16[6,4]")
    check_declined(
        graph_with_data(text, wo=WO.bfloat16(), s=torch.tensor(0.5, dtype=torch.bfloat16)),
        "fold-scale-shift-into-linears{bias_shifts=true}",
        "fold_shift_into_producing_linear",
        "not an fp32 tensor sum",
    )
    _shift_declined("an add with alpha", alpha=" {alpha=2}")


def test_the_shift_stays_by_default_and_with_bias_shifts_false():
    text = SHIFTED.format(
        weight="param %wo: f32[3,4]",
        stype="f32[]",
        otype="f32[6,3]",
        atype="f32[6,3]",
        bias="",
        between="",
        alpha="",
        outputs="",
    )
    before = graph_with_data(text, wo=WO, s=torch.tensor(0.5))
    for pipeline in ("fold-scale-shift-into-linears", "fold-scale-shift-into-linears{bias_shifts=false}"):
        check_pipeline(before, pipeline, text, changed=False)
