"""Any mutation of valid IR text parses and verifies, or raises the project's own error (issue 28, item 7).

Seeds are valid graphs from the IR text, verifier and fold-constants tests and a few more that reach
the attribute rules (convolution, pooling, cat, slice, reductions, creation ops). Mutations: a
character inserted, deleted or replaced, a token duplicated, a number inflated (past 64 bits,
negative, thousands of digits), brackets nested deep, a piece of another seed spliced in, an
attribute value (or an item of a list) replaced by one of another kind or range. The parser must
answer ParseError (with a line and a column), the verifier VerificationError; no other exception,
and no case may take more than a second. A text that is accepted prints, and its print parses back
to the same text.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_text import TEXT as TEXT_SEED
from tests.test_verifier import GOOD as VERIFIER_SEED
from xir import ParseError, VerificationError, parse_graph, print_graph, verify

CONV_SEED = """graph @conv {
  param %w: f32[8,3,3,3]
  param %b: f32[8]
  input %x: f32[1,3,16,16]
  %0: f32[1,8,8,8] = aten.convolution(%x, %w, %b) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}
  %1: f32[1,8,4,4] = aten.max_pool2d(%0) {kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], dilation=[1, 1], ceil_mode=false}
  %2: f32[1,8,4,4] = aten.avg_pool2d(%1) {kernel_size=[3, 3], stride=[1, 1], padding=[1, 1]}
  %3: f32[1,8,8,8] = aten.upsample_nearest2d.vec(%2) {output_size=none, scale_factors=[2.0, 2.0]}
  %4: f32[1,16,8,8] = aten.cat(%3, %0) {dim=1}
  %5: f32[1,16,8,4] = aten.slice_copy.Tensor(%4) {dim=-1, start=0, end=8, step=2}
  %6: f32[1,16,8,6] = aten.constant_pad_nd(%5) {pad=[1, 1], value=0.0}
  %7: f32[1,16] = aten.mean.dim(%6) {dim=[-1, -2], keepdim=false}
  %8: f32[16,1] = aten.permute_copy(%7) {dims=[1, 0]}
  %9: f32[16,1,1] = aten.unsqueeze_copy(%8) {dim=-1}
  %10: f32[16,4,1] = aten.expand_copy(%9) {size=[16, 4, -1]}
  %11: f32[16,4] = aten.squeeze_copy.dim(%10) {dim=2}
  %12: f32[64] = aten.view_copy(%11) {size=[-1]}
  %13: f32[64] = aten._softmax(%12) {dim=0, half_to_float=false}
  return %13
}
"""
# the decoder mask of the fold-constants tests, and the other creation ops
MASK_SEED = """graph @mask {
  input %x: f32[4,4]
  %0: i64[4] = aten.arange.start_step() {start=0, end=4}
  %1: i64[4,1] = aten.unsqueeze_copy(%0) {dim=1}
  %2: i64[1,4] = aten.unsqueeze_copy(%0) {dim=0}
  %3: bool[4,4] = aten.lt.Tensor(%1, %2)
  %4: f32[4,4] = aten.full() {size=[4, 4], fill_value=-inf, dtype=f32}
  %5: f32[] = aten.scalar_tensor() {s=0.0, dtype=f32}
  %6: f32[4,4] = aten.where.self(%3, %4, %5)
  %7: f32[4,4] = aten.add.Tensor(%x, %6)
  %8: f32[4,4] = aten.zeros() {size=[4, 4], dtype=f32, device=device.cpu}
  %9: f32[4,4] = aten.ones_like(%8) {pin_memory=false, memory_format=memory_format.preserve_format}
  %10: f32[4,4] = aten.full_like(%9) {fill_value=2}
  %11: f32[8] = aten.arange.start_step() {start=0, end=4.0, step=0.5}
  %12: f32[4], %13: i64[4] = aten.max.dim(%10) {dim=1, keepdim=false}
  return %7, %11, %12
}
"""
SEEDS = [TEXT_SEED, VERIFIER_SEED, CONV_SEED, MASK_SEED]

INTERESTING = '[]{}()<>,:=%@#-+.*"\\ \t\n\r0123456789aeifnx_\x00\u2028\ud800\u00e9'
TOKENS = re.compile(r"\s+|[A-Za-z0-9_.%@-]+|\S")
NUMBERS = re.compile(r"\d+")
ATTRIBUTE_VALUES = re.compile(r"(?<==)[^,{}=]+|(?<=\[)[^\[\],]+|(?<=, )[^\[\],{}=]+(?=[\],])")
VALUES = [
    "-1",
    "0",
    "1",
    "-2",
    "3",
    "99",
    "-9223372036854775808",
    "9223372036854775807",
    "1.5",
    "-0.5",
    "inf",
    "-inf",
    "nan",
    "true",
    "false",
    "none",
    '"s"',
    "[]",
    "[0]",
    "[[1]]",
    "[-5, 7]",
    "[1, 1, 1]",
    "[0, 0]",
    "f32",
    "i64",
    "memory_format.x",
    "%x",
    "%0",
]


@st.composite
def mutations(draw, text: str) -> str:
    """``text`` with one mutation."""
    kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate", "inflate", "nest", "splice", "value"]))
    at = draw(st.integers(0, len(text)))
    if kind == "insert":
        return text[:at] + draw(st.text(INTERESTING, min_size=1, max_size=3)) + text[at:]
    if kind == "delete":
        return text[:at] + text[at + draw(st.integers(1, 8)) :]
    if kind == "replace":
        return text[:at] + draw(st.sampled_from(INTERESTING)) + text[at + 1 :]
    if kind == "duplicate":
        tokens = TOKENS.findall(text)
        i = draw(st.integers(0, len(tokens) - 1))
        tokens.insert(draw(st.integers(0, len(tokens))), tokens[i])
        return "".join(tokens)
    if kind == "inflate":
        numbers = list(NUMBERS.finditer(text))
        m = numbers[draw(st.integers(0, len(numbers) - 1))]
        new = draw(
            st.sampled_from(
                [
                    "9" * 19,
                    "9223372036854775808",
                    "-1",
                    "-9223372036854775809",
                    "0",
                    "9" * 5000,
                    "0" * 5000 + "1",
                    "1" + "0" * 300,
                    "1e999",
                    "-0",
                ]
            )
        )
        return text[: m.start()] + new + text[m.end() :]
    if kind == "value":  # an attribute value, or an item of one, replaced by a value of another kind or range
        values = list(ATTRIBUTE_VALUES.finditer(text))
        if values:
            m = values[draw(st.integers(0, len(values) - 1))]
            return text[: m.start()] + draw(st.sampled_from(VALUES)) + text[m.end() :]
    if kind == "nest":
        depth = draw(st.sampled_from([2, 31, 33, 100, 2000]))
        closed = draw(st.booleans())
        return text[:at] + "[" * depth + ("]" * depth if closed else "") + text[at:]
    other = draw(st.sampled_from(SEEDS))
    start = draw(st.integers(0, len(other)))
    piece = other[start : start + draw(st.integers(1, 200))]
    return text[:at] + piece + text[at + draw(st.integers(0, 40)) :]


@st.composite
def mutated_texts(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 2))):
        text = draw(mutations(text))
    return text


@settings(max_examples=1000, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_texts())
def test_a_mutated_text_parses_and_verifies_or_raises_the_projects_error(text):
    try:
        graph = parse_graph(text)
    except ParseError as error:
        assert error.line >= 1 and error.column >= 1
        return
    try:
        verify(graph)
    except VerificationError:
        return
    printed = print_graph(graph)
    assert print_graph(parse_graph(printed)) == printed
