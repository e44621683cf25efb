"""Op definitions: one registry that says what every op the IR knows is.

An :class:`OpDef` gives an op's name and overloads, its named operands (``input``, ``weight``,
``bias?`` for an optional one, ``tensors*`` for a variadic one; an optional operand that is
absent is left out, and only one followed by a present operand keeps its place as the attribute
``name=none``), an attribute schema with
defaults, result-type inference, a check of its operands, and traits:

* ``pure``: no side effect; dead-code elimination may erase it when nothing uses its results;
* ``elementwise``: each output element depends on the input elements at the same position;
* ``view``: layout only (a view, permute, expand, copy): moves elements, computes nothing;
* ``commutative``: the first two operands may be swapped;
* ``random``: draws random numbers: two nodes with the same operands give different results;
* ``matmul``: multiplies matrices (its cost is the GEMM; backends match its operands as a unit);
* ``linear``: a linear layer, ``input @ weight.T + bias`` with a weight operand (``aten.linear``
  and the ``addmm``/``mm`` torch.export decomposes it into);
* ``quantize``, ``dequantize``, ``choose-qparams``: the quantization ops (a quantized lowering
  matches each with its one reader);
* ``cast``: the edge dialect's dtype (and dim order) copies, ``_to_copy`` and ``_to_dim_order_copy``;
* ``reshape``: a reshape to the ``size`` (``shape``) attribute: ``view_copy``, ``view``, ...;
* ``softmax``: a softmax along the ``dim`` attribute (``_softmax``, ``_log_softmax``);
* ``weights``: the operands that are weights (static data in a backend: has-static-weights).

The verifier, dead-code elimination, :meth:`Graph.create_node` (which infers result types
when the caller gives none), named operand access (``node.weight``) and the lowering's
capability rules all read this registry. An op without a definition is *opaque*: it imports,
prints, parses and verifies structurally, never gets erased by DCE, and is never delegated.

Adding an op is one call::

    define_op("aten.hardsigmoid", operands=("input",), traits=PURE | ELEMENTWISE, infer=same_as_input)

The definitions of the ops xir knows are in :mod:`xir.op_definitions`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .errors import IRError
from .types import ScalarType, Symbol, TensorType, Type

PURE = frozenset({"pure"})
ELEMENTWISE = frozenset({"elementwise"})
VIEW = frozenset({"view"})
COMMUTATIVE = frozenset({"commutative"})
RANDOM = frozenset({"random"})
MATMUL = frozenset({"matmul"})
LINEAR = frozenset({"linear", "matmul"})  # (a linear layer multiplies matrices)
QUANTIZE = frozenset({"quantize"})
DEQUANTIZE = frozenset({"dequantize"})
CHOOSE_QPARAMS = frozenset({"choose-qparams"})
CAST = frozenset({"cast"})
RESHAPE = frozenset({"reshape"})
SOFTMAX = frozenset({"softmax"})
TRAITS = (
    "pure",
    "elementwise",
    "view",
    "commutative",
    "random",
    "matmul",
    "linear",
    "quantize",
    "dequantize",
    "choose-qparams",
    "cast",
    "reshape",
    "softmax",
)

REQUIRED = object()  # an attribute the node must carry (no default)

Infer = Callable[[Any], "list[Type] | None"]  # node -> result types, or None when they cannot be told
Check = Callable[[Any], "str | None"]  # node -> what is wrong with its operands, or None


class OpDef:
    """The definition of one op (under one or more full names, one per overload)."""

    def __init__(
        self,
        name: str,
        *,
        overloads: Iterable[str] = ("default",),
        operands: Iterable[str] = (),
        attributes: dict[str, Any] | None = None,
        traits: Iterable[str] = (),
        weights: Iterable[str] = (),
        infer: Infer | None = None,
        check: Check | None = None,
        doc: str = "",
        identity: dict[str, Any] | None = None,
        absorbing: dict[str, Any] | None = None,
    ):
        self.name = name
        self.overloads = tuple(overloads)
        self.operand_specs = tuple(operands)
        self.attributes = dict(attributes or {})
        self.traits = frozenset(traits)
        unknown = self.traits - set(TRAITS)
        if unknown:
            raise IRError(f"op {name}: unknown trait(s) {', '.join(sorted(unknown))}; traits are {', '.join(TRAITS)}")
        self.weights = tuple(weights)
        self.infer = infer
        self.check = check
        self.doc = doc
        # argument -> the number that makes the op give back its other tensor operand (x * 1, 1 * x,
        # x + 0, x ** 1): data for canonicalization (remove-no-ops), read with node.scalar(argument)
        self.identity = dict(identity or {})
        # argument -> the number that decides the result whatever the other operand is (x * 0 is 0
        # for finite x only: a float rewrite must not use it; kept as data for integer rewrites)
        self.absorbing = dict(absorbing or {})
        for name in (*self.identity, *self.absorbing):
            if not self.has_operand(name) and name not in self.attributes:
                raise IRError(f"op {name!r} of {self.name}'s identity or absorbing element is no operand or attribute")
        variadic = [s for s in self.operand_specs if s.endswith("*")]
        if len(variadic) > 1 or (variadic and self.operand_specs[-1] != variadic[0]):
            raise IRError(f"op {name}: only the last operand may be variadic")
        for weight in self.weights:
            if not self.has_operand(weight):
                raise IRError(f"op {name}: weight {weight!r} is not one of its operands")
        # operand name -> (its position when no optional operand is marked absent, whether it is
        # variadic, the optional operands up to and including it): named access in O(1)
        self._positions: dict[str, tuple[int, bool, tuple[str, ...]]] = {}
        optional: list[str] = []
        for index, spec in enumerate(self.operand_specs):
            spec_name = spec.rstrip("?*")
            if spec.endswith("?"):
                optional.append(spec_name)
            self._positions[spec_name] = (index, spec.endswith("*"), tuple(optional))

    # ------------------------------------------------------------------ names
    @property
    def full_names(self) -> tuple[str, ...]:
        return tuple(self.name if o == "default" else f"{self.name}.{o}" for o in self.overloads)

    @property
    def operand_names(self) -> tuple[str, ...]:
        return tuple(s.rstrip("?*") for s in self.operand_specs)

    @property
    def is_pure(self) -> bool:
        return "pure" in self.traits

    def has(self, trait: str) -> bool:
        if trait in ("weights", "identity", "absorbing"):
            return bool(getattr(self, trait))
        return trait in self.traits

    def has_operand(self, name: str) -> bool:
        return name in self.operand_names

    # ---------------------------------------------------------------- operands
    def arity(self) -> tuple[int, int | None]:
        """(fewest, most) operands; most is None for a variadic op."""
        required = sum(1 for s in self.operand_specs if not s.endswith(("?", "*")))
        if any(s.endswith("*") for s in self.operand_specs):
            return required, None
        return required, len(self.operand_specs)

    def operand(self, node, name: str):
        found = self._positions.get(name)
        if found is not None:
            index, variadic, optional = found
            attributes = node.attributes
            if not any(o in attributes for o in optional):  # (no {name=none} before it: the plain position)
                if variadic:
                    return tuple(node.operands[index:])
                operands = node.operands
                return operands[index] if index < len(operands) else None
        index = 0
        for spec in self.operand_specs:
            spec_name = spec.rstrip("?*")
            absent = spec.endswith("?") and spec_name in node.attributes  # e.g. {bias=none}: not an operand
            if spec_name == name:
                if spec.endswith("*"):
                    return tuple(node.operands[index:])
                return None if absent or index >= len(node.operands) else node.operands[index]
            if not absent:
                index += 1
        hint = (
            f"; {name!r} is an attribute of {node.op}: read it with node.scalar({name!r})"
            if name in self.attributes
            else ""
        )
        raise AttributeError(
            f"{node.op} has no operand named {name!r} (operands: {', '.join(self.operand_names) or 'none'}){hint}"
        )

    def _absent_operand(self, node, name: str) -> bool:
        """Whether the attribute ``name`` spells an operand: an optional one that is absent
        (``{bias=none}``), or a scalar given as an attribute (``aten.add.Tensor(%x) {other=2}``)."""
        return any(spec.rstrip("?*") == name and spec.endswith("?") for spec in self.operand_specs)

    def attribute_default(self, name: str) -> Any:
        default = self.attributes[name]
        if default is REQUIRED:
            raise IRError(f"{self.name}: attribute {name!r} has no default and the node does not carry it")
        return list(default) if isinstance(default, list) else default

    # ------------------------------------------------------------ verification
    def problems(self, node) -> str | None:
        """What is wrong with ``node`` as an instance of this op, or None. The check and the
        inference may raise IRError for an attribute they cannot take (a dim out of range, a
        stride of 0): that is the problem."""
        fewest, most = self.arity()
        count = len(node.operands)
        if count < fewest or (most is not None and count > most):
            expected = f"{fewest}" if fewest == most else f"{fewest} to {most if most is not None else 'any number of'}"
            return f"takes {expected} operands ({', '.join(self.operand_specs)}), got {count}"
        for name, default in self.attributes.items():
            if default is REQUIRED and name not in node.attributes:
                return f"needs the attribute {name!r}"
        unknown = [
            name for name in node.attributes if name not in self.attributes and not self._absent_operand(node, name)
        ]
        if unknown:  # (the schema is closed: {stide=[2,2]} is no stride)
            known = ", ".join(self.attributes) or "none"
            return f"has no attribute {unknown[0]!r} (its attributes: {known})"
        try:
            problem = self.check(node) if self.check is not None else None
            if problem:
                return problem
            if self.infer is not None and all(isinstance(v.type, (TensorType, ScalarType)) for v in node.operands):
                expected = self.infer(node)
                if expected is not None:
                    return _compare_results(node, expected)
        except IRError as error:
            return str(error)
        return None

    def __repr__(self) -> str:
        return f"<OpDef {self.name} ({', '.join(self.operand_specs)})>"


def _compare_results(node, expected: list[Type]) -> str | None:
    if len(expected) != len(node.results):
        return f"has {len(node.results)} results, its definition gives {len(expected)}"
    for result, want in zip(node.results, expected):
        got = result.type
        which = "result" if len(expected) == 1 else f"result {result.index}"
        if isinstance(want, TensorType) and isinstance(got, TensorType):
            if got.dtype != want.dtype:
                return f"{which} dtype is {got.dtype}, expected {want.dtype}"
            if not shapes_agree(got.shape, want.shape):
                return f"{which} shape is {show_shape(got.shape)}, expected {show_shape(want.shape)}"
        elif type(got) is not type(want) or got != want:
            return f"{which} type is {got}, expected {want}"
    return None


def same_as_input(node) -> list[Type] | None:
    """Inference for ops whose one result has the type of their first operand."""
    x = node.operands[0].type if node.operands else None
    return [x] if isinstance(x, TensorType) else None


def dims_agree(a, b) -> bool:
    """Equal dims; a symbolic dim agrees with anything (only static dims are compared)."""
    if isinstance(a, Symbol) or isinstance(b, Symbol):
        return True
    return a == b


def shapes_agree(a, b) -> bool:
    return len(a) == len(b) and all(dims_agree(x, y) for x, y in zip(a, b))


def show_shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# ------------------------------------------------------------------------------ op handles


class Op(str):
    """A handle on an op the IR defines: its full name as a ``str`` (so it compares, hashes, prints
    and matches as the name does) whose overloads are attributes, checked when they are read::

        from xir.ops import aten
        aten.mul.Tensor == "aten.mul.Tensor"      # True
        aten.mull                                 # AttributeError: no op aten.mull is defined ...

    Accepted wherever an op name is: ``rewrite_pattern``, ``create_node``, ``node.op == ...``.
    A misspelt handle fails where it is read, so a module that names one fails on import."""

    __slots__ = ()

    def __getattr__(self, overload: str) -> "Op":
        if overload.startswith("__"):
            raise AttributeError(overload)
        full = f"{self}.{overload}"
        cached = _OVERLOADS.get(full)
        if cached is not None:
            return cached
        if lookup(full) is None:
            known = sorted(n[len(self) + 1 :] for n in all_ops() if n.startswith(f"{self}."))
            raise AttributeError(
                f"no op {full} is defined in xir.ops"
                + (f"; the overloads of {self} are {', '.join(known)}" if known else "")
            )
        return _OVERLOADS.setdefault(full, Op(full))

    @property
    def definition(self) -> "OpDef":
        return lookup(self)


_OVERLOADS: dict[str, "Op"] = {}


class Namespace:
    """The ops of one namespace as attributes: ``aten.relu`` (an op whose default overload is its
    name), ``aten.mul`` (whose overloads are its attributes: ``aten.mul.Tensor``)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, op: str) -> Op:
        if op.startswith("__"):
            raise AttributeError(op)
        full = f"{self._name}.{op}"
        if not any(name == full or name.startswith(full + ".") for name in all_ops()):
            close = sorted(
                n
                for n in {".".join(k.split(".")[:2]) for k in all_ops()}
                if n.startswith(self._name + ".") and _similar(n.split(".")[1], op)
            )
            raise AttributeError(
                f"no op {full} is defined in xir.ops" + (f"; did you mean {', '.join(close)}?" if close else "")
            )
        handle = Op(full)
        setattr(self, op, handle)  # (read once: later reads are plain attributes)
        return handle

    def __repr__(self) -> str:
        return f"<ops of {self._name}>"


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


aten = Namespace("aten")
quantized_decomposed = Namespace("quantized_decomposed")
dim_order_ops = Namespace("dim_order_ops")
torchao = Namespace("torchao")  # torchao's affine quantization (only dequantize_affine is defined)


def check_op_names(ops: Iterable[str], where: str) -> None:
    """Raise IRError naming ``where`` unless every name in ``ops`` is an op xir defines (a
    misspelt name would otherwise match nothing, silently)."""
    for op in ops:
        if lookup(op) is None:
            raise IRError(
                f"{where}: no op named {op!r} is defined in xir.ops (misspelt? an opaque op cannot be "
                "matched by name: define it first, see xir.ops.define_op)"
            )


# ----------------------------------------------------------------------------- the registry

_REGISTRY: dict[str, OpDef] = {}


def define_op(name: str, **fields) -> OpDef:
    """Define an op (see :class:`OpDef` for the fields) and register it under every overload.
    Defining a name twice is an error."""
    definition = OpDef(name, **fields)
    for full in definition.full_names:
        if full in _REGISTRY:
            raise IRError(f"op {full} is already defined; an op has one definition (remove it with undefine_op first)")
    for full in definition.full_names:
        _REGISTRY[full] = definition
    return definition


def undefine_op(name: str) -> None:
    """Remove the definition of ``name`` (every overload of it). For tests and experiments."""
    definition = _REGISTRY.get(name)
    if definition is None:
        raise IRError(f"op {name} is not defined")
    for full in definition.full_names:
        _REGISTRY.pop(full, None)


def lookup(op: str) -> OpDef | None:
    """The definition of the op named ``op`` (a full name such as ``aten.add.Tensor``), or None."""
    _load_definitions()
    return _REGISTRY.get(op)


def is_opaque(op: str) -> bool:
    return lookup(op) is None


def has_trait(op: str, trait: str) -> bool:
    definition = lookup(op)
    return definition is not None and definition.has(trait)


def ops_with(trait: str) -> frozenset[str]:
    """Every full op name whose definition has ``trait`` (``pure``, ``view``, ``weights``, ...)."""
    _load_definitions()
    return frozenset(name for name, d in _REGISTRY.items() if d.has(trait))


def family(trait: str) -> tuple[Op, ...]:
    """The ops defined with ``trait``, as handles (sorted): an op family declared on the op
    definitions (``family("linear")``: ``aten.addmm``, ``aten.linear``, ``aten.mm``). Read when
    called: a family read at import time holds the ops defined by then."""
    return tuple(Op(name) for name in sorted(ops_with(trait)))


def all_ops() -> dict[str, OpDef]:
    _load_definitions()
    return dict(_REGISTRY)


def infer_result_types(node) -> list[Type]:
    """The result types of ``node`` by its op's definition; an error when they cannot be told."""
    definition = lookup(node.op)
    if definition is None:
        raise IRError(f"{node.op} is an opaque op (no definition in xir.ops): give its result types")
    if definition.infer is None:
        raise IRError(f"the definition of {node.op} cannot infer result types: give them")
    types = definition.infer(node)
    if types is None:
        operands = ", ".join(str(v.type) for v in node.operands)
        raise IRError(f"cannot infer the result types of {node.op}({operands}) with {dict(node.attributes)}: give them")
    return list(types)


_LOADED = False


def _load_definitions() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import op_definitions  # noqa: F401  (defines the ops on import)
