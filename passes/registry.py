"""The pass registry: a pass's name -> its class, found when the name is first asked for.

No pass registers by being imported. A name is looked up in four places, in this order:

1. passes defined by the running program: a :class:`~passes.Pass` subclass with a ``name``, or a
   function under :func:`~passes.function_pass`, is registered where it is defined. Defining it
   again in the same module (a notebook cell run twice) replaces it; a pass of another module
   under a name already taken is an error that says how to free it (:func:`unregister_pass`);
2. the generic built-in passes of this package, listed in :data:`BUILTIN`;
3. the passes of backends: a backend's package hands its table (``name -> "module:Class"``) to
   :func:`register_backend_passes` when it is imported (the backend in ``lowering/`` does so
   in its ``__init__.py``), so no installed metadata is needed;
4. the passes of third parties, listed as entry points of the group ``xir.passes``
   (``name = "module:Class"``). An entry point never replaces a name of 2. or 3.: a clash is an
   error that names both modules.

An entry whose class has another name is an old name of that pass: asking for it is an error that
gives the new one.

Only the module of a pass asked for is imported (``xir passes`` imports them all).
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pass_base import Pass

ENTRY_POINT_GROUP = "xir.passes"
NAME_PATTERN = r"(?:[a-z][a-z0-9]*\.)?[a-z][a-z0-9]*(?:-[a-z0-9]+)*"

# the generic passes of this package: name -> "module:Class"
BUILTIN = {
    "common-subexpression-elimination": "passes.common_subexpressions:common_subexpression_elimination",
    "dead-code-elimination": "passes.dead_code_elimination:dead_code_elimination",
    "fold-batch-norm": "passes.fold_batch_norm:FoldBatchNorm",
    "fold-scale-shift-into-linears": "passes.fold_scale_shift:FoldScaleShiftIntoLinears",
    "hoist-row-select": "passes.hoist_row_select:hoist_row_select",
    "remove-no-ops": "passes.remove_no_ops:RemoveNoOps",
    "shape-ops-as-views": "passes.shape_ops_as_views:ShapeOpsAsViews",
}

_defined: dict[str, type["Pass"]] = {}  # passes the running program defined
_backends: dict[str, dict[str, str]] = {}  # backend package -> its passes (name -> "module:Class")


class PipelineError(ValueError):
    """An unknown pass or option, or a malformed pipeline text."""


def register_backend_passes(package: str, table: dict[str, str]) -> None:
    """Declare the passes of the backend ``package`` (name -> "module:Class"). Declaring the same
    table again does nothing; a name another backend or the built-in passes hold is an error."""
    table = dict(table)
    if _backends.get(package) == table:
        return
    for name in table:
        check_name(name)
    _check_clashes(
        {
            "xir's built-in passes": BUILTIN,
            **{other: t for other, t in _backends.items() if other != package},
            package: table,
        }
    )
    _backends[package] = table
    listed.cache_clear()


def _check_clashes(tables: dict[str, dict[str, str]]) -> dict[str, str]:
    """The union of ``tables`` (owner -> name -> "module:Class"); a name two owners list is an error."""
    union: dict[str, str] = {}
    owner_of: dict[str, str] = {}
    for owner, table in tables.items():
        for name, where in table.items():
            if name in union and union[name] != where:
                raise PipelineError(
                    f"the pass name {name!r} is taken twice: {owner_of[name]} lists {union[name]}, "
                    f"{owner} lists {where}"
                )
            union.setdefault(name, where)
            owner_of.setdefault(name, owner)
    return union


@lru_cache(maxsize=1)
def listed() -> dict[str, str]:
    """Every listed pass (built-in, the declared backends', third parties' entry points):
    name -> "module:Class"."""
    table = _check_clashes({"xir's built-in passes": BUILTIN, **_backends})
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        known = table.get(entry.name)
        if known is None:
            table[entry.name] = entry.value
        elif known != entry.value:  # (an older install of xir itself listed its backend's passes: the same value)
            owner = getattr(entry.dist, "name", None) or "an installed package"
            raise PipelineError(
                f"{owner} lists a pass {entry.name!r} ({entry.value}) as an entry point of "
                f"{ENTRY_POINT_GROUP!r}; that name is {known}'s: an entry point cannot replace "
                "a built-in or backend pass (rename the third-party pass)"
            )
    return table


def _load(where: str) -> type["Pass"]:
    module, _, attribute = where.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise PipelineError(f"the pass listed as {where} cannot be loaded: {error}") from error


def check_name(name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise PipelineError(
            f"pass name {name!r} is not kebab-case with an optional backend prefix "
            "(e.g. 'fold-batch-norm', 'backend.some-rewrite')"
        )


def register_pass(cls: type["Pass"]) -> None:
    """Register ``cls``, a pass the running program defines, under its name (see the module's doc)."""
    name = cls.name
    check_name(name)
    where = f"{cls.__module__}:{defined_as(cls)}"
    if listed().get(name) == where:
        return  # a listed pass, its module imported: it is found through the list
    if name in listed():
        raise PipelineError(f"{where} is named {name!r}, the name of the pass {listed()[name]}: give it another name")
    existing = _defined.get(name)
    if existing is not None and (existing.__module__, defined_as(existing)) != (cls.__module__, defined_as(cls)):
        raise PipelineError(
            f"a pass named {name!r} is already defined ({existing.__module__}.{defined_as(existing)}); "
            f"{cls.__module__}.{defined_as(cls)} needs another name (or unregister_pass({name!r}) first)"
        )
    _defined[name] = cls  # (a redefinition in the same module replaces the old class)


def defined_as(cls: type) -> str:
    """The name a pass class is bound to in its module: its qualified name, or for a
    :func:`~passes.function_pass`, the function's."""
    return getattr(cls, "defined_as", cls.__qualname__)


def unregister_pass(name: str) -> type["Pass"]:
    """Remove the pass the running program defined as ``name`` (and return it)."""
    try:
        return _defined.pop(name)
    except KeyError:
        why = " (a listed pass cannot be unregistered)" if name in listed() else ""
        raise PipelineError(f"no pass named {name!r} was defined{why}") from None


def get_pass_class(name: str) -> type["Pass"]:
    """The class of the pass named ``name``, its module imported if need be."""
    if name in _defined:
        return _defined[name]
    where = listed().get(name)
    if where is None:
        known = ", ".join(pass_names())
        hint = " (a backend's passes are known once its package is imported)" if "." in name else ""
        raise PipelineError(f"unknown pass {name!r}{hint}; registered passes: {known}")
    cls = _load(where)
    if cls.name != name:
        raise PipelineError(f"pass {name!r} was renamed: it is now {cls.name!r}")
    return cls


def pass_names() -> list[str]:
    """The names of every pass, defined or listed, sorted. Old names are left out: an entry that
    shares its class with another is an old name unless it is that class's name."""
    by_class: dict[str, list[str]] = {}
    for name, where in listed().items():
        by_class.setdefault(where, []).append(name)
    names = set(_defined)
    for where, names_of in by_class.items():
        names.add(names_of[0] if len(names_of) == 1 else _load(where).name)
    return sorted(names)


def registered_passes() -> dict[str, type["Pass"]]:
    """Every pass (name -> class); imports every listed pass's module."""
    return {name: get_pass_class(name) for name in pass_names()}


__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "PipelineError",
    "check_name",
    "get_pass_class",
    "listed",
    "pass_names",
    "register_backend_passes",
    "register_pass",
    "registered_passes",
    "unregister_pass",
]
