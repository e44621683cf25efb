"""capability's named checks (lowering.capability.checks.TABLES): one IR-text program per check,
in which analyse() rejects the node with that check and its reason; and, where one is given, a
near-identical program in which the check does not fire. A few checks a program cannot reach
through analyse() (what the unit builders recognise never trips them) are asked directly."""

from __future__ import annotations

import attrs
import pytest
import torch

from lowering.capability import Options, analyse, check_names
from lowering.capability.base import first_failure
from lowering.capability.checks import (
    DECOMPOSED_LINEAR_CHECKS,
    FLOAT_CHECKS,
    STATIC_CHECKS,
    WEIGHT_ONLY_LINEAR_CHECKS,
    FloatSubject,
    StaticPattern,
    WeightOnlySubject,
)
from lowering.capability.linears import DecomposedLinear
from lowering.rules import FP32, STATIC, SYMBOLIC_SLICE
from xir import parse_graph

Q = "scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8"
Q2 = "scale=0.2, zero_point=0, quant_min=-128, quant_max=127, dtype=i8"
QW = "scale=0.05, zero_point=0, quant_min=-127, quant_max=127, dtype=i8"
QP = "quant_min=-128, quant_max=127, dtype=i8"
PER_CHANNEL = "quant_min=-127, quant_max=127, dtype=i8"
INT4 = "quant_min=-8, quant_max=7, dtype=i8"
CONV2D = "stride=[1,1], padding=[0,0], dilation=[1,1], output_padding=[0,0]"
CONV1D = "stride=[1], padding=[0], dilation=[1], transposed=false, output_padding=[0], groups=1"
BN = "momentum=0.1, eps=1e-05"
BF16 = Options(enable_bf16=True)


@attrs.frozen
class Case:
    text: str  # the program's body (inputs and nodes); the last node's result is returned
    node: int = -1  # the position of the node the check rejects
    options: Options = attrs.field(factory=Options)
    passes: str | None = None  # a near-identical body where the check does not fire
    passes_options: Options | None = None  # (the options for it, where they are what differs)
    returns: str = ""  # what the program returns besides the last node's result
    data: dict = attrs.field(factory=dict)  # constant name -> its data (where a check reads it)
    passes_data: dict = attrs.field(factory=dict)


def graph_of(body: str, returns: str = ""):
    last = [line.split(":")[0].strip() for line in body.strip().splitlines() if line.strip().startswith("%")][-1]
    outputs = ", ".join(filter(None, [last.split(",")[0], returns]))
    return parse_graph(f"graph @g {{\n{body.strip()}\n  return {outputs}\n}}\n")


def static(op_line: str, inputs: str = "input %x: f32[2,8]", after: str = "") -> str:
    """dequantize -> op -> quantize around ``op_line`` (reading %d, writing %y)."""
    return f"""{inputs}
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  {op_line}
  %o: i8[2,8] = quantized_decomposed.quantize_per_tensor(%y) {{{after or Q}}}"""


def dynamic_linear(weight: str, x: str = "f32[2,8]", out: str = "f32[2,4]", op: str = "aten.linear(%d, %w2)") -> str:
    """choose_qparams -> quantize -> dequantize -> ``op`` (a linear reading %d and the weight %w2)."""
    return f"""input %x: {x}
  {weight}
  %s: f64[1], %z: i64[1] = quantized_decomposed.choose_qparams.tensor(%x) {{{QP}, eps=1e-05}}
  %q: i8{x[3:]} = quantized_decomposed.quantize_per_tensor.tensor(%x, %s, %z) {{{QP}}}
  %d: {x} = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {{{QP}}}
  %y: {out} = {op}"""


PER_CHANNEL_WEIGHT = f"""param %w: i8[4,8]
  param %ws: f32[4]
  param %wz: i64[4]
  %w2: f32[4,8] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {PER_CHANNEL}}}"""


def affine_dynamic(
    op_line: str = "%y: f32[2,4] = aten.linear(%d, %w2)",
    block: str = "[1,8]",
    dtype: str = "i8",
    weight: str | None = None,
) -> str:
    """torchao's per-token activation quantization into ``op_line`` (weight %w2: int8 per channel)."""
    weight = weight or affine_weight()
    return f"""input %x: f32[2,8]
  {weight}
  %s: f32[2,1], %z: i8[2,1] = torchao.choose_qparams_affine(%x) {{block_size={block}, target_dtype={dtype}}}
  %q: i8[2,8] = torchao.quantize_affine(%x, %s, %z) {{block_size={block}, output_dtype={dtype}}}
  %d: f32[2,8] = torchao.dequantize_affine(%q, %s, %z) {{block_size={block}, input_dtype={dtype}}}
  {op_line}"""


def affine_weight(
    shape: str = "[4,8]",
    scale: str = "[4,1]",
    block: str = "[1,8]",
    qrange: str = "-127, 127",
    data: str = "i8",
    scale_kind: str = "param",
    zero_point: bool = True,
) -> str:
    zp = ", %wz" if zero_point else ""
    return f"""param %w: {data}{shape}
  {scale_kind} %ws: f32{scale}
  param %wz: i8{scale}
  %w2: f32{shape} = torchao.dequantize_affine(%w, %ws{zp}) {{block_size={block}, input_dtype=i8, quant_min={qrange.split(", ")[0]}, quant_max={qrange.split(", ")[1]}}}"""


def weight_only(weight: str | None = None, x: str = "f32[2,8]", bias: str = "") -> str:
    return f"""input %x: {x}
  {weight or affine_weight()}{chr(10) + "  param %b: f32[4]" if bias else ""}
  %y: {x[:3]}[2,4] = aten.linear(%x, %w2{", %b" if bias else ""})"""


def per_channel_weight(axis: int = 0) -> str:
    return f"""param %w: i8[4,8]
  param %ws: f32[4]
  param %wz: i64[4]
  %w2: f32[4,8] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis={axis}, quant_min=-128, quant_max=127, dtype=i8}}"""


WO = "int8 weight-only linear: "

CASES: dict[str, Case] = {
    # ---------------------------------------------------------------- tensor and float checks
    "rank": Case(
        "input %x: f32[1,1,1,1,1,2,3]\n  %y: f32[1,1,1,1,1,2,3] = aten.relu(%x)",
        passes="input %x: f32[1,1,1,1,2,3]\n  %y: f32[1,1,1,1,2,3] = aten.relu(%x)",
    ),
    "bf16-disabled": Case(
        "input %x: bf16[2,3]\n  %y: bf16[2,3] = aten.relu(%x)",
        passes="input %x: f32[2,3]\n  %y: f32[2,3] = aten.relu(%x)",
    ),
    "bf16-not-supported": Case(
        "input %x: bf16[2,3]\n  %y: bf16[2,3] = aten._softmax(%x) {dim=1, half_to_float=false}", options=BF16
    ),
    "dtype-not-allowed": Case("input %x: i32[2,3]\n  %y: i32[2,3] = aten.relu(%x)"),
    "mixed-operand-dtypes": Case(
        "input %x: f32[2,3]\n  input %h: f16[2,3]\n  %y: f32[2,3] = aten.add.Tensor(%x, %h)",
        passes="input %x: f32[2,3]\n  input %h: f32[2,3]\n  %y: f32[2,3] = aten.add.Tensor(%x, %h)",
    ),
    "empty-tensor": Case("input %x: f32[0,3]\n  %y: f32[0,3] = aten.relu(%x)"),
    "opaque-op": Case("input %x: f32[2,3]\n  %y: f32[2,3] = custom.thing(%x)"),
    "no-rule": Case("input %x: f32[2,3]\n  %y: f32[2,3] = aten.erf(%x)"),
    "fp32-not-configured": Case(
        "input %x: f32[2,3]\n  %y: f32[2,3] = aten.relu(%x)", options=Options(precisions=frozenset({STATIC}))
    ),
    "non-tensor-operand": Case(
        "input %x: f32[2,3]\n  %n: int = aten.sym_size.int(%x) {dim=0}\n"
        "  %y: f32[2,s1] = aten.constant_pad_nd(%x) {pad=[%n, 0]}"
    ),
    # a view whose new shape is computed at run time, with two symbolic dims (one xir's
    # shape-ops-as-views writes as -1); the same view with its size written as integers passes
    "symbolic-size-operand": Case(
        "input %x: f32[s0,s1,8]\n  %n: int = aten.sym_size.int(%x) {dim=0}\n"
        "  %m: int = aten.sym_size.int(%x) {dim=1}\n"
        "  %y: f32[s0,s1,2,4] = aten.view_copy(%x) {size=[%n, %m, 2, 4]}",
        passes="input %x: f32[s0,8]\n  %y: f32[s0,2,4] = aten.view_copy(%x) {size=[-1, 2, 4]}",
    ),
    "structural-constraint": Case(
        "input %x: f32[1,2,4,4]\n  %y: f32[1,2,4,1], %i: i64[1,2,4,1] = aten.max.dim(%x) {dim=3, keepdim=true}",
        returns="%i",
    ),
    "reads-dequantized": Case(
        f"""input %x: f32[2,8]
  input %f: f32[2,8]
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %y: f32[2,8] = aten.add.Tensor(%d, %f)""",
        returns="%d",
    ),
    "op-constraint": Case(
        "input %x: f32[2,3]\n  input %h: f32[2,3]\n  %y: f32[2,3] = aten.add.Tensor(%x, %h) {alpha=2}",
        passes="input %x: f32[2,3]\n  input %h: f32[2,3]\n  %y: f32[2,3] = aten.add.Tensor(%x, %h)",
    ),
    # ---------------------------------------------------------------------------- batch norm
    "batch-norm-stats-used": Case(
        f"""input %x: f32[2,4,5]
  param %m: f32[4]
  %y: f32[2,4,5], %mean: f32[0], %var: f32[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}""",
        returns="%mean",
    ),
    "batch-norm-after-nd-linear": Case(f"""input %x: f32[2,4,8]
  param %w: f32[5,8]
  param %m: f32[4]
  %l: f32[2,4,5] = aten.linear(%x, %w)
  %y: f32[2,4,5], %mean: f32[0], %var: f32[0] = aten._native_batch_norm_legit_no_training(%l, %m, %m, %m, %m) {{{BN}}}"""),
    "batch-norm-bf16-disabled": Case(f"""input %x: bf16[2,4,5]
  param %m: bf16[4]
  %y: bf16[2,4,5], %mean: bf16[0], %var: bf16[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}"""),
    "batch-norm-bf16-unfolded": Case(
        f"""input %x: bf16[2,4,5]
  param %m: bf16[4]
  %y: bf16[2,4,5], %mean: bf16[0], %var: bf16[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}""",
        options=BF16,
    ),
    "batch-norm-not-decomposable": Case(f"""input %x: f32[2,4,5,6,7]
  param %m: f32[4]
  %y: f32[2,4,5,6,7], %mean: f32[0], %var: f32[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}"""),
    "batch-norm-stats-not-constant": Case(
        f"""input %x: f32[2,4,5]
  input %m: f32[4]
  %y: f32[2,4,5], %mean: f32[0], %var: f32[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}""",
        passes=f"""input %x: f32[2,4,5]
  param %m: f32[4]
  %y: f32[2,4,5], %mean: f32[0], %var: f32[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {{{BN}}}""",
    ),
    # ------------------------------------------------------------------------ static patterns
    "affine-weight-in-static-pattern": Case(f"""input %x: f32[2,8]
  {affine_weight()}
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %y: f32[2,4] = aten.linear(%d, %w2)"""),
    "one-side-quantized": Case(f"""input %x: f32[2,8]
  param %w: i8[4,8]
  %w2: f32[4,8] = quantized_decomposed.dequantize_per_tensor(%w) {{{QW}}}
  %y: f32[2,4] = aten.linear(%x, %w2)"""),
    "output-not-quantized": Case(static("%y: f32[2,8] = aten.relu(%d)").rsplit("\n", 1)[0], returns="%d"),
    "static-not-configured": Case(
        static("%y: f32[2,8] = aten.relu(%d)"), node=-2, options=Options(precisions=frozenset({FP32}))
    ),
    "no-static-version": Case(static("%y: f32[2,8] = aten.tanh(%d)"), node=-2, returns="%d"),
    "requantizing-op": Case(
        static("%y: f32[2,8] = aten.view_copy(%d) {size=[2,8]}", after=Q2),
        node=-2,
        returns="%d",
        passes=static("%y: f32[2,8] = aten.view_copy(%d) {size=[2,8]}"),
    ),
    "transposed-conv-per-channel-groups": Case(
        f"""input %x: f32[1,4,4,4]
  param %w: i8[4,1,1,1]
  param %ws: f32[1]
  param %wz: i64[1]
  %q: i8[1,4,4,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[1,4,4,4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %w2: f32[4,1,1,1] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=1, {PER_CHANNEL}}}
  %y: f32[1,4,4,4] = aten.convolution(%d, %w2) {{{CONV2D}, transposed=true, groups=4}}
  %o: i8[1,4,4,4] = quantized_decomposed.quantize_per_tensor(%y) {{{Q}}}""",
        node=-2,
    ),
    "transposed-conv-per-channel-axis": Case(
        f"""input %x: f32[1,4,4,4]
  param %w: i8[4,2,1,1]
  param %ws: f32[4]
  param %wz: i64[4]
  %q: i8[1,4,4,4] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[1,4,4,4] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %w2: f32[4,2,1,1] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {PER_CHANNEL}}}
  %y: f32[1,2,4,4] = aten.convolution(%d, %w2) {{{CONV2D}, transposed=true, groups=1}}
  %o: i8[1,2,4,4] = quantized_decomposed.quantize_per_tensor(%y) {{{Q}}}""",
        node=-2,
    ),
    "int4-odd-input-channels": Case(
        f"""input %x: f32[2,5]
  param %w: i8[4,5]
  param %ws: f32[4]
  param %wz: i64[4]
  %q: i8[2,5] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,5] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %w2: f32[4,5] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {INT4}}}
  %y: f32[2,4] = aten.linear(%d, %w2)
  %o: i8[2,4] = quantized_decomposed.quantize_per_tensor(%y) {{{Q}}}""",
        node=-2,
    ),
    "quantized-input-rank": Case(
        f"""input %x: f32[2,8]
  param %w: i8[1,1,1,1,1,4,8]
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %w1: f32[1,1,1,1,1,4,8] = quantized_decomposed.dequantize_per_tensor(%w) {{{QW}}}
  %w2: f32[4,8] = aten.view_copy(%w1) {{size=[4,8]}}
  %y: f32[2,4] = aten.linear(%d, %w2)
  %o: i8[2,4] = quantized_decomposed.quantize_per_tensor(%y) {{{Q}}}""",
        node=-2,
    ),
    # ----------------------------------------------------------------------- dynamic patterns
    "dynamic-dequantize-without-quantize": Case(f"""input %x: i8[2,8]
  input %s: f64[1]
  input %z: i64[1]
  {PER_CHANNEL_WEIGHT}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor.tensor(%x, %s, %z) {{{QP}}}
  %y: f32[2,4] = aten.linear(%d, %w2)"""),
    "dynamic-quantize-without-choose-qparams": Case(f"""input %x: f32[2,8]
  input %s: f64[1]
  input %z: i64[1]
  {PER_CHANNEL_WEIGHT}
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor.tensor(%x, %s, %z) {{{QP}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor.tensor(%q, %s, %z) {{{QP}}}
  %y: f32[2,4] = aten.linear(%d, %w2)"""),
    "dynamic-not-configured": Case(
        dynamic_linear(PER_CHANNEL_WEIGHT),
        options=Options(precisions=frozenset({STATIC})),
        passes=dynamic_linear(PER_CHANNEL_WEIGHT),
        passes_options=Options(),
    ),
    "dynamic-weight-not-quantized-constant": Case(dynamic_linear("param %w2: f32[4,8]")),
    "dynamic-per-tensor-weight": Case(
        dynamic_linear(f"""param %w: i8[4,8]
  %w2: f32[4,8] = quantized_decomposed.dequantize_per_tensor(%w) {{{QW}}}""")
    ),
    "int4-odd-input-channels-unrunnable": Case(
        dynamic_linear(PER_CHANNEL_WEIGHT.replace("8]", "5]").replace(PER_CHANNEL, INT4), x="f16[2,5]")
    ),
    "dynamic-conv-not-2d": Case(
        dynamic_linear(
            f"""param %w: i8[4,8,1]
  param %ws: f32[4]
  param %wz: i64[4]
  %w2: f32[4,8,1] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {PER_CHANNEL}}}""",
            x="f32[1,8,5]",
            out="f32[1,4,5]",
            op=f"aten.convolution(%d, %w2) {{{CONV1D}}}",
        )
    ),
    "dynamic-conv-depthwise": Case(
        dynamic_linear(
            f"""param %w: i8[4,1,1,1]
  param %ws: f32[4]
  param %wz: i64[4]
  %w2: f32[4,1,1,1] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {PER_CHANNEL}}}""",
            x="f32[1,4,3,3]",
            out="f32[1,4,3,3]",
            op=f"aten.convolution(%d, %w2) {{{CONV2D}, transposed=false, groups=4}}",
        )
    ),
    # ------------------------------------------------------------ torchao affine quantization
    "affine-activation-not-per-token": Case(affine_dynamic(block="[2,8]"), passes=affine_dynamic()),
    "affine-activation-not-int8": Case(affine_dynamic(dtype="u8")),
    "affine-outside-linear": Case(affine_dynamic(f"%y: f32[2,4] = aten.convolution(%d, %w2) {{{CONV1D}}}")),
    "affine-activation-decomposed-weight": Case(affine_dynamic(weight=PER_CHANNEL_WEIGHT)),
    "affine-weight-no-zero-point": Case(weight_only(affine_weight(zero_point=False))),
    "affine-weight-qparams-not-constant": Case(weight_only(affine_weight(scale_kind="input"))),
    "affine-weight-not-2d": Case(weight_only(affine_weight(shape="[1,4,8]"))),
    "affine-weight-block-size": Case(weight_only(affine_weight(block="[2,8]"))),
    "affine-weight-groups-do-not-tile": Case(weight_only(affine_weight(block="[1,3]"))),
    "affine-weight-not-int8-data": Case(weight_only(affine_weight(data="i32"))),
    "int4-weight-group-size": Case(weight_only(affine_weight(scale="[4,2]", block="[1,4]", qrange="-8, 7"))),
    "int8-weight-grouped": Case(weight_only(affine_weight(scale="[4,2]", block="[1,4]"))),
    "affine-weight-range": Case(weight_only(affine_weight(qrange="0, 255"))),
    "affine-weight-zero-points": Case(
        weight_only(),
        passes=weight_only(),
        data={"wz": torch.ones(4, 1, dtype=torch.int8)},
        passes_data={"wz": torch.zeros(4, 1, dtype=torch.int8)},
    ),
    # --------------------------------------------------------------------- weight-only linears
    "weight-only-int4-or-grouped": Case(
        weight_only(affine_weight(shape="[4,64]", scale="[4,2]", block="[1,32]", qrange="-8, 7"))
    ),
    "weight-only-input-dtype": Case(weight_only(x="f16[2,8]")),
    # ExecuTorch's qmode int8, as xnnpack.weight-only-int8-linear writes it: a per-channel dequantize
    "weight-only-per-channel-weight": Case(
        weight_only(per_channel_weight(axis=1)), passes=weight_only(per_channel_weight())
    ),
    "weight-only-bias": Case(
        weight_only(bias="yes"),
        passes=weight_only(bias="yes"),
        passes_options=Options(rewrites=frozenset({"xnnpack.weight-only-linear-bias"})),
    ),
    # ------------------------------------------------------------------------- conversions
    "not-a-conversion": Case(f"""input %w: i8[4,8]
  input %ws: f32[4]
  input %wz: i64[4]
  %y: f32[4,8] = quantized_decomposed.dequantize_per_channel(%w, %ws, %wz) {{axis=0, {PER_CHANNEL}}}"""),
    "conversion-dtype": Case(
        "input %x: f32[2,8]\n  %y: i16[2,8] = quantized_decomposed.quantize_per_tensor(%x) "
        "{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i16}"
    ),
    "conversion-float-side": Case(
        f"input %x: f16[2,8]\n  %y: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}",
        passes=f"input %x: f32[2,8]\n  %y: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}",
    ),
    "quantizes-float-conv1d": Case(f"""input %x: f32[1,2,8]
  param %w: f32[2,2,3]
  %c: f32[1,2,6] = aten.convolution(%x, %w) {{{CONV1D}}}
  %y: i8[1,2,6] = quantized_decomposed.quantize_per_tensor(%c) {{{Q}}}"""),
}


def nodes_of(text: str, returns: str = "", data: dict | None = None) -> list:
    graph = graph_of(text, returns)
    for name, value in (data or {}).items():
        graph.input_named(name).data = value
    return graph, [n for n in graph if not n.is_return]


def verdict_of(case: Case, text: str, data: dict, options: Options | None = None):
    graph, nodes = nodes_of(text, case.returns, data)
    return analyse(graph, options or case.options).verdict(nodes[case.node])


# Checks no program reaches through analyse(): what the builders recognise never trips them
# (a quantize is never analysed as a float op; a pad is taken into a quantized conv only when its
# own rule holds; a decomposed linear needs FX source partitions; weight_only_unit is built only for
# a linear reading torchao's dequantize and no dequantized input). Each: the table, the subject.


def _quantized_only():
    _, nodes = nodes_of(f"input %x: f32[2,8]\n  %y: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}")
    return FLOAT_CHECKS, FloatSubject(nodes[0], Options())


def _pad_constraint():
    _, nodes = nodes_of(static("%p: f32[2,9] = aten.constant_pad_nd(%d) {pad=[-1,2]}\n  %y: f32[2,9] = aten.relu(%p)"))
    _, d, pad, relu, out = nodes
    return STATIC_CHECKS, StaticPattern(relu, Options(), None, pad, (d,), (), (pad, relu), out)


def _decomposed_linear_dequantized_input():
    _, nodes = nodes_of(f"""input %x: f32[2,3,8]
  param %w: f32[4,8]
  %q: i8[2,3,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,3,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %v: f32[6,8] = aten.view_copy(%d) {{size=[6,8]}}
  %t: f32[8,4] = aten.permute_copy(%w) {{dims=[1,0]}}
  %m: f32[6,4] = aten.mm(%v, %t)
  %y: f32[2,3,4] = aten.view_copy(%m) {{size=[2,3,4]}}""")
    _, d, view, t, mm, out = nodes
    linear = DecomposedLinear(mm, d.results[0], out.results[0], (view, out), (), t)
    return DECOMPOSED_LINEAR_CHECKS, linear


def _weight_only_not_quantized_linear():
    _, nodes = nodes_of("input %x: f32[2,8]\n  param %w: f32[4,8]\n  %y: f32[2,4] = aten.linear(%x, %w)")
    return WEIGHT_ONLY_LINEAR_CHECKS, WeightOnlySubject(nodes[0], Options())


def _weight_only_quantized_input():
    _, nodes = nodes_of(f"""input %x: f32[2,8]
  {affine_weight()}
  %q: i8[2,8] = quantized_decomposed.quantize_per_tensor(%x) {{{Q}}}
  %d: f32[2,8] = quantized_decomposed.dequantize_per_tensor(%q) {{{Q}}}
  %y: f32[2,4] = aten.linear(%d, %w2)""")
    return WEIGHT_ONLY_LINEAR_CHECKS, WeightOnlySubject(nodes[-1], Options())


DIRECT = {  # name -> what builds the table and the subject
    "quantized-only": _quantized_only,
    "pad-constraint": _pad_constraint,
    "decomposed-linear-dequantized-input": _decomposed_linear_dequantized_input,
    "weight-only-not-quantized-linear": _weight_only_not_quantized_linear,
    "weight-only-quantized-input": _weight_only_quantized_input,
}


@pytest.mark.parametrize("name", check_names())
def test_every_check_has_a_case(name):
    assert (name in CASES) != (name in DIRECT)


def test_no_case_without_a_check():
    assert set(CASES) | set(DIRECT) <= set(check_names())


@pytest.mark.parametrize("name", list(CASES))
def test_the_check_rejects_its_case(name):
    case = CASES[name]
    verdict = verdict_of(case, case.text, case.data)
    assert not verdict.supported
    assert (verdict.check, verdict.reason) == (name, REASONS[name])


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.passes is not None])
def test_the_check_does_not_fire_on_the_near_identical_program(name):
    case = CASES[name]
    assert verdict_of(case, case.passes, case.passes_data, case.passes_options).check != name


@pytest.mark.parametrize("name", list(DIRECT))
def test_the_check_rejects_its_subject(name):
    check, reason = first_failure(*DIRECT[name]())
    assert (check.name, reason) == (name, REASONS[name])


# the reason each check gives in its program (the text of the verdict, as the HTML report shows it)
REASONS = {
    "rank": "7-D input f32[1,1,1,1,1,2,3] (XNNPACK takes at most 6-D tensors)",
    "bf16-disabled": "bf16 (pass enable_bf16=True to delegate bf16 ops)",
    "bf16-not-supported": "XNNPACK cannot define it with bf16 tensors (the runtime rejects it at load)",
    "dtype-not-allowed": "dtype i32 (XNNPACK runs f32, f16 and bf16 float ops)",
    "mixed-operand-dtypes": "mixed operand dtypes f16, f32",
    "empty-tensor": "an empty tensor",
    "opaque-op": "opaque op: xir has no definition for it (xir.ops), so it is never delegated",
    "no-rule": "XNNPACK has no rule for this op",
    "fp32-not-configured": "fp32 is not among config_precisions",
    "non-tensor-operand": "a non-tensor operand of type int (e.g. a symbolic size)",
    "symbolic-size-operand": "the new shape has 2 symbolic sizes: ExecuTorch's XNNPACK serializer writes a reshape's sizes as integers, with at most one inferred (-1)",
    "structural-constraint": "its indices are used (XNNPACK would need an argmax pooling, which stock keeps outside too)",
    "reads-dequantized": "reads a dequantized tensor but is not a quantized pattern XNNPACK runs (e.g. a quantized op whose output is not quantized)",
    "op-constraint": "alpha=2 (XNNPACK adds/subtracts with alpha 1 only)",
    "batch-norm-stats-used": "its mean/var outputs are used",
    "batch-norm-after-nd-linear": "follows a linear with a 3-D output, whose channels are its last dim, not the normalized dim 1: XNNPACK 1.5.1 would fold it into the linear along that dim; xir's transform pass fold-batch-norm rewrites it as a multiply-add",
    "batch-norm-bf16-disabled": "bf16 (pass enable_bf16=True to delegate bf16 ops)",
    "batch-norm-bf16-unfolded": "in bf16 a batch norm runs in XNNPACK only when it folds into a conv or linear (its input is not the output of a conv or linear)",
    "batch-norm-not-decomposable": "does not fold and cannot be decomposed (5-D input)",
    "batch-norm-stats-not-constant": "its statistics are not constants",
    "affine-weight-in-static-pattern": "a torchao-quantized weight, but not read by a linear whose input is torchao's per-token dynamic quantization (a linear that to_edge decomposed, its quantize/dequantize ops inside the pattern: ExecuTorch's XNNPACK preprocessing would rebuild the linear from the raw int8 weight; keep it whole with to_edge_transform_and_lower)",
    "one-side-quantized": "only one of input and weight is quantized",
    "output-not-quantized": "its inputs are quantized but its output is not: XNNPACK has no quantized relu with a float output, so it stays outside with its Q/DQ",
    "static-not-configured": "static quantization is not among config_precisions",
    "no-static-version": "XNNPACK has no statically quantized version of this op",
    "requantizing-op": "its input and output are quantized differently (XNNPACK's quantized view_copy keeps the quantization parameters)",
    "transposed-conv-per-channel-groups": "per-channel quantized transposed conv with groups=4 (XNNPACK rejects it)",
    "transposed-conv-per-channel-axis": "per-channel quantized transposed conv quantized along axis 0, not the output-channel axis 1",
    "int4-odd-input-channels": "int4 weight (range [-8, 7]) per output channel with an odd number of input channels (5): XNNPACK 1.5.1 computes every row but the first of a 2- to 15-row input wrong",
    "quantized-input-rank": "7-D quantized input",
    "dynamic-dequantize-without-quantize": "dynamic dequantize without its quantize",
    "dynamic-quantize-without-choose-qparams": "dynamic quantize without choose_qparams",
    "dynamic-not-configured": "dynamic quantization is not among config_precisions",
    "dynamic-weight-not-quantized-constant": "dynamically quantized input but the weight is not a quantized constant",
    "dynamic-per-tensor-weight": "dynamic quantization with a per-tensor weight (XNNPACK needs per-channel)",
    "int4-odd-input-channels-unrunnable": "int4 weight (range [-8, 7]) per output channel with an odd number of input channels (5): XNNPACK 1.5.1 computes every row but the first of a 2- to 15-row input wrong; and outside XNNPACK it cannot run either: ExecuTorch's choose_qparams kernel takes an fp32 input, this one is f16",
    "dynamic-conv-not-2d": "a dynamically quantized conv must be 2-D",
    "dynamic-conv-depthwise": "a dynamically quantized conv cannot be depthwise",
    "affine-activation-not-per-token": "activation quantized in blocks of [2, 8], not per token ([1, 8]): XNNPACK quantizes each row of the input",
    "affine-activation-not-int8": "activation quantized to u8 (XNNPACK quantizes it to int8)",
    "affine-outside-linear": "torchao's affine quantization runs in XNNPACK in a linear only",
    "affine-activation-decomposed-weight": "a torchao per-token activation with a quantized_decomposed weight",
    "affine-weight-no-zero-point": "int8 weight-only linear: the weight's dequantize has no zero-point tensor (ExecuTorch's XNNPACK lowering reads one)",
    "affine-weight-qparams-not-constant": "int8 weight-only linear: the weight's scales and zero points are not constants",
    "affine-weight-not-2d": "int8 weight-only linear: a 3-D weight (XNNPACK's quantized linear takes a 2-D one)",
    "affine-weight-block-size": "int8 weight-only linear: weight quantized in blocks of [2, 8] (XNNPACK quantizes per output channel or per group of input channels)",
    "affine-weight-groups-do-not-tile": "int8 weight-only linear: weight groups of 3 do not tile its 8 input channels with one scale each",
    "affine-weight-not-int8-data": "int8 weight-only linear: weight stored as i32 (XNNPACK takes int8 data)",
    "int4-weight-group-size": "int8 weight-only linear: Delegation to XNNPACK requires group_size to be a multiple of 32, but got 4 (the int4 weight is quantized in groups of 4 input channels)",
    "int8-weight-grouped": "int8 weight-only linear: int8 weight in groups of 4 input channels (XNNPACK groups int4 weights only)",
    "affine-weight-range": "int8 weight-only linear: weight range [0, 255] (XNNPACK takes int4 [-8, 7] or int8 weights)",
    "affine-weight-zero-points": "int8 weight-only linear: weight zero points other than 0 (XNNPACK's quantized weights are symmetric: it would ignore them)",
    "weight-only-int4-or-grouped": "int8 weight-only linear: an int4 or group-wise weight (XNNPACK runs weight-only quantization with int8 weights per output channel)",
    "weight-only-input-dtype": "int8 weight-only linear: a f16 input (XNNPACK's fully connected with an int8 weight takes fp32)",
    "weight-only-per-channel-weight": "int8 weight-only linear: a weight quantized along axis 1, not its output channels (axis 0)",
    "weight-only-bias": "int8 weight-only linear: a bias (ExecuTorch's XNNPACK serializer cannot take an fp32 bias with a quantized weight; xir's transform pass xnnpack.weight-only-linear-bias adds it after the linear: run transform_passes())",
    "not-a-conversion": "runs in XNNPACK only folded into a quantized op",
    "conversion-dtype": "quantized dtype i16 (XNNPACK converts int8/uint8)",
    "conversion-float-side": "f16 float side (XNNPACK converts f32)",
    "quantizes-float-conv1d": "it quantizes the result of an fp32 1-D conv: in a delegate with that conv, XNNPACK's preprocessing (Conv1dUnsqueezePass) folds a quantization into the conv's output, and XNNPACK cannot make a conv of fp32 input and weight with an int8 output ('Failed to create deconvolution node', stock's program too; fuzz static seed 1301)",
    "quantized-only": "only inside a quantized pattern",
    "pad-constraint": "negative padding",
    "decomposed-linear-dequantized-input": "reads a dequantized tensor",
    "weight-only-not-quantized-linear": "not a linear with an int8-quantized weight",
    "weight-only-quantized-input": "its input is quantized",
}


# symbolic sizes a serializer must write as integers: the reason each stays outside
SYMBOLIC = {
    "slice-of-a-symbolic-shape-not-rewritten": (
        "input %x: f32[1,s0,8]\n  %y: f32[1,s0,4] = aten.slice_copy.Tensor(%x) {dim=2, start=0, end=4}",
        "op-constraint",
        "a slice of a symbolic shape (ExecuTorch's XNNPACK serializer writes its upper bound as the size; xir's "
        "transform pass xnnpack.slices-as-xir-slices writes it as xir.slice: run transform_passes())",
    ),
    "slice-of-the-symbolic-dim-to-a-symbolic-length": (
        "input %x: f32[1,s0,8]\n  %y: f32[1,s1,8] = aten.slice_copy.Tensor(%x) {dim=1, start=1}",
        "op-constraint",
        "slices a symbolic dim to a length computed at run time (XNNPACK's slice sizes are written as integers)",
    ),
    "slice-with-a-symbolic-end": (
        "input %x: f32[8,4]\n  input %p: f32[1,s0]\n  %n: int = aten.sym_size.int(%p) {dim=1}\n"
        "  %y: f32[s0,4] = aten.slice_copy.Tensor(%x) {dim=0, start=0, end=%n}",
        "symbolic-size-operand",
        SYMBOLIC_SLICE,
    ),
    "select-of-the-symbolic-dim": (
        "input %x: f32[1,s0,8]\n  %y: f32[1,8] = aten.select_copy.int(%x) {dim=1, index=-1}",
        "op-constraint",
        "selects from a symbolic dim (e.g. the last token of a dynamic length): XNNPACK's slice offset would be "
        "computed at run time",
    ),
    "select-not-rewritten": (
        "input %x: f32[2,8]\n  %y: f32[8] = aten.select_copy.int(%x) {dim=0, index=1}",
        "op-constraint",
        "XNNPACK has no select (xnnpack.select-as-slice writes one of a static dim of a 2-D to 6-D float tensor as "
        "a slice and a view: run transform_passes())",
    ),
    "view-with-one-symbolic-size-not-rewritten": (
        "input %x: f32[1,s0,32]\n  %n: int = aten.sym_size.int(%x) {dim=1}\n"
        "  %y: f32[1,s0,4,8] = aten.view_copy(%x) {size=[1, %n, 4, 8]}",
        "symbolic-size-operand",
        "a symbolic size in the new shape (ExecuTorch's XNNPACK serializer writes a reshape's sizes as integers; "
        "xir's transform pass shape-ops-as-views writes it as -1: run transform_passes())",
    ),
}


@pytest.mark.parametrize("name", list(SYMBOLIC))
def test_symbolic_sizes_the_serializer_cannot_write(name):
    text, check, reason = SYMBOLIC[name]
    verdict = verdict_of(Case(text), text, {})
    assert (verdict.supported, verdict.check, verdict.reason) == (False, check, reason)


def test_a_cast_left_as_a_cast_says_why():
    """A bf16 -> f32 cast casts-as-converts declined (its result leaves the delegate) is reported
    with the reason, not as an op without a rule."""
    text = "input %x: bf16[2,8]\n  %y: f32[2,8] = aten._to_copy(%x) {dtype=f32}"
    verdict = verdict_of(Case(text), text, {}, Options(enable_bf16=True))
    assert (verdict.supported, verdict.check) == (False, "op-constraint")
    assert verdict.reason.startswith("a dtype cast, which ExecuTorch's XNNPACK backend does not define")
