"""Pipelines: a list of passes, written in Python or as text.

    remove-no-ops,fold-batch-norm{to_affine=false},dead-code-elimination

Options go in ``{}`` as ``key=value`` separated by commas. The text of a pipeline lists the
options that differ from their defaults, so ``format_pipeline(parse_pipeline(t)) == t`` for
any text written that way, and ``parse_pipeline(format_pipeline(p))`` equals ``p``.

A pass may declare its order relative to others (``runs_after``/``runs_before``: pass names, as
class attributes). :func:`check_order` holds a pipeline to them, and :class:`~passes.PassManager`
calls it: where a pipeline holds both passes of a constraint, some run of the later one must come
after some run of the earlier one; a constraint on a pass the pipeline leaves out holds.
"""

from __future__ import annotations

import re
from typing import Iterable

import attrs

from .pass_base import Pass, PipelineError, coerce_option, format_option, get_pass_class

_PASS_NAME = re.compile(r"\s*([a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)?)\s*")
_OPTION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([^,}]*?)\s*(?=[,}])")


def parse_pipeline(text: str) -> list[Pass]:
    """Passes (with their options) from pipeline text. Unknown names list the valid ones."""
    passes: list[Pass] = []
    pos = 0
    text = text.strip()
    if not text:
        return passes
    while pos < len(text):
        m = _PASS_NAME.match(text, pos)
        if not m:
            raise PipelineError(
                f"pipeline text, column {pos + 1}: expected a pass name, found {text[pos : pos + 15]!r}"
            )
        name = m.group(1)
        cls = get_pass_class(name)
        pos = m.end()
        raw: dict[str, str] = {}
        if pos < len(text) and text[pos] == "{":
            close = text.find("}", pos)
            if close < 0:
                raise PipelineError(f"pipeline text, column {pos + 1}: '{{' of pass {name} is never closed")
            body = text[pos + 1 : close] + "}"
            inner = 0
            while inner < len(body) - 1:
                om = _OPTION.match(body, inner)
                if not om:
                    raise PipelineError(f"pass {name}: expected key=value in {{{body[:-1]}}}")
                raw[om.group(1)] = om.group(2)
                inner = om.end()
                if body[inner] == ",":
                    inner += 1
            pos = close + 1
        passes.append(make_pass(cls, raw))
        while pos < len(text) and text[pos] == " ":
            pos += 1
        if pos < len(text):
            if text[pos] != ",":
                raise PipelineError(
                    f"pipeline text, column {pos + 1}: expected ',' between passes, found {text[pos]!r}"
                )
            pos += 1
    return passes


def make_pass(cls: type[Pass], raw_options: dict[str, str]) -> Pass:
    fields = {field.name: field for field in cls.options()}
    values = {}
    for key, text in raw_options.items():
        if key not in fields:
            valid = ", ".join(fields) or "none"
            raise PipelineError(f"pass {cls.name} has no option {key!r}; its options: {valid}")
        values[key] = coerce_option(cls.name, fields[key], text)
    try:
        return cls(**values)
    except (ValueError, TypeError) as error:  # a validator of the pass's attrs fields
        if isinstance(error, PipelineError):
            raise
        given = ", ".join(f"{key}={text}" for key, text in raw_options.items())
        raise PipelineError(
            f"pass {cls.name}: the option(s) {{{given}}} are not valid: {_validator_text(error)}"
        ) from error


def _validator_text(error: Exception) -> str:
    """attrs' "'max_elements' must be >= 0: -5" (its ValueError's first argument)."""
    return str(error.args[0]) if error.args and isinstance(error.args[0], str) else str(error)


def format_pass(p: Pass) -> str:
    options = p.non_default_options()
    if not options:
        return p.name
    return p.name + "{" + ",".join(f"{k}={format_option(v)}" for k, v in options.items()) + "}"


def format_pipeline(passes: Iterable[Pass]) -> str:
    return ",".join(format_pass(p) for p in passes)


def order_constraints(passes: Iterable[Pass]) -> list[tuple[str, str, str]]:
    """The ordering constraints the passes of a pipeline declare, as ``(earlier, later, declared
    by)``: ``declared by`` is ``"<pass>.runs_after"`` or ``"<pass>.runs_before"``."""
    constraints: dict[tuple[str, str], str] = {}
    for p in passes:
        name = getattr(p, "name", "")
        for other in getattr(p, "runs_after", ()):
            constraints.setdefault((other, name), f"{name}.runs_after")
        for other in getattr(p, "runs_before", ()):
            constraints.setdefault((name, other), f"{name}.runs_before")
    return [(earlier, later, by) for (earlier, later), by in constraints.items()]


def check_order(passes: Iterable[Pass]) -> None:
    """Raise :class:`PipelineError` where ``passes`` break an ordering a pass of them declares:
    ``B must run after A (pipeline positions 3 and 7; ...)`` names both passes and where they
    stand (the last run of B, the first of A; counted from 1). Passes repeated in a pipeline (a
    second dead-code-elimination) keep a constraint when one run of the later pass follows one run
    of the earlier."""
    passes = list(passes)
    names = [getattr(p, "name", "") for p in passes]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        first.setdefault(name, position)
        last[name] = position
    for earlier, later, declared_by in order_constraints(passes):
        if earlier in first and later in first and not first[earlier] < last[later]:
            raise PipelineError(
                f"{later} must run after {earlier} (pipeline positions {last[later]} and "
                f"{first[earlier]}; declared by {declared_by})"
            )


def pass_help() -> list[tuple[str, str, str]]:
    """(name, options, description) of every pass, sorted by name."""
    from .registry import registered_passes

    rows = []
    for name, cls in registered_passes().items():
        options = []
        for field in cls.options():
            default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default
            options.append(f"{field.name}={format_option(default)}")
        rows.append((name, ", ".join(options), cls.description()))
    return rows
