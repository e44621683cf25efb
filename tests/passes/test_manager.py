"""The pass manager's contract: options, honest changed flags, instruments, verify-each, reproducers."""

import enum
import io

import attrs
import pytest

from passes import (
    CheckChanged,
    DumpIR,
    Instrument,
    Pass,
    PassFailure,
    PassManager,
    PipelineError,
    PrintIR,
    Reproducer,
    TimePasses,
    VerifyEach,
    constants_path,
    format_pipeline,
    function_pass,
    parse_pipeline,
    run_reproducer,
)
from xir import DType, TensorType, parse_graph, print_graph

GRAPH = """graph @g {
  input %x: f32[2,3]
  %0: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
  %1: f32[2,3] = aten.relu(%0)
  %2: f32[3,2] = aten.permute_copy(%1) {dims=[1, 0]}
  return %2
}
"""


class Mode(enum.Enum):
    fast = "fast"
    exact = "exact"


@attrs.frozen
class OptionsPass(Pass):
    """A pass with one option of every kind."""

    name = "test-options"
    count: int = 1
    ratio: float = 0.5
    enabled: bool = True
    mode: Mode = Mode.fast
    label: str = "x"

    def run(self, graph):
        return False


@attrs.frozen
class BreakTypes(Pass):
    """Breaks the IR on purpose: changes the relu's result type."""

    name = "test-break-types"

    def run(self, graph):
        relu = next(n for n in graph if n.op == "aten.relu")
        relu.results[0].type = TensorType(DType.f32, (9, 9))
        return True


@attrs.frozen
class Raises(Pass):
    """Raises on purpose."""

    name = "test-raises"

    def run(self, graph):
        raise ValueError("boom on purpose")


@function_pass("test-lies")
def lies(graph) -> bool:
    """Claims to change the graph but does not."""
    return True


@function_pass("test-add-neg")
def add_neg(graph, *, times: int = 1) -> bool:
    """Insert a negation before the first relu `times` times."""
    relu = next(n for n in graph if n.op == "aten.relu")
    for _ in range(times):
        x = relu.operands[0]
        neg = graph.insert_before(relu, graph.create_node("aten.neg", [x], [x.type]))
        graph.set_operand(relu, 0, neg.result)
    return times > 0


def test_options_parse_and_print_back():
    text = "test-options{count=3,ratio=0.25,enabled=false,mode=exact,label=hello},remove-no-ops"
    pipeline = parse_pipeline(text)
    assert pipeline[0] == OptionsPass(count=3, ratio=0.25, enabled=False, mode=Mode.exact, label="hello")
    assert format_pipeline(pipeline) == text
    built = [OptionsPass(count=7), add_neg(times=2)]
    assert parse_pipeline(format_pipeline(built)) == built
    assert format_pipeline(built) == "test-options{count=7},test-add-neg{times=2}"
    assert format_pipeline(parse_pipeline("test-options{ count = 2 }")) == "test-options{count=2}"


def test_unknown_pass_lists_the_valid_ones():
    with pytest.raises(PipelineError) as info:
        parse_pipeline("remove-no-ops,fold-everything")
    assert "unknown pass 'fold-everything'" in str(info.value)
    assert "remove-no-ops" in str(info.value) and "dead-code-elimination" in str(info.value)


def test_unknown_option_lists_the_options():
    with pytest.raises(PipelineError, match=r"has no option 'speed'; its options: count, ratio, enabled, mode, label"):
        parse_pipeline("test-options{speed=2}")
    with pytest.raises(PipelineError, match=r"option mode='slow' is invalid: expected one of fast, exact"):
        parse_pipeline("test-options{mode=slow}")
    with pytest.raises(PipelineError, match=r"count='many' is invalid"):
        parse_pipeline("test-options{count=many}")


def test_changed_flags_are_honest():
    graph = parse_graph(GRAPH)
    result = PassManager("remove-no-ops,dead-code-elimination", [CheckChanged()]).run(graph)
    assert result.changed_by == ["remove-no-ops"]  # the view goes; nothing is dead afterwards
    again = PassManager("remove-no-ops,dead-code-elimination", [CheckChanged()]).run(graph)
    assert not again.changed


def test_a_lying_pass_is_caught():
    with pytest.raises(PassFailure, match="test-lies returned changed=True, but the graph did not change"):
        PassManager("test-lies", [CheckChanged()]).run(parse_graph(GRAPH))


def test_instruments_are_called_in_order():
    calls = []

    class Recorder(Instrument):
        def __init__(self, tag):
            self.tag = tag

        def before_pipeline(self, manager, graph):
            calls.append((self.tag, "start"))

        def before_pass(self, p, graph, index):
            calls.append((self.tag, "before", p.name, index))

        def after_pass(self, p, graph, changed, index):
            calls.append((self.tag, "after", p.name, changed))

        def after_pipeline(self, manager, graph, result):
            calls.append((self.tag, "end"))

    PassManager("remove-no-ops,test-options", [Recorder("a"), Recorder("b")]).run(parse_graph(GRAPH))
    assert calls == [
        ("a", "start"),
        ("b", "start"),
        ("a", "before", "remove-no-ops", 1),
        ("b", "before", "remove-no-ops", 1),
        ("a", "after", "remove-no-ops", True),
        ("b", "after", "remove-no-ops", True),
        ("a", "before", "test-options", 2),
        ("b", "before", "test-options", 2),
        ("a", "after", "test-options", False),
        ("b", "after", "test-options", False),
        ("a", "end"),
        ("b", "end"),
    ]


def test_verify_each_names_the_pass_and_the_node():
    graph = parse_graph(GRAPH)
    verifier = VerifyEach()
    with pytest.raises(PassFailure) as info:
        PassManager("remove-no-ops,test-break-types", [verifier]).run(graph)
    failure = info.value
    assert failure.pass_name == "test-break-types"
    assert "after pass test-break-types" in str(failure)
    assert "aten.relu: result shape is [9,9], expected [2,3]" in str(failure) and "at: %" in str(failure)
    # the IR just before the failing pass is kept
    assert failure.ir_before == print_graph(parse_graph(failure.ir_before), show_origin=True)
    assert "aten.view_copy" not in failure.ir_before  # remove-no-ops had already run


def test_reproducer_fails_the_same_way(tmp_path):
    path = tmp_path / "repro.xir"
    graph = parse_graph(GRAPH)
    with pytest.raises(PassFailure) as info:
        PassManager("test-add-neg{times=2},test-raises", [Reproducer(path)]).run(graph)
    assert info.value.reproducer == str(path)
    text = path.read_text()
    assert "# pipeline: test-raises" in text and "boom on purpose" in text
    assert text.count("aten.neg") == 2
    with pytest.raises(PassFailure) as again:
        run_reproducer(path)
    assert again.value.pass_name == "test-raises" and "boom on purpose" in str(again.value)


def test_reproducer_of_a_verification_failure(tmp_path):
    path = tmp_path / "repro.xir"
    with pytest.raises(PassFailure):
        PassManager("test-break-types", [VerifyEach(), Reproducer(path)]).run(parse_graph(GRAPH))
    with pytest.raises(PassFailure, match="after pass test-break-types"):
        run_reproducer(path, [VerifyEach()])


def test_provenance_is_recorded_and_printed():
    graph = parse_graph(GRAPH)
    PassManager("test-add-neg").run(graph)
    neg = next(n for n in graph if n.op == "aten.neg")
    assert neg.origin == "test-add-neg"
    assert "aten.neg(%0)  # by test-add-neg" in print_graph(graph, show_origin=True)
    assert graph.origin is None


def test_print_ir_after_change_and_after_all():
    changes, everything = io.StringIO(), io.StringIO()
    PassManager("remove-no-ops,test-options", [PrintIR("change", changes), PrintIR("all", everything)]).run(
        parse_graph(GRAPH)
    )
    assert changes.getvalue().count("// -----") == 1 and "IR after remove-no-ops" in changes.getvalue()
    assert everything.getvalue().count("// -----") == 2 and "IR after test-options (unchanged)" in everything.getvalue()


def test_print_ir_to_a_file(tmp_path):
    path = tmp_path / "ir.txt"
    PassManager("remove-no-ops", [PrintIR("all", path)]).run(parse_graph(GRAPH))
    assert "IR after remove-no-ops" in path.read_text()


def test_dump_ir_numbered_files(tmp_path):
    PassManager("remove-no-ops,test-options,dead-code-elimination", [DumpIR(tmp_path)]).run(parse_graph(GRAPH))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00-input.xir", "01-remove-no-ops.xir", "02-test-options.xir", "03-dead-code-elimination.xir"]
    assert parse_graph((tmp_path / "01-remove-no-ops.xir").read_text())  # dumps parse back


def test_time_passes_table():
    out = io.StringIO()
    PassManager("remove-no-ops,test-options{count=2}", [TimePasses(out)]).run(parse_graph(GRAPH))
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["pass", "seconds", "share", "changed"]
    assert lines[1].startswith("remove-no-ops") and lines[1].endswith("yes")
    assert lines[2].startswith("test-options{count=2}") and lines[2].endswith("no")
    assert lines[3].startswith("total")


# ------------------------------------------------------------------ atomic passes, registry


@function_pass("test-fails-halfway")
def fails_halfway(graph) -> bool:
    """Edits a lot (new nodes, a new constant, operands, attributes, outputs, an erase), then raises."""
    relu = next(n for n in graph if n.op == "aten.relu")
    permute = next(n for n in graph if n.op == "aten.permute_copy")
    x = relu.operands[0]
    neg = graph.insert_before(relu, graph.create_node("aten.neg", [x]))
    graph.set_operand(relu, 0, neg.result)
    graph.add_constant("extra", x.type, None)
    graph.set_attribute(permute, "dims", [0, 1])
    graph.replace_all_uses(permute.result, relu.result)
    graph.erase(permute)
    raise RuntimeError("failing on purpose after editing")


def test_a_pass_that_raises_halfway_leaves_the_graph_as_it_was():
    graph = parse_graph(GRAPH)
    before = print_graph(graph, show_origin=True)
    nodes_before = graph.nodes
    with pytest.raises(PassFailure) as info:
        PassManager("test-fails-halfway", [VerifyEach()]).run(graph)
    assert print_graph(graph, show_origin=True) == before
    assert graph.nodes == nodes_before  # the same node objects, in the same order
    from xir import verify

    verify(graph)  # use-lists and output bookkeeping restored too
    message = str(info.value)
    assert "pass test-fails-halfway failed" in message and "failing on purpose" in message
    assert "at node:" in message and "aten.permute_copy" in message  # the node the pass last edited (erased)
    assert "rolled back" in message


def test_a_rewrite_rule_that_raises_names_the_rule_and_the_node():
    from passes import PatternRewritePass, rewrite_pattern

    @rewrite_pattern("aten.relu")
    def explode(node, rewriter):
        rewriter.insert_before(node, rewriter.create("aten.neg", [node.operands[0]]))
        raise ValueError("rule exploded")

    class Explode(PatternRewritePass, register=False):
        name = "test-explode"

        def patterns(self):
            return [explode]

    graph = parse_graph(GRAPH)
    before = print_graph(graph)
    with pytest.raises(PassFailure) as info:
        PassManager([Explode()]).run(graph)
    assert print_graph(graph) == before
    assert "rule explode failed on" in str(info.value) and "aten.relu(" in str(info.value)


def test_registering_a_pass_name_twice_is_an_error():
    from passes import unregister_pass

    with pytest.raises(PipelineError, match="'test-lies' is already defined"):

        @function_pass("test-lies")
        def lies_again(graph) -> bool:
            return False

    with pytest.raises(PipelineError, match="already defined"):

        @attrs.frozen
        class AnotherOptions(Pass):
            name = "test-options"

            def run(self, graph):
                return False

    @function_pass("test-temporary")
    def temporary(graph) -> bool:
        return False

    unregister_pass("test-temporary")
    with pytest.raises(PipelineError, match="unknown pass 'test-temporary'"):
        parse_pipeline("test-temporary")


def test_backend_passes_have_prefixed_names_and_old_names_say_the_new_one():
    assert (
        format_pipeline(parse_pipeline("xnnpack.bf16-in-fp32{enable_bf16=true},remove-no-ops"))
        == "xnnpack.bf16-in-fp32{enable_bf16=true},remove-no-ops"
    )
    with pytest.raises(PipelineError, match="pass 'bf16-in-fp32' was renamed: it is now 'xnnpack.bf16-in-fp32'"):
        parse_pipeline("remove-no-ops,bf16-in-fp32")
    for old in ("mean-keepdim", "decompose-conv3d", "layer-norm-in-fp32", "fold-repeat-into-bmm"):
        with pytest.raises(PipelineError, match=f"pass '{old}' was renamed: it is now 'xnnpack.{old}'"):
            parse_pipeline(old)


def test_reproducer_keeps_the_constant_data_a_failing_pass_reads(tmp_path):
    import torch

    @function_pass("test-needs-weights")
    def needs_weights(graph) -> bool:
        """Reads the weight's data and fails when it is positive."""
        weight = graph.input_named("w")
        if weight.data is None:
            raise ValueError("no weight data")
        if float(weight.data.sum()) > 0:
            raise ValueError(f"weight sum {float(weight.data.sum()):.1f} is positive")
        return False

    text = (
        "graph @g {\n  input %x: f32[2]\n  param %w: f32[2]\n  %0: f32[2] = aten.mul.Tensor(%x, %w)\n  return %0\n}\n"
    )
    graph = parse_graph(text)
    graph.input_named("w").data = torch.tensor([1.5, 2.5])
    path = tmp_path / "repro.xir"
    try:
        with pytest.raises(PassFailure, match="weight sum 4.0 is positive"):
            PassManager("remove-no-ops,test-needs-weights", [Reproducer(path)]).run(graph)
        assert "# constants: repro.xir.constants.npz" in path.read_text()
        with pytest.raises(PassFailure, match="no weight data"):  # data is read only from a file the caller names
            run_reproducer(path)
        with pytest.raises(PassFailure, match="weight sum 4.0 is positive"):  # fails the same way: the data came back
            run_reproducer(path, constants=constants_path(path))
    finally:
        from passes import unregister_pass

        unregister_pass("test-needs-weights")


def test_nodes_a_rewrite_rule_creates_record_the_program_op_it_matched():
    """``Node.written_for``: the FX node of the op a rule matched, carried through rules that match
    nodes rules created (write-back gives those nodes that op's module; fuzz dynamic seed 31542),
    and kept by a clone. Nodes created outside rewrite rules have none."""
    from passes.rewriter import apply_patterns_greedily, rewrite_pattern

    @rewrite_pattern("aten.relu")
    def relu_as_two_ops(node, rewriter):
        x = rewriter.op_before(node, "aten.abs", [node.operands[0]])
        rewriter.replace_node(node, [rewriter.op_before(node, "aten.neg", [x])])
        return True

    @rewrite_pattern("aten.neg")
    def neg_as_exp(node, rewriter):
        rewriter.replace_node(node, [rewriter.op_before(node, "aten.exp", [node.operands[0]])])
        return True

    graph = parse_graph(GRAPH)
    relu, view = next(n for n in graph if n.op == "aten.relu"), next(n for n in graph if n.op == "aten.view_copy")
    relu.fx_node, view.fx_node = object(), object()
    stats = apply_patterns_greedily(graph, [relu_as_two_ops, neg_as_exp])
    assert stats.fired == {"relu_as_two_ops": 1, "neg_as_exp": 1}
    made = [n for n in graph if n.op in ("aten.abs", "aten.exp")]
    assert len(made) == 2 and all(n.written_for is relu.fx_node for n in made)
    assert view.written_for is None and all(n.written_for is None for n in graph if n.fx_node is None and n not in made)
    clone, _ = graph.copy()
    assert [n.written_for for n in clone if n.op in ("aten.abs", "aten.exp")] == [relu.fx_node] * 2
    fresh = parse_graph(GRAPH)
    PassManager("test-add-neg").run(fresh)
    assert next(n for n in fresh if n.op == "aten.neg").written_for is None
