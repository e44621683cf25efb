"""Issue 57, item 4: the leftovers, one test each (the CLI's messages for -o under a file is in
test_outputs_not_inputs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_shape_digits_are_ascii():
    """``f32[٣,٤]`` (Arabic-Indic digits) is no shape: only 0-9 are digits in IR text."""
    import xir
    from xir.errors import ParseError

    with pytest.raises(ParseError, match="expected an integer or a symbol as a dimension, found '٣'"):
        xir.parse_graph("graph @g {\n  input %x: f32[٣,٤]\n  return %x\n}\n")
    with pytest.raises(ParseError):
        xir.parse_graph("graph @g {\n  input %x: f32[3,4]\n  %0: f32[3,4] = aten.mul(%x) {other=٢}\n  return %0\n}\n")


@pytest.mark.parametrize("value, valid", [("none", True), ("tanh", True), ("exact", False), ("Tanh", False)])
def test_gelu_approximate_is_an_enum(value, valid):
    """gelu's ``approximate`` is 'none' or 'tanh'; any other string was taken (and reported as
    the tanh approximation)."""
    import xir
    from xir.errors import VerificationError

    graph = xir.parse_graph(
        "graph @g {\n  input %x: f32[3,4]\n"
        f'  %0: f32[3,4] = aten.gelu(%x) {{approximate="{value}"}}\n  return %0\n}}\n'
    )
    if valid:
        xir.verify(graph)
    else:
        with pytest.raises(VerificationError, match=f"aten.gelu: approximate='{value}' is none of 'none', 'tanh'"):
            xir.verify(graph)


def test_stale_temporary_files_are_removed_by_the_next_write(tmp_path):
    """A write killed outright left ``.NAME.XXXXXXXX.tmp``: the next write to NAME removes it (one
    as young as a write in progress stays), and a write that fails removes its own."""
    from xir import files

    target = tmp_path / "model.pte"
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import os
from xir import files
real = os.fsync
def stop(fd):
    print("writing", flush=True)
    import time; time.sleep(60)
os.fsync = stop
files.write_atomic({str(target)!r}, b"x" * (1 << 20))
""",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert killed.stdout.readline() == "writing\n"
    killed.kill()
    killed.wait()
    (stale,) = tmp_path.glob(".model.pte.*.tmp")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    young = tmp_path / ".model.pte.abcd1234.tmp"
    young.write_bytes(b"in progress")
    other = tmp_path / ".other.pte.abcd1234.tmp"
    other.write_bytes(b"another file's")
    os.utime(other, (old, old))
    files.write_atomic(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".model.pte.abcd1234.tmp", ".other.pte.abcd1234.tmp", "model.pte"]
    )
    assert target.read_bytes() == b"new"


def test_a_truncated_pt2_is_called_truncated(tmp_path):
    """A .pt2 cut just after its sample inputs (a zip inside it): zipfile finds their directory;
    it was called 'a torch.save file'."""
    import torch

    from xir_tools.pt2 import BadArchive, load_exported_program

    path = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(torch.nn.Linear(4, 2), (torch.randn(1, 4),)), path)
    import zipfile

    infos = zipfile.ZipFile(path).infolist()
    after = next(i for i, info in enumerate(infos) if info.filename.endswith("sample_inputs/model.pt")) + 1
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(path.read_bytes()[: infos[after].header_offset])
    with pytest.raises(
        BadArchive,
        match=r"cut.pt2: it is truncated or damaged: the zip directory at its end lists "
        r"members from byte [\d,]+ on \(archive/data.pkl: a zip stored inside it\?\), "
        r"not from its start$",
    ):
        load_exported_program(cut)


def test_a_failing_pass_raises_its_own_error_to_api_callers():
    """Through lowering.to_edge_transform_and_lower, xir's error (here an instrument's IRError) is
    raised, ExecuTorch's "An error occurred when running the 'XirRewritePass' pass" its cause."""
    import torch

    from lowering import XnnpackPartitioner, to_edge_transform_and_lower
    from passes.instruments import Instrument
    from xir.errors import IRError

    class Fails(Instrument):
        def before_pass(self, p, graph, index):
            raise IRError(f"{p.name} refused")

    ep = torch.export.export(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()), (torch.randn(1, 4),))
    with pytest.raises(IRError, match="refused") as raised:
        to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(instruments=[Fails()])])
    assert "An error occurred when running the 'XirRewritePass' pass" in str(raised.value.__cause__)


def test_an_invalid_option_value_is_a_pipeline_error():
    """``{max_elements=-5}`` was attrs' ValueError; it is a PipelineError naming the pass and option."""
    import lowering  # noqa: F401  (declares fold-constants)
    from passes.pipeline import parse_pipeline
    from passes.registry import PipelineError

    with pytest.raises(
        PipelineError,
        match=r"pass fold-constants: the option\(s\) \{max_elements=-5\} are not "
        r"valid: 'max_elements' must be >= 0: -5",
    ):
        parse_pipeline("fold-constants{max_elements=-5}")
