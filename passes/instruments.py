"""Instruments: objects the pass manager calls around every pass.

Each has ``before_pass``, ``after_pass`` and ``on_failure`` hooks (and pipeline-level hooks).
The files they write are written atomically (:func:`xir.files.write_atomic`). The built-in ones:

* :class:`PrintIR` prints the IR after every pass, or only after passes that changed it;
* :class:`DumpIR` writes numbered files (``00-input.xir``, ``03-fold-batch-norm.xir``);
* :class:`TimePasses` times each pass and prints a table at the end;
* :class:`VerifyEach` verifies after each pass, naming the pass that broke the IR;
* :class:`Reproducer` writes, on failure, the IR just before the failing pass and the
  pipeline text that makes it fail again, and the constants' data beside it as arrays (see
  :func:`run_reproducer`);
* :class:`CheckChanged` checks that a pass's "changed" answer is honest.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

from xir import (
    DType,
    Graph,
    ParseError,
    TensorType,
    VerificationError,
    print_graph,
    verify,
)
from xir.files import write_atomic

if TYPE_CHECKING:
    from .manager import PassFailure, PassManager, PipelineResult
    from .pass_base import Pass


class Instrument:
    """Base class: every hook does nothing."""

    def before_pipeline(self, manager: "PassManager", graph: Graph) -> None:
        pass

    def before_pass(self, p: "Pass", graph: Graph, index: int) -> None:
        pass

    def after_pass(self, p: "Pass", graph: Graph, changed: bool, index: int) -> None:
        pass

    def on_failure(self, p: "Pass", graph: Graph, failure: "PassFailure", index: int) -> None:
        pass

    def after_pipeline(self, manager: "PassManager", graph: Graph, result: "PipelineResult") -> None:
        pass


def _open(target: IO[str] | str | os.PathLike | None) -> tuple[IO[str], bool]:
    if target is None:
        return sys.stderr, False
    if isinstance(target, (str, os.PathLike)):
        return open(target, "a", encoding="ascii"), True
    return target, False


class PrintIR(Instrument):
    """Print the IR after every pass (``after="all"``) or only after those that changed it
    (``after="change"``), to a stream or a file (default: stderr)."""

    def __init__(
        self,
        after: str = "all",
        stream: IO[str] | str | os.PathLike | None = None,
        show_origin: bool = True,
        before_first: bool = False,
    ):
        if after not in ("all", "change"):
            raise ValueError(f"PrintIR(after=...) must be 'all' or 'change', got {after!r}")
        self.after = after
        self.target = stream
        self.show_origin = show_origin
        self.before_first = before_first

    def _write(self, header: str, graph: Graph) -> None:
        stream, owned = _open(self.target)
        try:
            stream.write(f"// ----- {header} -----\n{print_graph(graph, show_origin=self.show_origin)}")
            stream.flush()
        finally:
            if owned:
                stream.close()

    def before_pipeline(self, manager, graph):
        if self.before_first:
            self._write("IR before the pipeline", graph)

    def after_pass(self, p, graph, changed, index):
        if self.after == "all" or changed:
            self._write(f"IR after {p}" + ("" if changed else " (unchanged)"), graph)


class DumpIR(Instrument):
    """Write the IR to ``folder`` as numbered files: ``00-input.xir`` then ``NN-pass-name.xir``
    after pass NN (only after passes that changed it when ``only_changes``)."""

    def __init__(self, folder: str | os.PathLike, only_changes: bool = False, show_origin: bool = True):
        self.folder = Path(folder)
        self.only_changes = only_changes
        self.show_origin = show_origin
        self.files: list[Path] = []

    def _dump(self, name: str, graph: Graph) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = write_atomic(self.folder / name, print_graph(graph, show_origin=self.show_origin), encoding="ascii")
        self.files.append(path)

    def before_pipeline(self, manager, graph):
        self._dump("00-input.xir", graph)

    def after_pass(self, p, graph, changed, index):
        if changed or not self.only_changes:
            self._dump(f"{index:02d}-{p.name}.xir", graph)


class TimePasses(Instrument):
    """Time each pass; print a table (pass, seconds, share, changed) after the pipeline."""

    def __init__(self, stream: IO[str] | str | os.PathLike | None = None):
        self.target = stream
        self.rows: list[tuple[str, float, bool]] = []
        self._start = 0.0

    def before_pass(self, p, graph, index):
        self._start = time.perf_counter()

    def after_pass(self, p, graph, changed, index):
        self.rows.append((str(p), time.perf_counter() - self._start, changed))

    def table(self) -> str:
        total = sum(seconds for _, seconds, _ in self.rows) or 1e-12
        width = max([len("pass")] + [len(name) for name, _, _ in self.rows])
        lines = [f"{'pass':<{width}}  {'seconds':>9}  {'share':>6}  changed"]
        for name, seconds, changed in self.rows:
            lines.append(
                f"{name:<{width}}  {seconds:>9.5f}  {100 * seconds / total:>5.1f}%  {'yes' if changed else 'no'}"
            )
        lines.append(f"{'total':<{width}}  {sum(s for _, s, _ in self.rows):>9.5f}")
        return "\n".join(lines) + "\n"

    def after_pipeline(self, manager, graph, result):
        stream, owned = _open(self.target)
        try:
            stream.write(self.table())
        finally:
            if owned:
                stream.close()


class VerifyEach(Instrument):
    """Verify the IR after every pass. A broken IR raises VerificationError naming the pass and
    the node; the IR just before the pass is kept in ``ir_before``."""

    def __init__(self):
        self.ir_before: str | None = None

    def before_pipeline(self, manager, graph):
        verify(graph)

    def before_pass(self, p, graph, index):
        self.ir_before = print_graph(graph, show_origin=True)

    def after_pass(self, p, graph, changed, index):
        try:
            verify(graph)
        except VerificationError as e:
            raise VerificationError(f"after pass {p.name}: {e.message}", e.node_text) from None

    def on_failure(self, p, graph, failure, index):
        if failure.ir_before is None:
            failure.ir_before = self.ir_before


class Reproducer(Instrument):
    """On failure, write a file holding the pipeline text of the failing pass and the IR just
    before it ran (the pass manager has rolled the graph back to it), and beside it
    ``<path>.constants.npz`` with the tensor data of the constants, so that a pass that reads
    weights fails again. The data are plain arrays (bf16 and float8 as their bit patterns, the
    dtypes in a JSON member): numpy reads them back without unpickling anything.
    ``run_reproducer(path, constants=constants_path(path))`` makes it fail the same way again."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @property
    def constants_path(self) -> Path:
        return constants_path(self.path)

    def on_failure(self, p, graph, failure, index):
        before = print_graph(graph, show_origin=True)
        constants, left_out = _constants_file(graph)
        header = [
            f"# xir reproducer: the pass failed with: {_one_line(failure.error)}",
            f"# pipeline: {failure.pipeline_text}",
        ]
        if constants is not None:
            header.append(
                f"# constants: {self.constants_path.name} (read only when named: run_reproducer(path, constants=...))"
            )
        if left_out:
            header.append(f"# constants not kept (no plain tensor data): {', '.join('%' + n for n in left_out)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if constants is not None:  # before the reproducer, so that no reproducer names a missing file
            write_atomic(self.constants_path, constants)
        elif self.constants_path.exists():
            self.constants_path.unlink()
        text = "\n".join(header).encode("ascii", "backslashreplace").decode("ascii") + "\n" + before
        write_atomic(self.path, text, encoding="ascii")
        failure.reproducer = str(self.path)
        if failure.ir_before is None:
            failure.ir_before = before


class CheckChanged(Instrument):
    """Fail a pass whose "changed" answer is wrong: compares the IR text before and after."""

    def before_pass(self, p, graph, index):
        self._before = print_graph(graph, show_origin=True)

    def after_pass(self, p, graph, changed, index):
        really = print_graph(graph, show_origin=True) != self._before
        if really != changed:
            raise AssertionError(
                f"pass {p.name} returned changed={changed}, but the graph {'did' if really else 'did not'} change"
            )


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text.splitlines()[0] if text else type(error).__name__


def constants_path(path: str | os.PathLike) -> Path:
    """Where a reproducer keeps its constants' data: beside it, ``<name>.constants.npz``."""
    path = Path(path)
    return path.with_name(path.name + ".constants.npz")


# the member of a constants file that maps each constant to its IR dtype; a "-" is in no value name
_DTYPES_MEMBER = "xir-dtypes"


def _stored_dtype(dtype: DType):
    """The torch dtype a constant of IR ``dtype`` is stored as: its own, or for the dtypes numpy
    has no type for (bf16, float8) the unsigned integer of the same size, holding its bits; None
    for the quantized dtypes (not stored)."""
    import torch

    from xir.fx_import import DTYPE_TO_TORCH

    if dtype.is_quantized:
        return None
    return {DType.bf16: torch.uint16, DType.f8e4m3: torch.uint8, DType.f8e5m2: torch.uint8}.get(
        dtype, DTYPE_TO_TORCH[dtype]
    )


def _plain_array(data):
    """``data`` as a numpy array and its IR dtype, or None when it is no plain tensor
    (quantized, sparse, a fake or meta tensor without data, an opaque object)."""
    import torch

    from xir.fx_import import TORCH_TO_DTYPE

    dtype = TORCH_TO_DTYPE.get(data.dtype) if isinstance(data, torch.Tensor) else None
    stored = _stored_dtype(dtype) if dtype is not None else None
    if stored is None or data.layout != torch.strided:
        return None
    try:
        return data.detach().cpu().resolve_conj().resolve_neg().contiguous().view(stored).numpy(), dtype
    except RuntimeError:  # fake and meta tensors have no data
        return None


def _constants_file(graph: Graph) -> tuple[bytes | None, list[str]]:
    """The ``.npz`` bytes of the constants' tensor data (None when there is none), and the names
    of the constants whose data is no plain tensor: those are not kept, since only arrays are
    stored (this runs while a failure is reported: odd data must not raise)."""
    import numpy

    arrays, dtypes, left_out = {}, {}, []
    for value in graph.inputs:
        if not value.is_constant or value.data is None:
            continue
        plain = _plain_array(value.data)
        if plain is None:
            left_out.append(value.name)
        else:
            arrays[value.name], dtypes[value.name] = plain[0], plain[1].value
    if not arrays:
        return None, left_out
    arrays[_DTYPES_MEMBER] = numpy.asarray(json.dumps(dtypes))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:  # numpy.savez's layout, with any member name
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w") as member:
                numpy.lib.format.write_array(member, array, allow_pickle=False)
    return buffer.getvalue(), left_out


def read_constants(path: str | os.PathLike, graph: Graph) -> dict:
    """The tensors of a reproducer's constants file, by name, checked against ``graph``: each is
    a constant input of it, of the dtype and shape the IR declares. Read with numpy, pickle
    refused: a file holding Python objects is an error, never run. Raises ValueError naming the
    file and the constant."""
    import torch

    from xir.fx_import import DTYPE_TO_TORCH

    _check_sizes(path, graph)
    arrays, dtypes = _read_npz(path)
    inputs = {value.name: value for value in graph.inputs}
    tensors = {}
    for name, array in arrays.items():
        value = inputs.get(name)
        if value is None or not value.is_constant:
            raise ValueError(f"{path}: holds data for %{name}, which is no constant input of the reproducer")
        try:
            dtype = DType.parse(dtypes[name])
        except ValueError as error:
            raise ValueError(f"{path}: %{name}: {error}") from None
        stored = _stored_dtype(dtype)
        declared = value.type
        if (
            stored is None
            or array.dtype != torch.empty(0, dtype=stored).numpy().dtype
            or not isinstance(declared, TensorType)
            or declared.dtype != dtype
            or (declared.is_static and tuple(declared.shape) != array.shape)
        ):
            raise ValueError(
                f"{path}: %{name} holds {dtype}[{','.join(map(str, array.shape))}] (numpy "
                f"{array.dtype}), the reproducer declares %{name}: {declared}"
            )
        tensors[name] = torch.from_numpy(array).view(DTYPE_TO_TORCH[dtype])
    return tensors


_DTYPES_MEMBER_LIMIT = 1 << 20  # bytes of the dtypes member's JSON at most


def _check_sizes(path: str | os.PathLike, graph: Graph) -> None:
    """Refuse, before any array is read, a member whose header declares more elements than the
    IR's type of its constant (or the dtypes member larger than a megabyte), and a member that
    inflates past what its header declares: a small file must not make the reader allocate much."""
    import numpy

    inputs = {value.name: value for value in graph.inputs}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                with archive.open(info) as member:
                    version = numpy.lib.format.read_magic(member)
                    read_header = (
                        numpy.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else numpy.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(member)  # (a header whose dtype would need pickle raises)
                declared = math.prod(shape) * dtype.itemsize
                if name == _DTYPES_MEMBER:
                    allowed = _DTYPES_MEMBER_LIMIT
                else:
                    value = inputs.get(name)
                    if value is None or not value.is_constant:
                        raise ValueError(f"holds data for %{name}, which is no constant input of the reproducer")
                    static = isinstance(value.type, TensorType) and value.type.is_static
                    allowed = value.type.numel() * 8 if static else 0  # (8 bytes: the widest stored element)
                if declared > allowed or info.file_size > allowed + 4096:
                    raise ValueError(
                        f"%{name} declares {info.file_size:,} bytes (shape {list(shape)}), more than "
                        f"its type in the reproducer allows"
                    )
    except (OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a reproducer's constants file: {error}") from None
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def _read_npz(path: str | os.PathLike) -> tuple[dict, dict]:
    """The arrays of a ``.npz`` file by name, and its dtypes member, read with pickle refused."""
    import numpy

    try:
        archive = numpy.load(path, allow_pickle=False)
        if not isinstance(archive, numpy.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        with archive:
            arrays = {name: archive[name] for name in archive.files}
        dtypes = json.loads(str(arrays.pop(_DTYPES_MEMBER, "{}")))
        if not isinstance(dtypes, dict):
            raise ValueError(f"its {_DTYPES_MEMBER} member is no JSON object")
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a reproducer's constants file: {error}") from None
    missing = sorted(set(arrays) - set(dtypes))
    if missing:
        raise ValueError(f"{path}: %{missing[0]} has no dtype in its {_DTYPES_MEMBER} member")
    return arrays, dtypes


def read_reproducer(path: str | os.PathLike, constants: str | os.PathLike | None = None) -> tuple[str, Graph]:
    """The pipeline text and the graph stored in a reproducer file, with its constants' data
    read from ``constants`` when the caller names that file (usually ``constants_path(path)``).
    Nothing is read that the caller did not name: a file left beside the reproducer (such as
    the ``.constants.pkl`` older versions wrote) is never opened. Raises ValueError naming the
    file, and the line and column or the constant at fault."""
    from xir import parse_graph

    try:
        text = Path(path).read_text(encoding="ascii")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not an xir reproducer (byte {error.start} is not ASCII)") from None
    pipeline = None
    for line in text.splitlines():
        if line.startswith("# pipeline: "):
            pipeline = line[len("# pipeline: ") :].strip()
            break
    if pipeline is None:
        raise ValueError(f"{path}: not an xir reproducer (no '# pipeline:' line)")
    try:
        graph = parse_graph(text)
    except ParseError as error:
        raise ValueError(f"{path}, {error}") from None
    if constants is not None:
        for name, tensor in read_constants(constants, graph).items():
            graph.input_named(name).data = tensor
    return pipeline, graph


def run_reproducer(path: str | os.PathLike, instruments=(), constants: str | os.PathLike | None = None):
    """Run the pipeline of a reproducer on its IR (it should fail as it did), with the
    constants' data of the file ``constants`` when given (see :func:`read_reproducer`)."""
    from .manager import PassManager

    pipeline, graph = read_reproducer(path, constants)
    return PassManager(pipeline, list(instruments)).run(graph)


__all__ = [
    "CheckChanged",
    "DumpIR",
    "Instrument",
    "PrintIR",
    "Reproducer",
    "TimePasses",
    "VerifyEach",
    "constants_path",
    "read_constants",
    "read_reproducer",
    "run_reproducer",
]
