"""Loading a ``.pt2`` archive without running code from it.

``torch.export.load`` runs code from the file it reads: it unpickles a weight or tensor constant
marked ``use_pickle`` (``torch.load(weights_only=False)``), an ``opaque_obj_*`` constant
(``pickle.loads``), a TorchScript ``custom_obj_*``, the legacy ``.pt`` members and the sample
inputs (``weights_only=True``, then ``False`` when that fails); it evaluates every symbolic size
with ``sympy.sympify`` (``eval``) and compiles the graph with its names spliced into Python
source; ``ep.module()`` execs the program's ``guards_code``; and it loads the shared libraries of
``data/aotinductor/``. It inflates a member whole, however large, and reads a member whose CRC
does not match as if it did.

:func:`load_exported_program` reads the archive with :mod:`zipfile` and :mod:`json` first and
refuses it (:class:`BadArchive`, naming the member and the problem) unless

* no member inflates past ``MAX_MEMBER`` bytes (a JSON member, parsed whole, past ``MAX_JSON``)
  or more than ``MAX_RATIO`` times its compressed size, none holding a tensor
  inflates past the bytes the tensor's dtype, sizes and strides declare or holds fewer, and every
  member's CRC matches;
* every symbolic size and guard is a Python expression within small bounds (length, depth, the
  digits of its numbers, powers and shifts by a written number up to ``MAX_EXPONENT``, no number
  past ``MAX_BITS``): sympy computes the numbers of a size, the module's call those of a guard;
* nothing torch would unpickle or load as code is in it (:class:`UntrustedArchive`), and its
  names, symbolic sizes and guards are names, shape expressions and shape checks.

It then loads the program with torch's own readers, minus the sample inputs, which it reads with
torch's weights-only unpickler (tensors and containers only, no fallback). ``trust_pickle=True``
(``xir --trust-pickle``) keeps the checks of sizes, CRCs and bounds and loads the rest with
``torch.export.load``: for files the user trusts, since that runs their code.
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import math
import re
import zipfile
from pathlib import Path

MAX_RATIO = 100  # weights compress ~1.1x; torch.export.save stores members uncompressed
MAX_MEMBER = 1 << 34  # no member inflates past 16 GiB (a weight of a model XNNPACK runs is far smaller)
MAX_JSON = 1 << 26  # nor a JSON member past 64 MiB (parsed whole; an LLM's model.json is a few MiB)
SLACK = 1 << 20  # small text members may compress better than MAX_RATIO
CHUNK = 1 << 20  # members are read this much at a time to check their CRCs

# member names inside the archive's folder (torch.export.pt2_archive.constants)
FORMAT = "archive_format"
MODEL_JSON = "models/model.json"
SAMPLE_INPUTS = "data/sample_inputs/model.pt"
PAYLOAD_CONFIGS = {
    "weights": re.compile(r"data/weights/([^/]+)_weights_config\.json"),
    "constants": re.compile(r"data/constants/([^/]+)_constants_config\.json"),
}
PICKLED_MEMBERS = re.compile(r"data/(weights|constants)/[^/]+\.pt")  # the legacy state dict and constants
COMPILED_CODE = "data/aotinductor/"

# bytes per element of schema.ScalarType
ELEMENT_SIZE = {
    1: 1,
    2: 1,
    3: 2,
    4: 4,
    5: 8,
    6: 2,
    7: 4,
    8: 8,
    9: 4,
    10: 8,
    11: 16,
    12: 1,
    13: 2,
    28: 2,
    29: 1,
    30: 1,
    31: 1,
    32: 1,
    33: 1,
    34: 4,
    35: 8,
}


class BadArchive(ValueError):
    """A ``.pt2`` that xir does not load: damaged, inflating past what it declares, or holding what
    torch would run. The message names the file, the member and the problem."""

    def __init__(self, path, problem: str):
        self.path, self.problem = Path(path), problem
        super().__init__(self.text())

    def text(self) -> str:
        return f"{self.path}: {self.problem}"


class NotAnExportedProgram(BadArchive):
    """Not an archive written by ``torch.export.save`` (not a zip, a ``torch.save`` file, ...)."""

    def text(self) -> str:
        return f"{self.path} is not an exported program (a .pt2 file written by torch.export.save): {self.problem}"


class UntrustedArchive(BadArchive):
    """Loading it would run code from the file: a pickle, compiled code, an expression or a name
    torch evaluates. ``trust_pickle=True`` loads it."""

    def text(self) -> str:
        return (
            f"{self.path}: {self.problem}: loading it would run code from the file "
            f"(--trust-pickle, or trust_pickle=True, loads it if you trust the file)"
        )


def load_exported_program(path, trust_pickle: bool = False):
    """The ExportedProgram saved in ``path``, loaded without running code from the file (unless
    ``trust_pickle``); raises :class:`BadArchive` when the archive does not pass the checks. The
    file is opened once: torch reads the bytes that were checked, even if the path changes."""
    path = Path(path)
    try:
        file = open(path, "rb")
    except OSError as error:
        raise BadArchive(path, f"cannot read it: {error.strerror or error}") from error
    with file:
        _check(path, file, trust_pickle)
        file.seek(0)
        if trust_pickle:
            import torch

            with zipfile.ZipFile(file) as archive:
                names = [n for n in archive.namelist() if n.endswith(MODEL_JSON)]
                _register_operator_libraries(archive.read(names[0]) if names else b"")
            file.seek(0)
            return torch.export.load(file)
        return _load(path, file)


# operator namespaces a program may use whose operators exist only once a library module defines
# them, and that module: the quantization flows xir lowers (pt2e's Q/DQ ops, torchao's affine ones)
OPERATOR_LIBRARIES = {
    "quantized_decomposed": "torch.ao.quantization.fx._decomposed",
    "torchao": "torchao.quantization.quant_primitives",
}


def _register_operator_libraries(model_json: bytes) -> None:
    """Import the library modules that define the operators of ``OPERATOR_LIBRARIES``'s namespaces
    the program names: without them torch cannot resolve a statically quantized program's
    ``quantized_decomposed`` ops, and the file looks damaged. Fixed modules of installed libraries:
    nothing the file names is imported."""
    import importlib

    for namespace, module in OPERATOR_LIBRARIES.items():
        if f'"torch.ops.{namespace}.'.encode() in model_json:
            importlib.import_module(module)


def _check(path: Path, file, trust_pickle: bool) -> None:
    """Read the archive with zipfile and json only; raise :class:`BadArchive` if it is damaged,
    inflates past what it declares or (unless ``trust_pickle``) holds what torch would run."""
    try:
        archive = zipfile.ZipFile(file)
    except zipfile.BadZipFile as error:
        raise NotAnExportedProgram(path, "it is not a zip archive") from error
    with archive:
        first = min((info.header_offset for info in archive.infolist()), default=0)
        if first != 0:  # (a truncated .pt2 ending in its sample inputs: zipfile finds *their* directory)
            raise BadArchive(
                path,
                f"it is truncated or damaged: the zip directory at its end lists members from "
                f"byte {first:,} on ({archive.infolist()[0].filename}: a zip stored inside it?), "
                f"not from its start",
            )
        _check_zip(path, archive)
        members = _members(path, archive, trust_pickle)
        payloads = _payloads(path, archive, members)
        _check_tensor_sizes(path, members, payloads)
        for name, info in members.items():
            if name.startswith("models/") and name.endswith(".json"):
                _check_bounds(path, info.filename, _read_json(path, archive, info))
        if not trust_pickle:
            _check_content(path, archive, members, payloads)


# ------------------------------------------------------------------------- the zip itself


def _check_zip(path: Path, archive: zipfile.ZipFile, inside: str = "") -> None:
    """Each member once, its sizes consistent and not inflating more than ``MAX_RATIO`` times; then
    every member read through (zipfile checks the CRC at the end) in bounded chunks."""
    seen = set()
    for info in archive.infolist():
        name = inside + info.filename
        if info.filename in seen:
            raise BadArchive(path, f"member {name} appears twice in the archive")
        seen.add(info.filename)
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise BadArchive(
                path,
                f"member {name}: its sizes in the zip directory disagree "
                f"({info.compress_size:,} bytes stored, {info.file_size:,} declared)",
            )
        limit = MAX_JSON if info.filename.endswith(".json") else MAX_MEMBER
        if info.file_size > limit:
            raise BadArchive(
                path,
                f"member {name} inflates to {info.file_size:,} bytes, more than the {limit:,} "
                f"xir reads of {'a JSON member' if limit == MAX_JSON else 'a member'}",
            )
        if info.file_size > info.compress_size * MAX_RATIO + SLACK:
            raise BadArchive(
                path,
                f"member {name} inflates to {info.file_size:,} bytes from {info.compress_size:,} "
                f"(a decompression bomb?)",
            )
    for info in archive.infolist():
        try:
            with archive.open(info) as member:
                while member.read(CHUNK):
                    pass
        except zipfile.BadZipFile as error:
            problem = "its CRC-32 does not match its bytes" if "CRC" in str(error) else str(error)
            raise BadArchive(path, f"member {inside}{info.filename} is damaged: {problem}") from error
        except (OSError, EOFError, RuntimeError, NotImplementedError, ValueError) as error:
            raise BadArchive(path, f"member {inside}{info.filename} cannot be read: {error}") from error


def _members(path: Path, archive: zipfile.ZipFile, trust_pickle: bool) -> dict[str, zipfile.ZipInfo]:
    """The members by their name in the archive's folder (``models/model.json``, ...); empty for
    an archive of torch 2.7's format, which only a trusted load reads."""
    names = archive.namelist()
    roots = {name[: -len(FORMAT)] for name in names if name.endswith("/" + FORMAT) and name.count("/") == 1}
    if len(roots) != 1:
        return _older_format(path, names, trust_pickle)
    (root,) = roots
    outside = [name for name in names if not name.startswith(root)]
    if outside:
        raise BadArchive(path, f"member {outside[0]} is outside the archive's folder {root}")
    return {name[len(root) :]: archive.getinfo(name) for name in names}


def _older_format(path: Path, names: list[str], trust_pickle: bool) -> dict:
    if "serialized_exported_program.json" in names:
        if trust_pickle:
            return {}
        raise UntrustedArchive(
            path,
            "it is in the format of torch 2.7 and earlier, whose state dict, constants and sample inputs are pickled",
        )
    if any(name.endswith("data.pkl") for name in names):
        raise NotAnExportedProgram(
            path,
            "it is a torch.save file (a state dict or module?); export the model with "
            "torch.export.export and save that with torch.export.save",
        )
    raise NotAnExportedProgram(path, "it is a zip archive without an exported program in it")


def _read_json(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo):
    try:
        return json.loads(archive.read(info))
    except (ValueError, RecursionError) as error:  # (UnicodeDecodeError is a ValueError)
        raise BadArchive(path, f"member {info.filename} is not valid JSON: {error}") from error


# ---------------------------------------------------------------------------- tensor sizes


def _payloads(path: Path, archive: zipfile.ZipFile, members: dict) -> list[tuple[str, str, str, dict]]:
    """(kind, fqn, member name, payload meta) of every entry of the weights and constants configs."""
    entries = []
    for name, info in members.items():
        for kind, pattern in PAYLOAD_CONFIGS.items():
            if pattern.fullmatch(name):
                config = _read_json(path, archive, info)
                table = config.get("config") if isinstance(config, dict) else None
                if not isinstance(table, dict) or not all(isinstance(m, dict) for m in table.values()):
                    raise BadArchive(path, f"member {info.filename} is not a payload config of torch.export.save")
                folder = name.rsplit("/", 1)[0] + "/"
                entries += [(kind[:-1], fqn, folder + str(meta.get("path_name")), meta) for fqn, meta in table.items()]
    return entries


def _pickled(meta: dict) -> bool:
    return meta.get("use_pickle") is not False or not str(meta.get("path_name")).startswith(("weight_", "tensor_"))


def _tensor_bytes(meta) -> int | None:
    """The bytes of storage a tensor meta declares (offset and the furthest element, times the
    element's size), or None when it is not a tensor meta of concrete sizes."""
    try:
        element = ELEMENT_SIZE[meta["dtype"]]
        sizes = [d["as_int"] for d in meta["sizes"]]
        strides = [d["as_int"] for d in meta["strides"]]
        offset = meta["storage_offset"]["as_int"]
    except (KeyError, TypeError):
        return None
    numbers = [*sizes, *strides, offset]
    if len(sizes) != len(strides) or not all(type(n) is int and n >= 0 for n in numbers):
        return None
    if 0 in sizes:
        return 0
    return (offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1) * element


def _check_tensor_sizes(path: Path, members: dict, payloads: list) -> None:
    """Each tensor's member holds at least the bytes its tensors declare and, when compressed,
    inflates to no more (torch.export.save stores the whole storage of a view, uncompressed)."""
    needed: dict[str, tuple[int, str]] = {}
    for kind, fqn, name, meta in payloads:
        if _pickled(meta):
            continue
        size = _tensor_bytes(meta.get("tensor_meta"))
        if size is None:
            raise BadArchive(path, f"{kind} {fqn}: its tensor meta does not declare a dtype, sizes and strides")
        if name not in members:
            raise BadArchive(path, f"{kind} {fqn}: its member {name} is missing")
        if size >= needed.get(name, (-1, ""))[0]:
            needed[name] = (size, f"{kind} {fqn}")
    for name, (size, tensor) in needed.items():
        info = members[name]
        if info.file_size < size:
            raise BadArchive(
                path,
                f"member {info.filename} holds {info.file_size:,} bytes, fewer than the {size:,} "
                f"that {tensor} declares",
            )
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > size:
            raise BadArchive(
                path,
                f"member {info.filename} inflates to {info.file_size:,} bytes, more than the "
                f"{size:,} that {tensor} declares",
            )


# ------------------------------------------------------------------- code in the archive

NAME_FIELDS = {"name", "as_name"}  # placeholders, nodes, arguments: Python names in the graph module's source
VALUE_TABLES = {"tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values"}
PATH_FIELDS = {"parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "fqn", "user_input_name"}
DOTTED = re.compile(r"\w+(?:\.\w+)*", re.ASCII)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # \r ends a line of Python source as \n does

# what a symbolic size torch printed is made of: sympy's and torch's shape functions (the deserializer's
# sympy_functions), Symbol's assumptions, symbols (s0, u3), numbers, quoted names and numbers, operators
SHAPE_NAMES = frozenset(
    """
    Symbol Integer Rational Float Add Mul Pow Mod Max Min Abs floor ceiling Eq Ne Lt Le Gt Ge Equality
    Unequality StrictLessThan StrictGreaterThan LessThan GreaterThan And Or Not Piecewise ExprCondPair true false
    True False oo zoo nan int_oo FloorDiv ModularIndexing Where PythonMod CleanDiv CeilToInt FloorToInt CeilDiv
    LShift RShift PowByNatural FloatPow FloatTrueDiv IntTrueDiv IsNonOverlappingAndDenseIndicator TruncToFloat
    TruncToInt RoundToInt RoundDecimal ToFloat Identity positive negative nonnegative nonpositive integer real
    finite infinite zero nonzero even odd rational commutative precision""".split()
)
SYMBOL = re.compile(r"[a-z]+[0-9]+")
NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
SHAPE_TOKEN = re.compile(
    rf"""\s*(?:(?P<name>[A-Za-z_]\w*)|{NUMBER}|'(?:[A-Za-z]\w*|{NUMBER})'|"(?:[A-Za-z]\w*|{NUMBER})"
                             |\*\*|//|[<>=!]=|[-+*/%(),<>=])""",
    re.ASCII | re.VERBOSE,
)

# what a guard torch.export wrote is made of: comparisons and arithmetic of the inputs' sizes and strides
GUARD_NODES = (
    ast.Expression,
    ast.Compare,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.Call,
    ast.Subscript,
    ast.Attribute,
    ast.Name,
    ast.Constant,
    ast.Tuple,
    ast.expr_context,
    ast.boolop,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
)
GUARD_NAMES = frozenset(
    {
        "L",
        "math",
        "torch",
        "inf",
        "IsNonOverlappingAndDenseIndicator",
        "cast_symbool_to_symint_guardless",
        "abs",
        "min",
        "max",
        "int",
        "float",
        "bool",
        "round",
    }
)
GUARD_ATTRIBUTES = frozenset(
    {
        "size",
        "stride",
        "storage_offset",
        "dim",
        "numel",
        "floor",
        "ceil",
        "trunc",
        "sqrt",
        "isnan",
        "isinf",
        "inf",
        "nan",
        "sym_max",
        "sym_min",
        "sym_int",
        "sym_float",
        "sym_not",
        "sym_ite",
        "sym_sqrt",
        "sym_sum",
    }
)
GUARD_TEXT = re.compile(r"\w*", re.ASCII)


# bounds of a symbolic size or a guard, checked on its syntax tree before sympy or Python sees it:
# sympify computes the numbers of a symbolic size (``0*7**10**8`` takes minutes, ``10**10**11`` all the
# memory) and the module's call computes those of its guards
MAX_EXPRESSION = 10_000  # characters
MAX_DEPTH = 200  # nesting of its syntax tree
MAX_LITERAL = 40  # digits of a number written in it
MAX_EXPONENT = 64  # |n| of a power x**n, Pow(x, n), and the shift of x << n: n is a number written in it
MAX_BITS = 4096  # bits of any number it computes, a size (a symbol, an input's size) taken as 64 bits
MAX_PRECISION = 1000  # digits of Float(x, n) and RoundDecimal(x, n)
POWERS = frozenset({"Pow", "PowByNatural", "FloatPow"})
PRECISIONS = frozenset({"Float", "RoundDecimal"})
NUMERAL = re.compile(r"[-+]?(?P<digits>\d*\.?\d*)(?:[eE](?P<exponent>[-+]?\d+))?", re.ASCII)


class _Unbounded(Exception):
    """A symbolic size or a guard past the bounds; its text says which."""


def _bounds_problem(text) -> str | None:
    """None when ``text`` (a symbolic size or a guard) is a Python expression within the bounds
    above; else the problem. Parsing it is bounded (its length is) and nothing in it is evaluated."""
    if not isinstance(text, str):
        return f"{_short(text)} is not text"
    if len(text) > MAX_EXPRESSION:
        return f"{_short(text)} is {len(text):,} characters long, more than {MAX_EXPRESSION:,}"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"{_short(text)} is not an expression"
    try:
        _bits(tree.body, 1, "value")
    except _Unbounded as error:
        return f"{_short(text)} {error}"
    return None


def _exponent(node) -> float:
    """|n| of an exponent or a shift written as a number (n, -n, p/q) up to MAX_EXPONENT."""
    value = None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = abs(node.value)
    elif (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and all(isinstance(n, ast.Constant) and type(n.value) is int for n in (node.left, node.right))
        and node.right.value != 0
    ):
        value = abs(node.left.value / node.right.value)
    if value is None or not value <= MAX_EXPONENT:
        raise _Unbounded(
            f"raises to a power (or shifts by) {_short(ast.unparse(node))}: only a number up to "
            f"{MAX_EXPONENT} is read as one"
        )
    return value


def _literal_bits(value, context: str) -> int:
    if type(value) is bool or value is None or value is Ellipsis:
        return 1
    if type(value) is int:
        if len(str(abs(value))) > MAX_LITERAL:
            raise _Unbounded(f"holds a number of more than {MAX_LITERAL} digits")
        return value.bit_length()
    if type(value) is float:
        return max(1, math.frexp(value)[1]) if math.isfinite(value) else 1
    if type(value) is str:
        if context not in ("argument", "index"):
            raise _Unbounded(f"uses the text {_short(value)} as a value")
        match = NUMERAL.fullmatch(value.strip())
        if not match or not any(c.isdigit() for c in value):
            return 1 if len(value) <= 100 else _raise(f"holds the text {_short(value)}, longer than 100 characters")
        digits, exponent = match.group("digits"), match.group("exponent") or "0"
        if len(digits) > MAX_LITERAL + 1 or len(exponent.lstrip("+-")) > 3:
            raise _Unbounded(
                f"holds the number {_short(value)}: more than {MAX_LITERAL} digits, or an "
                f"exponent of more than 3 digits"
            )
        return int(4 * (len(digits) + abs(int(exponent)))) + 1
    raise _Unbounded(f"holds the constant {_short(value)}")


def _raise(problem: str):
    raise _Unbounded(problem)


def _bits(node, depth: int, context: str) -> int:
    """An upper bound of the bits of the number ``node`` computes; _Unbounded past the bounds."""
    if depth > MAX_DEPTH:
        raise _Unbounded(f"nests deeper than {MAX_DEPTH}")
    deeper = depth + 1
    if isinstance(node, ast.Constant):
        bits = _literal_bits(node.value, context)
    elif isinstance(node, ast.Name):
        bits = 64
    elif isinstance(node, ast.UnaryOp):
        bits = _bits(node.operand, deeper, "value")
    elif isinstance(node, ast.BinOp):
        left = _bits(node.left, deeper, "value")
        if isinstance(node.op, ast.Pow):
            bits = int(left * max(1.0, _exponent(node.right))) + 1
        elif isinstance(node.op, ast.LShift):
            bits = left + int(_exponent(node.right))
        else:
            right = _bits(node.right, deeper, "value")
            bits = left + right if isinstance(node.op, (ast.Mult, ast.Div, ast.MatMult)) else max(left, right) + 1
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        _bits(node.func, deeper, "callee")
        args = [_bits(arg, deeper, "argument") for arg in node.args]
        keywords = {k.arg: k.value for k in node.keywords}
        args += [_bits(k, deeper, "argument") for k in keywords.values()]
        if name in POWERS and len(node.args) == 2:
            bits = int(args[0] * max(1.0, _exponent(node.args[1]))) + 1
        elif name == "LShift" and len(node.args) == 2:
            bits = args[0] + int(_exponent(node.args[1]))
        else:
            bits = sum(args) + len(args) + 1
        if name in PRECISIONS:
            for arg in node.args[1:] + [k for key, k in keywords.items() if key in ("precision", "dps", "ndigits")]:
                if not (isinstance(arg, ast.Constant) and type(arg.value) is int and abs(arg.value) <= MAX_PRECISION):
                    raise _Unbounded(
                        f"asks {name} for {_short(ast.unparse(arg))} digits: only a number up to "
                        f"{MAX_PRECISION} is read as one"
                    )
    elif isinstance(node, ast.Subscript):
        _bits(node.value, deeper, "value")
        _bits(node.slice, deeper, "index")
        bits = 64
    elif isinstance(node, ast.Attribute):
        _bits(node.value, deeper, "value")
        bits = 64
    else:  # comparisons, and, or, if-else, tuples, slices
        children = [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
        bits = max([_bits(child, deeper, "value") for child in children], default=1) + 1
    if bits > MAX_BITS:
        raise _Unbounded(f"computes {_short(ast.unparse(node))}, a number of more than {MAX_BITS} bits")
    return bits


def _check_bounds(path: Path, member: str, program) -> None:
    """The bounds of every symbolic size and guard of a program's JSON (checked whether the file is
    trusted or not: sympy and the guards compute their numbers either way)."""
    if not isinstance(program, dict):
        raise BadArchive(path, f"member {member} is not the JSON of an exported program")
    for key, value in _fields(program):
        if key == "expr_str":
            problem = _bounds_problem(value)
            if problem:
                raise BadArchive(path, f"member {member}: the symbolic size {problem}")
    guards = program.get("guards_code") or []
    for guard in guards if isinstance(guards, list) else [guards]:
        problem = _bounds_problem(guard)
        if problem:
            raise BadArchive(path, f"member {member}: the guard {problem}")


def _check_content(path: Path, archive: zipfile.ZipFile, members: dict, payloads: list) -> None:
    """Refuse what torch.export.load would unpickle or load as code, and names, symbolic sizes and
    guards that are not names, shape expressions and shape checks."""
    for name, info in members.items():
        if name.startswith(COMPILED_CODE):
            raise UntrustedArchive(
                path,
                f"member {info.filename} is AOTInductor compiled code, which "
                f"torch.export.load loads as a shared library",
            )
        if PICKLED_MEMBERS.fullmatch(name):
            raise UntrustedArchive(path, f"member {info.filename} is a pickled state dict (torch 2.7's format)")
    for kind, fqn, name, meta in payloads:
        if _pickled(meta):
            prefix = re.sub(r"\d+$", "", str(meta.get("path_name")))
            what = {"custom_obj_": "a TorchScript object", "opaque_obj_": "a pickled Python object"}.get(
                prefix, "pickled (a tensor subclass: a torchao quantized weight, for example)"
            )
            member = members[name].filename if name in members else name
            raise UntrustedArchive(path, f"{kind} {fqn} (member {member}) is {what}")
    inputs = members.get(SAMPLE_INPUTS)
    if inputs is not None:
        _check_inner_zip(path, inputs.filename, archive.read(inputs))
    for name, info in members.items():
        if name.startswith("models/") and name.endswith(".json"):
            _check_program(path, info.filename, _read_json(path, archive, info))


def _check_inner_zip(path: Path, member: str, data: bytes) -> None:
    """The checks of :func:`_check_zip` on a member that is a zip itself (the sample inputs are a
    torch.save archive, which torch inflates as it does the outer one)."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return
    try:
        inner = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise BadArchive(path, f"member {member} is a damaged zip archive: {error}") from error
    _check_zip(path, inner, inside=f"{member}:")


def _check_program(path: Path, member: str, program) -> None:
    """The names, symbolic sizes and guards of a program's JSON: torch splices the names into the
    Python source of its graph modules, evaluates the sizes with sympy and execs the guards."""
    if not isinstance(program, dict):
        raise BadArchive(path, f"member {member} is not the JSON of an exported program")
    for key, value in _fields(program):
        problem = _field_problem(key, value)
        if problem:
            raise UntrustedArchive(path, f"member {member}: {problem}")
    guards = program.get("guards_code") or []
    for guard in guards if isinstance(guards, list) else [guards]:
        if not _is_shape_check(guard):
            raise UntrustedArchive(path, f"member {member}: the guard {_short(guard)} is not a check of input sizes")


def _fields(document):
    """(key, value) of every entry of the JSON document's objects (a list's items have the list's
    key), and (None, key) for each key."""
    stack = [(None, document)]
    while stack:
        key, value = stack.pop()
        yield key, value
        if isinstance(value, dict):
            for k, v in value.items():
                yield None, k
                stack.append((k, v))
        elif isinstance(value, list):
            stack.extend((key, item) for item in value)


def _field_problem(key, value) -> str | None:
    if isinstance(value, str):
        if CONTROL.search(value):
            return f"the text {_short(value)} holds control characters"
        if key in NAME_FIELDS and value and not _is_name(value):
            return f"the name {_short(value)} is not a Python name"
        if key in PATH_FIELDS and value and not DOTTED.fullmatch(value):
            return f"the {key} {_short(value)} is not a dotted name"
        if key == "expr_str" and not _is_shape_expression(value):
            return f"the symbolic size {_short(value)} is not a shape expression (torch evaluates it with sympify)"
    elif key in VALUE_TABLES and isinstance(value, dict):
        for name in value:
            if not _is_name(name):
                return f"the name {_short(name)} is not a Python name"
    return None


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _is_shape_expression(text: str) -> bool:
    """Only shape functions, symbols, numbers and operators (sympify runs eval on the text)."""
    text, position = text.rstrip(), 0
    while position < len(text):
        match = SHAPE_TOKEN.match(text, position)
        if match is None:
            return False
        name = match.group("name")
        if name is not None and name not in SHAPE_NAMES and not SYMBOL.fullmatch(name):
            return False
        position = match.end()
    return True


def _is_shape_check(guard) -> bool:
    """Comparisons and arithmetic of ``L['x'].size()[0]``, strides and numbers (``ep.module()``
    splices the guard into Python source and execs it)."""
    if not isinstance(guard, str) or any(c in guard for c in "#\\\n\r"):
        return False
    try:
        tree = ast.parse(guard, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, GUARD_NODES):
            return False
        if isinstance(node, ast.Name) and node.id not in GUARD_NAMES:
            return False
        if isinstance(node, ast.Attribute) and node.attr not in GUARD_ATTRIBUTES:
            return False
        if isinstance(node, ast.Constant) and not (
            type(node.value) in (int, float, bool) or isinstance(node.value, str) and GUARD_TEXT.fullmatch(node.value)
        ):
            return False
        if isinstance(node, ast.Call) and node.keywords:
            return False
    return True


def _short(text) -> str:
    text = repr(text)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------------- loading


def _load(path: Path, file):
    """The checked archive's program, read as torch.export.load reads it but for the sample inputs:
    torch unpickles them in full when its weights-only unpickler refuses them; here they are refused."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _bytes_to_dataclass
    from torch.export.pt2_archive._package import PT2ArchiveReader, _load_constants, _load_state_dict

    with PT2ArchiveReader(file) as reader:
        names = reader.get_file_names()
        if MODEL_JSON not in names:
            raise NotAnExportedProgram(path, f"it holds no program named 'model' ({MODEL_JSON})")
        inputs = _sample_inputs(path, reader.read_bytes(SAMPLE_INPUTS)) if SAMPLE_INPUTS in names else None
        model_json = reader.read_bytes(MODEL_JSON)
        _register_operator_libraries(model_json)
        program = _bytes_to_dataclass(schema.ExportedProgram, model_json)
        state_dict, constants = _load_state_dict(reader, "model"), _load_constants(reader, "model")
    ep = ExportedProgramDeserializer().deserialize(program, state_dict, constants, b"")
    ep.example_inputs = inputs
    return ep


def _sample_inputs(path: Path, data: bytes):
    """The sample inputs, unpickled by torch's weights-only unpickler (tensors, numbers and
    containers); None when none were saved."""
    import torch

    if not data:
        return None
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as error:
        lines = [line.strip() for line in str(error).splitlines() if "WeightsUnpickler error" in line]
        reason = lines[0] if lines else f"{type(error).__name__}: {error}".splitlines()[0]
        raise UntrustedArchive(
            path,
            f"its sample inputs ({SAMPLE_INPUTS}) are a pickle that torch's weights-only "
            f"unpickler refuses ({_short(reason)[1:-1]})",
        ) from error


__all__ = ["BadArchive", "NotAnExportedProgram", "UntrustedArchive", "load_exported_program"]
