"""Write the IR's rewrites back into an ExportedProgram (edge dialect).

Nodes the IR imported keep their FX node (their arguments are rebuilt from the IR when they
changed); nodes a pass created become new FX nodes calling the edge op of the same name, with
``meta["val"]`` computed on fake tensors; nodes the IR erased are erased; new constants become
parameter placeholders; the FX order follows the IR order. This is the only place where xir
changes an ExecuTorch graph, and it runs as a transform pass, before partitioning.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
from executorch.backends.transforms.utils import create_constant_placeholder, delete_constant_placeholder
from executorch.exir.dialects._ops import ops as exir_ops
from torch._guards import detect_fake_mode
from torch.export.graph_signature import ExportGraphSignature, OutputSpec, TensorArgument
from torch.export.graph_signature import InputKind as TorchInputKind

from xir import Graph, InputKind, Node, Value
from xir.fx_import import op_arguments

from . import xnnpack_ops  # noqa: F401  (the torch ops and XNNPACK visitors of xir's own ops, which passes create)


class WriteBackError(RuntimeError):
    pass


def resolve_op(name: str) -> Any:
    """The edge-dialect op for an IR op name (``aten.add.Tensor``, ``aten.linear``)."""

    parts = name.split(".")
    namespace, op = parts[0], parts[1]
    overload = parts[2] if len(parts) > 2 else "default"
    try:
        packet = getattr(getattr(exir_ops.edge, namespace), op)
        return getattr(packet, overload)
    except AttributeError:
        raise WriteBackError(f"no ExecuTorch op named {name!r} to write back") from None


_INPUT_KINDS = {
    InputKind.parameter: "PARAMETER",
    InputKind.buffer: "BUFFER",
    InputKind.constant: "CONSTANT_TENSOR",
}


def write_back(graph: Graph, ep: Any) -> Any:
    """A new program that computes what ``graph`` says; ``graph`` must have been imported from ``ep``.

    The rewrite is made on a copy of ``ep`` (:func:`copy_program`), returned on success: ``ep``
    (its graph, signature, constants and state dict) is never changed, so a caller that catches
    a failure still holds the program it had. ``graph``'s links to FX nodes move to the copy on
    success and are as they were after a failure. ``ep``'s ShapeEnv (which the copy shares, as do
    every copy of ``ep`` and the program it was exported as) is as it was after a failure too: a fake
    run that fails can have fixed a symbol on its way (:class:`ShapeEnvState`)."""
    links = [(obj, obj.fx_node, getattr(obj, "written_for", None)) for obj in (*graph.inputs, *graph)]
    state = ShapeEnvState.of_program(ep)
    try:
        program, fx_nodes = copy_program(ep)
        for obj, fx_node, written_for in links:
            obj.fx_node = fx_nodes.get(fx_node, fx_node)
            if written_for is not None:
                obj.written_for = fx_nodes.get(written_for, written_for)
        _write_into(graph, program)
    except BaseException:
        for obj, fx_node, written_for in links:
            obj.fx_node = fx_node
            if written_for is not None:
                obj.written_for = written_for
        state.restore()
        raise
    return program


def copy_program(ep: Any) -> tuple[Any, dict]:
    """A copy of ``ep`` that may be rewritten in place: its own FX graph and graph module, graph
    signature, state dict and constants dicts (the tensors in them are shared: write-back adds and
    removes entries, it never writes into a tensor). Returns the copy and the map from ``ep``'s FX
    nodes to the copy's.

    (ExecuTorch's pass manager hands each pass a shallow copy of the program, which shares the
    graph, the signature and the dicts with the caller's: rewriting that in place and failing
    halfway would leave the caller a program that computes something else.)"""
    gm = ep.graph_module
    fx_graph = copy.deepcopy(gm.graph)
    fx_nodes = dict(zip(gm.graph.nodes, fx_graph.nodes))
    if any(old.name != new.name for old, new in fx_nodes.items()):
        raise WriteBackError("copying the FX graph renamed its nodes")
    new_gm = torch.fx.GraphModule(gm, fx_graph, class_name=type(gm).__name__)
    new_gm.meta.update(gm.meta)
    program = copy.copy(ep)
    program._graph_module = new_gm
    program._graph_signature = copy.deepcopy(ep.graph_signature)
    program._state_dict = dict(ep.state_dict)
    program._constants = dict(ep.constants)
    program._range_constraints = dict(ep.range_constraints)
    return program, fx_nodes


def _write_into(graph: Graph, ep: Any) -> None:
    """Make ``ep``'s graph compute what ``graph`` says, in place (``ep`` is write_back's copy), in
    phases: new constants become placeholders; every IR node, in IR order, gets its FX node (made,
    or with its arguments rewritten) placed in that order; the outputs are pointed at; the FX nodes
    the IR erased are erased, and the constants no longer read are deleted."""
    writer = _Writer(ep)
    writer.add_constants(graph)
    writer.note_imported(graph)
    for node in graph:
        writer.place(node)
    writer.set_outputs(graph)
    writer.erase_dropped()
    writer.delete_unread_constants()
    writer.fx_graph.lint()
    writer.gm.recompile()


class _Writer:
    """The state of one write-back: the FX node of every IR value written so far (``to_fx``), the
    FX nodes to keep, and the cursor after which the next node is placed."""

    def __init__(self, ep: Any):
        self.ep = ep
        self.gm = ep.graph_module
        self.fx_graph = self.gm.graph
        self.placeholders = [n for n in self.fx_graph.nodes if n.op == "placeholder"]
        self.fake_mode = detect_fake_mode([n.meta.get("val") for n in self.placeholders])
        self.to_fx: dict[int, torch.fx.Node] = {}
        self.keep: set[torch.fx.Node] = set()
        self.cursor = self.placeholders[-1] if self.placeholders else None
        self.stacks: dict[int, Any] = {}
        self.imported: set[torch.fx.Node] = set()
        self.erased_readers: dict[torch.fx.Node, list[torch.fx.Node]] = {}

    def fx_of(self, value: Value) -> torch.fx.Node:
        try:
            return self.to_fx[id(value)]
        except KeyError:
            raise WriteBackError(f"value {value.describe()} has no FX node yet (IR order broken?)") from None

    def add_constants(self, graph: Graph) -> None:
        """Map the graph's inputs; a constant a pass added becomes a placeholder, before the user inputs."""

        user_inputs = self.ep.graph_signature.user_inputs
        first_user_input = next((n for n in self.placeholders if n.name in user_inputs), None)
        for value in graph.inputs:
            if value.fx_node is None:
                if value.input_kind is InputKind.user:
                    raise WriteBackError(f"a pass added the user input %{value.name}; only constants can be added")
                if value.data is None:
                    raise WriteBackError(f"new constant %{value.name} has no data")
                anchor = first_user_input or self.placeholders[-1] if self.placeholders else None
                with self.fx_graph.inserting_before(anchor):
                    kind = getattr(TorchInputKind, _INPUT_KINDS[value.input_kind])
                    extra = {"persistent_buffer": True} if kind == TorchInputKind.BUFFER else {}
                    name = _free_attribute_name(self.gm, value.name)
                    value.fx_node = create_constant_placeholder(
                        self.ep, self.fx_graph, name, kind, value.data.detach().contiguous(), **extra
                    )
            self.to_fx[id(value)] = value.fx_node

    def note_imported(self, graph: Graph) -> None:
        """The FX nodes the IR kept, and the ones it erased by what they read: a node a pass made
        takes the module of the one it replaced (:func:`_module_stack`)."""
        self.imported = {n.fx_node for n in graph if n.fx_node is not None and n.fx_node.graph is self.fx_graph}
        # (a getitem of an imported node is that node's result, not a node the IR erased)
        self.imported |= {n for n in self.fx_graph.nodes if n.target is operator.getitem and n.args[0] in self.imported}
        for fx_node in self.fx_graph.nodes:
            if fx_node.op == "call_function" and fx_node not in self.imported:
                for read in fx_node.all_input_nodes:
                    self.erased_readers.setdefault(read, []).append(fx_node)

    def place(self, node: Node) -> None:
        """Give ``node`` its FX node (made, or its arguments rewritten), after the cursor."""
        fx_node = node.fx_node if node.fx_node is not None and node.fx_node.graph is self.fx_graph else None
        schema = getattr(fx_node.target, "_schema", None) if fx_node is not None else None
        if fx_node is None:
            fx_node = self._create(node)
        elif schema is not None:
            args, kwargs = op_arguments(schema, node, self.fx_of)
            if not _same_call(fx_node, args, kwargs):
                fx_node.args, fx_node.kwargs = args, kwargs
        elif _operands_changed(node, fx_node, self.fx_of):
            _rewire_schemaless(node, fx_node, self.fx_of)
        self._advance(fx_node)
        if len(node.results) == 1 and not isinstance(fx_node.meta.get("val"), (list, tuple)):
            self.to_fx[id(node.results[0])] = fx_node
        else:
            self._pick_results(node, fx_node)

    def _create(self, node: Node) -> torch.fx.Node:
        """The FX node of a node a pass made: the edge op of its name, ``meta["val"]`` from fake tensors."""
        if node.definition is None:
            raise WriteBackError(
                f"pass {node.origin or '?'} created {node.op}, an opaque op (no definition in "
                "xir.ops): only defined ops can be written back into the program"
            )
        target = resolve_op(node.op)
        args, kwargs = op_arguments(target._schema, node, self.fx_of)
        with self.fx_graph.inserting_after(self.cursor):
            fx_node = self.fx_graph.call_function(target, args, kwargs)
        fx_node.meta["val"] = _fake_run(target, args, kwargs, self.fake_mode)
        node.fx_node = fx_node
        if node.origin:
            fx_node.meta["xir_origin"] = node.origin
        stack = self.stacks[id(node)] = _module_stack(node, self.fx_of, self.erased_readers, self.stacks, self.imported)
        if stack:
            fx_node.meta["nn_module_stack"] = dict(stack)
        return fx_node

    def _advance(self, fx_node: torch.fx.Node) -> None:
        """Place ``fx_node`` right after the cursor, keep it, and move the cursor to it."""
        if self.cursor is not None and self.cursor.next is not fx_node:
            self.cursor.append(fx_node)
        self.cursor = fx_node
        self.keep.add(fx_node)

    def _pick_results(self, node: Node, fx_node: torch.fx.Node) -> None:
        """The getitems of a node with several results: kept, or made for a used result that has none."""
        picks = {u.args[1]: u for u in fx_node.users if u.target is operator.getitem}
        for result in node.results:
            pick = picks.get(result.index)
            if pick is None and not result.is_unused():  # (a graph output is a use)
                with self.fx_graph.inserting_after(self.cursor):
                    pick = self.fx_graph.call_function(operator.getitem, (fx_node, result.index))
                pick.meta["val"] = fx_node.meta["val"][result.index]
            if pick is not None:
                self._advance(pick)
                self.to_fx[id(result)] = pick

    def set_outputs(self, graph: Graph) -> None:
        output = next(n for n in self.fx_graph.nodes if n.op == "output")
        old = output.args[0]
        new_outputs = [self.fx_of(v) for v in graph.outputs]
        output.args = (type(old)(new_outputs) if isinstance(old, (list, tuple)) else new_outputs[0],)
        _rename_outputs(self.ep, new_outputs)

    def erase_dropped(self) -> None:
        """Erase the FX nodes the IR erased (none may still be read)."""
        for fx_node in reversed(list(self.fx_graph.nodes)):
            if fx_node.op in ("call_function", "call_method", "call_module") and fx_node not in self.keep:
                if fx_node.users:
                    raise WriteBackError(
                        f"FX node {fx_node.name} was erased in the IR but is still used by "
                        f"{', '.join(u.name for u in fx_node.users)}"
                    )
                self.fx_graph.erase_node(fx_node)

    def delete_unread_constants(self) -> None:

        signature = self.ep.graph_signature
        for fx_node in list(self.fx_graph.nodes):
            if fx_node.op == "placeholder" and not fx_node.users and fx_node.name not in signature.user_inputs:
                if any(
                    spec.arg.name == fx_node.name and spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")
                    for spec in signature.input_specs
                ):
                    delete_constant_placeholder(self.ep, fx_node)


def _module_stack(node: Node, fx_of, erased_readers: dict, stacks: dict, imported: set) -> Any:
    """``nn_module_stack`` for a node a pass made (reports group nodes by module, and source
    partitions, XNNPACK's linear rebuild among them, follow it). For a node a rewrite rule created,
    that of the program's op the rule matched (``Node.written_for``: a GELU decomposed after a linear
    is not part of the linear; fuzz dynamic seed 31542). Otherwise found from the graph: that of the
    erased node it replaced, else of a node it reads that the pass made too, else of the program's
    node that reads it, else of the one it reads.

    The node it replaced is found from a program node that reads it: that node read the erased one
    in its place (its FX arguments are not rewritten yet); one that also read one of this node's
    inputs, or the only one. Failing that, an erased node that read the same value. Several may
    qualify (a dequantize shared by three linears, each
    reading it through its own unsqueeze; fuzz dynamic seeds 30466, 30307): the wrong one would put
    the node in another linear's source partition, and neither linear would be recognised."""

    def meta(fx_node):
        return fx_node.meta.get("nn_module_stack") if fx_node is not None else None

    if node.written_for is not None:
        return meta(node.written_for)
    values = list(node.inputs())
    sources = {fx_of(value) for value in values}
    replaced = [
        read
        for user in node.readers
        if user.fx_node in imported
        for read in user.fx_node.all_input_nodes
        if read.op == "call_function" and read not in imported
    ]
    same_inputs = [read for read in replaced if sources & set(read.all_input_nodes)]
    if same_inputs or len(set(replaced)) == 1:
        return meta((same_inputs or replaced)[0])
    for value in values:
        for erased in erased_readers.get(fx_of(value), ()):
            if meta(erased):
                return meta(erased)
    for value in values:
        if value.producer is not None and stacks.get(id(value.producer)):
            return stacks[id(value.producer)]
    for user in node.readers:
        if user.fx_node in imported and meta(user.fx_node):
            return meta(user.fx_node)
    for value in values:
        if value.producer is not None and value.producer.fx_node in imported and meta(value.producer.fx_node):
            return meta(value.producer.fx_node)
    return None


def _free_attribute_name(gm: torch.fx.GraphModule, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``...: a constant becomes an attribute of the graph module,
    so its name must not be one the module has (``half``, ``float``, ``training``, another constant)."""
    taken = {n.name for n in gm.graph.nodes}
    name, suffix = base, 0
    while name in taken or hasattr(gm, name):
        suffix += 1
        name = f"{base}_{suffix}"
    return name


def _rename_outputs(ep: Any, outputs: list) -> None:
    """Point the graph signature's output specs at the FX nodes that now produce the outputs."""

    specs = list(ep.graph_signature.output_specs)
    if len(specs) != len(outputs):
        raise WriteBackError(f"the program has {len(specs)} outputs, the IR {len(outputs)}")
    renamed = []
    changed = False
    for spec, node in zip(specs, outputs):
        if isinstance(spec.arg, TensorArgument) and spec.arg.name != node.name:
            spec = OutputSpec(kind=spec.kind, arg=TensorArgument(name=node.name), target=spec.target)
            changed = True
        renamed.append(spec)
    if changed:
        ep._graph_signature = ExportGraphSignature(
            input_specs=list(ep.graph_signature.input_specs), output_specs=renamed
        )


# copy ops whose fake implementations fail or specialize on a symbolic size (torch 2.13): they read
# the size, or the storage offset, as a number (``slice_copy``, ``split_copy``,
# ``split_with_sizes_copy``, ``narrow_copy``: "Cannot call storage_offset() on tensor with symbolic
# sizes/strides", with the symbol pinned to its example value on the way; ``permute_copy``,
# ``expand_copy``, ``unbind_copy``: the symbol specialized). Their results are computed from the view
# op they copy, made contiguous, which keeps the symbols (``tests/lowering/test_writeback_symbolic.py``
# writes new permutes, expands and slices of a symbolic size; ``test_symbolic_passes.py`` what every
# registered pass makes on programs of a symbolic length. Of this table only those three are ops xir
# defines, and so ops a pass can make: the others are here for a pass that defines one)
_COPY_AS_VIEW = {
    "aten::permute_copy": "permute",
    "aten::expand_copy": "expand",
    "aten::slice_copy": "slice",
    "aten::split_copy": "split",
    "aten::split_with_sizes_copy": "split_with_sizes",
    "aten::narrow_copy": "narrow",
    "aten::unbind_copy": "unbind",
}


class ShapeEnvState:
    """Everything a fake run can change in a ShapeEnv (replacements, ``var_to_val``, ranges, guards,
    axioms, deferred asserts, caches, counters: every attribute, containers copied two levels deep),
    saved to be put back. ``restore`` makes the ShapeEnv what it was when this was taken; the fake
    tensors of every program sharing it (the caller's, its copies) then keep their symbols."""

    def __init__(self, shape_env: Any):
        self.shape_env = shape_env
        self.saved = {name: _copied(value) for name, value in vars(shape_env).items()} if shape_env is not None else {}

    @classmethod
    def of_program(cls, ep: Any) -> "ShapeEnvState":
        """The state of the ShapeEnv of ``ep``'s fake values (none: nothing to save)."""
        fake_mode = detect_fake_mode([n.meta.get("val") for n in ep.graph_module.graph.nodes if n.op == "placeholder"])
        return cls(getattr(fake_mode, "shape_env", None))

    def restore(self) -> None:
        env = self.shape_env
        if env is None:
            return
        version = getattr(env, "_version_counter", 0)
        for name in [name for name in vars(env) if name not in self.saved]:
            delattr(env, name)
        for name, value in self.saved.items():
            setattr(env, name, _copied(value))
        if isinstance(version, int):  # (a counter never seen: the ShapeEnv's own caches are cleared)
            env._version_counter = max(version, self.saved.get("_version_counter", 0)) + 1

    def fixed_symbols(self) -> dict:
        """The symbols made numbers since, or whose range narrowed: {symbol: its number or range}."""
        env = self.shape_env
        if env is None:
            return {}
        before, ranges = self.saved.get("replacements", {}), self.saved.get("var_to_range", {})
        fixed = {
            symbol: value
            for symbol, value in env.replacements.items()
            if symbol not in before and getattr(value, "is_number", False)
        }
        for symbol, now in env.var_to_range.items():
            if symbol in ranges and symbol not in fixed and now != ranges[symbol]:
                fixed[symbol] = now
        return fixed


def _copied(value: Any) -> Any:
    """``value``, its container (and the containers in it) copied: the saved state never shares a
    container the ShapeEnv goes on changing."""
    if isinstance(value, dict):
        copied = copy.copy(value)
        for key, item in value.items():
            if isinstance(item, (dict, list, set)):
                copied[key] = copy.copy(item)
        return copied
    if isinstance(value, (list, set)) or type(value).__name__ in ("OrderedSet", "Counter"):
        return copy.copy(value)
    return value


def _fake_run(target, args, kwargs, fake_mode):
    """``meta["val"]`` of a new node: ``target`` run on its arguments' fake values, symbolic sizes
    kept (copy ops of ``_COPY_AS_VIEW`` run as their view, made contiguous). The one way every node a
    pass makes gets its shape in the program. Raises :class:`WriteBackError`, with the ShapeEnv as
    it was, when the fake run fails, or would fix a symbolic size (or narrow its range)."""

    def meta(x):
        if isinstance(x, torch.fx.Node):
            return x.meta["val"]
        if isinstance(x, (list, tuple)):
            return type(x)(meta(i) for i in x)
        return x

    def contiguous(t):
        if isinstance(t, (list, tuple)):
            return type(t)(contiguous(i) for i in t)
        return t.clone(memory_format=torch.contiguous_format)

    schema = getattr(target, "_schema", None)
    name = schema.name if schema is not None else str(target)
    view = _COPY_AS_VIEW.get(schema.name) if schema is not None else None
    state = ShapeEnvState(getattr(fake_mode, "shape_env", None))
    try:
        with fake_mode:
            if view is not None:
                overload = schema.overload_name or "default"
                result = contiguous(getattr(getattr(torch.ops.aten, view), overload)(*meta(args), **meta(kwargs)))
            else:
                result = target(*meta(args), **meta(kwargs))
    except Exception as error:
        state.restore()
        raise WriteBackError(
            f"cannot compute the shape of a new {name} node: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}"
        ) from error
    fixed = state.fixed_symbols()
    if fixed:
        state.restore()
        sizes = ", ".join(f"{symbol} = {value}" for symbol, value in fixed.items())
        raise WriteBackError(
            f"writing {name} back would fix a symbolic size ({sizes}): its fake implementation "
            "reads the size as a number"
        )
    return result


def _same_call(fx_node: torch.fx.Node, args: tuple, kwargs: dict) -> bool:
    """Whether the FX call already passes these arguments (defaults left out count as equal)."""

    return _equal(tuple(fx_node.args), args) and _equal_dicts(dict(fx_node.kwargs), kwargs)


def _equal_dicts(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)


def _equal(a, b) -> bool:
    if isinstance(a, torch.fx.Node) or isinstance(b, torch.fx.Node):
        return a is b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def _import_order(fx_node: torch.fx.Node) -> list[torch.fx.Node]:
    """The FX nodes a call without a schema reads, in the order the importer made them the IR
    node's inputs: positional node arguments (its operands), then the nodes inside its other
    positional arguments, then those inside its keyword arguments (its attributes)."""
    found: list[torch.fx.Node] = []
    collect = lambda n: found.append(n) or n  # noqa: E731
    positional = [a for a in fx_node.args if isinstance(a, torch.fx.Node)]
    for arg in fx_node.args:
        if not isinstance(arg, torch.fx.Node):
            torch.fx.node.map_arg(arg, collect)
    torch.fx.node.map_arg(dict(fx_node.kwargs), collect)
    return positional + found


def _rewire_schemaless(node: Node, fx_node: torch.fx.Node, fx_of) -> None:
    """Make a call without a schema (a higher-order op such as ``auto_functionalized_v2``, the
    KV-cache update of ExecuTorch's LLM flow) read the values its IR node reads now: each input
    replaced in place, position by position. Anything else (inputs added or removed, one FX node
    that would have to become two) is an error."""
    old = _import_order(fx_node)
    new = [fx_of(v) for v in node.inputs()]
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    if len(old) != len(new) or any(mapping.setdefault(a, b) is not b for a, b in zip(old, new)):
        raise WriteBackError(
            f"cannot rewrite the arguments of {node.op}: it has no schema, and its inputs "
            f"changed in number or order ({len(old)} read before, {len(new)} now)"
        )
    for a, b in mapping.items():
        if a is not b:
            fx_node.replace_input_with(a, b)


def _operands_changed(node: Node, fx_node: torch.fx.Node, fx_of) -> bool:
    current = [a for a in fx_node.all_input_nodes]
    wanted = [fx_of(v) for v in node.inputs()]
    return set(current) != set(wanted)
