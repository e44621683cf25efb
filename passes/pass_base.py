"""A pass: a small class with a kebab-case ``name``, typed options as fields, and ``run``.

    @attrs.frozen
    class FoldThings(Pass):
        '''Fold the things.'''
        name = "fold-things"
        limit: int = 4            # an option: `fold-things{limit=8}`

        def run(self, graph) -> bool:
            ...                    # edit the graph; return True only if it changed

A subclass with a ``name`` defined by a program is registered where it is defined (the built-in
passes are listed instead, and found by name: :mod:`passes.registry`); :func:`function_pass`
turns a plain function ``fn(graph, *, option=default) -> bool`` into a pass. Passes tied to one
backend carry its name as a prefix (``backend.some-rewrite``); generic passes have none.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any, Callable, ClassVar

import attrs

from xir import Graph

from .registry import PipelineError, get_pass_class, register_pass, unregister_pass  # noqa: F401  (the pass API's names)


class Pass:
    """Base class of all passes. Subclasses are attrs classes whose fields are the options."""

    name: ClassVar[str] = ""
    # ordering the pass declares (names of other passes): where a pipeline holds both, one of them
    # must run after (before) one of the other; :func:`passes.pipeline.check_order` checks it
    runs_after: ClassVar[tuple[str, ...]] = ()
    runs_before: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, register: bool = True, **kwargs):
        super().__init_subclass__(**kwargs)
        if register and cls.__dict__.get("name"):
            register_pass(cls)

    def run(self, graph: Graph) -> bool:
        """Transform ``graph`` in place; return True if and only if it changed."""
        raise NotImplementedError(f"pass {self.name} does not implement run()")

    # ------------------------------------------------------------------ options
    @classmethod
    def options(cls) -> list[attrs.Attribute]:
        return list(attrs.fields(cls)) if attrs.has(cls) else []

    @classmethod
    def description(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    def option_values(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in self.options()}

    def non_default_options(self) -> dict[str, Any]:
        values = {}
        for field in self.options():
            value = getattr(self, field.name)
            default = field.default
            if isinstance(default, attrs.Factory):
                default = default.factory()
            if value != default:
                values[field.name] = value
        return values

    def __str__(self) -> str:
        from .pipeline import format_pass

        return format_pass(self)


def option_type(field: attrs.Attribute) -> Any:
    """The Python type of an option field (resolving string annotations)."""
    annotation = field.type
    if isinstance(annotation, str):
        annotation = {"int": int, "float": float, "bool": bool, "str": str}.get(annotation, str)
    return annotation


def function_pass(
    name: str, description: str | None = None, *, runs_after: tuple[str, ...] = (), runs_before: tuple[str, ...] = ()
) -> Callable[[Callable[..., bool]], type[Pass]]:
    """Make a pass of a function ``fn(graph, *, option=default, ...) -> bool``.

    Keyword-only parameters with defaults become the pass's options (their annotations give
    the types). The decorated name is bound to the new Pass class. ``runs_after`` and
    ``runs_before`` declare its ordering (:attr:`Pass.runs_after`).
    """

    def wrap(fn: Callable[..., bool]) -> type[Pass]:
        signature = inspect.signature(fn)
        fields = {}
        for parameter in list(signature.parameters.values())[1:]:
            if parameter.kind is not inspect.Parameter.KEYWORD_ONLY or parameter.default is inspect.Parameter.empty:
                raise PipelineError(
                    f"{fn.__name__}: options must be keyword-only with a default; {parameter.name} is not"
                )
            annotation = (
                parameter.annotation if parameter.annotation is not inspect.Parameter.empty else type(parameter.default)
            )
            fields[parameter.name] = attrs.field(default=parameter.default, type=annotation)

        def run(self, graph: Graph) -> bool:
            changed = fn(graph, **self.option_values())
            if not isinstance(changed, bool):
                raise TypeError(
                    f"pass {name} must return True or False (whether it changed the graph), got {changed!r}"
                )
            return changed

        namespace = {
            "name": name,
            "run": run,
            "__doc__": description or fn.__doc__,
            "__module__": fn.__module__,
            "defined_as": fn.__qualname__,  # (the module binds the class to the function's name)
            "runs_after": tuple(runs_after),
            "runs_before": tuple(runs_before),
        }
        cls = attrs.make_class(_class_name(name), fields, bases=(Pass,), frozen=True)
        for key, value in namespace.items():
            setattr(cls, key, value)
        register_pass(cls)
        cls.function = staticmethod(fn)
        return cls

    return wrap


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-")) + "Pass"


def coerce_option(pass_name: str, field: attrs.Attribute, text: str) -> Any:
    """Parse an option's value from pipeline text according to its type."""
    kind = option_type(field)
    try:
        if kind is bool:
            if text not in ("true", "false"):
                raise ValueError("expected true or false")
            return text == "true"
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            try:
                return kind(text)
            except ValueError:
                raise ValueError("expected one of " + ", ".join(str(m.value) for m in kind)) from None
        return text
    except ValueError as e:
        raise PipelineError(f"pass {pass_name}: option {field.name}={text!r} is invalid: {e}") from None


def format_option(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)
