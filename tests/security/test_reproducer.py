"""Items 1 and 4 of issue 28 for the pass manager's files: replaying a reproducer runs no code
from any file, and the reproducer and IR dumps are written atomically.

The payloads would do harm if run: pickles whose ``__reduce__`` creates a marker file (as a
payload that writes anywhere would), left where the old reproducer's ``.constants.pkl`` went, or
hidden in an ``.npz`` as an object array. Replaying must never create the marker.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
import torch

from passes import (
    PassFailure,
    PassManager,
    Reproducer,
    constants_path,
    function_pass,
    read_reproducer,
    run_reproducer,
    unregister_pass,
)
from xir import parse_graph

ROOT = Path(__file__).resolve().parents[2]

GRAPH = "graph @g {\n  input %x: f32[2]\n  param %w: f32[2]\n  %0: f32[2] = aten.mul.Tensor(%x, %w)\n  return %0\n}\n"


class WritesMarker:
    """Unpickling this creates the file ``marker`` (any code could run in its place)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def needs_weights():
    """A pass that reads ``%w``'s data and fails, naming its sum (so a replay shows whether the
    data came back)."""

    @function_pass("test-security-needs-weights")
    def reads_weights(graph) -> bool:
        """Fails on ``%w``'s data."""
        weight = graph.input_named("w")
        if weight.data is None:
            raise ValueError("no weight data")
        raise ValueError(f"weight sum {float(weight.data.float().sum()):.1f}")

    yield "test-security-needs-weights"
    unregister_pass("test-security-needs-weights")


def _reproducer(tmp_path: Path, pipeline: str, text: str = GRAPH, data: dict | None = None) -> Path:
    """The reproducer the Reproducer instrument writes when ``pipeline`` fails on ``text``."""
    graph = parse_graph(text)
    for name, tensor in (data if data is not None else {"w": torch.tensor([1.5, 2.5])}).items():
        graph.input_named(name).data = tensor
    path = tmp_path / "repro.xir"
    with pytest.raises(PassFailure):
        PassManager(pipeline, [Reproducer(path)]).run(graph)
    return path


def test_a_pickle_beside_a_reproducer_is_never_loaded(tmp_path, needs_weights):
    """The old ``<repro>.constants.pkl`` sits beside a received reproducer: replaying it as the
    docs describe (with and without its constants) never opens it; named as the constants file,
    it is refused as no array file, unrun."""
    path = _reproducer(tmp_path, needs_weights)
    marker = tmp_path / "marker"
    pkl = path.with_name(path.name + ".constants.pkl")
    pkl.write_bytes(pickle.dumps({"w": torch.tensor([1.5, 2.5]), "x": WritesMarker(marker)}))

    read_reproducer(path)
    assert not marker.exists()
    with pytest.raises(PassFailure, match="no weight data"):
        run_reproducer(path)
    with pytest.raises(PassFailure, match="weight sum 4.0"):
        run_reproducer(path, constants=constants_path(path))
    with pytest.raises(ValueError, match=f"{pkl}: not a reproducer's constants file"):
        run_reproducer(path, constants=pkl)
    assert not marker.exists()


def test_an_npz_hiding_a_pickled_object_is_refused(tmp_path, needs_weights):
    """An ``.npz`` whose member is an object array (a pickle inside the zip) is refused, naming
    the file; the pickle is not run."""
    path = _reproducer(tmp_path, needs_weights)
    marker = tmp_path / "marker"
    bad = tmp_path / "bad.npz"
    numpy.savez(bad, w=numpy.array([WritesMarker(marker)], dtype=object))
    with pytest.raises(ValueError, match=f"{bad}: not a reproducer's constants file"):
        read_reproducer(path, constants=bad)
    assert not marker.exists()


def test_constants_come_back_exactly_and_are_plain_arrays(tmp_path):
    """Every dtype comes back bit for bit (bf16 and float8, which numpy has no type for, too),
    and the file is arrays only: numpy reads it with pickle refused."""
    data = {
        "a": torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16),
        "b": torch.tensor(7.0, dtype=torch.bfloat16),
        "c": torch.randn(2, 3, dtype=torch.float16),
        "d": torch.tensor([0.5, -448.0]).to(torch.float8_e4m3fn),
        "e": torch.tensor([[1, -2]], dtype=torch.int64),
        "f": torch.tensor([True, False]),
        "g": torch.nn.Parameter(torch.randn(3)),
    }
    text = (
        "graph @g {\n  input %x: f32[3]\n  param %a: bf16[3]\n  param %b: bf16[]\n  param %c: f16[2,3]\n"
        "  param %d: f8e4m3[2]\n  param %e: i64[1,2]\n  param %f: bool[2]\n  param %g: f32[3]\n"
        "  %0: f32[3] = aten.add.Tensor(%x, %g)\n  return %0\n}\n"
    )

    @function_pass("test-security-fails")
    def fails(graph) -> bool:
        """Always fails."""
        raise ValueError("boom")

    try:
        path = _reproducer(tmp_path, "test-security-fails", text, data)
    finally:
        unregister_pass("test-security-fails")
    with numpy.load(constants_path(path), allow_pickle=False) as archive:
        assert sorted(archive.files) == ["a", "b", "c", "d", "e", "f", "g", "xir-dtypes"]
        assert archive["a"].dtype == numpy.uint16 and archive["c"].dtype == numpy.float16
    _, graph = read_reproducer(path, constants=constants_path(path))
    for name, tensor in data.items():
        back = graph.input_named(name).data
        assert back.dtype == tensor.dtype and back.shape == tensor.shape, name
        assert torch.equal(back.reshape(-1).view(torch.uint8), tensor.detach().reshape(-1).view(torch.uint8)), name


def test_constants_that_do_not_match_the_ir_are_named(tmp_path, needs_weights):
    """A constants file whose array is not of the declared shape, or names no constant of the
    reproducer, is an error naming the file and the constant (never a wrong program)."""
    path = _reproducer(tmp_path, needs_weights)

    def constants(**arrays) -> Path:
        target = tmp_path / "other.npz"
        numpy.savez(target, **arrays, **{"xir-dtypes": numpy.asarray('{"w": "f32", "x": "f32", "z": "f32"}')})
        return target

    with pytest.raises(
        ValueError,
        match=r"other.npz: %w holds f32\[3\] \(numpy float32\), the reproducer declares "
        r"%w: f32\[2\]",
    ):
        read_reproducer(path, constants=constants(w=numpy.zeros(3, numpy.float32)))
    with pytest.raises(ValueError, match=r"other.npz: %w holds f32\[2\] \(numpy float64\)"):
        read_reproducer(path, constants=constants(w=numpy.zeros(2)))
    with pytest.raises(ValueError, match="other.npz: holds data for %z, which is no constant input"):
        read_reproducer(path, constants=constants(z=numpy.zeros(2, numpy.float32)))
    with pytest.raises(ValueError, match="other.npz: holds data for %x, which is no constant input"):
        read_reproducer(path, constants=constants(x=numpy.zeros(2, numpy.float32)))


def _fails_to_write(script: str, tmp_path: Path, limit: int) -> str:
    """Run ``script`` in a child process whose files may not grow past ``limit`` bytes (as a full
    disk or a quota stops a write partway); returns its output."""
    prelude = textwrap.dedent(f"""\
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        def limit_file_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        """)
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


LONG_GRAPH = (
    "graph @g {\n  input %x: f32[2,3]\n"
    + "".join(f"  %{i}: f32[2,3] = aten.relu(%{i - 1 if i else 'x'})\n" for i in range(300))
    + "  return %299\n}\n"
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stops a write partway on Linux")
def test_a_dump_that_fails_partway_leaves_the_old_file(tmp_path):
    """DumpIR writing a long IR over an earlier dump fails partway: the earlier dump is intact and
    no partial file is left beside it."""
    old = "// an earlier dump\n"
    (tmp_path / "00-input.xir").write_text(old)
    output = _fails_to_write(
        f"""
        from passes import DumpIR
        from xir import parse_graph
        graph = parse_graph({LONG_GRAPH!r})
        limit_file_size()
        try:
            DumpIR({str(tmp_path)!r}).before_pipeline(None, graph)
        except OSError as error:
            print("write failed:", error.strerror)
        """,
        tmp_path,
        limit=4096,
    )
    assert "write failed: File too large" in output
    assert (tmp_path / "00-input.xir").read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00-input.xir"]


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stops a write partway on Linux")
def test_a_reproducer_that_fails_partway_leaves_the_old_one(tmp_path):
    """The Reproducer writing over an earlier reproducer and its constants fails partway: both
    earlier files are intact, no partial file is left."""
    old = "# an earlier reproducer\n"
    (tmp_path / "repro.xir").write_text(old)
    (tmp_path / "repro.xir.constants.npz").write_bytes(b"earlier constants")
    output = _fails_to_write(
        f"""
        import torch
        from passes import PassManager, Reproducer, function_pass
        from xir import parse_graph

        @function_pass("test-fails")
        def fails(graph):
            \"\"\"Always fails.\"\"\"
            raise ValueError("boom")

        graph = parse_graph({GRAPH.replace("f32[2]", "f32[4096]")!r})
        graph.input_named("w").data = torch.randn(4096)  # 16 kB of constants
        limit_file_size()
        try:
            PassManager("test-fails", [Reproducer({str(tmp_path / "repro.xir")!r})]).run(graph)
        except OSError as error:
            print("write failed:", error.strerror)
        """,
        tmp_path,
        limit=4096,
    )
    assert "write failed: File too large" in output
    assert (tmp_path / "repro.xir").read_text() == old
    assert (tmp_path / "repro.xir.constants.npz").read_bytes() == b"earlier constants"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro.xir", "repro.xir.constants.npz"]


def test_a_constants_file_declaring_more_than_its_type_is_refused_before_reading(tmp_path):
    """A member whose header declares a huge array (10^10 elements, a few bytes of file) is refused
    before numpy allocates it, naming the constant; so is one that inflates past its header."""
    import io
    import zipfile

    import numpy

    from passes.instruments import read_constants
    from xir import parse_graph

    graph = parse_graph(
        "graph @g {\n  input %x: f32[4]\n  param %w: f32[4]\n  %0: f32[4] = aten.add.Tensor(%x, %w)\n  return %0\n}\n"
    )

    def npz(path, header_shape, payload=b""):
        member = io.BytesIO()
        numpy.lib.format.write_array_header_2_0(member, {"descr": "<f4", "fortran_order": False, "shape": header_shape})
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("w.npy", member.getvalue() + payload)
            dtypes = io.BytesIO()
            numpy.lib.format.write_array(dtypes, numpy.asarray('{"w": "f32"}'))
            archive.writestr("xir-dtypes.npy", dtypes.getvalue())
        return path

    with pytest.raises(ValueError, match=r"%w declares .* more than its type in the reproducer allows"):
        read_constants(npz(tmp_path / "huge.npz", (100000, 100000)), graph)
    with pytest.raises(ValueError, match=r"%w declares .* more than its type"):
        read_constants(npz(tmp_path / "bomb.npz", (4,), payload=bytes(50_000_000)), graph)
    good = npz(tmp_path / "good.npz", (4,), payload=numpy.arange(4, dtype="<f4").tobytes())
    assert read_constants(good, graph)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
