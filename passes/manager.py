"""The pass manager: runs a pipeline on a graph, calling instruments around every pass.

    manager = PassManager("fold-batch-norm,remove-no-ops", instruments=[PrintIR(after="change"), VerifyEach()])
    result = manager.run(graph)
    result.changed            # did any pass change the graph?
    result.changed_by         # names of the passes that did

Every node a pass creates records the pass's name in ``node.origin``. Passes are atomic: when
a pass raises, or an instrument finds it broke the IR, the graph is rolled back to exactly what
it was before the pass, every instrument's ``on_failure`` runs, and the manager raises
:class:`PassFailure` naming the pass and the node it was rewriting.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from xir import Graph

from .instruments import Instrument
from .pass_base import Pass
from .pipeline import check_order, format_pipeline, parse_pipeline


class PassFailure(RuntimeError):
    """Pass ``pass_name`` failed (its own error or a broken IR). ``ir_before`` is the IR text
    just before it ran, when an instrument kept it."""

    def __init__(
        self,
        pass_name: str,
        pipeline_text: str,
        error: BaseException,
        ir_before: str | None = None,
        reproducer: str | None = None,
        node: str | None = None,
    ):
        self.pass_name = pass_name
        self.pipeline_text = pipeline_text
        self.error = error
        self.ir_before = ir_before
        self.reproducer = reproducer
        self.node = node  # the node the pass was rewriting, printed
        super().__init__(self._message())

    def _message(self) -> str:
        message = f"pass {self.pass_name} failed: {self.error}"
        if self.node and self.node not in str(self.error):
            message += f"\n  at node: {self.node}"
        message += "\n  the graph was rolled back to what it was before the pass"
        if self.reproducer:
            message += f"\n  reproducer written to {self.reproducer}"
        return message

    def __str__(self) -> str:  # instruments may add the reproducer after construction
        return self._message()


@attrs.define
class PassRecord:
    name: str
    changed: bool


@attrs.define
class PipelineResult:
    records: list[PassRecord] = attrs.field(factory=list)

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.records)

    @property
    def changed_by(self) -> list[str]:
        return [r.name for r in self.records if r.changed]


class PassManager:
    """Runs ``passes`` (a list of Pass objects or pipeline text) with ``instruments``. A pipeline
    that breaks an ordering its passes declare is refused (:func:`~passes.pipeline.check_order`)."""

    def __init__(self, passes: Sequence[Pass] | str = (), instruments: Iterable[Instrument] = ()):
        self.passes: list[Pass] = parse_pipeline(passes) if isinstance(passes, str) else list(passes)
        self.instruments: list[Instrument] = list(instruments)
        check_order(self.passes)

    @property
    def pipeline_text(self) -> str:
        return format_pipeline(self.passes)

    def add(self, *passes: Pass | str) -> "PassManager":
        added = list(self.passes)
        for p in passes:
            added.extend(parse_pipeline(p) if isinstance(p, str) else [p])
        check_order(added)  # (a refused pass leaves the manager as it was)
        self.passes = added
        return self

    def run(self, graph: Graph) -> PipelineResult:
        result = PipelineResult()
        for instrument in self.instruments:
            instrument.before_pipeline(self, graph)
        for index, p in enumerate(self.passes, start=1):
            for instrument in self.instruments:
                instrument.before_pass(p, graph, index)
            previous_origin = graph.origin
            graph.origin = p.name
            graph.focus = None
            saved = graph.checkpoint()
            try:
                changed = p.run(graph)
                if not isinstance(changed, bool):
                    raise TypeError(f"run() must return True or False (whether the graph changed), got {changed!r}")
                for instrument in self.instruments:
                    instrument.after_pass(p, graph, changed, index)
            except Exception as error:
                node = _failing_node(error, graph)
                graph.rollback(saved)
                graph.origin = previous_origin
                failure = PassFailure(p.name, str(p), error, node=node)
                for instrument in self.instruments:
                    instrument.on_failure(p, graph, failure, index)
                raise failure from error
            graph.origin = previous_origin
            result.records.append(PassRecord(p.name, changed))
        for instrument in self.instruments:
            instrument.after_pipeline(self, graph, result)
        return result


def _failing_node(error: BaseException, graph: Graph) -> str | None:
    """The node a failing pass was at: the rewriter's, the verifier's, or the graph's last edit."""
    from xir import VerificationError, print_node

    from .rewriter import RewriteError

    if isinstance(error, RewriteError):
        return print_node(error.node)
    if isinstance(error, VerificationError) and error.node_text:
        return error.node_text
    if graph.focus is not None:
        try:
            return print_node(graph.focus)
        except Exception:
            return graph.focus.op
    return None


def run_pipeline(
    graph: Graph, pipeline: Sequence[Pass] | str, instruments: Iterable[Instrument] = ()
) -> PipelineResult:
    return PassManager(pipeline, instruments).run(graph)
