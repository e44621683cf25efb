"""Bad IR text gets the project's own error, naming line and column, and nothing else (issue 28, item 7).

Each payload here once crashed the parser or the verifier with a Python error (RecursionError,
ValueError, ZeroDivisionError, IndexError, TypeError), raised an IRError with no location, or was
accepted: text after the graph, a negative dim, an attribute given twice, a dim out of range taken
modulo the rank, a string stride, a cat of nothing. The parser raises ParseError at the offending
line and column; the verifier raises VerificationError with the line and column of the node's text.
"""

from __future__ import annotations

import time

import pytest

from xir import DType, Graph, ParseError, TensorType, VerificationError, parse_graph, print_graph, verify


def graph_text(*lines: str, inputs: str = "input %x: f32[2,3]") -> str:
    """A graph with ``inputs`` (one line each, separated by ';'), then ``lines``, returning %0."""
    body = [f"  {line.strip()}" for line in inputs.split(";")] + [f"  {line}" for line in lines]
    return "graph @g {\n" + "\n".join(body) + "\n  return %0\n}\n"


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_graph(text)
    return info.value


# ------------------------------------------------------------------------------------- parser


@pytest.mark.parametrize(
    "line, column, message",
    [
        # an attribute nested 1000 lists deep: RecursionError
        (
            "%0: f32[2,3] = aten.relu(%x) {a=" + "[" * 1000 + "]" * 1000 + "}",
            67,
            "attribute lists nest more than 32 deep",
        ),
        # an integer of 5000 digits: ValueError (past Python's integer-conversion limit)
        ("%0: f32[2,3] = aten.relu(%x) {a=" + "9" * 5000 + "}", 35, "does not fit in 64 bits"),
        ("%0: f32[2,3] = aten.relu(%x) {a=-" + "9" * 5000 + "}", 35, "does not fit in 64 bits"),
        (
            "%0: f32[2,3] = aten.relu(%x) {a=9223372036854775808}",
            35,
            "integer 9223372036854775808 does not fit in 64 bits",
        ),
        ("%0: f32[" + "9" * 5000 + "] = aten.relu(%x)", 11, "does not fit in 64 bits"),
        # accepted: a negative dim (and then delegated), an attribute given twice
        ("%0: f32[2,-3] = aten.relu(%x)", 13, "a dimension is at least 0, found -3"),
        (
            "%0: f32[2,3] = aten.leaky_relu(%x) {negative_slope=0.1, negative_slope=5.0}",
            59,
            "attribute 'negative_slope' is given twice",
        ),
        # IRError without a location: 'return' as an operation
        ("%0: f32[2,3] = return(%x)", 17, "'return' is not an operation"),
        # a string with a lone surrogate: accepted, then the IR could not be written as UTF-8
        ('%0: f32[2,3] = aten.gelu(%x) {approximate="\\ud800"}', 45, "lone surrogate"),
    ],
)
def test_bad_text_is_a_parse_error_at_its_line_and_column(line, column, message):
    error = parse_error(graph_text(line))
    assert (error.line, error.column) == (3, column)
    assert message in error.message


def test_integers_are_limited_to_64_bits_and_no_further():
    graph = parse_graph(graph_text("%0: f32[2,3] = aten.relu(%x) {a=9223372036854775807, b=-00009223372036854775808}"))
    assert graph.nodes[0].attributes == {"a": 2**63 - 1, "b": -(2**63)}
    assert (
        "does not fit in 64 bits"
        in parse_error(graph_text("%0: f32[2,3] = aten.relu(%x) {b=-9223372036854775809}")).message
    )
    # leading zeros count for nothing (Python refused to convert past 4300 digits: ValueError)
    graph = parse_graph(
        graph_text(
            "%0: f32[2,3] = aten.relu(%x) {a=-" + "0" * 5000 + "7}", inputs="input %x: f32[" + "0" * 5000 + "2,3]"
        )
    )
    assert graph.nodes[0].attributes == {"a": -7} and graph.inputs[0].type.shape == (2, 3)


def test_an_input_defined_twice_is_a_parse_error_not_an_irerror_without_a_location():
    error = parse_error(graph_text("%0: f32[2,3] = aten.relu(%x)", inputs="input %x: f32[2,3]; param %x: f32[2,3]"))
    assert (error.line, error.column) == (3, 9) and "value %x is defined twice" in error.message


@pytest.mark.parametrize(
    "after",
    [
        "graph @h {\n  input %y: f32[4]\n  return %y\n}\n",  # a second graph was silently dropped
        "%1: f32[2,3] = aten.relu(%x)\n",
        "}\n",
    ],
)
def test_text_after_the_graphs_closing_brace_is_an_error(after):
    text = graph_text("%0: f32[2,3] = aten.relu(%x)") + "# a comment is fine\n\n" + after
    error = parse_error(text)
    assert (error.line, error.column) == (8, 1)
    assert "expected the end of the text after the graph's closing '}'" in error.message


def test_a_long_symbolic_dim_is_rejected_in_linear_time():
    """The symbol pattern backtracked quadratically: a 40,000-character bad dim took seconds."""
    text = graph_text("%0: f32[2,3] = aten.relu(%x)", inputs="input %x: f32[" + "s" * 40_000 + "!]")
    start = time.perf_counter()
    error = parse_error(text)
    assert time.perf_counter() - start < 1.0
    assert error.line == 2 and "expected an integer or a symbol as a dimension" in error.message


# ----------------------------------------------------------------------------------- verifier

CONV = "param %w: f32[4,3,3,3]; input %x: f32[1,3,8,8]"


@pytest.mark.parametrize(
    "inputs, line, message",
    [
        # ZeroDivisionError
        (
            CONV,
            "%0: f32[1,4,6,6] = aten.convolution(%x, %w) {stride=[0, 0], padding=[0, 0], dilation=[1, 1], "
            "transposed=false, output_padding=[0, 0], groups=1}",
            "stride must be at least 1, got [0, 0]",
        ),
        # accepted: a string stride
        (
            CONV,
            '%0: f32[1,4,6,6] = aten.convolution(%x, %w) {stride="11"}',
            "stride must be a list of integers, got '11'",
        ),
        (
            CONV,
            "%0: f32[1,4,6,6] = aten.convolution(%x, %w) {groups=0}",
            "groups must be an integer of at least 1, got 0",
        ),
        (CONV, "%0: f32[1,4,6,6] = aten.convolution(%x, %w) {dilation=[1, -1]}", "dilation must be at least 1"),
        (CONV, "%0: f32[1,4,1,1] = aten.convolution(%x, %w) {padding=[-3, -3]}", "padding must be at least 0"),
        # IndexError: a 1-D convolution input
        (
            "param %w: f32[4]; input %x: f32[3]",
            "%0: f32[4] = aten.convolution(%x, %w)",
            "input must have a batch dim, a channel dim and spatial dims",
        ),
        # IndexError: a cat of 0-D tensors; accepted: a cat of nothing
        ("input %x: f32[]", "%0: f32[2] = aten.cat(%x, %x) {dim=0}", "cannot concatenate tensors of ranks 0, 0"),
        ("input %x: f32[2,3]", "%0: f32[2] = aten.cat() {dim=0}", "concatenates no tensors"),
        ("input %x: f32[2,3]; input %y: f32[2,4]", "%0: f32[4,3] = aten.cat(%x, %y) {dim=0}", "differ outside dim 0"),
        # accepted, the dim taken modulo the rank
        ("input %x: f32[2,3]", "%0: f32[2,3,1] = aten.unsqueeze_copy(%x) {dim=5}", "dim 5 is out of range [-3, 2]"),
        ("input %x: f32[2,3]", "%0: f32[3,2] = aten.permute_copy(%x) {dims=[3, 2]}", "dim 3 is out of range [-2, 1]"),
        (
            "input %x: f32[2,3]",
            "%0: f32[2,3] = aten._softmax(%x) {dim=2, half_to_float=false}",
            "dim 2 is out of range [-2, 1]",
        ),
        ("input %x: f32[2,1]", "%0: f32[2] = aten.squeeze_copy.dim(%x) {dim=3}", "dim 3 is out of range [-2, 1]"),
        (
            "input %x: f32[2,3]",
            "%0: f32[1,3] = aten.slice_copy.Tensor(%x) {dim=-3, start=0, end=1}",
            "dim -3 is out of range",
        ),
        ("input %x: f32[2,3]", "%0: f32[2] = aten.sum.dim_IntList(%x) {dim=[4]}", "dim 4 is out of range [-2, 1]"),
        ("input %x: f32[2,3]", "%0: f32[2] = aten.sum.dim_IntList(%x) {dim=[1, -1]}", "dim [1, -1] names a dim twice"),
        ("input %x: f32[2,3]", "%0: f32[2], %1: i64[2] = aten.max.dim(%x) {dim=7}", "dim 7 is out of range [-2, 1]"),
        (
            "input %x: f32[2,3]; input %y: f32[2,3]",
            "%0: f32[2,6] = aten.cat(%x, %y) {dim=3}",
            "dim 3 is out of range [-2, 1]",
        ),
        # ValueError (slice step cannot be zero)
        (
            "input %x: f32[2,3]",
            "%0: f32[2,3] = aten.slice_copy.Tensor(%x) {dim=1, step=0}",
            "step must be at least 1, got 0",
        ),
        # TypeError: strings where integers go
        ("input %x: f32[2,3]", '%0: f32[6] = aten.view_copy(%x) {size=["6"]}', "size must be a list of sizes"),
        (
            "input %x: f32[2,3]",
            '%0: f32[2,5] = aten.constant_pad_nd(%x) {pad=["1", 1]}',
            "pad must be a list of an even number of integers",
        ),
        (
            "input %x: f32[1,3,4,4]",
            "%0: f32[1,3,2,2] = aten.max_pool2d(%x) {kernel_size=[2, 2], ceil_mode=1}",
            "ceil_mode must be true or false",
        ),
        # OverflowError and ValueError: an infinite or a string upsampling scale
        (
            "input %x: f32[1,3,4,4]",
            "%0: f32[1,3,8,8] = aten.upsample_nearest2d.vec(%x) {scale_factors=[inf, 2.0]}",
            "scale_factors must be two positive numbers",
        ),
        (
            "input %x: f32[1,3,4,4]",
            '%0: f32[1,3,8,8] = aten.upsample_nearest2d.vec(%x) {scale_factors=["2", 2.0]}',
            "scale_factors must be two positive numbers",
        ),
        # accepted: a pooling window larger than its input
        (
            "input %x: f32[1,3,4,4]",
            "%0: f32[1,3,1,1] = aten.max_pool2d(%x) {kernel_size=[9, 9]}",
            "a window of 9 (dilation 1) does not fit",
        ),
    ],
)
def test_a_bad_node_is_a_verification_error_at_its_line_and_column(inputs, line, message):
    graph = parse_graph(graph_text(line, inputs=inputs))
    with pytest.raises(VerificationError) as info:
        verify(graph)
    error = info.value
    assert message in error.message
    assert (error.line, error.column) == (len(inputs.split(";")) + 2, 3)
    assert str(error).startswith(f"line {error.line}, column 3: ") and "at: %0" in str(error)


def test_a_negative_dim_made_through_the_api_fails_verification():
    graph = Graph("g")
    graph.outputs = [graph.add_input("x", TensorType(DType.f32, (2, -3)))]
    with pytest.raises(VerificationError, match=r"value %x has a negative dim in its type f32\[2,-3\]"):
        verify(graph)


def test_a_node_copied_keeps_the_location_of_its_text():
    graph = parse_graph(graph_text("%0: f32[2,3] = aten.relu(%x)"))
    copy, _ = graph.copy()
    assert copy.nodes[0].location == graph.nodes[0].location == (3, 3)
    assert print_graph(copy) == print_graph(graph)
