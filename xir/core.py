"""Values, nodes and graphs.

A :class:`Graph` holds its inputs (user inputs, parameters, buffers, constants), its nodes
in program order and a *return node* whose operands are the graph's outputs. Every
:class:`Value` is either a graph input or one result of a :class:`Node`, and knows the nodes
that use it, the return node included: being a graph output is a use. So ``value.uses``,
``value.has_one_use()`` and ``value.single_user()`` give one answer that counts outputs, and
``graph.erase`` refuses a node whose result is still returned.

Use-lists are kept by the graph's editing methods; code outside this module never touches
them. Every edit goes through the graph (operands, attributes, outputs), so that
:meth:`Graph.checkpoint` / :meth:`Graph.rollback` can restore a graph exactly (the pass
manager does so when a pass raises).
"""

from __future__ import annotations

import contextlib
import enum
import types
from typing import Any, Iterable, Iterator

import attrs

from .errors import IRError
from .types import TensorType, Type

RETURN_OP = "return"


class InputKind(enum.Enum):
    """What a graph input is. The value is the keyword used in IR text."""

    user = "input"
    parameter = "param"
    buffer = "buffer"
    constant = "const"
    state = "state"  # a buffer the program writes (a KV cache, a counter): not a constant


@attrs.define(eq=False, repr=False)
class Value:
    """One result of a node, or one graph input.

    ``uses`` lists the nodes that read this value, once per reading position (a node that
    reads a value twice appears twice). The graph's return node is one of them when the value
    is a graph output (once per output position).
    """

    type: Type
    name: str | None = None  # graph inputs keep their names; results are numbered by the printer
    producer: Node | None = None
    index: int = 0  # which result of ``producer``
    input_kind: InputKind | None = None  # set for graph inputs only
    data: Any = None  # constant data of parameters, buffers and constants
    fx_node: Any = None  # the FX placeholder or get_attr an imported input came from
    uses: list[Node] = attrs.field(factory=list)

    @property
    def is_input(self) -> bool:
        return self.input_kind is not None

    @property
    def is_constant(self) -> bool:
        """A parameter, buffer or constant: data known before the program runs."""
        return self.input_kind in (InputKind.parameter, InputKind.buffer, InputKind.constant)

    @property
    def users(self) -> list[Node]:
        """Distinct nodes that use this value, in first-use order (the return node included)."""
        seen: dict[int, Node] = {}
        for node in self.uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

    @property
    def readers(self) -> list[Node]:
        """Distinct nodes that read this value, in first-use order: ``users`` without the return
        node (a graph output is a use, not a reader)."""
        return [node for node in self.users if not node.is_return]

    def scalar(self) -> Any:
        """The number this value holds when it is a constant of one element with data (a 0-D
        constant, as the edge dialect writes a Python scalar operand), else None."""
        if not self.is_constant or self.data is None or not isinstance(self.type, TensorType) or self.type.numel() != 1:
            return None
        return self.data.reshape(-1)[0].item()

    # the use questions, each with one answer that counts graph outputs
    def is_graph_output(self) -> bool:
        return any(node.is_return for node in self.uses)

    def is_unused(self) -> bool:
        """Nothing reads it, and it is not a graph output."""
        return not self.uses

    def has_one_use(self) -> bool:
        """Exactly one use: one node reads it once, or it is returned once and read by nobody."""
        return len(self.uses) == 1

    def single_user(self) -> Node | None:
        """The node that is this value's only use; None when the value has several uses, none,
        or when its only use is being a graph output. A rewrite that changes what this value
        holds (a fold into its producer) may do so only through this."""
        if len(self.uses) == 1 and not self.uses[0].is_return:
            return self.uses[0]
        return None

    @property
    def tensor_type(self) -> TensorType:
        if not isinstance(self.type, TensorType):
            raise IRError(f"value {self.describe()} is not a tensor (type {self.type})")
        return self.type

    @property
    def rank(self) -> int:
        return self.tensor_type.rank

    @property
    def dtype(self):
        return self.tensor_type.dtype

    @property
    def shape(self):
        return self.tensor_type.shape

    def describe(self) -> str:
        if self.name is not None:
            return f"%{self.name}"
        if self.producer is not None:
            return f"result {self.index} of {self.producer.op}"
        return "<detached value>"

    def __repr__(self) -> str:
        return f"<Value {self.describe()}: {self.type}>"


def iter_values(obj: Any) -> Iterator[Value]:
    """Every Value inside an attribute (which may nest lists and tuples)."""
    if isinstance(obj, Value):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from iter_values(item)


def map_values(obj: Any, fn) -> Any:
    """Rebuild an attribute with every Value replaced by ``fn(value)``."""
    if isinstance(obj, Value):
        return fn(obj)
    if isinstance(obj, list):
        return [map_values(item, fn) for item in obj]
    if isinstance(obj, tuple):
        return tuple(map_values(item, fn) for item in obj)
    return obj


@attrs.define(eq=False, repr=False)
class Node:
    """One operation: ``op`` applied to ``operands`` with non-tensor ``attributes``.

    ``op`` is the operator's name, e.g. ``aten.linear`` (the ``.default`` overload) or
    ``aten.add.Tensor``; its definition (:mod:`xir.ops`) names the operands, so a pass may
    write ``node.weight`` or ``node.operand("weight")``. Attributes hold every non-tensor
    argument by its schema name (read-only here: edit with ``graph.set_attribute``); an
    attribute may also refer to values (e.g. a symbolic size in a view's shape list).
    ``origin`` names the pass that created the node (None for imported nodes, but for a node an
    earlier lowering's pass wrote into the program: its ``meta["xir_origin"]``).
    ``fx_node`` links an imported node to the torch.fx node it came from.
    ``written_for`` is, for a node a rewrite rule created, the torch.fx node of the program's op
    the rule matched (through rules that matched nodes created by rules): write-back gives the new
    node that op's module, which source partitions (XNNPACK's linear rebuild) go by.
    ``location`` is, for a node read from IR text, the (line, column) where its text starts: the
    verifier's errors point there.
    """

    op: str
    operands: tuple[Value, ...] = ()
    _attributes: dict[str, Any] = attrs.field(factory=dict, alias="attributes")
    results: tuple[Value, ...] = ()
    origin: str | None = None
    fx_node: Any = None
    written_for: Any = None
    location: tuple[int, int] | None = None
    graph: Graph | None = None
    prev: Node | None = None
    next: Node | None = None

    @property
    def attributes(self) -> types.MappingProxyType:
        return types.MappingProxyType(self._attributes)

    @property
    def is_return(self) -> bool:
        return self.op == RETURN_OP

    @property
    def result(self) -> Value:
        """The single result of a one-result node."""
        if len(self.results) != 1:
            raise IRError(f"{self.op} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def definition(self):
        """The op's :class:`~xir.ops.OpDef`, or None for an opaque op."""
        from .ops import lookup

        return lookup(self.op)

    def operand(self, name: str):
        """The operand named ``name`` by the op's definition (None when an optional operand is
        absent; a tuple for a variadic one)."""
        definition = self.definition
        if definition is None:
            raise IRError(f"{self.op} is an opaque op (no definition in xir.ops): its operands have no names")
        return definition.operand(self, name)

    def attribute(self, name: str) -> Any:
        """The attribute ``name``, or the default its definition gives when the node leaves it out."""
        if name in self._attributes:
            return self._attributes[name]
        definition = self.definition
        if definition is None or name not in definition.attributes:
            known = ", ".join(sorted(set(self._attributes) | set(definition.attributes if definition else ())))
            raise IRError(f"{self.op} has no attribute {name!r} (it has: {known or 'none'})")
        return definition.attribute_default(name)

    def scalar(self, name: str) -> Any:
        """The number the argument ``name`` holds, however the program spells it: an attribute
        (``aten.mul.Scalar``'s ``other``; the default when the node leaves it out) or an operand that
        is a one-element constant (``aten.mul.Tensor`` reading a 0-D constant, as the edge dialect
        writes ``x * 2``). None when it holds no known number (a computed tensor)."""
        if name in self._attributes:
            value = self._attributes[name]
            return value if isinstance(value, (int, float)) else None
        definition = self.definition
        if definition is not None and definition.has_operand(name):
            operand = definition.operand(self, name)
            return operand.scalar() if isinstance(operand, Value) else None
        value = self.attribute(name)  # (the default, or an error naming what the node has)
        return value if isinstance(value, (int, float)) else None

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: named operands of defined ops (node.weight)
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            op = object.__getattribute__(self, "op")
        except AttributeError:
            raise AttributeError(name) from None
        from .ops import lookup

        definition = lookup(op)
        if definition is not None and definition.has_operand(name):
            return definition.operand(self, name)
        names = ", ".join(definition.operand_names) if definition is not None else "none (opaque op)"
        raise AttributeError(f"{op} node has no attribute or operand {name!r} (operands: {names})")

    def inputs(self) -> Iterator[Value]:
        """Every value this node reads: operands, then values inside attributes."""
        yield from self.operands
        for value in self._attributes.values():
            yield from iter_values(value)

    @property
    def users(self) -> list[Node]:
        seen: dict[int, Node] = {}
        for result in self.results:
            for user in result.uses:
                seen.setdefault(id(user), user)
        return list(seen.values())

    @property
    def readers(self) -> list[Node]:
        """The nodes that read any of its results: ``users`` without the return node."""
        return [node for node in self.users if not node.is_return]

    def __repr__(self) -> str:
        from .printer import print_node

        try:
            return f"<Node {print_node(self)}>"
        except Exception:  # a half-built node still gets a repr
            return f"<Node {self.op}>"


@attrs.frozen
class Checkpoint:
    """Everything :meth:`Graph.rollback` needs to restore a graph exactly."""

    name: str
    inputs: tuple
    nodes: tuple
    node_state: tuple  # (node, operands, attributes, results, origin, fx_node) per node
    value_state: tuple  # (value, type, name, producer, index, input_kind, data, fx_node, uses) per value
    outputs: tuple


class Graph:
    """Inputs, nodes in program order, and a return node whose operands are the outputs.

    Nodes form a doubly linked list so that inserting and erasing is O(1); iterate with
    ``for node in graph`` (safe against erasing the current node; the return node is not
    part of the iteration: it is ``graph.return_node``).
    """

    def __init__(self, name: str = "forward"):
        self.name = name
        self.inputs: list[Value] = []
        self._input_names: set[str] = set()
        self._first: Node | None = None
        self._last: Node | None = None
        self._count = 0
        self.return_node = Node(op=RETURN_OP, graph=self)
        # the name of the pass now running: nodes created without an explicit origin get it
        self.origin: str | None = None
        # the node the last edit was about: a failing pass's error names it
        self.focus: Node | None = None

    # ----------------------------------------------------------------- outputs
    @property
    def outputs(self) -> tuple[Value, ...]:
        """The graph's outputs: the return node's operands."""
        return self.return_node.operands

    @outputs.setter
    def outputs(self, values: Iterable[Value]) -> None:
        self.set_operands(self.return_node, values)

    def set_output(self, index: int, value: Value) -> None:
        self.set_operand(self.return_node, index, value)

    # ----------------------------------------------------------------- inputs
    def add_input(self, name: str, type: Type, kind: InputKind = InputKind.user, data: Any = None) -> Value:
        if name in self._input_names:
            raise IRError(f"graph already has an input named %{name}")
        value = Value(type=type, name=name, input_kind=kind, data=data)
        self.inputs.append(value)
        self._input_names.add(name)
        return value

    def add_constant(self, base: str, type: Type, data: Any, kind: InputKind = InputKind.parameter) -> Value:
        """A new constant input named ``base`` (or ``base_1``, ... when taken) holding ``data``."""
        return self.add_input(self.unique_input_name(base), type, kind, data)

    def unique_input_name(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ... : a name no input of this graph has."""
        name, i = base, 1
        while name in self._input_names:
            name, i = f"{base}_{i}", i + 1
        return name

    def remove_input(self, value: Value) -> None:
        if value.uses:
            raise IRError(f"cannot remove input {value.describe()}: it is still used")
        self.inputs.remove(value)
        self._input_names.discard(value.name)

    # ------------------------------------------------------------------ nodes
    def __iter__(self) -> Iterator[Node]:
        node = self._first
        while node is not None:
            following = node.next
            yield node
            node = following

    def __len__(self) -> int:
        return self._count

    @property
    def nodes(self) -> list[Node]:
        return list(self)

    def create_node(
        self,
        op: str,
        operands: Iterable[Value],
        result_types: Iterable[Type] | None = None,
        attributes: dict[str, Any] | None = None,
        origin: str | None = None,
    ) -> Node:
        """A new node, not yet placed in the graph; place it with ``insert_before/after`` or
        ``append``. Without ``result_types`` the op's definition infers them."""
        if op == RETURN_OP:
            raise IRError("the return node is the graph's own: set graph.outputs instead")
        node = Node(
            op=str(op),
            operands=tuple(operands),
            attributes=dict(attributes or {}),
            origin=origin if origin is not None else self.origin,
        )
        if result_types is None:
            from .ops import infer_result_types

            result_types = infer_result_types(node)
        node.results = tuple(Value(type=t, producer=node, index=i) for i, t in enumerate(result_types))
        return node

    def append(self, node: Node) -> Node:
        return self._link(node, after=self._last)

    def insert_before(self, anchor: Node, node: Node) -> Node:
        self._check_member(anchor)
        self.focus = anchor
        return self._link(node, after=anchor.prev)

    def insert_after(self, anchor: Node, node: Node) -> Node:
        self._check_member(anchor)
        self.focus = anchor
        return self._link(node, after=anchor)

    def _link(self, node: Node, after: Node | None) -> Node:
        if node.graph is not None:
            raise IRError(f"node {node.op} is already in a graph")
        self._splice(node, after)
        node.graph = self
        for value in node.inputs():
            value.uses.append(node)
        return node

    def _splice(self, node: Node, after: Node | None) -> None:
        """Put ``node`` in the list just after ``after`` (first when None); uses untouched."""
        before = self._first if after is None else after.next
        node.prev, node.next = after, before
        if after is None:
            self._first = node
        else:
            after.next = node
        if before is None:
            self._last = node
        else:
            before.prev = node
        self._count += 1

    def _check_member(self, node: Node) -> None:
        if node.graph is not self or node.is_return:
            raise IRError(f"node {node.op} is not in this graph")

    def erase(self, node: Node) -> None:
        """Remove ``node``. Refuses while any of its results is still used (a graph output is a use)."""
        self._check_member(node)
        self.focus = node
        for result in node.results:
            if result.uses:
                users = ", ".join(sorted({"the graph outputs" if u.is_return else u.op for u in result.uses}))
                raise IRError(f"cannot erase {node!r}: its result {result.index} is still used by {users}")
        for value in node.inputs():
            _remove_one(value.uses, node)
        self._unlink(node)
        node.graph = None

    def move_before(self, anchor: Node, node: Node) -> None:
        """Move ``node`` (already in the graph) to just before ``anchor``."""
        self._check_member(anchor)
        self._unlink(node)
        self._splice(node, anchor.prev)

    def _unlink(self, node: Node) -> None:
        self._check_member(node)
        if node.prev is None:
            self._first = node.next
        else:
            node.prev.next = node.next
        if node.next is None:
            self._last = node.prev
        else:
            node.next.prev = node.prev
        node.prev = node.next = None
        self._count -= 1

    # ------------------------------------------------------------------ edits
    def _linked(self, node: Node) -> bool:
        return node.graph is self

    def set_operand(self, node: Node, index: int, value: Value) -> None:
        old = node.operands[index]
        operands = list(node.operands)
        operands[index] = value
        node.operands = tuple(operands)
        if self._linked(node):
            self.focus = node if not node.is_return else self.focus
            _remove_one(old.uses, node)
            value.uses.append(node)

    def set_operands(self, node: Node, operands: Iterable[Value]) -> None:
        operands = tuple(operands)
        if self._linked(node):
            self.focus = node if not node.is_return else self.focus
            for old in node.operands:
                _remove_one(old.uses, node)
            for new in operands:
                new.uses.append(node)
        node.operands = operands

    def set_attribute(self, node: Node, name: str, value: Any) -> None:
        if self._linked(node):
            self.focus = node
            for old in iter_values(node._attributes.get(name)):
                _remove_one(old.uses, node)
            for new in iter_values(value):
                new.uses.append(node)
        node._attributes[name] = value

    def remove_attribute(self, node: Node, name: str) -> None:
        """Drop attribute ``name`` from ``node`` (the op's default applies again)."""
        if name not in node._attributes:
            return
        if self._linked(node):
            self.focus = node
            for old in iter_values(node._attributes[name]):
                _remove_one(old.uses, node)
        del node._attributes[name]

    def replace_all_uses(self, old: Value, new: Value, *, outputs: bool = True) -> None:
        """Make every reader of ``old`` read ``new`` instead.

        The graph outputs are readers too: where ``old`` is returned, ``new`` is returned
        instead. Pass ``outputs=False`` to keep returning ``old`` (then only nodes move).
        """
        if old is new:
            return
        for user in old.users:
            if user.is_return and not outputs:
                continue
            self.focus = user if not user.is_return else self.focus
            count = sum(1 for v in user.inputs() if v is old)
            user.operands = tuple(new if v is old else v for v in user.operands)
            for key, attr in user._attributes.items():
                user._attributes[key] = map_values(attr, lambda v: new if v is old else v)
            for _ in range(count):
                _remove_one(old.uses, user)
                new.uses.append(user)

    def replace_node(self, node: Node, values: Iterable[Value | None]) -> None:
        """Replace each result of ``node`` by the matching value (the outputs included), then
        erase ``node``. ``None`` stands for a result that has no use (e.g. a batch norm's
        statistics); a used one is an error."""
        values = list(values)
        if len(values) != len(node.results):
            raise IRError(f"{node.op} has {len(node.results)} results, got {len(values)} replacements")
        for result, value in zip(node.results, values):
            if value is None:
                if not result.is_unused():
                    raise IRError(f"cannot replace {node.op}: its result {result.index} is used but has no replacement")
            else:
                self.replace_all_uses(result, value)
        self.erase(node)

    # ------------------------------------------------------ checkpoint, rollback
    def checkpoint(self) -> Checkpoint:
        """A record of the whole graph, for :meth:`rollback` (constant data is shared, not copied)."""
        nodes = tuple(self)
        values = list(self.inputs) + [r for n in nodes for r in n.results]
        return Checkpoint(
            self.name,
            tuple(self.inputs),
            nodes,
            tuple((n, n.operands, dict(n._attributes), n.results, n.origin, n.fx_node) for n in nodes),
            tuple(
                (v, v.type, v.name, v.producer, v.index, v.input_kind, v.data, v.fx_node, list(v.uses)) for v in values
            ),
            self.return_node.operands,
        )

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Restore the graph to ``checkpoint``: the same node and value objects, in the same
        state; nodes created since are detached."""
        kept = {id(n) for n in checkpoint.nodes}
        for node in self:
            if id(node) not in kept:
                node.graph = node.prev = node.next = None
        self.name = checkpoint.name
        self.inputs = list(checkpoint.inputs)
        self._input_names = {v.name for v in self.inputs}
        self._first = self._last = None
        self._count = 0
        previous = None
        for node, operands, attributes, results, origin, fx_node in checkpoint.node_state:
            node.operands, node._attributes, node.results = operands, dict(attributes), results
            node.origin, node.fx_node, node.graph = origin, fx_node, self
            node.prev, node.next = previous, None
            if previous is None:
                self._first = node
            else:
                previous.next = node
            previous = node
            self._count += 1
        self._last = previous
        for value, type_, name, producer, index, input_kind, data, fx_node, uses in checkpoint.value_state:
            value.type, value.name, value.producer, value.index = type_, name, producer, index
            value.input_kind, value.data, value.fx_node, value.uses = input_kind, data, fx_node, list(uses)
        self.return_node.operands = checkpoint.outputs
        self.focus = None

    @contextlib.contextmanager
    def transaction(self):
        """``with graph.transaction(): ...``: if the block raises, the graph is rolled back."""
        saved = self.checkpoint()
        try:
            yield self
        except BaseException:
            self.rollback(saved)
            raise

    # ---------------------------------------------------------------- queries
    def values(self) -> Iterator[Value]:
        yield from self.inputs
        for node in self:
            yield from node.results

    def input_named(self, name: str) -> Value:
        for value in self.inputs:
            if value.name == name:
                return value
        raise KeyError(name)

    def order(self) -> dict[int, int]:
        """Position of every node, keyed by ``id(node)``."""
        return {id(node): i for i, node in enumerate(self)}

    def copy(self) -> tuple[Graph, dict[int, Value]]:
        """A deep copy of the structure (constant data is shared). Returns the copy and a map
        from ``id(old value)`` to the new value."""
        clone = Graph(self.name)
        mapping: dict[int, Value] = {}
        for value in self.inputs:
            mapping[id(value)] = clone.add_input(value.name, value.type, value.input_kind, value.data)
        for node in self:
            new = clone.create_node(
                node.op,
                [mapping[id(v)] for v in node.operands],
                [r.type for r in node.results],
                {k: map_values(a, lambda v: mapping[id(v)]) for k, a in node.attributes.items()},
                origin=node.origin or "",
            )
            new.origin = node.origin
            new.fx_node = node.fx_node
            new.written_for = node.written_for
            new.location = node.location
            clone.append(new)
            for old_result, new_result in zip(node.results, new.results):
                mapping[id(old_result)] = new_result
        clone.outputs = [mapping[id(v)] for v in self.outputs]
        return clone, mapping

    def __str__(self) -> str:
        from .printer import print_graph

        return print_graph(self)


def _remove_one(uses: list[Node], node: Node) -> None:
    for i, user in enumerate(uses):
        if user is node:
            del uses[i]
            return
    raise IRError(f"use-list corrupted: {node.op} is not a recorded user")
