"""fold-constants: evaluate the nodes whose inputs are all constants, and put their results in as
constants.

A node folds when

* its op has a definition in :mod:`xir.ops` and is ``pure`` (never an opaque op, never one with
  side effects), and is not one of :data:`NEVER_FOLDED` (random ops, the quantize/dequantize ops
  the quantized lowering needs to see, xir's own XNNPACK ops);
* every value it reads (operands and values inside attributes) is a constant with data that the
  program does not write (see :func:`written_constants`: KV caches are buffers the program
  mutates), or it reads no value at all (``arange``, ``full``, ``scalar_tensor``, ``zeros``,
  ``ones`` with static attributes); ``full_like``, ``zeros_like`` and ``ones_like`` read only the
  type of their first operand, which may be any tensor of static shape (:data:`SHAPE_ONLY_OPS`);
* every result is a tensor of static shape with at most ``max_elements`` elements (a larger
  constant stays computed: folding would grow the program), and contiguous (the IR records no dim
  order, and a constant is written contiguous: a channels-last copy stays computed);
* some reader of a result is a node: a constant never becomes a graph output, so a result that
  is also returned keeps its node for the output, and only its other readers read the constant.

The node is evaluated by calling the same op the program calls (:func:`lowering.fx.writeback.resolve_op`
with the arguments :func:`xir.fx_import.op_arguments` rebuilds from the node) on the constants'
data, so the constant is what that op computes; its dtype and shape must be the node's result
type exactly (otherwise the pass raises, naming the node). That is checked before anything is
computed: the op runs first on fake tensors (dtypes and shapes, no data), so a node whose
attributes or operands give a bigger result than its declared type (``aten.full() {size=[20000,
20000]}`` typed ``f32[2]``, two constants broadcast against each other) never allocates it, and
``max_elements`` on the declared type bounds what is allocated. A node whose evaluation (fake or
real) raises is left computed, with the reason recorded (an op whose result size depends on its
data, such as indexing by a boolean mask, cannot be run on fake tensors: it stays computed).
Folding a node makes its readers' inputs constants: the greedy driver revisits them, so one run
reaches the fixed point. Folded nodes are erased; constants the pass created that a later fold made
unused are removed again (the program's own constants stay: the write-back deletes the placeholders
nothing reads).

What was folded: ``pass.folded`` (nodes folded in the last run, by op) and ``pass.last_report``
(a :class:`FoldReport`: that, the reasons nodes reading only constants were not folded, the
constants added and their elements); as for the pattern passes, ``pass.last_stats`` has the
rewriter's counts (rule ``fold_constant``). The summary is also logged (logger ``xir``, INFO).

Where in a pipeline: after the rewrites that match ops this pass would turn into constants
(``xnnpack.safe-softmax`` matches ``where(..., full_like(softmax, 0), softmax)``), and before the
ones it saves work or delegation: ``xnnpack.scalar-operands-as-constants`` (a scalar op on a
constant folds whole) and ``xnnpack.casts-as-converts`` (a cast of a constant weight becomes a
constant, not an ``xir.convert`` run on every call).
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections import Counter
from typing import Any

import attrs

from passes import Pass, Rewriter
from passes.rewriter import RewritePattern, RewriteStats, apply_patterns_greedily
from xir import EnumAttr, Graph, Node, TensorType, Value, print_node
from xir.ops import aten, has_trait, lookup
from xir.printer import Namer

from .remove_no_ops import DECOMPOSED_LINEAR_OPS

RULE = "fold_constant"
logger = logging.getLogger("xir")
DEFAULT_MAX_ELEMENTS = 65536

# pure by their definition, but never folded: random (dropout in training mode), the Q/DQ ops the
# quantized lowering matches (a folded dequantize would turn an int8 weight into an fp32 one), and
# xir's own ops (they exist for XNNPACK to run, and have no portable kernel to evaluate)
NEVER_FOLDED = (aten.native_dropout,)
NEVER_FOLDED_NAMESPACES = ("quantized_decomposed.", "torchao.", "xir.")
# ops that read only the type (dtype, static shape) of their first operand, never its data: that
# operand may be computed at run time (or be a mutated buffer)
SHAPE_ONLY_OPS = (aten.full_like, aten.zeros_like, aten.ones_like)


class FoldError(ValueError):
    """Evaluating a node gave a result of another type than the node's own result type."""


@attrs.define
class FoldReport:
    """What one run of fold-constants did."""

    folded: Counter = attrs.field(factory=Counter)  # op -> nodes folded
    skipped: list[tuple[str, str]] = attrs.field(factory=list)  # (node, reason) for nodes reading only constants
    constants: int = 0  # constants added (and still used)
    elements: int = 0  # their elements, in all
    stats: RewriteStats | None = None  # the rewriter's counts, as for every pattern pass

    def summary(self) -> str:
        if not self.folded:
            return "nothing folded"
        ops = ", ".join(f"{op} x{count}" for op, count in sorted(self.folded.items()))
        return f"folded {sum(self.folded.values())} node(s) ({ops}) into {self.constants} constant(s) of {self.elements} element(s)"


def written_constants(graph: Graph) -> dict[int, str]:
    """The constants the program may write, by ``id``, each with the reason; never fold from these.

    Buffers the program mutates (KV caches, counters: the signature's ``buffers_to_mutate``) are
    imported as ``state`` inputs, which are not constants. What is left: a constant that a node
    without the ``pure`` trait reads (an opaque op, an in-place op), directly or through ops with
    the ``view`` trait, may be written by it.
    """
    written: dict[int, str] = {}
    for value in graph.inputs:
        if not value.is_constant:
            continue
        writer = _impure_reader(value)
        if writer is not None:
            written[id(value)] = f"{value.describe()} is read by {writer.op}, which is not pure and may write it"
    return written


def _impure_reader(value: Value) -> Node | None:

    seen: set[int] = set()
    pending = [value]
    while pending:
        current = pending.pop()
        for user in current.users:
            if user.is_return or id(user) in seen:
                continue
            seen.add(id(user))
            definition = lookup(user.op)
            if definition is None or not definition.is_pure:
                return user
            if has_trait(user.op, "view"):
                pending.extend(user.results)
    return None


def never_folded(op: str) -> str | None:
    """Why ``op`` is never folded, or None."""
    if op in NEVER_FOLDED:
        return "a random op"
    if op.startswith(NEVER_FOLDED_NAMESPACES):
        return "quantize/dequantize and xir's own ops are left to the lowering"
    return None


def evaluate(node: Node, fake: bool = False) -> list[Any]:
    """The results of ``node`` computed by the program's own op on its inputs' constant data (an
    operand only the shape of which the op reads, see :data:`SHAPE_ONLY_OPS`, is an uninitialized
    tensor of its type). Results are returned as the op gives them (possibly views of the data).
    With ``fake``, the op runs on fake tensors: the results have the real ones' dtypes and shapes,
    and no data (nothing is allocated; an op PyTorch has no shape function for raises)."""

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from xir.fx_import import DTYPE_TO_TORCH, op_arguments

    from ..fx.writeback import resolve_op

    target = resolve_op(node.op)
    shaped = node.input if node.op in SHAPE_ONLY_OPS else None
    mode = FakeTensorMode(allow_fallback_kernels=False) if fake else None

    def tensor(value: Value):
        if value is shaped:
            return torch.empty(tuple(value.shape), dtype=DTYPE_TO_TORCH[value.dtype])
        return value.data if mode is None else mode.from_tensor(value.data)

    with torch.no_grad(), _real_tensors(), mode or contextlib.nullcontext():
        args, kwargs = op_arguments(target._schema, node, tensor)
        out = target(*args, **kwargs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _contiguous_in_program(value: Value) -> bool:
    """Whether the program's tensor for ``value`` has the default dim order, by the FX metadata the
    importer linked (False when there is none: a parsed graph, a node a pass created)."""
    import torch

    fx_node = value.fx_node if value.is_input else getattr(value.producer, "fx_node", None)
    val = fx_node.meta.get("val") if fx_node is not None else None
    if isinstance(val, (list, tuple)):
        val = val[value.index] if value.index < len(val) else None
    return isinstance(val, torch.Tensor) and val.is_contiguous()


def _real_tensors():
    """A context where no fake tensor mode is active (the folded data must be real)."""

    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:  # pragma: no cover (older torch)
        return contextlib.nullcontext()
    return unset_fake_temporarily()


def _first_line(error: Exception) -> str:
    message = str(error).strip()
    return f"{type(error).__name__}: {message.splitlines()[0] if message else ''}"


def _check_results(node: Node, results: list[Any]) -> None:
    import torch

    from xir.fx_import import TORCH_TO_DTYPE

    if len(results) != len(node.results):
        raise FoldError(f"evaluating it gave {len(results)} result(s), the node has {len(node.results)}")
    for value, data in zip(node.results, results):
        if not isinstance(data, torch.Tensor):
            raise FoldError(f"evaluating it gave {type(data).__name__} for result {value.index}, not a tensor")
        got = TensorType(TORCH_TO_DTYPE[data.dtype], tuple(data.shape)) if data.dtype in TORCH_TO_DTYPE else None
        if got != value.type:
            raise FoldError(
                f"evaluating it gave {got if got is not None else data.dtype} for result {value.index}, "
                f"but the node's result type is {value.type}: the fold would change the program"
            )


class _Fold(RewritePattern):
    """The rule: fold one node (matched on every op). One object per run: it keeps the run's context."""

    ops = ()
    name = RULE

    def __init__(self, graph: Graph, max_elements: int):
        self.max_elements = max_elements
        self.written = written_constants(graph)
        self.namer = Namer(graph)  # the report names nodes as the IR printed before the pass does
        self.report = FoldReport()
        self.created: list[Value] = []

    def decline(self, node: Node, rewriter: Rewriter, reason: str) -> bool:
        self.report.skipped.append((print_node(node, self.namer), reason))
        return rewriter.notify_match_failure(node, reason)

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        shape_only = node.op in SHAPE_ONLY_OPS and bool(node.operands) and isinstance(node.input.type, TensorType)
        inputs = list(node.inputs())
        data_inputs = inputs[1:] if shape_only else inputs  # (full_like reads only the shape of its first operand)
        if not all(v.is_constant for v in data_inputs):
            return False  # reads a value computed at run time: the common case, not worth a reason
        readers = [[u for u in r.uses if not u.is_return] for r in node.results]
        if not any(readers):
            if any(r.is_graph_output() for r in node.results):
                return self.decline(
                    node, rewriter, "its result is a graph output only (a constant is never made a graph output)"
                )
            return False  # dead: dead-code elimination erases it
        why = self._why_not(node, readers, data_inputs, shape_only)
        if why:
            return self.decline(node, rewriter, why)
        try:
            shapes = evaluate(node, fake=True)
        except Exception as error:  # folding is an optimization: the node stays computed
            return self.decline(node, rewriter, f"evaluating it on fake tensors failed: {_first_line(error)}")
        _check_results(node, shapes)  # a mismatch raises (the rewriter names the node) before anything is allocated
        try:
            results = evaluate(node)
        except Exception as error:
            return self.decline(node, rewriter, f"evaluating it failed: {_first_line(error)}")
        _check_results(node, results)
        if not all(r.is_contiguous() for r in results):
            # the IR records no dim order, and a constant is written contiguous: the program's readers
            # of a channels-last copy (or a strided view) expect the layout they were traced with
            return self.decline(node, rewriter, "its result is not contiguous (a dim order other than the default)")
        self._replace(
            node, [r.detach().clone() for r in results], readers, rewriter
        )  # (its own data: an op may return a view)
        return True

    def _why_not(self, node: Node, readers: list, data_inputs: list[Value], shape_only: bool) -> str | None:
        """Why ``node``, whose inputs are all constants, must stay computed (before evaluating it)."""
        definition = node.definition
        if definition is None:
            return "an opaque op (no definition in xir.ops): it may have side effects"
        if not definition.is_pure:
            return "not a pure op"
        why = never_folded(node.op)
        if why:
            return why
        if any(user.op in DECOMPOSED_LINEAR_OPS for users in readers for user in users):
            return (
                "the weight of a decomposed linear (ExecuTorch's XNNPACK preprocessing "
                "rebuilds the linear from the permute or view it reads)"
            )
        for value in data_inputs:
            if value.data is None:
                return f"the constant {value.describe()} has no data"
            if id(value) in self.written:
                return self.written[id(value)]
        for result in node.results:
            if not isinstance(result.type, TensorType):
                return f"result {result.index} is not a tensor ({result.type})"
            if not result.type.is_static:
                return f"result {result.index} has a symbolic shape ({result.type})"
            if result.type.numel() > self.max_elements:
                return f"result {result.index} has {result.type.numel()} elements, more than max_elements={self.max_elements}"
        if (
            shape_only
            and node.input.rank in (4, 5)
            and not _contiguous_in_program(node.input)
            and node.attributes.get("memory_format") != EnumAttr("memory_format", "contiguous_format")
        ):
            return f"its result keeps the dim order of {node.input.describe()}, which may be channels-last"
        return None

    def _replace(self, node: Node, results: list, readers: list, rewriter: Rewriter) -> None:
        base = "folded_" + node.op.split(".")[1].strip("_")
        for result, data, result_readers in zip(node.results, results, readers):
            if not result_readers:
                continue
            constant = rewriter.add_constant(base, result.type, data)
            self.created.append(constant)
            rewriter.replace_all_uses(result, constant, outputs=False)  # a returned result stays the node's
        if all(r.is_unused() for r in node.results):
            rewriter.erase(node)
        self.report.folded[node.op] += 1


# the last report of each pass object, by identity (pass objects with equal options are equal)
_REPORTS: dict[int, FoldReport] = {}


def _keep_report(p: "FoldConstants", report: FoldReport) -> None:
    if id(p) not in _REPORTS:
        weakref.finalize(p, _REPORTS.pop, id(p), None)
    _REPORTS[id(p)] = report


@attrs.frozen
class FoldConstants(Pass):
    """Evaluate nodes that read only constants (or nothing: arange, full, ...) and use the results as constants."""

    name = "fold-constants"
    # after the rewrites that match ops it would fold (safe-softmax's full_like), before those it saves
    # work or delegation (a scalar op on a constant folds whole; a cast weight becomes a constant, not a convert)
    runs_after = ("xnnpack.safe-softmax",)
    runs_before = ("xnnpack.scalar-operands-as-constants", "xnnpack.casts-as-converts")

    max_elements: int = attrs.field(default=DEFAULT_MAX_ELEMENTS, validator=attrs.validators.ge(0))

    def run(self, graph: Graph) -> bool:
        rule = _Fold(graph, self.max_elements)
        stats = apply_patterns_greedily(graph, [rule])
        report = rule.report
        for constant in rule.created:
            if constant.is_unused():  # an intermediate of a chain folded further
                graph.remove_input(constant)
            else:
                report.constants += 1
                report.elements += constant.type.numel()
        report.stats = stats
        _keep_report(self, report)
        logger.info("fold-constants: %s", report.summary())
        return stats.changed

    @property
    def last_report(self) -> FoldReport | None:
        """What the last run folded (and why nodes reading only constants were not folded)."""
        return _REPORTS.get(id(self))

    @property
    def last_stats(self) -> RewriteStats | None:
        report = _REPORTS.get(id(self))
        return report.stats if report is not None else None

    @property
    def folded(self) -> Counter:
        """Nodes folded in the last run, by op."""
        report = _REPORTS.get(id(self))
        return report.folded if report is not None else Counter()
