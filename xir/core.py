"""Values, nodes and graphs.

A :class:`Graph` holds its inputs (user inputs, parameters, buffers, constants), its nodes
in program order and its outputs. Every :class:`Value` is either a graph input or one
result of a :class:`Node`, and knows the nodes that use it. Use-lists are kept by the
graph's editing methods; code outside this module never touches them.
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, Iterator

import attrs

from .errors import IRError
from .types import TensorType, Type


class InputKind(enum.Enum):
    """What a graph input is. The value is the keyword used in IR text."""

    user = "input"
    parameter = "param"
    buffer = "buffer"
    constant = "const"


@attrs.define(eq=False, repr=False)
class Value:
    """One result of a node, or one graph input.

    ``uses`` lists the nodes that read this value, once per reading position (a node that
    reads a value twice appears twice).
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
        """Distinct nodes that use this value, in first-use order."""
        seen: dict[int, Node] = {}
        for node in self.uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

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
    ``aten.add.Tensor``. Attributes hold every non-tensor argument by its schema name; an
    attribute may also refer to values (e.g. a symbolic size in a view's shape list).
    ``origin`` names the pass that created the node (None for imported nodes).
    ``fx_node`` links an imported node to the torch.fx node it came from.
    """

    op: str
    operands: tuple[Value, ...] = ()
    attributes: dict[str, Any] = attrs.field(factory=dict)
    results: tuple[Value, ...] = ()
    origin: str | None = None
    fx_node: Any = None
    graph: Graph | None = None
    prev: Node | None = None
    next: Node | None = None

    @property
    def result(self) -> Value:
        """The single result of a one-result node."""
        if len(self.results) != 1:
            raise IRError(f"{self.op} has {len(self.results)} results, not one")
        return self.results[0]

    def inputs(self) -> Iterator[Value]:
        """Every value this node reads: operands, then values inside attributes."""
        yield from self.operands
        for value in self.attributes.values():
            yield from iter_values(value)

    @property
    def users(self) -> list[Node]:
        seen: dict[int, Node] = {}
        for result in self.results:
            for user in result.uses:
                seen.setdefault(id(user), user)
        return list(seen.values())

    def __repr__(self) -> str:
        from .printer import print_node

        try:
            return f"<Node {print_node(self)}>"
        except Exception:  # a half-built node still gets a repr
            return f"<Node {self.op}>"


class Graph:
    """Inputs, nodes in program order, and outputs.

    Nodes form a doubly linked list so that inserting and erasing is O(1); iterate with
    ``for node in graph`` (safe against erasing the current node).
    """

    def __init__(self, name: str = "forward"):
        self.name = name
        self.inputs: list[Value] = []
        self._input_names: set[str] = set()
        self.outputs: list[Value] = []
        self._first: Node | None = None
        self._last: Node | None = None
        self._count = 0
        # the name of the pass now running: nodes created without an explicit origin get it
        self.origin: str | None = None

    # ----------------------------------------------------------------- inputs
    def add_input(self, name: str, type: Type, kind: InputKind = InputKind.user, data: Any = None) -> Value:
        if name in self._input_names:
            raise IRError(f"graph already has an input named %{name}")
        value = Value(type=type, name=name, input_kind=kind, data=data)
        self.inputs.append(value)
        self._input_names.add(name)
        return value

    def unique_input_name(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ... : a name no input of this graph has."""
        name, i = base, 1
        while name in self._input_names:
            name, i = f"{base}_{i}", i + 1
        return name

    def remove_input(self, value: Value) -> None:
        if value.uses or value in self.outputs:
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
        result_types: Iterable[Type],
        attributes: dict[str, Any] | None = None,
        origin: str | None = None,
    ) -> Node:
        """A new node, not yet placed in the graph; place it with ``insert_before/after`` or ``append``."""
        node = Node(op=op, operands=tuple(operands), attributes=dict(attributes or {}),
                    origin=origin if origin is not None else self.origin)
        node.results = tuple(Value(type=t, producer=node, index=i) for i, t in enumerate(result_types))
        return node

    def append(self, node: Node) -> Node:
        return self._link(node, after=self._last)

    def insert_before(self, anchor: Node, node: Node) -> Node:
        self._check_member(anchor)
        return self._link(node, after=anchor.prev)

    def insert_after(self, anchor: Node, node: Node) -> Node:
        self._check_member(anchor)
        return self._link(node, after=anchor)

    def _link(self, node: Node, after: Node | None) -> Node:
        if node.graph is not None:
            raise IRError(f"node {node.op} is already in a graph")
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
        node.graph = self
        self._count += 1
        for value in node.inputs():
            value.uses.append(node)
        return node

    def _check_member(self, node: Node) -> None:
        if node.graph is not self:
            raise IRError(f"node {node.op} is not in this graph")

    def erase(self, node: Node) -> None:
        """Remove ``node``. Refuses while any of its results is still used."""
        self._check_member(node)
        for result in node.results:
            if result.uses or any(out is result for out in self.outputs):
                users = ", ".join(sorted({u.op for u in result.uses})) or "the graph outputs"
                raise IRError(f"cannot erase {node!r}: its result {result.index} is still used by {users}")
        for value in node.inputs():
            _remove_one(value.uses, node)
        if node.prev is None:
            self._first = node.next
        else:
            node.prev.next = node.next
        if node.next is None:
            self._last = node.prev
        else:
            node.next.prev = node.prev
        node.prev = node.next = None
        node.graph = None
        self._count -= 1

    def move_before(self, anchor: Node, node: Node) -> None:
        """Move ``node`` (already in the graph) to just before ``anchor``."""
        self._unlink_keep_uses(node)
        before_anchor = anchor.prev
        node.prev, node.next = before_anchor, anchor
        if before_anchor is None:
            self._first = node
        else:
            before_anchor.next = node
        anchor.prev = node
        node.graph = self
        self._count += 1

    def _unlink_keep_uses(self, node: Node) -> None:
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
    def set_operand(self, node: Node, index: int, value: Value) -> None:
        old = node.operands[index]
        operands = list(node.operands)
        operands[index] = value
        node.operands = tuple(operands)
        if node.graph is self:
            _remove_one(old.uses, node)
            value.uses.append(node)

    def set_operands(self, node: Node, operands: Iterable[Value]) -> None:
        operands = tuple(operands)
        if node.graph is self:
            for old in node.operands:
                _remove_one(old.uses, node)
            for new in operands:
                new.uses.append(node)
        node.operands = operands

    def set_attribute(self, node: Node, name: str, value: Any) -> None:
        if node.graph is self:
            for old in iter_values(node.attributes.get(name)):
                _remove_one(old.uses, node)
            for new in iter_values(value):
                new.uses.append(node)
        node.attributes[name] = value

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Make every reader of ``old`` (nodes and graph outputs) read ``new`` instead."""
        if old is new:
            return
        for user in old.users:
            user.operands = tuple(new if v is old else v for v in user.operands)
            for key, attr in user.attributes.items():
                user.attributes[key] = map_values(attr, lambda v: new if v is old else v)
        moved = [u for u in old.uses]
        old.uses.clear()
        new.uses.extend(moved)
        self.outputs = [new if v is old else v for v in self.outputs]

    def replace_node(self, node: Node, values: Iterable[Value]) -> None:
        """Replace each result of ``node`` by the matching value, then erase ``node``."""
        values = list(values)
        if len(values) != len(node.results):
            raise IRError(f"{node.op} has {len(node.results)} results, got {len(values)} replacements")
        for result, value in zip(node.results, values):
            self.replace_all_uses(result, value)
        self.erase(node)

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
