"""Reads IR text (see :mod:`xir.printer`) back into a :class:`~xir.core.Graph`.

Errors are :class:`~xir.errors.ParseError` with the line and column of the problem and what
was expected there. The text may come from anyone: whatever it holds, reading it ends in a graph
or a ParseError. Attribute lists nest at most :data:`MAX_NESTING` deep and integers fit in 64 bits
(so no input reaches Python's recursion or integer-conversion limits), a dimension is never
negative, an attribute is given once, and nothing but comments follows the graph's closing ``}``.
Each node records where its text starts (``node.location``), for the verifier's errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .attributes import EnumAttr
from .core import RETURN_OP, Graph, InputKind, Value
from .dtypes import DType
from .errors import ParseError
from .types import ScalarType, Symbol, TensorType, Type

_NAME = re.compile(r"[A-Za-z0-9_.]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NUMBER = re.compile(r"-?(?:inf\b|nan\b|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)", re.ASCII)
_INT_DIM = re.compile(r"-?\d+$", re.ASCII)
_INPUT_KINDS = {kind.value: kind for kind in InputKind}
_SCALAR_KINDS = {"int", "float", "bool", "none", "opaque"}
MAX_NESTING = 32  # attribute lists in lists: real programs nest two deep
INT_LIMIT = 2**63  # integer literals (attributes and dims) lie in [-INT_LIMIT, INT_LIMIT)


class _Line:
    """A cursor over one source line; columns are 1-based in errors."""

    def __init__(self, text: str, number: int):
        self.text = text
        self.number = number
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> ParseError:
        return ParseError(message, self.number, (self.pos if pos is None else pos) + 1, self.text)

    def skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_spaces()
        return self.pos >= len(self.text) or self.text[self.pos] == "#"

    def peek(self) -> str:
        self.skip_spaces()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept(self, literal: str) -> bool:
        self.skip_spaces()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, what: str | None = None) -> None:
        if not self.accept(literal):
            raise self.error(f"expected {what or repr(literal)}, found {self.found()}")

    def match(self, pattern: re.Pattern) -> str | None:
        self.skip_spaces()
        m = pattern.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group(0)

    def found(self) -> str:
        self.skip_spaces()
        if self.pos >= len(self.text):
            return "end of line"
        m = re.compile(r"\S+").match(self.text, self.pos)
        return repr(m.group(0)[:20])


class _Parser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.values: dict[str, Value] = {}
        self.graph: Graph | None = None

    def parse(self) -> Graph:
        body = [(i + 1, line) for i, line in enumerate(self.lines) if line.strip() and not line.strip().startswith("#")]
        if not body:
            raise ParseError("expected 'graph @NAME {', found an empty text", 1, 1)
        number, first = body[0]
        line = _Line(first, number)
        line.expect("graph", "'graph @NAME {'")
        line.expect("@", "'@' and the graph's name")
        name = line.match(_NAME)
        if name is None:
            raise line.error(f"expected the graph's name, found {line.found()}")
        line.expect("{")
        self._end(line)
        self.graph = Graph(name)
        returned = False
        for i, (number, text) in enumerate(body[1:], 1):
            line = _Line(text, number)
            if returned:
                line.expect("}", "'}' after return")
                self._end(line)
                self._nothing_after(body[i + 1 :])
                return self.graph
            word = line.match(_IDENT)
            if word in _INPUT_KINDS:
                self._input(line, _INPUT_KINDS[word])
            elif word == "return":
                self._return(line)
                returned = True
            elif word is None and line.peek() == "%":
                self._node(line)
            elif word is not None and line.peek() == "(":
                line.pos -= len(word)
                self._node(line, results_allowed=False)
            else:
                line.pos = 0
                raise line.error(f"expected an input, a node or 'return', found {line.found()}")
        last = body[-1][0]
        raise ParseError(
            "expected 'return' and '}' at the end of the graph",
            last,
            len(self.lines[last - 1]) + 1,
            self.lines[last - 1],
        )

    def _end(self, line: _Line) -> None:
        if not line.at_end():
            raise line.error(f"expected end of line, found {line.found()}")

    @staticmethod
    def _nothing_after(rest: list[tuple[int, str]]) -> None:
        """The text is one graph: a second graph, or anything else after the closing '}', is an
        error (never silently dropped)."""
        if rest:
            number, text = rest[0]
            line = _Line(text, number)
            raise line.error(f"expected the end of the text after the graph's closing '}}', found {line.found()}")

    def _input(self, line: _Line, kind: InputKind) -> None:
        line.skip_spaces()
        start = line.pos
        name = self._new_name(line)
        line.expect(":", "':' and a type")
        type_ = self._type(line)
        self._end(line)
        self._check_new(line, name, start)
        self.values[name] = self.graph.add_input(name, type_, kind)

    def _return(self, line: _Line) -> None:
        outputs = []
        if not line.at_end():
            outputs.append(self._use(line))
            while line.accept(","):
                outputs.append(self._use(line))
        self._end(line)
        self.graph.outputs = outputs

    def _node(self, line: _Line, results_allowed: bool = True) -> None:
        line.skip_spaces()
        node_start = line.pos
        results = self._results(line) if results_allowed else []
        op_start = line.pos
        op = line.match(_IDENT)
        if op is None:
            raise line.error(f"expected an operation name, found {line.found()}")
        if op == RETURN_OP:
            raise line.error("'return' is not an operation: the graph's outputs are its own 'return' line", op_start)
        line.expect("(", "'(' after the operation name")
        operands: list[Value] = []
        if not line.accept(")"):
            while True:
                operands.append(self._use(line))
                if line.accept(")"):
                    break
                line.expect(",", "',' or ')'")
        attributes = self._attributes(line)
        origin = None
        line.skip_spaces()
        if line.accept("#"):
            if line.accept("by"):
                origin = line.match(_IDENT)
            line.pos = len(line.text)
        self._end(line)
        names: set[str] = set()
        for name, _, start in results:
            if name in names:
                raise line.error(f"value %{name} is defined twice", start)
            self._check_new(line, name, start)
            names.add(name)
        node = self.graph.create_node(op, operands, [t for _, t, _ in results], attributes, origin=origin)
        node.location = (line.number, node_start + 1)
        self.graph.append(node)
        for (name, _, _), value in zip(results, node.results):
            self.values[name] = value

    def _results(self, line: _Line) -> list[tuple[str, Type, int]]:
        """``%a: f32[2], %b: i64[2] =``: each result's name, type and column."""
        results: list[tuple[str, Type, int]] = []
        while True:
            line.skip_spaces()
            start = line.pos
            name = self._new_name(line)
            line.expect(":", "':' and a type")
            results.append((name, self._type(line), start))
            if not line.accept(","):
                break
        line.expect("=", "'=' before the operation")
        return results

    def _attributes(self, line: _Line) -> dict[str, Any]:
        """``{name=value, ...}``, or nothing."""
        attributes: dict[str, Any] = {}
        if not line.accept("{") or line.accept("}"):
            return attributes
        while True:
            line.skip_spaces()
            key_start = line.pos
            key = line.match(_IDENT)
            if key is None:
                raise line.error(f"expected an attribute name, found {line.found()}")
            if key in attributes:
                raise line.error(f"attribute {key!r} is given twice", key_start)
            line.expect("=", "'=' after the attribute name")
            attributes[key] = self._attribute(line)
            if line.accept("}"):
                return attributes
            line.expect(",", "',' or '}'")

    def _new_name(self, line: _Line) -> str:
        line.expect("%", "'%' and a value name")
        name = line.match(_NAME)
        if name is None:
            raise line.error(f"expected a value name after '%', found {line.found()}")
        return name

    def _check_new(self, line: _Line, name: str, start: int) -> None:
        """A definition of %name (an input or a result) must be its first."""
        if name in self.values:
            raise line.error(f"value %{name} is defined twice", start)

    def _use(self, line: _Line) -> Value:
        line.skip_spaces()
        start = line.pos
        name = self._new_name(line)
        if name not in self.values:
            raise line.error(f"unknown value %{name} (used before it is defined, or never defined)", start)
        return self.values[name]

    def _type(self, line: _Line) -> Type:
        line.skip_spaces()
        start = line.pos
        word = line.match(_IDENT)
        if word is None:
            raise line.error(f"expected a type such as f32[2,3] or int, found {line.found()}")
        if word in _SCALAR_KINDS and line.peek() != "[":
            return ScalarType(word)
        try:
            dtype = DType.parse(word)
        except ValueError as e:
            raise line.error(str(e), start) from None
        if not line.text.startswith("[", line.pos):
            raise line.error(f"expected '[' and the shape after {word}, found {line.found()}")
        close = line.text.find("]", line.pos)
        if close < 0:
            raise line.error("expected ']' closing the shape")
        dims_text = line.text[line.pos + 1 : close]
        dims: list[int | Symbol] = []
        column = line.pos + 1
        if dims_text.strip():
            for part in dims_text.split(","):
                item = part.strip()
                if _INT_DIM.match(item):
                    at = column + len(part) - len(part.lstrip())
                    dim = _integer(line, item, at)
                    if dim < 0:
                        raise line.error(f"a dimension is at least 0, found {dim}", at)
                    dims.append(dim)
                else:
                    try:
                        dims.append(Symbol(item))
                    except ValueError:
                        raise line.error(
                            f"expected an integer or a symbol as a dimension, found {item!r}", column
                        ) from None
                column += len(part) + 1
        line.pos = close + 1
        return TensorType(dtype, tuple(dims))

    def _attribute(self, line: _Line, depth: int = 0) -> Any:
        c = line.peek()
        start = line.pos
        if c == "%":
            return self._use(line)
        if c == "[":
            if depth == MAX_NESTING:
                raise line.error(f"attribute lists nest more than {MAX_NESTING} deep")
            line.expect("[")
            items = []
            if not line.accept("]"):
                while True:
                    items.append(self._attribute(line, depth + 1))
                    if line.accept("]"):
                        break
                    line.expect(",", "',' or ']'")
            return items
        if c == '"':
            decoder = json.JSONDecoder()
            try:
                value, end = decoder.raw_decode(line.text, line.pos)
            except json.JSONDecodeError as error:
                raise line.error(f"bad string: {error.msg}", error.pos) from None
            if not _encodable(value):
                raise line.error("bad string: an escape gives a lone surrogate, which UTF-8 cannot encode")
            line.pos = end
            return value
        number = line.match(_NUMBER)
        if number is not None:
            if re.fullmatch(r"-?\d+", number, re.ASCII):
                return _integer(line, number, start)
            return float(number)
        word = line.match(_IDENT)
        if word is None:
            raise line.error(f"expected an attribute value, found {line.found()}", start)
        if word in ("true", "false"):
            return word == "true"
        if word == "none":
            return None
        if word in DType._value2member_map_:
            return DType(word)
        if "." in word:
            kind, _, name = word.partition(".")
            return EnumAttr(kind, name)
        raise line.error(
            f"expected an attribute value (number, string, list, dtype, kind.name or %value), found {word!r}", start
        )


def _integer(line: _Line, text: str, start: int) -> int:
    """The integer literal ``text`` (at column ``start`` + 1): one outside 64 bits is an error,
    before Python converts thousands of digits (slow, or refused past its conversion limit)."""
    digits = text.lstrip("-").lstrip("0") or "0"
    value = int(digits) if len(digits) <= 19 else 2 * INT_LIMIT  # (out of range, not converted)
    value = -value if text.startswith("-") else value
    if not -INT_LIMIT <= value < INT_LIMIT:
        raise line.error(f"integer {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 bits", start)
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_graph(text: str) -> Graph:
    """Parse IR text into a Graph. Raises ParseError naming the line and column."""
    return _Parser(text).parse()
