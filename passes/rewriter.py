"""Pattern rewriting: small rules matched by op name, applied greedily to a fixed point.

    @rewrite_pattern("aten.permute_copy")
    def drop_identity_permute(node, rewriter):
        if node.attributes["dims"] != list(range(node.result.rank)):
            return rewriter.notify_match_failure(node, "not the identity permutation")
        rewriter.replace_node(node, [node.input])
        return True

Every edit goes through the :class:`Rewriter` (so the driver knows what changed and what to
revisit). A rule that declines says why with ``notify_match_failure``; the driver counts the
rules that fired and keeps the last reason each rule gave for each op.
"""

from __future__ import annotations

import weakref
from collections import Counter, deque
from typing import Any, Callable, ClassVar, Iterable, Sequence

import attrs

from xir import Graph, Node, Value, print_node
from xir.ops import check_op_names

from .pass_base import Pass


class RewriteError(RuntimeError):
    """A rule raised while rewriting a node: names the rule and the node."""

    def __init__(self, rule: str, node: Node, error: BaseException):
        self.rule, self.node, self.error = rule, node, error
        super().__init__(f"rule {rule} failed on {print_node(node)}: {type(error).__name__}: {error}")


class RewritePattern:
    """A rule: ``ops`` it applies to (empty: every op) and ``match_and_rewrite``."""

    ops: tuple[str, ...] = ()
    name: str = ""

    def match_and_rewrite(self, node: Node, rewriter: "Rewriter") -> bool:
        raise NotImplementedError


class _FunctionPattern(RewritePattern):
    def __init__(self, ops: tuple[str, ...], fn: Callable[[Node, "Rewriter"], bool]):
        self.ops = ops
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def match_and_rewrite(self, node, rewriter):
        return bool(self.fn(node, rewriter))

    def __call__(self, node, rewriter):
        return self.match_and_rewrite(node, rewriter)


def rewrite_pattern(*ops: str) -> Callable[[Callable[[Node, "Rewriter"], bool]], RewritePattern]:
    """Make a rule of a function ``fn(node, rewriter) -> bool`` matched on ``ops`` (op handles,
    ``aten.mul.Tensor``, or their names). Every op must be one xir defines: a misspelt name is an
    error where the rule is defined, not a rule that never fires."""

    def wrap(fn):
        check_op_names(ops, f"rewrite_pattern of {fn.__module__}.{fn.__qualname__}")
        return _FunctionPattern(tuple(str(op) for op in ops), fn)

    return wrap


class Rewriter:
    """The only way a rule edits the graph. Records new and touched nodes for the driver."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.changed = False
        self.touched: list[Node] = []
        self.created: list[Node] = []
        self.failures: list[tuple[Node, str]] = []

    # creation
    def create(
        self,
        op: str,
        operands: Iterable[Value],
        result_types: Iterable[Any] | None = None,
        attributes: dict | None = None,
    ) -> Node:
        """A new node (not yet placed); without ``result_types`` the op's definition infers them."""
        node = self.graph.create_node(op, operands, result_types, attributes)
        self.created.append(node)
        return node

    def add_constant(self, base: str, type_: Any, data: Any, kind: Any = None) -> Value:
        """A new constant input (a parameter unless ``kind`` says otherwise) named after ``base``."""
        self.changed = True
        return self.graph.add_constant(base, type_, data, *(() if kind is None else (kind,)))

    def insert_before(self, anchor: Node, node: Node) -> Node:
        self.graph.insert_before(anchor, node)
        self._touch(node)
        return node

    def insert_after(self, anchor: Node, node: Node) -> Node:
        self.graph.insert_after(anchor, node)
        self._touch(node)
        return node

    def op_before(self, anchor: Node, op: str, operands: Iterable[Value], **attributes: Any) -> Value:
        """Create ``op`` (result type inferred by its definition), place it before ``anchor``, and
        return its result: ``y = rewriter.op_before(node, "aten.mul.Tensor", [x, scale])``."""
        return self.insert_before(anchor, self.create(op, operands, attributes=attributes)).result

    # replacement
    def replace_all_uses(self, old: Value, new: Value, *, outputs: bool = True) -> None:
        """Every reader of ``old`` reads ``new``, the graph outputs included (see Graph.replace_all_uses)."""
        users = old.users
        self.graph.replace_all_uses(old, new, outputs=outputs)
        for user in users:
            self._touch(user)
        if new.producer is not None:
            self._touch(new.producer)

    def replace_node(self, node: Node, values: Sequence[Value | None]) -> None:
        """Replace ``node``'s results by ``values`` (the outputs included; None for an unused
        result) and erase it."""
        users = node.users
        producers = [v.producer for v in node.inputs() if v.producer is not None]
        self.graph.replace_node(node, values)
        self.changed = True
        for user in users:
            self._touch(user)
        for value in values:
            if value is not None and value.producer is not None:
                self._touch(value.producer)
        self.touched.extend(producers)  # may now be dead or newly matchable

    def set_operand(self, node: Node, index: int, value: Value) -> None:
        self.graph.set_operand(node, index, value)
        self._touch(node)

    def set_attribute(self, node: Node, name: str, value: Any) -> None:
        self.graph.set_attribute(node, name, value)
        self._touch(node)

    def remove_attribute(self, node: Node, name: str) -> None:
        self.graph.remove_attribute(node, name)
        self._touch(node)

    def set_operands(self, node: Node, operands: Iterable[Value]) -> None:
        self.graph.set_operands(node, operands)
        self._touch(node)

    def erase(self, node: Node) -> None:
        producers = [v.producer for v in node.inputs() if v.producer is not None]
        self.graph.erase(node)
        self.changed = True
        for producer in producers:
            self.touched.append(producer)  # may now be dead or newly matchable

    def notify_match_failure(self, node: Node, reason: str) -> bool:
        """Say why a rule declined ``node``; returns False so a rule can ``return`` it."""
        self.failures.append((node, reason))
        return False

    def _touch(self, node: Node) -> None:
        self.changed = True
        if not node.is_return:
            self.touched.append(node)
            self.touched.extend(node.readers)


@attrs.define
class RewriteStats:
    """What a greedy run did: how often each rule fired, and why rules declined."""

    fired: Counter = attrs.field(factory=Counter)
    declined: dict[str, list[str]] = attrs.field(factory=dict)
    iterations: int = 0

    @property
    def changed(self) -> bool:
        return sum(self.fired.values()) > 0

    def summary(self) -> str:
        if not self.fired:
            return "no rule fired"
        return ", ".join(f"{name} x{count}" for name, count in sorted(self.fired.items()))


def apply_patterns_greedily(
    graph: Graph, patterns: Sequence[RewritePattern], max_rewrites: int = 1_000_000
) -> RewriteStats:
    """Apply ``patterns`` until none fires (a fixed point). Rules are tried in order; the first
    one that fires on a node wins. Nodes touched by a rewrite are revisited."""
    by_op: dict[str, list[RewritePattern]] = {}
    generic: list[RewritePattern] = []
    for pattern in patterns:
        if pattern.ops:
            for op in pattern.ops:
                by_op.setdefault(op, []).append(pattern)
        else:
            generic.append(pattern)
    stats = RewriteStats()
    worklist = deque(graph)
    queued = {id(n) for n in worklist}
    rewrites = 0
    while worklist:
        node = worklist.popleft()
        queued.discard(id(node))
        if node.graph is not graph or node.is_return:
            continue  # erased since it was queued
        stats.iterations += 1
        for pattern in by_op.get(node.op, []) + generic:
            rewriter = Rewriter(graph)
            graph.focus = node
            try:
                fired = pattern.match_and_rewrite(node, rewriter)
            except RewriteError:
                raise
            except Exception as error:
                raise RewriteError(pattern.name, node, error) from error
            for failed_node, reason in rewriter.failures:
                stats.declined.setdefault(pattern.name, []).append(f"{failed_node.op}: {reason}")
            if fired:
                if not rewriter.changed:
                    raise RuntimeError(
                        f"rule {pattern.name} said it fired on {node.op} but made no edit through the rewriter"
                    )
                stats.fired[pattern.name] += 1
                written_for = node.fx_node if node.fx_node is not None else node.written_for
                for new in rewriter.created:
                    if new.written_for is None:
                        new.written_for = written_for
                rewrites += 1
                if rewrites > max_rewrites:
                    raise RuntimeError(
                        f"rewriting did not converge after {max_rewrites} rewrites (last rule: {pattern.name})"
                    )
                for touched in rewriter.touched:
                    if touched.graph is graph and id(touched) not in queued:
                        worklist.append(touched)
                        queued.add(id(touched))
                break
    return stats


class KeepsStats:
    """A mixin for passes that keep what their last run did as :class:`RewriteStats` in
    ``last_stats`` (rules fired, and why each declined): ``self.keep_stats(stats)`` at the end of ``run``."""

    def keep_stats(self, stats: RewriteStats) -> None:
        if id(self) not in _LAST_STATS:
            weakref.finalize(self, _LAST_STATS.pop, id(self), None)
        _LAST_STATS[id(self)] = stats

    @property
    def last_stats(self) -> RewriteStats | None:
        return _LAST_STATS.get(id(self))


class PatternRewritePass(KeepsStats, Pass, register=False):
    """A pass that applies its rules greedily: the class attribute ``rules``, or what
    ``patterns()`` returns when the rules depend on the pass's options. ``last_stats`` keeps the
    counts of the last run."""

    rules: ClassVar[tuple[RewritePattern, ...]] = ()

    def patterns(self) -> Sequence[RewritePattern]:
        return self.rules

    def run(self, graph: Graph) -> bool:
        stats = apply_patterns_greedily(graph, self.patterns())
        self.keep_stats(stats)
        return stats.changed


# by instance identity: passes are frozen values, and two equal instances (the same pass twice in
# a pipeline) must not share their counts; an entry goes when its pass is collected
_LAST_STATS: dict[int, RewriteStats] = {}
