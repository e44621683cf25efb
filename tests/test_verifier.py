"""The verifier names the node and the rule it breaks."""

import pytest

from xir import VerificationError, parse_graph, verify

GOOD = """graph @g {
  param %w: f32[8,4]
  param %b: f32[8]
  input %x: f32[2,4]
  %0: f32[2,8] = aten.linear(%x, %w, %b)
  %1: f32[8,2] = aten.permute_copy(%0) {dims=[1, 0]}
  %2: f32[16] = aten.view_copy(%1) {size=[16]}
  %3: i8[16] = quantized_decomposed.quantize_per_tensor(%2) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  %4: f32[16] = quantized_decomposed.dequantize_per_tensor(%3) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
  %5: bf16[16] = aten._to_copy(%4) {dtype=bf16}
  return %5
}
"""


def test_good_graph_verifies():
    verify(parse_graph(GOOD))


def broken(old, new):
    assert old in GOOD
    return parse_graph(GOOD.replace(old, new))


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "%0: f32[2,8] = aten.linear",
            "%0: f32[2,9] = aten.linear",
            "aten.linear: result shape is [2,9], expected [2,8]",
        ),
        ("param %w: f32[8,4]", "param %w: f32[8,5]", "does not match the weight's in-features 5"),
        (
            "%1: f32[8,2] = aten.permute_copy(%0) {dims=[1, 0]}",
            "%1: f32[8,2] = aten.permute_copy(%0) {dims=[0, 0]}",
            "is not a permutation",
        ),
        (
            "%2: f32[16] = aten.view_copy(%1) {size=[16]}",
            "%2: f32[15] = aten.view_copy(%1) {size=[15]}",
            "view changes the element count",
        ),
        ("%3: i8[16] = quantized", "%3: u8[16] = quantized", "result dtype is u8, expected i8"),
        (
            "%5: bf16[16] = aten._to_copy",
            "%5: f16[16] = aten._to_copy",
            "aten._to_copy: result dtype is f16, expected bf16",
        ),
    ],
)
def test_op_type_rules(old, new, message):
    with pytest.raises(VerificationError) as info:
        verify(broken(old, new))
    assert message in str(info.value)
    assert "at: %" in str(info.value)  # the node is printed


def test_use_before_definition_names_the_node():
    graph = parse_graph(GOOD)
    nodes = graph.nodes
    graph.move_before(nodes[0], nodes[1])  # permute now reads %0 before the linear defines it
    with pytest.raises(VerificationError) as info:
        verify(graph)
    assert "aten.permute_copy uses" in str(info.value) and "before it is defined" in str(info.value)


def test_corrupted_use_list_is_caught():
    graph = parse_graph(GOOD)
    linear = graph.nodes[0]
    linear.results[0].uses.append(linear)  # a use that no operand backs
    with pytest.raises(VerificationError, match="use-list of %0 is inconsistent"):
        verify(graph)


def test_operand_changed_behind_the_graphs_back_is_caught():
    graph = parse_graph(GOOD)
    permute = graph.nodes[1]
    permute.operands = (graph.inputs[2],)  # bypasses set_operand
    with pytest.raises(VerificationError, match="inconsistent"):
        verify(graph)


def test_batch_norm_rule_names_the_channel_dim():
    text = """graph @g {
  input %x: f32[2,4,8]
  param %m: f32[8]
  %0: f32[2,4,8], %1: f32[0], %2: f32[0] = aten._native_batch_norm_legit_no_training(%x, %m, %m, %m, %m) {momentum=0.1, eps=1e-05}
  return %0
}
"""
    with pytest.raises(VerificationError, match="1-D with 4 elements"):
        verify(parse_graph(text))


@pytest.mark.parametrize(
    "weight, bias, message",
    [
        ("f16[8,4]", "f32[8]", None),
        ("f32[8,4]", "f32[8]", "input must be f32 and weight f16, got f32 and f32"),
        ("f16[8,4]", "f16[8]", "bias must be an f32 tensor"),
        ("f16[8,5]", "f32[8]", "does not match the weight's in-features 5"),
        ("f16[8,4]", "f32[7]", "bias must be 1-D with 8 elements"),
    ],
)
def test_linear_on_an_fp16_weight_checks_its_dtypes_and_shapes(weight, bias, message):
    graph = parse_graph(f"""graph @g {{
  param %w: {weight}
  param %b: {bias}
  input %x: f32[2,4]
  %0: f32[2,8] = xir.linear_f16w(%x, %w, %b)
  return %0
}}
""")
    if message is None:
        verify(graph)
        return
    with pytest.raises(VerificationError, match="xir.linear_f16w") as info:
        verify(graph)
    assert message in str(info.value)
