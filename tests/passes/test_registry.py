"""The pass registry (issue 29): explicit and lazy. Nothing registers or configures logging on
import, a pass a notebook defines again replaces the old one, and every listed pass loads."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import attrs
import pytest

import lowering  # noqa: F401  (declares the backend's passes)
from passes import Pass, PipelineError, get_pass_class, parse_pipeline, unregister_pass
from passes.registry import BUILTIN, listed


def test_importing_the_packages_imports_no_pass_and_leaves_logging_alone():
    code = textwrap.dedent("""
        import logging, sys
        names = ("", "torchao", "torch.utils._pytree", "xir", "torch")
        before = {n: logging.getLogger(n).level for n in names}
        import passes, lowering, xir
        after = {n: logging.getLogger(n).level for n in names}
        loaded = sorted(m for m in sys.modules if m.startswith("lowering.passes.") or m in ("lowering.passes.fold_constants", "torch"))
        print(before == after, passes.registry._defined, loaded)
        passes.parse_pipeline("xnnpack.merge-clamps")
        print(sorted(m for m in sys.modules if m.startswith("lowering.passes.")))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    unchanged, then = done.stdout.splitlines()
    assert (
        unchanged == "True {} []"
    )  # (lowering's capability imports a helper of fold-batch-norm's module: no pass is defined)
    assert (
        then == "['lowering.passes._base', 'lowering.passes.merge_clamps']"
        or then == "['lowering.passes.merge_clamps']"
    )


NOTEBOOK_CELL = '''
import attrs
from passes import Pass

@attrs.frozen
class Doubler(Pass):
    """VERSION"""
    name = "test-notebook-doubler"

    def run(self, graph):
        return False
'''


def test_a_pass_defined_again_in_the_same_module_replaces_it():
    first, second = {"__name__": "notebook_cell"}, {"__name__": "notebook_cell"}
    exec(NOTEBOOK_CELL.replace("VERSION", "first"), first)
    exec(NOTEBOOK_CELL.replace("VERSION", "second"), second)
    try:
        assert get_pass_class("test-notebook-doubler") is second["Doubler"]
        assert parse_pipeline("test-notebook-doubler")[0].description() == "second"
        elsewhere = {"__name__": "another_module"}
        with pytest.raises(PipelineError, match=r"already defined \(notebook_cell.Doubler\).*unregister_pass"):
            exec(NOTEBOOK_CELL, elsewhere)
    finally:
        unregister_pass("test-notebook-doubler")
    with pytest.raises(PipelineError, match="unknown pass 'test-notebook-doubler'"):
        get_pass_class("test-notebook-doubler")


def test_a_pass_of_the_program_cannot_take_a_listed_name():
    with pytest.raises(PipelineError, match=r"the name of the pass lowering.passes.merge_clamps:MergeClamps"):

        @attrs.frozen
        class MyMergeClamps(Pass):
            name = "xnnpack.merge-clamps"

    with pytest.raises(PipelineError, match="a listed pass cannot be unregistered"):
        unregister_pass("remove-no-ops")


@pytest.mark.parametrize("name", sorted(listed()))
def test_every_listed_pass_loads_under_its_name_or_says_its_new_one(name):
    try:
        cls = get_pass_class(name)
    except PipelineError as error:
        assert "was renamed: it is now 'xnnpack." in str(error)
        return
    assert cls.name == name and issubclass(cls, Pass)
    prefix_ok = name in BUILTIN or name.startswith("xnnpack.") or name == "fold-constants"
    assert prefix_ok, f"{name}: a backend pass is named with its backend's prefix"
    module = cls.__module__
    assert module.startswith("passes.") == (name in BUILTIN), f"{name} lives in {module}"


# A fresh interpreter with the project on PYTHONPATH only, and no installed metadata for it: every
# entry point of the group xir.passes hidden (what a clone without `pip install` has).
HIDDEN_ENTRY_POINTS = """
import importlib.metadata as metadata
_entry_points = metadata.entry_points
def entry_points(**params):
    if params.get("group") == "xir.passes":
        return metadata.EntryPoints(())
    return _entry_points(**params)
metadata.entry_points = entry_points
"""


def _run_without_metadata(code: str, tmp_path) -> subprocess.CompletedProcess:
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, "-c", HIDDEN_ENTRY_POINTS + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )


def test_the_readme_example_lowers_from_a_clone_without_installed_metadata(tmp_path):
    """The backend declares its own passes: the default pipeline resolves with no entry points."""
    done = _run_without_metadata(
        """
        import torch
        from executorch.runtime import Runtime
        from lowering import XnnpackPartitioner, to_edge_transform_and_lower

        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(approximate="tanh"),
                                    torch.nn.Linear(16, 4)).eval()
        x = torch.randn(3, 8)
        exported = torch.export.export(model, (x,))
        partitioner = XnnpackPartitioner()
        edge = to_edge_transform_and_lower(exported, partitioner=[partitioner])
        outside = sorted({str(n.target) for n in edge.exported_program().graph.nodes
                          if n.op == "call_function" and "delegate" not in str(n.target) and "getitem" not in str(n.target)})
        program = edge.to_executorch()
        method = Runtime.get().load_program(program.buffer).load_method("forward")
        (y,) = method.execute([x])
        print(float((y - model(x)).abs().max()), outside, len(partitioner.rewrites_applied) > 0)
    """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    error = float(last.split(" ")[0])
    assert error < 1e-5, last
    assert "[]" in last and last.endswith("True"), last  # all of it delegated, the rewrites ran


def test_a_third_party_entry_point_cannot_replace_a_built_in_or_backend_name(tmp_path):
    for name in ("fold-constants", "remove-no-ops"):
        done = _run_without_metadata(
            f"""
            import importlib.metadata as metadata
            metadata.entry_points = lambda **params: metadata.EntryPoints(
                (metadata.EntryPoint("{name}", "thirdparty.passes:Evil", "xir.passes"),)
                if params.get("group") == "xir.passes" else ())
            import lowering
            from passes import parse_pipeline
            parse_pipeline("dead-code-elimination")
        """,
            tmp_path,
        )
        assert done.returncode != 0
        builtin = "lowering.passes.fold_constants:FoldConstants" if name == "fold-constants" else BUILTIN[name]
        assert f"lists a pass '{name}' (thirdparty.passes:Evil)" in done.stderr, done.stderr[-2000:]
        assert builtin in done.stderr, done.stderr[-2000:]


def test_a_backend_cannot_declare_a_name_another_holds():
    from passes.registry import register_backend_passes

    with pytest.raises(
        PipelineError,
        match=r"'fold-constants' is taken twice: lowering lists "
        r"lowering.passes.fold_constants:FoldConstants, otherbackend lists x:Y",
    ):
        register_backend_passes("otherbackend", {"fold-constants": "x:Y"})
    assert "otherbackend" not in __import__("passes.registry").registry._backends
