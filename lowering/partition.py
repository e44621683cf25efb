"""Partitioning in the IR: units become delegate groups, and the plan says why the rest stays out.

Graph mode merges units into groups greedily in program order, as long as each group stays
convex: no path leaves a group and comes back into it through a node outside (that would be a
cycle between the delegate and the rest of the program). Per-op mode makes one group per unit.

The :class:`PartitionPlan` is plain data: groups (nodes, implicit Q/DQ), and every node left
outside with the rule and the reason. Emission to ExecuTorch reads only the plan.
"""

from __future__ import annotations

from typing import Callable

import attrs

from xir import Graph, Node, TensorType
from xir.ops import aten, dim_order_ops, has_trait, quantized_decomposed

from .capability import (
    AFFINE_RULE,
    LINEAR_OPS,
    UNRUNNABLE_RULE,
    Capability,
    Options,
    Unit,
    Verdict,
    analyse,
    is_float_conv1d,
    zero_pad,
)
from .ops import xir_ops
from .report import format_report
from .rules import (
    CHANNELS_LAST_OPS,
    CHOOSE_QPARAMS_OPS,
    DEQUANTIZE_OPS,
    DYNAMIC,
    FP32,
    LAYOUT_RESET_OPS,
    QUANTIZE_OPS,
    STATIC_OPERAND_OPS,
    after_channels_last_op,
    is_static,
    quantized_data,
)


@attrs.define(eq=False)
class Group:
    index: int
    nodes: list[Node]
    implicit: list[Node] = attrs.field(factory=list)  # Q/DQ folded into their op (committed)
    units: list[Unit] = attrs.field(factory=list)

    @property
    def tag(self) -> str:
        return f"tag{self.index}"

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]


@attrs.define
class Rejection:
    node: Node
    rule: str
    reason: str
    check: str = ""  # the named check that rejected it (lowering.capability.checks.TABLES), where one did


class NotLowerable(AssertionError):
    """The program cannot be lowered: ops that only XNNPACK runs (torchao's affine quantize and
    dequantize ops have no ExecuTorch kernel; ExecuTorch's choose_qparams kernel aborts on fp16) are
    in a pattern XNNPACK cannot take. An
    AssertionError, as ExecuTorch's own XNNPACK lowering raises for these programs."""


@attrs.define
class PartitionPlan:
    groups: list[Group]
    rejected: list[Rejection]
    options: Options
    # delegated matmuls of a linear that XNNPACK's preprocessing must not rebuild (emit_tags)
    kept_matmuls: list[str] = attrs.field(factory=list)
    # the decomposed linears of the graph (capability.decomposed_linears), by id of the matmul
    linears: dict = attrs.field(factory=dict)

    @property
    def whole_linears(self) -> list:
        """The decomposed linears delegated whole: matmul, views and weight transpose in one group
        (XNNPACK's preprocessing rebuilds these into the linear they were)."""
        group_of = {id(n): g.tag for g in self.groups for n in g.nodes}
        return [
            lin
            for lin in self.linears.values()
            if group_of.get(id(lin.matmul)) is not None
            and all(group_of.get(id(n)) == group_of[id(lin.matmul)] for n in list(lin.reshapes) + [lin.transpose])
        ]

    @property
    def unlowerable(self) -> list[Rejection]:
        """Rejected nodes whose ops run nowhere but in XNNPACK (see :data:`capability.AFFINE_RULE`,
        :data:`capability.UNRUNNABLE_RULE`). Not xir's own ops (``xir.*``, made by its transform
        passes for XNNPACK): one left outside is left to the next partitioner of the list, and what
        no delegate takes is written back as the ATen ops it stands for (``lowering.fx.xir_ops_as_aten``)."""
        return [r for r in self.rejected if r.rule in (AFFINE_RULE, UNRUNNABLE_RULE)]

    def raise_if_unlowerable(self) -> None:
        """Raise :class:`NotLowerable` naming each such node and why XNNPACK cannot take it."""
        if self.unlowerable:
            lines = "\n".join(f"  {r.node.op} {r.node.results[0].type}: {r.reason}" for r in self.unlowerable)
            raise NotLowerable(
                f"XNNPACK cannot run these ops, and their quantize/dequantize ops cannot run outside an "
                f"XNNPACK delegate either (torchao's have no ExecuTorch kernel):\n{lines}"
            )

    def group_of(self, node: Node) -> Group | None:
        for group in self.groups:
            if any(n is node for n in group.nodes):
                return group
        return None

    @property
    def delegated_nodes(self) -> list[Node]:
        return [n for g in self.groups for n in g.nodes]

    def report(self) -> str:

        return format_report(self)


class _UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(x, x) != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
        return ra


def plan_partition(graph: Graph, options: Options, capability: Capability | None = None) -> PartitionPlan:
    """Group the capable units, then check the plan as ExecuTorch and XNNPACK will see it, and
    repair it until every check holds: each check of :data:`REPAIRS` (a small function over one
    group, with what is done where it finds something), and then that the graph with every group
    contracted to one vertex is acyclic (so every group is convex and no two delegates wait on
    each other): groups in a cycle are split into their units, and a unit that is itself in a
    cycle (not convex, e.g. through a shared dequantize) stays outside. Before grouping, one
    dynamically quantized activation read by both a conv and a linear stays outside
    (:func:`_conv_and_linear_share_dynamic_activation`)."""
    capability = capability or analyse(graph, options)
    for unit in [u for u in capability.units if _conv_and_linear_share_dynamic_activation(u)]:
        conv = next(n for n in unit.nodes if n.op == aten.convolution)
        _drop_unit(capability, conv, Verdict(False, "quant", CONV_AND_LINEAR_SHARE_ACTIVATION))
    order = graph.order()
    alone: set[int] = set()  # ids of units that may not be merged with others
    while True:
        groups = _groups(graph, options, capability, order, alone)
        if _repair(groups, capability, alone):
            continue
        cycle = _groups_in_a_cycle(graph, groups)
        if not cycle:
            break
        _split_cycle(cycle, capability, alone, order)
    return PartitionPlan(groups, _rejections(graph, groups, capability), options, linears=capability.linears)


@attrs.frozen
class Repair:
    """A check of the planned groups and how a group that fails it is repaired. ``find`` returns,
    for one group, the nodes (``drop``, ``detach``) or units (``isolate``) that break the check:

    * ``drop``: the node's unit stays outside, the node with ``rule`` and ``reason`` (a text, or a
      function of the node and its group);
    * ``detach``: the node (a Q/DQ) alone stays outside, the rest of its unit in;
    * ``isolate``: the unit is planned in a delegate of its own (checked in shared groups only)."""

    name: str
    find: Callable[[Group], list]
    action: str
    rule: str = "unit"
    reason: str | Callable[[Node, Group], str] = ""

    def apply(self, groups: list[Group], capability: Capability, alone: set[int]) -> bool:
        """Repair what the check finds in ``groups``; whether it found anything."""
        found = False
        for group in groups:
            if self.action == "isolate" and len(group.units) < 2:
                continue
            for target in self.find(group):
                found = True
                if self.action == "isolate":
                    alone.add(id(target))
                    continue
                reason = self.reason(target, group) if callable(self.reason) else self.reason
                act = _drop_unit if self.action == "drop" else _detach_from_unit
                act(capability, target, Verdict(False, self.rule, reason))
        return found


def _repair(groups: list[Group], capability: Capability, alone: set[int]) -> bool:
    """Apply every check of :data:`REPAIRS` to ``groups`` (all of them, on the same groups);
    whether any repaired something (the groups are then made again)."""
    repaired = [repair.apply(groups, capability, alone) for repair in REPAIRS]
    return any(repaired)


def _split_cycle(cycle: list[Group], capability: Capability, alone: set[int], order: dict[int, int]) -> None:
    """Break a cycle of groups: merged groups in it are split into their units; single units in it
    that are not convex themselves stay outside, else the last one."""
    merged = [g for g in cycle if len(g.units) > 1]
    if merged:
        alone.update(id(u) for g in merged for u in g.units)
        return
    culprits = [g for g in cycle if not _is_convex(g.nodes, order)] or [max(cycle, key=lambda g: order[id(g.nodes[0])])]
    for g in culprits:
        _drop_unit(capability, g.units[0].anchor, Verdict(False, "unit", NOT_CONVEX))


def _rejections(graph: Graph, groups: list[Group], capability: Capability) -> list[Rejection]:
    """Every node in no group, with the rule and the reason that kept it out."""
    in_group = {id(n) for g in groups for n in g.nodes}
    rejected = []
    for node in graph:
        if id(node) not in in_group:
            verdict: Verdict = capability.verdict(node)
            rejected.append(Rejection(node, verdict.rule or "op", verdict.reason or "not supported", verdict.check))
    return rejected


ZERO_D_OUTPUT = (
    "its 0-D result, computed from a 0-D static tensor, would leave the delegate (XNNPACK makes it 1-D "
    "and ExecuTorch 1.5.1 cannot resize the 0-D output to it: 'Size needs to be equal to the number "
    "of dimensions')"
)
NOT_CONVEX = (
    "its pattern (the op with its Q/DQ) is not convex: a path leaves it and comes back through a node "
    "outside, so it cannot be one delegate"
)


def _groups(
    graph: Graph, options: Options, capability: Capability, order: dict[int, int], alone: set[int]
) -> list[Group]:
    units = sorted(capability.units, key=lambda u: min(order[id(n)] for n in u.nodes))
    if options.per_op_mode:
        merged = [[u] for u in units]
    else:
        mergeable = [u for u in units if id(u) not in alone]
        merged = _merge_adjacent(graph, _merge_convex(graph, mergeable, capability)) + [
            [u] for u in units if id(u) in alone
        ]
    groups = []
    for i, unit_list in enumerate(sorted(merged, key=lambda us: min(order[id(n)] for u in us for n in u.nodes))):
        nodes = sorted({id(n): n for u in unit_list for n in u.nodes}.values(), key=lambda n: order[id(n)])
        implicit = [n for u in unit_list for n in u.implicit]
        groups.append(Group(i, nodes, implicit, unit_list))
    return groups


QUANTIZES_0D_INPUT = (
    "it quantizes a 0-D value computed outside the delegate: XNNPACK's channels-last pass "
    "indexes that delegate input's tensor and fails ('IndexError: invalid index of a 0-dim "
    "tensor', stock's program too); outside, the delegate reads the quantized value"
)


def _quantizes_of_0d_inputs(group: Group) -> list[Node]:
    """The quantizes of ``group`` that read a 0-D value computed outside it (an op left outside,
    such as an amax over all dims, or a graph input). In the delegate, that value is an input
    whose dequantized copy XNNPACK's ChannelsLastTaggedReshapePass inspects by indexing its
    tensor's first element, which a 0-D tensor has not (fuzz static seed 1733). Left outside, the
    quantize hands the delegate an int8 0-D input, and the dequantize that reads it stays in."""
    inside = {id(n) for n in group.nodes}
    return [
        n
        for n in group.nodes
        if n.op == quantized_decomposed.quantize_per_tensor
        and n.input.rank == 0
        and not n.input.is_constant
        and (n.input.producer is None or id(n.input.producer) not in inside)
    ]


CLONE_OPS = (aten.clone, dim_order_ops._clone_dim_order)
CLONE_PASSES_THROUGH = (
    "a copy whose result leaves the delegate while the value it copies leaves it too: XNNPACK's "
    "preprocessing drops the copy, and the delegate would return one value twice (ExecuTorch "
    "refuses that)"
)


def _clones_passing_through(group: Group) -> list[Node]:
    """The clones of ``group`` that XNNPACK's preprocessing (RemoveCloneOpsTransform) would drop
    where the delegate then returns one value twice: the result leaves the group, and the operand
    is computed in the group and leaves it as well. (A copy of a delegate input to a delegate
    output is kept by XNNPACK's preprocessing; one of a value used only inside is dropped, the
    value returned in its place.)"""
    inside = {id(n) for n in group.nodes}

    def leaves(value) -> bool:
        return any(user.is_return or id(user) not in inside for user in value.users)

    found = []
    for node in group.nodes:
        if node.op not in CLONE_OPS or not node.operands or not leaves(node.results[0]):
            continue
        source = node.input
        if source.producer is not None and id(source.producer) in inside and leaves(source):
            found.append(node)
    return found


CONV_AND_LINEAR_SHARE_ACTIVATION = (
    "a conv and a linear read one dynamically quantized activation: XNNPACK's channels-last pass "
    "converts the activation for the conv and moves the linear onto the converted copy, which then "
    "reaches the linear through a contiguous copy instead of a dequantize ('Weight and Input should "
    "both be quantized', stock's program too)"
)


def _conv_and_linear_share_dynamic_activation(unit: Unit) -> bool:
    """A dynamically quantized unit in which one choose_qparams/quantize/dequantize feeds both a
    conv and a linear (fuzz dynamic seed 30349): no delegate can hold it."""
    return (
        unit.kind == DYNAMIC
        and any(n.op == aten.convolution for n in unit.nodes)
        and any(n.op in LINEAR_OPS for n in unit.nodes)
    )


def _dynamic_units_misread_by_channels_last(group: Group) -> list[Unit]:
    """The dynamically quantized units of ``group`` that XNNPACK's channels-last pass would break
    unless they are in a delegate of their own (where their activation arrives contiguous, as a
    delegate input):

    * a linear whose 4-D activation comes, through ops that keep the layout, from an op the
      delegate computes channels-last (a conv, a pooling, ...) in the same group: the pass puts a
      contiguous copy between the activation's dynamic dequantize and the linear (it re-quantizes
      around such a copy only for static dequantizes), and the linear, no longer reading a
      dequantize, fails to lower: "Weight and Input should both be quantized" (fuzz dynamic seed
      30012);
    * a conv whose activation is computed in the same group and not already channels-last: to
      convert it, the pass follows first arguments from the dequantize up to a graph input and
      converts that input for all its readers (fuzz dynamic seed 30116: through a linear to its
      1-D bias, "required rank 4 tensor to use channels_last format")."""
    inside = {id(n) for n in group.nodes}
    found = []
    for unit in group.units:
        if unit.kind != DYNAMIC:
            continue
        choose = next((n for n in unit.nodes if n.op in CHOOSE_QPARAMS_OPS), None)
        if choose is None:
            continue
        activation = quantized_data(choose)
        if any(n.op in LINEAR_OPS for n in unit.nodes):
            if activation.rank == 4 and after_channels_last_op(activation, within=inside) is not None:
                found.append(unit)
        elif any(n.op == aten.convolution for n in unit.nodes):
            if (
                activation.producer is not None
                and id(activation.producer) in inside
                and not _channels_last_chain(activation, inside)
            ):
                found.append(unit)
    return found


def _pads_of_computed_conversions(group: Group) -> list[Unit]:
    """The units of ``group`` whose pad, with a padding value other than 0, reads an ``xir.convert``
    of the group that converts a value also computed in the group. XNNPACK pads such a value with
    0 (measured: bf16 relu -> convert to f32 -> pad with -1 gives 0 in the padding; a convert of a
    delegate input, or another op between convert and pad, pads right; fuzz bf16 seed 20194). In
    a delegate of its own, the pad reads the converted value as a delegate input."""
    inside = {id(n) for n in group.nodes}
    found = []
    for unit in group.units:
        for node in unit.nodes:
            if node.op != aten.constant_pad_nd or float(node.attributes.get("value", 0.0) or 0.0) == 0.0:
                continue
            convert = node.input.producer
            if (
                convert is not None
                and convert.op == xir_ops.convert
                and id(convert) in inside
                and convert.input.producer is not None
                and id(convert.input.producer) in inside
            ):
                found.append(unit)
                break
    return found


def _readers_of_converted_conv_inputs(group: Group) -> list[Unit]:
    """The units of ``group`` that read, other than through a conv, a 4-D delegate input that a
    quantized conv of the group also reads through its quantize/dequantize: XNNPACK's channels-last
    pass converts such an input for the conv by following first arguments from the dequantize up
    to the input, and then every reader in the delegate gets the converted copy (fuzz dynamic seed
    49000: a view of the input to rows for a linear read channels-last data; stock's program of the
    same three ops is wrong too). In a delegate of its own, the reader gets the input contiguous."""
    inside = {id(n) for n in group.nodes} | {id(n) for n in group.implicit}
    unit_of = {id(n): unit for unit in group.units for n in unit.nodes}
    found: list[Unit] = []
    for conv in (n for n in group.nodes if n.op == aten.convolution):
        chain, quantized, value = {id(conv)}, False, conv.operands[0]
        while (
            value.producer is not None
            and id(value.producer) in inside
            and value.producer.op in DEQUANTIZE_OPS + QUANTIZE_OPS
        ):
            chain.add(id(value.producer))
            quantized = quantized or value.producer.op in DEQUANTIZE_OPS
            value = value.producer.operands[0]
        # (a conv whose activation the group computes is _dynamic_units_misread_by_channels_last's)
        computed = value.producer is not None and id(value.producer) in inside
        if not quantized or computed or not isinstance(value.type, TensorType) or value.rank != 4:
            continue
        for reader in value.readers:
            unit = unit_of.get(id(reader))
            if (
                unit is None
                or id(reader) in chain
                or unit is unit_of.get(id(conv))
                or unit in found
                or any(n.op in CHANNELS_LAST_OPS for n in unit.nodes)
                or _reads_any_layout(unit)
            ):
                continue
            found.append(unit)
    return found


def _reads_any_layout(unit: Unit) -> bool:
    """A float unit of one elementwise op whose tensor operands are all 4-D: XNNPACK's channels-last
    pass converts every one of them to the converted input's layout (a per-channel ``x * scale``
    beside a dynamically quantized conv of ``x``: one delegate, eager's numbers, as stock's)."""
    return (
        unit.kind == FP32
        and len(unit.nodes) == 1
        and has_trait(unit.anchor.op, "elementwise")
        and all(v.rank == 4 for v in unit.anchor.operands if isinstance(v.type, TensorType))
    )


def _softmaxes_after_channels_last_ops(group: Group) -> list[Unit]:
    """The units of ``group`` with a 4-D softmax whose input comes, through ops of the group that
    keep the layout, from an op the delegate computes channels-last (a conv, a pooling, a mean,
    ...): XNNPACK would normalize over the channels instead of the last dim (stock does, and is
    wrong). In a delegate of its own, the softmax reads its input as a delegate input, contiguous
    (fuzz fp32 seeds 10121, 10253, ...: before, such a softmax stayed outside XNNPACK)."""
    inside = {id(n) for n in group.nodes}
    return [
        unit
        for unit in group.units
        if any(
            n.op == aten._softmax and n.input.rank == 4 and after_channels_last_op(n.input, within=inside) is not None
            for n in unit.nodes
        )
    ]


def _dequantizes_of_float_conv1ds(group: Group) -> list[Unit]:
    """The standalone dequantizes of ``group`` read by a 1-D conv of the group whose weight is a
    float constant (a grouped ConvTranspose1d XNNPACKQuantizer leaves in fp32 on a quantized
    input, run between conversions). XNNPACK's preprocessing (Conv1dUnsqueezePass) makes the conv
    2-D and, as its input is a dequantize, quantizes and dequantizes again after the unsqueeze: the
    conv then reads a dequantize, counts as quantized, and its float weight fails to lower,
    "Weight and Input should both be quantized" (stock's program too; fuzz static seeds 1318,
    1582, 2109). In a delegate of its own, the dequantize hands the conv's delegate an fp32 input."""
    inside = {id(n) for n in group.nodes}
    found = []
    for unit in group.units:
        if unit.kind != "convert" or unit.anchor.op not in DEQUANTIZE_OPS:
            continue
        for reader in unit.anchor.results[0].users:
            if id(reader) in inside and is_float_conv1d(reader) and reader.input is unit.anchor.results[0]:
                found.append(unit)
                break
    return found


ZERO_PAD_QUANTIZED_BY_PREPROCESSING = (
    "a zero pad of a dequantized value, run in fp32 between conversions, whose quantize is not in its delegate: "
    "XNNPACK's preprocessing (InsertPadQDQPass) would quantize its output there, and the pad would get an "
    'f32 input and an int8 output ("Failed to create StaticConstantPad node" at load)'
)


def _zero_pads_quantized_by_preprocessing(group: Group) -> list[Node]:
    """The pads of ``group`` that run in fp32 between conversions (a unit of their own), pad with
    zeros, and read a dequantize of the group, while no quantize of the group reads them: XNNPACK's
    preprocessing sees the delegate's graph, in which such a pad's output is not quantized, and
    quantizes it (:func:`.capability.patterns.quantized_by_preprocessing`; the capability lets a
    zero pad run between conversions only where a quantize reads it, which may land in another
    delegate or outside)."""
    inside = {id(n) for n in group.nodes}
    found = []
    for unit in group.units:
        pad = unit.anchor
        if pad.op != aten.constant_pad_nd or unit.kind != FP32 or not zero_pad(pad):
            continue
        source = pad.input.producer
        if source is None or source.op not in DEQUANTIZE_OPS or id(source) not in inside:
            continue
        if not any(id(reader) in inside and reader.op in QUANTIZE_OPS for reader in pad.results[0].users):
            found.append(pad)
    return found


def _channels_last_chain(value, inside: set, seen: dict | None = None) -> bool:
    """Whether ``value`` is computed, in the group ``inside``, by an op XNNPACK keeps channels-last,
    or from such values by ops that keep the layout, every tensor operand of which is itself such a
    value (``h * sigmoid(h)`` after a conv). An operand from outside the chain, a constant included,
    ends it: a conv7 -> ``x * 0.75`` (or ``+ c``, or ``* w`` per channel) -> dynamically quantized
    conv in one delegate loads, then fails on every call with "Propagating input shapes failed"
    (fuzz dynamic seed 46043); a relu between them runs."""
    seen = {} if seen is None else seen
    node = value.producer
    if node is None or id(node) not in inside:
        return False
    if id(node) not in seen:
        seen[id(node)] = False  # (a DAG: no value reaches itself; this only saves work)
        operands = [v for v in node.operands if isinstance(v.type, TensorType)]
        seen[id(node)] = node.op in CHANNELS_LAST_OPS or (
            node.op not in LAYOUT_RESET_OPS
            and bool(operands)
            and all(_channels_last_chain(v, inside, seen) for v in operands)
        )
    return seen[id(node)]


def _folded_read_outside(group: Group) -> list[Node]:
    """The folded dequantizes of ``group`` read by a node outside it (XNNPACK hands a folded
    dequantize's readers the int8 data)."""
    inside = {id(n) for n in group.nodes}  # (once per group: a quantized group folds many dequantizes)
    return [dq for dq in group.implicit if dq.op in DEQUANTIZE_OPS and _reader_outside(dq, inside) is not None]


def _reader_outside(node: Node, inside: set[int]) -> Node | None:
    return next((reader for reader in node.results[0].users if id(reader) not in inside), None)


def _folded_read_outside_reason(dq: Node, group: Group) -> str:
    reader = _reader_outside(dq, {id(n) for n in group.nodes})
    return f"its dequantize is folded into a quantized op but also read by {reader.op} outside that op's delegate"


SELECT_AS_SLICE = "xnnpack.select-as-slice"  # (the pass's name: its module is imported only when a pipeline names it)
SELECT_AT_THE_EDGE = (
    "a select at its delegate's edge (its operand computed outside the delegate, or its result read "
    "only outside): inside it is an XNNPACK slice and reshape, outside one ExecuTorch copy, as in "
    "stock's program, and it joins nothing (ExecuTorch's LSTM example ran 1.02x stock's latency with "
    "its 9 such selects inside, 0.995x outside)"
)


def _selects_at_the_edge(group: Group) -> list[Node]:
    """The float selects of ``group`` (the slice and view of ``xnnpack.select-as-slice``) at its
    edge, with the views that lead to them from outside and from them to their readers: the chain
    read from a value computed outside the group (a graph input, another delegate's output), or
    every reader of its last view outside it."""
    inside = {id(n) for n in group.nodes}
    float_nodes = {id(n) for u in group.units if u.kind == FP32 for n in u.nodes}

    def view_inside(node) -> bool:
        return node is not None and node.op == aten.view_copy and id(node) in float_nodes

    found = []
    for node in group.nodes:
        if node.op != aten.slice_copy.Tensor or node.origin != SELECT_AS_SLICE or id(node) not in float_nodes:
            continue
        down, value = [], node.result
        while len(value.uses) == 1 and view_inside(value.uses[0]):
            down.append(value.uses[0])
            value = down[-1].result
        if not down:  # (a slice of its own, not a select's)
            continue
        up, source = [], node.input
        while view_inside(source.producer):
            up.append(source.producer)
            source = up[-1].input
        from_outside = (source.producer is None or id(source.producer) not in inside) and not is_static(source)
        read_outside = all(user.is_return or id(user) not in inside for user in value.users)
        if from_outside:
            found += up + [node] + down
        elif read_outside:
            found += [node] + down
    return found


def _groups_in_a_cycle(graph: Graph, groups: list[Group]) -> list[Group]:
    """The groups on a cycle of the graph in which each group is contracted to one vertex
    (strongly connected components of more than one vertex; Tarjan's algorithm, iterative)."""
    vertex: dict[int, int] = {}
    for g in groups:
        for n in g.nodes:
            vertex[id(n)] = -1 - g.index
    successors: dict[int, set[int]] = {}
    for node in graph:
        v = vertex.get(id(node), id(node))
        for value in node.inputs():
            if value.producer is not None:
                u = vertex.get(id(value.producer), id(value.producer))
                if u != v:
                    successors.setdefault(u, set()).add(v)
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    in_cycle: set[int] = set()
    counter = 0
    for root in list(successors):
        if root in index:
            continue
        work = [(root, iter(successors.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(successors.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    in_cycle.update(component)
    return [g for g in groups if -1 - g.index in in_cycle]


def _is_convex(nodes: list[Node], order: dict[int, int]) -> bool:
    """No path leaves ``nodes`` and comes back into them through a node outside."""
    inside = {id(n) for n in nodes}
    last = max(order[id(n)] for n in nodes)
    stack = [u for n in nodes for r in n.results for u in r.readers if id(u) not in inside]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or order[id(node)] > last:
            continue
        seen.add(id(node))
        for r in node.results:
            for user in r.users:
                if id(user) in inside:
                    return False
                if not user.is_return:
                    stack.append(user)
    return True


def _zero_d_outputs(group: Group) -> list[Node]:
    """Nodes of ``group`` whose 0-D tensor result is read outside it (or returned) and is computed,
    in the group, from a 0-D static tensor. XNNPACK's static tensors have at least one dim, so such
    a result comes out 1-D and the runtime cannot resize the 0-D output to it ("Size needs to be
    equal to the number of dimensions"). A 0-D result computed from 0-D delegate inputs alone
    comes out 0-D (measured: abs, tanh of a sum; as stock delegates them), and other 0-D constants
    are delegate inputs (emit_tags tags a 0-D constant only as the operand of a
    :data:`STATIC_OPERAND_OPS` op: the dequantize of a quantized scalar)."""
    inside = {id(n) for n in group.nodes}

    def reads_0d_constant(start: Node) -> bool:  # (a walk up the group, without recursion: groups are large)
        seen, stack = {id(start)}, [start]
        while stack:
            node = stack.pop()
            for v in node.operands:
                if v.is_constant and isinstance(v.type, TensorType) and v.rank == 0 and node.op in STATIC_OPERAND_OPS:
                    return True
                if v.producer is not None and id(v.producer) in inside and id(v.producer) not in seen:
                    seen.add(id(v.producer))
                    stack.append(v.producer)
        return False

    return [
        n
        for n in group.nodes
        for r in n.results
        if isinstance(r.type, TensorType)
        and r.rank == 0
        and any(id(u) not in inside for u in r.uses)
        and reads_0d_constant(n)
    ]


def _drop_unit(capability: Capability, node: Node, verdict: Verdict) -> None:
    unit = capability.unit_of.get(id(node))
    if unit is None:
        return
    capability.units = [u for u in capability.units if u is not unit]
    for member in unit.nodes:
        capability.unit_of.pop(id(member), None)
        capability.verdicts[id(member)] = (
            verdict
            if member is node
            else Verdict(
                False, "unit", f"delegated only together with {node.op}, which stays outside: {verdict.reason}"
            )
        )


def _detach_from_unit(capability: Capability, node: Node, verdict: Verdict) -> None:
    """Leave ``node`` (a Q/DQ) outside and its unit's other nodes in: a unit of that node alone is
    dropped."""
    unit = capability.unit_of.get(id(node))
    if unit is None:
        return
    if all(member is node for member in unit.nodes):
        _drop_unit(capability, node, verdict)
        return
    unit.nodes = [m for m in unit.nodes if m is not node]
    unit.implicit = [m for m in unit.implicit if m is not node]
    capability.unit_of.pop(id(node), None)
    capability.verdicts[id(node)] = verdict


def _merge_adjacent(graph: Graph, groups: list[list[Unit]]) -> list[list[Unit]]:
    """Merge each group into the one before it (in program order) when no path leaves one and
    enters the other: independent branches share a delegate, so fewer delegate calls."""
    if len(groups) < 2:
        return groups
    order = graph.order()

    def nodes_of(us):
        return [n for u in us for n in u.nodes]

    def path_between(source: list[Node], target_ids: set[int], inside: set[int], limit: int) -> bool:
        """Is there a path from ``source`` into ``target_ids`` through a node outside ``inside``?"""
        stack = [user for n in source for r in n.results for user in r.users if id(user) not in inside]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if node.is_return or id(node) in seen or order[id(node)] > limit:
                continue  # (a path to the graph outputs enters no group)
            seen.add(id(node))
            for r in node.results:
                for user in r.users:
                    if id(user) in target_ids:
                        return True
                    if id(user) not in inside:
                        stack.append(user)
        return False

    result = [groups[0]]
    for group in groups[1:]:
        previous = result[-1]
        a, b = nodes_of(previous), nodes_of(group)
        a_ids, b_ids = {id(n) for n in a}, {id(n) for n in b}
        both = a_ids | b_ids
        last_a, last_b = max(order[id(n)] for n in a), max(order[id(n)] for n in b)
        first_b = min(order[id(n)] for n in b)
        a_to_b = path_between(a, b_ids, both, last_b)
        b_to_a = first_b < last_a and path_between(b, a_ids, both, last_a)
        if not a_to_b and not b_to_a:
            result[-1] = previous + group
        else:
            result.append(group)
    return result


def _merge_convex(graph: Graph, units: list[Unit], capability: Capability) -> list[list[Unit]]:
    """Greedy merging in program order; a merge happens only if the result stays convex.

    For every node we keep the set of groups among its strict ancestors ("tainted"), recorded for
    all nodes before merging. A unit may join group G only if none of its operands from outside G
    has G tainted: otherwise a path would leave G and come back.
    """
    merger = _ConvexMerger(graph, units, capability)
    for node in graph:  # (first every node's ancestors: a unit's nodes can lie far apart, see record_ancestors)
        merger.record_ancestors(node)
    for node in graph:
        merger.visit(node)
    return merger.groups()


class _ConvexMerger:
    """The state of :func:`_merge_convex`: groups as union-find roots (unit indices), their nodes
    and program-order extent, and each visited node's ancestor groups."""

    def __init__(self, graph: Graph, units: list[Unit], capability: Capability):
        self.units = units
        self.uf = _UnionFind()
        unit_index = {id(u): i for i, u in enumerate(units)}
        self.node_unit = {id(n): unit_index[id(capability.unit_of[id(n)])] for u in units for n in u.nodes}
        # ancestors[v]: group roots (as unit indices, resolved through uf) among the strict ancestors of v
        self.ancestors: dict[int, set[int]] = {}
        self.members: dict[int, list[Node]] = {i: list(u.nodes) for i, u in enumerate(units)}
        self.order = graph.order()
        self.first = {i: min(self.order[id(n)] for n in u.nodes) for i, u in enumerate(units)}
        self.last = {i: max(self.order[id(n)] for n in u.nodes) for i, u in enumerate(units)}

    def group_of(self, node: Node | None) -> int | None:
        """The group (root) ``node`` is in, None for a node in no unit (or no node)."""
        if node is None or id(node) not in self.node_unit:
            return None
        return self.uf.find(self.node_unit[id(node)])

    def reach(self, producer: Node) -> set[int]:
        """The groups among ``producer``'s ancestors, and its own."""
        result = {self.uf.find(g) for g in self.ancestors.get(id(producer), ())}
        own = self.group_of(producer)
        if own is not None:
            result.add(own)
        return result

    def ancestor_groups(self, node: Node) -> set[int]:
        result: set[int] = set()
        for v in node.inputs():
            if v.producer is not None:
                result |= self.reach(v.producer)
        return result

    def can_join(self, group: int, nodes: list[Node]) -> bool:
        """Can the nodes (one unit, or a whole group) join ``group`` without a path leaving and re-entering?"""
        g = self.uf.find(group)
        node_ids = {id(n) for n in nodes}
        for n in nodes:
            for v in n.inputs():
                p = v.producer
                if p is None or id(p) in node_ids or self.group_of(p) == g:
                    continue
                if g in self.reach(p):
                    return False
        return True

    def record_ancestors(self, node: Node) -> None:
        """Record the units among ``node``'s strict ancestors (as union-find indices: later merges
        resolve them). Recorded for every node before any merge, since a merge checks the
        ancestors of every operand of a whole unit, and a unit's nodes can lie far apart in program
        order (a concatenation's unit holds the dequantize of each of its inputs, each right after
        the branch that makes it): a check made before a later branch was visited would see none
        of that branch's ancestors, merge across it, and make a cycle (a quantized inception
        block: its pool branch, outside, reads the stem's group, and its concatenation joined that
        group too)."""
        self.ancestors[id(node)] = self.ancestor_groups(node)

    def visit(self, node: Node) -> None:
        """Merge ``node``'s unit into the groups of its operands' producers where the result stays convex."""
        u = self.group_of(node)
        if u is None:
            return
        for v in node.inputs():  # candidate groups: those of the producers of this node's operands
            g = self.group_of(v.producer)
            if g is None or g == u:
                continue
            # a path from u back into g is only possible if some node of g comes after u starts
            if self.can_join(g, self.members[u]) and (
                self.first[u] > self.last[g] or self.can_join(u, self.members[g])
            ):
                u = self.merge(g, u)

    def merge(self, g: int, u: int) -> int:
        root = self.uf.union(g, u)
        other = u if root == g else g
        if len(self.members[root]) < len(self.members[other]):
            self.members[root], self.members[other] = self.members[other], self.members[root]
        self.members[root].extend(self.members.pop(other))
        self.first[root] = min(self.first[root], self.first.pop(other))
        self.last[root] = max(self.last[root], self.last.pop(other))
        return root

    def groups(self) -> list[list[Unit]]:
        """The units of each group, the groups in program order."""
        roots: dict[int, list[Unit]] = {}
        for i, unit in enumerate(self.units):
            roots.setdefault(self.uf.find(i), []).append(unit)
        return sorted(roots.values(), key=lambda us: min(self.order[id(n)] for u in us for n in u.nodes))


# The checks of the planned groups, in the order they run (plan_partition): each is one function
# over a group, with an IR-text test in tests/lowering/test_repairs.py.
REPAIRS: tuple[Repair, ...] = (
    Repair("zero-d-output", _zero_d_outputs, "drop", "rank", ZERO_D_OUTPUT),
    Repair("folded-dequantize-read-outside", _folded_read_outside, "drop", "quant", _folded_read_outside_reason),
    Repair("clone-passes-through", _clones_passing_through, "drop", "unit", CLONE_PASSES_THROUGH),
    Repair("quantizes-0d-input", _quantizes_of_0d_inputs, "detach", "rank", QUANTIZES_0D_INPUT),
    Repair("select-at-the-edge", _selects_at_the_edge, "drop", "unit", SELECT_AT_THE_EDGE),
    # units XNNPACK's preprocessing would break in a shared delegate: each in one of its own
    Repair("dynamic-unit-misread-by-channels-last", _dynamic_units_misread_by_channels_last, "isolate"),
    Repair("reader-of-converted-conv-input", _readers_of_converted_conv_inputs, "isolate"),
    Repair("pad-of-computed-conversion", _pads_of_computed_conversions, "isolate"),
    Repair("softmax-after-channels-last-op", _softmaxes_after_channels_last_ops, "isolate"),
    Repair("dequantize-of-float-conv1d", _dequantizes_of_float_conv1ds, "isolate"),
    Repair(
        "zero-pad-quantized-by-preprocessing",
        _zero_pads_quantized_by_preprocessing,
        "drop",
        "quant",
        ZERO_PAD_QUANTIZED_BY_PREPROCESSING,
    ),
)
