"""Import a torch.export ExportedProgram (ExecuTorch edge dialect or plain aten) into the IR.

This module and :mod:`lowering` are the only places that read torch metadata. Every FX node
becomes a :class:`~xir.core.Node` typed from its ``meta["val"]``; multi-output ops get one
result per output and ``operator.getitem`` disappears. Ops the IR knows nothing about are
imported as they are: typed from the metadata (``opaque`` when there is none), never a crash.

Arguments are split by the op's schema: tensor arguments become operands, everything else
becomes an attribute named as in the schema. An optional tensor argument passed as None is
absent (``aten.convolution(%x, %w)`` has no bias); only when a later tensor operand follows it
does it keep its place as the attribute ``name=none``. :func:`op_arguments` is the inverse, used to write nodes back.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch

from .attributes import EnumAttr
from .core import Graph, InputKind, Node, Value
from .dtypes import DType
from .types import ScalarType, Symbol, TensorType, Type

TORCH_TO_DTYPE: dict[torch.dtype, DType] = {
    torch.float64: DType.f64,
    torch.float32: DType.f32,
    torch.float16: DType.f16,
    torch.bfloat16: DType.bf16,
    torch.int64: DType.i64,
    torch.int32: DType.i32,
    torch.int16: DType.i16,
    torch.int8: DType.i8,
    torch.uint8: DType.u8,
    torch.bool: DType.bool,
    torch.complex64: DType.c64,
    torch.qint8: DType.qi8,
    torch.quint8: DType.qu8,
    torch.qint32: DType.qi32,
    torch.quint4x2: DType.qu4x2,
    torch.float8_e4m3fn: DType.f8e4m3,
    torch.float8_e5m2: DType.f8e5m2,
}
DTYPE_TO_TORCH: dict[DType, torch.dtype] = {v: k for k, v in TORCH_TO_DTYPE.items()}

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.]")


def op_name(target: Any) -> str:
    """The IR name of an FX call target: ``aten.add.Tensor``, ``aten.linear`` (default overload),
    ``quantized_decomposed.quantize_per_tensor``; other callables by module and name."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        namespace, _, name = schema.name.partition("::")
        overload = getattr(target, "_overloadname", "") or schema.overload_name
        return f"{namespace}.{name}" + ("" if overload in ("", "default") else f".{overload}")
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__name__", None) or type(target).__name__
    return f"{module}.{name}".replace("<", "").replace(">", "")


def type_of(val: Any) -> Type:
    """The IR type of an FX ``meta['val']`` entry."""
    if isinstance(val, torch.Tensor):
        dtype = TORCH_TO_DTYPE.get(val.dtype)
        if dtype is None:
            return ScalarType("opaque")
        return TensorType(dtype, tuple(_dim(d) for d in val.shape))
    if isinstance(val, (bool, torch.SymBool)):
        return ScalarType("bool")
    if isinstance(val, (int, torch.SymInt)):
        return ScalarType("int")
    if isinstance(val, (float, torch.SymFloat)):
        return ScalarType("float")
    if val is None:
        return ScalarType("none")
    return ScalarType("opaque")


def _dim(d: Any) -> int | Symbol:
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt):
        concrete = d.node.maybe_as_int()
        if concrete is not None:
            return int(concrete)
        return Symbol(str(d).replace(" ", ""))
    return Symbol(str(d))


def convert_attribute(value: Any, values: dict[torch.fx.Node, Value]) -> Any:
    """A Python argument of an FX node as an IR attribute value."""
    if isinstance(value, torch.fx.Node):
        found = values.get(value)
        return found if isinstance(found, Value) else EnumAttr("opaque", _NAME_CHARS.sub("_", value.name))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [convert_attribute(v, values) for v in value]
    if isinstance(value, torch.dtype):
        return TORCH_TO_DTYPE.get(value, EnumAttr("dtype", str(value).removeprefix("torch.")))
    if isinstance(value, torch.memory_format):
        return EnumAttr("memory_format", str(value).removeprefix("torch."))
    if isinstance(value, torch.layout):
        return EnumAttr("layout", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return EnumAttr("device", _NAME_CHARS.sub("_", str(value)))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return EnumAttr("symbol", _NAME_CHARS.sub("_", str(value)))
    return EnumAttr("opaque", _NAME_CHARS.sub("_", type(value).__name__))


def _is_tensor_type(t: Any) -> bool:
    return isinstance(t, torch.TensorType)


def _tensor_kind(arg: Any) -> str | None:
    """'tensor', 'optional' or 'list' for tensor-typed schema arguments, None otherwise."""
    t = arg.type
    if _is_tensor_type(t):
        return "tensor"
    if isinstance(t, torch.OptionalType) and _is_tensor_type(t.getElementType()):
        return "optional"
    if isinstance(t, torch.ListType) and _is_tensor_type(t.getElementType()):
        return "list"
    return None


def split_arguments(fx_node: torch.fx.Node, values: dict[torch.fx.Node, Value]) -> tuple[list[Value], dict[str, Any]]:
    """Operands and attributes of an FX call, split by the target's schema."""
    schema = getattr(fx_node.target, "_schema", None)
    operands: list[Value] = []
    attributes: dict[str, Any] = {}
    if schema is None:
        for i, arg in enumerate(fx_node.args):
            if isinstance(values.get(arg) if isinstance(arg, torch.fx.Node) else None, Value):
                operands.append(values[arg])
            else:
                attributes[f"arg{i}"] = convert_attribute(arg, values)
        for key, arg in fx_node.kwargs.items():
            attributes[key] = convert_attribute(arg, values)
        return operands, attributes
    absent: list[str] = []  # optional tensor arguments passed as None, not yet followed by an operand
    for i, arg in enumerate(schema.arguments):
        if i < len(fx_node.args):
            value = fx_node.args[i]
        elif arg.name in fx_node.kwargs:
            value = fx_node.kwargs[arg.name]
        else:
            continue  # left to its default
        kind = _tensor_kind(arg)
        if kind == "optional" and value is None:
            absent.append(arg.name)
            continue
        if kind in ("tensor", "optional") and _is_value(value, values):
            found = [values[value]]
        elif kind == "list" and isinstance(value, (list, tuple)) and all(_is_value(v, values) for v in value):
            found = [values[v] for v in value]
        else:
            attributes[arg.name] = convert_attribute(value, values)
            continue
        # an absent optional operand before a present one keeps its place: {weight=none}
        attributes.update((name, None) for name in absent)
        absent.clear()
        operands.extend(found)
    return operands, attributes  # (trailing absent optional operands are just absent)


def _is_value(arg: Any, values: dict) -> bool:
    return isinstance(arg, torch.fx.Node) and isinstance(values.get(arg), Value)


def op_arguments(schema: Any, node: Node, to_fx) -> tuple[tuple, dict]:
    """Rebuild FX ``args`` and ``kwargs`` for ``node`` from its operands and attributes.

    ``to_fx`` maps an IR Value to the FX node that computes it. The inverse of
    :func:`split_arguments`: positional schema arguments become ``args`` (trailing defaults
    dropped), keyword-only ones ``kwargs`` (only those the node sets)."""
    operands = list(node.operands)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    arguments = list(schema.arguments)
    for i, arg in enumerate(arguments):
        kind = _tensor_kind(arg)
        present = True
        if arg.name in node.attributes:
            value = _attribute_to_python(node.attributes[arg.name], to_fx)
        elif kind in ("tensor", "optional") and operands and not (kind == "optional" and arg.kwarg_only):
            value = to_fx(operands.pop(0))
        elif kind == "optional" and not arg.kwarg_only and not operands:
            # an absent optional operand (a trailing one has no ``name=none``)
            value, present = None, not arg.has_default_value()
        elif kind == "list":
            later_required = sum(
                1 for a in arguments[i + 1 :] if _tensor_kind(a) == "tensor" and a.name not in node.attributes
            )
            take = len(operands) - later_required
            value = [to_fx(v) for v in operands[:take]]
            operands = operands[take:]
        elif arg.has_default_value():
            value, present = arg.default_value, False
        else:
            raise ValueError(f"{node.op}: no value for its argument {arg.name!r}")
        if arg.kwarg_only:
            if present:
                kwargs[arg.name] = value
        else:
            args.append((value, present))
    if operands:
        raise ValueError(f"{node.op}: {len(operands)} operand(s) left over after matching the schema")
    while args and not args[-1][1]:
        args.pop()
    return tuple(value for value, _ in args), kwargs


def _attribute_to_python(value: Any, to_fx) -> Any:
    if isinstance(value, Value):
        return to_fx(value)
    if isinstance(value, list):
        return [_attribute_to_python(v, to_fx) for v in value]
    if isinstance(value, DType):
        return DTYPE_TO_TORCH[value]
    if isinstance(value, EnumAttr):
        # (the name may come from IR text anyone wrote: only torch's own values of the kind are taken)
        found = getattr(torch, value.name, None) if value.kind in ("memory_format", "layout", "dtype") else None
        if isinstance(found, _ENUM_TYPES.get(value.kind, ())):
            return found
        if value.kind == "device" and value.name in ("cpu", "meta"):
            return torch.device(value.name)
        raise ValueError(f"attribute {value} cannot be turned back into a Python value")
    return value


_ENUM_TYPES = {"memory_format": torch.memory_format, "layout": torch.layout, "dtype": torch.dtype}


_INPUT_KINDS = {
    "USER_INPUT": InputKind.user,
    "PARAMETER": InputKind.parameter,
    "BUFFER": InputKind.buffer,
    "CONSTANT_TENSOR": InputKind.constant,
}


def from_exported_program(ep: Any, name: str = "forward") -> Graph:
    """Import ``ep`` (a torch.export ExportedProgram) into a new Graph.

    Each Node keeps the FX node it came from in ``node.fx_node``.
    """
    return from_graph_module(ep.graph_module, ep.graph_signature, ep.state_dict, ep.constants, name)


def from_graph_module(
    gm: torch.fx.GraphModule,
    signature: Any = None,
    state_dict: dict | None = None,
    constants: dict | None = None,
    name: str = "forward",
) -> Graph:
    """Import a graph module; ``signature`` (an ExportGraphSignature) tells parameters from inputs."""
    return _Importer(gm, signature, state_dict or {}, constants or {}, name).run()


class _Importer:
    """One import: FX placeholders and attributes become graph inputs, calls become nodes, the
    output node the graph's outputs."""

    def __init__(self, gm: torch.fx.GraphModule, signature: Any, state_dict: dict, constants: dict, name: str):
        self.gm, self.state_dict, self.constants = gm, state_dict, constants
        self.graph = Graph(name)
        self.specs = {}
        self.mutated_buffers: set = set()
        if signature is not None:
            self.specs = {spec.arg.name: spec for spec in signature.input_specs if hasattr(spec.arg, "name")}
            self.mutated_buffers = set(getattr(signature, "buffers_to_mutate", {}).values())
        self.values: dict[torch.fx.Node, Any] = {}
        self.used_names: set[str] = set()

    def run(self) -> Graph:
        for fx_node in self.gm.graph.nodes:
            if fx_node.op == "placeholder":
                self.placeholder(fx_node)
            elif fx_node.op == "get_attr":
                data = _get_attr(self.gm, fx_node.target)
                type_ = type_of(data) if isinstance(data, torch.Tensor) else ScalarType("opaque")
                self.add_input(fx_node, type_, InputKind.constant, data)
            elif fx_node.op in ("call_function", "call_method", "call_module"):
                self.call(fx_node)
            elif fx_node.op == "output":
                outputs = fx_node.args[0]
                outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
                self.graph.outputs = [
                    self.values[o]
                    for o in outputs
                    if isinstance(o, torch.fx.Node) and isinstance(self.values.get(o), Value)
                ]
        for fx_node, value in list(self.values.items()):
            if isinstance(value, _Multi):
                self.values[fx_node] = value.node.results[0] if value.node.results else None
        return self.graph

    def input_name(self, raw: str) -> str:
        base = _NAME_CHARS.sub("_", raw) or "input"
        if base.isdigit():
            base = "v" + base
        candidate, k = base, 1
        while candidate in self.used_names:
            candidate, k = f"{base}_{k}", k + 1
        self.used_names.add(candidate)
        return candidate

    def add_input(self, fx_node: torch.fx.Node, type_: Type, kind: InputKind, data: Any) -> None:
        value = self.graph.add_input(self.input_name(fx_node.name), type_, kind, data)
        value.fx_node = fx_node
        self.values[fx_node] = value

    def placeholder(self, fx_node: torch.fx.Node) -> None:
        spec = self.specs.get(fx_node.name)
        kind, data = InputKind.user, None
        if spec is not None:
            kind = _INPUT_KINDS.get(spec.kind.name, InputKind.constant)
            if kind is InputKind.buffer and spec.target in self.mutated_buffers:
                kind = InputKind.state
            if spec.target is not None:
                data = self.state_dict.get(spec.target, self.constants.get(spec.target))
        self.add_input(fx_node, type_of(fx_node.meta.get("val")), kind, data)

    def call(self, fx_node: torch.fx.Node) -> None:
        values = self.values
        if fx_node.target is operator.getitem and _is_result_pick(fx_node, values):
            source, index = fx_node.args
            values[fx_node] = values[source].producer.results[index]
            return
        operands, attributes = split_arguments(fx_node, values)
        val = fx_node.meta.get("val", _MISSING)
        if isinstance(val, (list, tuple)):
            result_types = [type_of(v) for v in val]
        elif val is _MISSING:
            result_types = [ScalarType("opaque")]
        else:
            result_types = [type_of(val)]
        target = fx_node.target if fx_node.op == "call_function" else f"{fx_node.op}.{fx_node.target}"
        node = self.graph.create_node(
            op_name(target) if not isinstance(target, str) else target,
            operands,
            result_types,
            attributes,
            origin=fx_node.meta.get("xir_origin"),  # (the pass that wrote it into the program, if one did)
        )
        node.fx_node = fx_node
        self.graph.append(node)
        if len(node.results) == 1 and not isinstance(val, (list, tuple)):
            values[fx_node] = node.result
        else:
            values[fx_node] = _Multi(node)


_MISSING = object()


class _Multi:
    """Stand-in for an FX node with several results until getitem picks one."""

    def __init__(self, node: Node):
        self.node = node
        self.producer = node
        self.uses = []


def _is_result_pick(fx_node: torch.fx.Node, values: dict) -> bool:
    if len(fx_node.args) != 2 or not isinstance(fx_node.args[1], int):
        return False
    source = values.get(fx_node.args[0])
    return isinstance(source, _Multi) and 0 <= fx_node.args[1] < len(source.node.results)


def _get_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj
