"""The pass registry (issue 29): explicit and lazy. Nothing registers or configures logging on
import, a pass a notebook defines again replaces the old one, and every listed pass loads."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import attrs
import pytest

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
    assert unchanged == "True {} []"  # (lowering's capability imports a helper of fold-batch-norm's module: no pass is defined)
    assert then == "['lowering.passes._base', 'lowering.passes.merge_clamps']" or \
        then == "['lowering.passes.merge_clamps']"


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
