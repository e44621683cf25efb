"""The ``xir`` command.

    xir demo [--out DIR] [--only NAME ...]   lower the built-in examples with stock and with xir,
                                              run both on ExecuTorch's runtime, compare with eager
    xir lower MODEL.pt2 [-o MODEL.pte] ...    lower a saved ExportedProgram to an XNNPACK .pte
    xir dump MODEL.pt2|IR.xir [--after PIPELINE]  the IR of its edge program, or of an IR text file (after a pipeline)
    xir explain MODEL.pt2 [--html FILE]       what lowering delegates to XNNPACK, and why the rest not
                                              (--html: as a page; --explorer: the Model Explorer command)
    xir passes                                the registered passes, their options and descriptions
    xir optimum --model DIR --task T -o DIR   optimum-executorch's export with xir's recipe xnnpack-xir
                                              (optimum-cli export executorch's arguments; xir[optimum])
    xir fuzz [--kind K --count N ...]         differential fuzzing against the stock partitioner (python -m xir_tools.fuzz)

Errors print one line, ``xir: error: ...``, on stderr and exit with status 2 (``--debug``
adds the traceback); ``lower --verify`` exits with status 1 when the program does not load
or does not match eager PyTorch. Progress goes to stderr (a live line with a bar and the elapsed
time on a terminal, plain lines otherwise: :mod:`xir_tools.progress`), results to stdout.

A .pt2 is checked before torch reads it (:mod:`xir_tools.pt2`): one whose loading would run code
from the file (pickles, ...) is refused unless ``--trust-pickle``. ``xir lower`` checks that it can
write its output before any work, and every file the commands write goes through a temporary file
and a rename (:func:`xir.files.write_atomic`): a failed write leaves the old file as it was.

``xir --help``, ``xir passes``, ``xir dump`` of IR text and the argument errors import neither
torch nor ExecuTorch (tests/test_cli_fast.py): keep heavy imports inside the commands.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

from .progress import Progress, delegate_progress, pass_notes

# the names of xir_tools.examples.EXAMPLES (that module imports torch; tests/test_cli_fast.py checks they agree)
EXAMPLE_NAMES = ("mlp", "cnn", "attention", "attention-bf16", "patchify", "quantized-conv", "linear-bn-3d")

PROGRESS = Progress()  # main() makes a new one for each run (stderr may be another stream by then)


QUIET_LOGGERS = ("torch", "torchao", "executorch", "xir", "torch.utils._pytree")
_quiet_wanted = False


def _quiet() -> None:
    # (no TORCH_LOGS here: torch is imported later, and `import torch` fails with an empty TORCH_LOGS)
    global _quiet_wanted
    _quiet_wanted = True
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def _import_torch():
    """``import torch``, with torch's logging set up again as quiet as main() made it (torch's import
    sets its own loggers' levels). The commands that need torch call this before anything imports it."""
    import torch

    if _quiet_wanted:
        _quiet()
    return torch


def _demo(args) -> int:
    _quiet()
    torch = _import_torch()

    import xir
    from passes import DumpIR

    from .examples import EXAMPLES, edge_program, export_example
    from .harness import allowed_error, lower, reference
    from .html_report import RecordPasses, write_partitioner_report

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(EXAMPLES)
    rows = []
    for name in names:
        example = EXAMPLES[name]
        with PROGRESS.step(name, f"{example.description}: exporting"):
            ep = export_example(example)
            inputs = example.example_inputs()
            ref = reference(ep, inputs)
            bf16 = example.dtype == torch.bfloat16
            kind = "quantized" if example.quantize else "bf16" if bf16 else "fp32"
            _write(out / f"{name}.xir", xir.print_graph(xir.from_exported_program(edge_program(ep))))
        results = {}
        pending = []
        for which in ("stock", "xir"):
            options = {"enable_bf16": bf16}
            if which == "xir":
                options["instruments"] = [DumpIR(out / f"{name}-passes"), RecordPasses()]
            with (
                PROGRESS.step(name, f"lowering with {which}, serializing, running on ExecuTorch's runtime") as step,
                delegate_progress(step),
            ):
                result = lower(ep, inputs, which, **options)
            results[which] = result
            if result.buffer is not None:
                _write(out / f"{name}-{which}.pte", result.buffer)
            tolerance = allowed_error(ref, kind)
            error = result.err(ref) if result.ran else None
            pending.append((which, result, error, tolerance))
        with PROGRESS.step(name, "timing 50 runs of each program"):
            latencies = _latencies({w: r.buffer for w, r, _, _ in pending if r.ran}, inputs)
        for which, result, error, tolerance in pending:
            latency = latencies.get(which)
            rows.append(
                (
                    name,
                    which,
                    "yes" if result.ran else "NO",
                    "-" if error is None else ("yes" if error <= tolerance else "NO"),
                    "-" if error is None else f"{error:.2g}",
                    str(sum(result.delegated.values())),
                    str(sum(result.outside.values())),
                    "-" if latency is None else f"{latency * 1e3:.3f}",
                    "" if result.ran else (result.error or "")[:60],
                )
            )
        if results["xir"].partitioner is not None and results["xir"].partitioner.last_plan is not None:
            write_partitioner_report(results["xir"].partitioner, out / f"{name}.html")
            _write(out / f"{name}-report.txt", results["xir"].partitioner.report())
    header = ("model", "partitioner", "loads", "matches", "max err", "delegated", "outside", "ms", "failure")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print(
        f"\n.pte files, IR dumps (per pass) and partition reports (<model>-report.txt, and <model>.html to open "
        f"in a browser): {out}/"
    )
    return 0


def _latencies(buffers: dict, inputs: tuple, runs: int = 50) -> dict:
    """Median wall time of warm runs of each loaded program, the programs run interleaved so
    that they see the same machine load."""
    from .harness import load_method

    loaded = {}
    for name, buffer in buffers.items():
        program, method = load_method(buffer)
        method.execute(list(inputs))
        loaded[name] = (program, method)
    times: dict = {name: [] for name in loaded}
    for _ in range(runs):
        for name, (_, method) in loaded.items():
            start = time.perf_counter()
            method.execute(list(inputs))
            times[name].append(time.perf_counter() - start)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def _llm(args) -> int:
    """``xir llm ARGS`` = ``python -m lowering.fx.llm ARGS`` (export_llm's arguments)."""
    llm = importlib.import_module("lowering.fx.llm")
    try:
        return llm.main(args.args)
    except llm.UnsupportedOption as error:
        raise CLIError(str(error)) from error


def _optimum(args) -> int:
    """``xir optimum ARGS``: optimum-executorch's export (``optimum-cli export executorch ARGS``) with
    xir's recipe ``xnnpack-xir`` by default (xir_tools.optimum)."""
    from . import optimum

    try:
        return optimum.main(args.args)
    except optimum.OptimumNotInstalled as error:
        raise CLIError(str(error)) from error


def _passes(args) -> int:
    import lowering  # noqa: F401  (declares the XNNPACK backend's passes)
    from passes import pass_help

    if args.phases:
        from lowering.pipeline import describe

        print(describe(), end="")
        return 0
    for name, options, description in pass_help():
        print(f"{name}{'{' + options + '}' if options else ''}\n    {description}")
    return 0


# ------------------------------------------------------------------------------ errors


class CLIError(Exception):
    """A failure reported as one line, ``xir: error: <message>``; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 2, hint: bool = False):
        super().__init__(message)
        self.status = status
        self.hint = hint  # a library's error: --debug shows where it came from


def _first_line(error: BaseException) -> str:
    """``Type: first non-empty line of the message`` (messages of torch errors often start with a newline)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@contextlib.contextmanager
def _step(label: str, doing: str, failure: str, total: int | None = None, unit: str = ""):
    """Show ``[label] doing ...`` on stderr while it runs (with the elapsed time on a terminal) and
    yield the :class:`xir_tools.progress.Step`; turn an exception into CLIError(``failure: error``)."""
    try:
        with PROGRESS.step(label, doing, total, unit) as step:
            yield step
    except CLIError:
        raise
    except Exception as error:
        from lowering.partition import NotLowerable
        from passes import PipelineError

        if isinstance(error, PipelineError):
            raise CLIError(f"{failure}: {error}") from error
        if isinstance(error, NotLowerable):
            raise CLIError(f"{failure}: {_all_lines(error)}") from error
        raise CLIError(f"{failure}: {_first_line(error)}", hint=True) from error


def _all_lines(error: BaseException) -> str:
    """``Type: message`` with the message's lines joined into one: a NotLowerable's first line ends
    in ':' and the ops and the reasons follow, one a line."""
    head, *rest = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
    return f"{type(error).__name__}: {head} {'; '.join(rest)}".rstrip()


def _progress(label: str, doing: str, more: bool = True) -> None:
    PROGRESS.message(label, doing, more)


def _quiet_logs() -> None:
    """No warnings or library log lines (torch.export.load logs a traceback before raising)."""
    _quiet()


# ----------------------------------------------------------------------- the model file


def _model_path(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise CLIError(f"{text}: no such file")
    if path.is_dir():
        raise CLIError(f"{text} is a directory, not an exported program (.pt2)")
    return path


NOT_A_PROGRAM = "{path} is not an exported program (a .pt2 file written by torch.export.save)"


def _load(path: Path, trust_pickle: bool):
    """The program in ``path``, the archive checked first (:mod:`xir_tools.pt2`: no code from the file
    runs unless --trust-pickle)."""
    _import_torch()
    from .pt2 import BadArchive, load_exported_program

    try:
        with PROGRESS.step(path.name, f"loading {path}"):
            return load_exported_program(path, trust_pickle=trust_pickle)
    except BadArchive as error:
        raise CLIError(str(error)) from error
    except Exception as error:  # an archive torch does not load (another torch version, a missing custom op, ...)
        raise CLIError(f"{NOT_A_PROGRAM.format(path=path)}: {_first_line(error)}", hint=True) from error


def _placeholder_dtypes(ep) -> set:
    import torch

    return {
        n.meta["val"].dtype
        for n in ep.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
    }


def _has_dynamic_dims(ep) -> bool:
    import torch

    return any(
        not isinstance(d, int)
        for n in ep.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
        for d in n.meta["val"].shape
    )


def _is_quantized(ep) -> bool:
    return any(n.op == "call_function" and "quantize_per_" in str(n.target) for n in ep.graph.nodes)


def _example_inputs(ep, label: str) -> tuple[tuple, dict]:
    """The example inputs saved with the program, or random ones shaped like its inputs."""
    import torch

    saved = getattr(ep, "example_inputs", None)
    if saved is not None:
        args, kwargs = saved
        return tuple(args), dict(kwargs or {})
    _progress(label, "no example inputs saved in the program: using random ones of the input shapes", more=False)
    torch.manual_seed(0)
    names = set(ep.graph_signature.user_inputs)
    inputs = []
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in names:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise CLIError(
                f"input {node.name} is not a tensor and no example inputs were saved with the program; "
                f"save it with torch.export.save after export with example inputs"
            )
        shape = [_concrete(d, ep) for d in val.shape]
        if val.dtype.is_floating_point:
            inputs.append(torch.randn(shape).to(val.dtype))
        elif val.dtype == torch.bool:
            inputs.append(torch.rand(shape) > 0.5)
        else:
            inputs.append(torch.randint(0, 8, shape, dtype=val.dtype))
    return tuple(inputs), {}


def _concrete(dim, ep) -> int:
    """A size for a (possibly symbolic) dim: 2 when its range allows it, else the nearest bound."""
    if isinstance(dim, int):
        return dim
    ranges = ep.range_constraints.get(dim.node.expr)
    if ranges is None:
        hint = getattr(dim.node, "hint", None)
        return int(hint) if hint is not None else 2
    try:
        lower = int(ranges.lower)
    except (TypeError, ValueError, OverflowError):
        lower = 0
    try:
        upper = int(ranges.upper)
    except (TypeError, ValueError, OverflowError):  # unbounded
        upper = 1 << 30
    return min(max(lower, 2), upper)


def _dynamic_shapes(ep, args: tuple, kwargs: dict):
    """Dim.AUTO for the dims that were dynamic in the program (flat tensor inputs only), else None."""
    import torch

    if kwargs or not all(isinstance(a, torch.Tensor) for a in args):
        return None
    names = list(ep.graph_signature.user_inputs)
    vals = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
    if len(names) != len(args):
        return None
    specs, dynamic = [], False
    for name in names:
        val = vals.get(name)
        dims = {i: torch.export.Dim.AUTO for i, d in enumerate(getattr(val, "shape", ())) if not isinstance(d, int)}
        dynamic = dynamic or bool(dims)
        specs.append(dims or None)
    return tuple(specs) if dynamic else None


def _export(module, args: tuple, kwargs: dict, dynamic_shapes, label: str):
    import torch

    if dynamic_shapes is not None:
        try:
            return torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
        except Exception:
            _progress(
                label, "re-export with dynamic dims failed: re-exporting with the example input shapes", more=False
            )
    return torch.export.export(module, args, kwargs)


def _cast(module, dtype) -> None:
    """Cast the floating parameters, buffers and tensor constants of an unlifted module."""
    import torch

    module.to(dtype)
    for sub in module.modules():
        for key, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
                setattr(sub, key, value.to(dtype))


DTYPES = {"bf16": "bfloat16", "fp32": "float32"}


class Prepared:
    """The program to lower, its example inputs, and what it computes in."""

    def __init__(self, ep, args: tuple, kwargs: dict, bf16: bool, quantized: bool):
        self.ep, self.args, self.kwargs, self.bf16, self.quantized = ep, args, kwargs, bf16, quantized


def _prepare(path: Path, args) -> Prepared:
    """Load the program; cast it (--dtype) or quantize it (--quantize) and re-export."""
    import torch

    label = path.name
    ep = original = _load(path, args.trust_pickle)
    example_args, example_kwargs = _example_inputs(ep, label)
    dtype = getattr(args, "dtype", None)
    quantize = getattr(args, "quantize", None)
    current = _placeholder_dtypes(ep)
    if dtype is not None:
        target = getattr(torch, DTYPES[dtype])
        if {d for d in current if d.is_floating_point} - {target}:
            with _step(label, f"casting to {dtype} and re-exporting", f"re-exporting {path} in {dtype} failed"):
                module = ep.module()
                _cast(module, target)
                example_args = tuple(
                    a.to(target) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in example_args
                )
                example_kwargs = {
                    k: v.to(target) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                    for k, v in example_kwargs.items()
                }
                shapes = _dynamic_shapes(ep, example_args, example_kwargs)
                ep = _export(module, example_args, example_kwargs, shapes, label)
    if quantize is not None:
        if example_kwargs:
            raise CLIError("--quantize needs a program whose inputs are all positional")
        from .examples import quantize_module

        with _step(
            label,
            f"quantizing ({quantize}) with XNNPACKQuantizer and re-exporting",
            f"quantizing {path} ({quantize}) failed",
        ):
            # per-channel weights: XNNPACK's dynamically quantized linear needs them, and they are its usual recipe
            module = quantize_module(ep.module(), example_args, quantize, per_channel=True)
            ep = _export(module, example_args, {}, None, label)
    if (dtype is not None or quantize is not None) and _has_dynamic_dims(original) and not _has_dynamic_dims(ep):
        _progress(label, "note: the re-exported program has static shapes (those of the example inputs)", more=False)
    bf16 = torch.bfloat16 in _placeholder_dtypes(ep)
    return Prepared(ep, example_args, example_kwargs, bf16, quantize is not None or _is_quantized(ep))


# ---------------------------------------------------------------------- pipelines, instruments


def _pipeline(text: str | None, option: str):
    """Check pipeline text early (an unknown pass or option is an error before any work)."""
    import lowering  # noqa: F401  (declares the XNNPACK backend's passes)
    from passes import PipelineError, parse_pipeline

    if text is None or text.strip() == "default":
        return None
    try:
        parse_pipeline(text[1:] if text.startswith("+") else text)
    except PipelineError as error:
        raise CLIError(f"{option}: {error}") from error
    return text


def _instruments(args) -> list:
    from passes import DumpIR, PrintIR, TimePasses

    instruments = []
    if args.print_ir_after_all:
        instruments.append(PrintIR("all"))
    elif args.print_ir_after_change:
        instruments.append(PrintIR("change"))
    if args.dump_dir:
        _not_an_input("--dump-dir", Path(args.dump_dir), [Path(args.model)], folder=True)
        if Path(args.dump_dir).exists() and not Path(args.dump_dir).is_dir():
            raise CLIError(f"--dump-dir {args.dump_dir} is a file, not a folder")
        instruments.append(DumpIR(args.dump_dir))
    if args.time_passes:
        instruments.append(TimePasses())
    return instruments


# ----------------------------------------------------------------------------- commands


def _lower_program(path: Path, prepared: Prepared, args, instruments=()):
    from lowering import XnnpackPartitioner

    from .harness import lower_edge

    notes = pass_notes(lambda: PROGRESS.current)
    partitioner = XnnpackPartitioner(
        enable_bf16=prepared.bf16, per_op_mode=args.per_op, pipeline=args.pipeline, instruments=[*instruments, notes]
    )
    with (
        _step(
            path.name,
            f"lowering to XNNPACK with xir ({'bf16' if prepared.bf16 else 'no bf16'}"
            f"{', per op' if args.per_op else ''})",
            f"lowering {path} failed",
        ) as step,
        delegate_progress(step, [partitioner]),
    ):
        edge, _ = lower_edge(prepared.ep, partitioner=partitioner)
    return edge, partitioner


def _lower(args) -> int:
    path = _model_path(args.model)
    out = Path(args.output) if args.output else path.with_suffix(".pte")
    _not_an_input("-o", out, [path])
    if args.dtype == "bf16" and args.quantize:
        raise CLIError("--dtype bf16 and --quantize cannot be combined (XNNPACK's quantized ops take fp32)")
    args.pipeline = _pipeline(args.pipeline, "--pipeline")
    _writable(out)
    instruments = _instruments(args)  # (checks --dump-dir before any work)
    prepared = _prepare(path, args)
    edge, partitioner = _lower_program(path, prepared, args, instruments)
    from .harness import delegate_count, delegated_ops, outside_ops, to_buffer

    with _step(path.name, "serializing to ExecuTorch", f"serializing {path} failed"):
        buffer = to_buffer(edge)
    _write(out, buffer)

    inside, outside = sum(delegated_ops(edge).values()), sum(outside_ops(edge).values())
    print(
        f"wrote {out} ({len(buffer):,} bytes): {inside} op(s) in {delegate_count(edge)} XNNPACK delegate(s), "
        f"{outside} op(s) outside"
    )
    if args.report:
        print(partitioner.report(), end="")
    if args.verify:
        return _verify(path, out, buffer, prepared)
    return 0


DUMPED = re.compile(r"\d\d+-[\w.-]+\.xir", re.ASCII)  # the names DumpIR writes in --dump-dir


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _not_an_input(flag: str, target: Path, inputs: list[Path], folder: bool = False) -> None:
    """Every output flag's check that it does not name a file the command reads (the same path, a
    link to it, or, for a folder, one of the files written in it): CLIError names both."""
    for source in inputs:
        if _same_file(target, source):
            raise CLIError(
                f"{flag} {target} is the input {source}: writing it would overwrite the input; "
                f"give another {'folder' if folder else 'file'}"
            )
        if folder and DUMPED.fullmatch(source.name) and _same_file(target, source.parent):
            raise CLIError(
                f"{flag} {target} holds the input {source}, a name the IR dumps are written to; give another folder"
            )


def _writable(path: Path) -> Path:
    """Check, before any work, that ``path`` can be written (its folder is made if missing)."""
    from xir.files import check_writable

    try:
        return check_writable(path)
    except OSError as error:
        where = f": {error.filename}" if error.filename and Path(error.filename) != path else ""
        raise CLIError(f"cannot write {path}: {error.strerror or error}{where}") from error


def _write(path: Path, data: bytes | str) -> None:
    """Write through a temporary file and a rename: a failure leaves the old ``path`` as it was."""
    from xir.files import write_atomic

    try:
        write_atomic(path, data)
    except OSError as error:
        raise CLIError(f"cannot write {path}: {error.strerror or error}") from error


def _verify(path: Path, out: Path, buffer: bytes, prepared: Prepared) -> int:
    import torch
    from torch.utils import _pytree as pytree

    from .harness import LoadError, allowed_error, max_error, run_pte

    with _step(path.name, "running eager ep.module() on the example inputs", f"running {path} eagerly failed"):
        expected = prepared.ep.module()(*prepared.args, **prepared.kwargs)
        expected = [t for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    inputs = tuple(t for t in pytree.tree_leaves((prepared.args, prepared.kwargs)) if isinstance(t, torch.Tensor))
    try:
        with PROGRESS.step(path.name, f"running {out} on ExecuTorch's runtime"):
            actual = run_pte(buffer, inputs)
    except LoadError as error:
        reason = error.reason.splitlines()[-1] if error.reason else _first_line(error)
        raise CLIError(f"verify: ExecuTorch's runtime refused {out}: {reason}", status=1) from error
    try:
        error = max_error(actual, expected)
    except AssertionError as mismatch:
        raise CLIError(f"verify: {out} {mismatch}", status=1) from mismatch
    tolerance = allowed_error(expected, "quantized" if prepared.quantized else "bf16" if prepared.bf16 else "fp32")
    verdict = "ok" if error <= tolerance else "MISMATCH"
    print(
        f"verify: max error {error:.3g} against eager ep.module() on the example inputs "
        f"(tolerance {tolerance:.3g}): {verdict}"
    )
    if error > tolerance:
        raise CLIError(
            f"verify: {out} does not match eager PyTorch: max error {error:.3g} > tolerance {tolerance:.3g}", status=1
        )
    return 0


def _is_ir_text(path: Path) -> bool:
    """An IR text file (``xir dump``'s output, a DumpIR file): ``.xir``, or not a zip and reading as text."""
    import zipfile

    if path.suffix == ".xir":
        return True
    try:
        if zipfile.is_zipfile(path):
            return False
        with open(path, "rb") as file:
            head = file.read(65536)
    except OSError:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return any(line.strip().startswith("graph @") for line in text.splitlines())


def _parse_text(path: Path):
    """Parse and verify IR text; errors as one line with the file, line and column."""
    import xir

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CLIError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from error
    try:
        graph = xir.parse_graph(text)
        xir.verify(graph)
    except xir.IRError as error:
        raise CLIError(_ir_error(path, error)) from error
    return graph


def _ir_error(path: Path, error) -> str:
    """``FILE:LINE:COLUMN: problem`` on one line (``FILE: problem (at: node)`` when the error has no place)."""
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    message = getattr(error, "message", None) or str(error)
    if line is None:
        node = getattr(error, "node_text", None)
        return " ".join(f"{path}: {message}{f' (at: {node})' if node else ''}".split())
    return " ".join(f"{path}:{line}:{column}: {message}".split())


def _dump_text(path: Path, args) -> int:
    """``xir dump IR.xir``: parse, verify, optionally run a pipeline, print. Imports no torch unless
    a pass of the pipeline needs it."""
    import attrs

    import xir
    from lowering.passes._base import Bf16Rewrite
    from passes import PassManager, parse_pipeline

    if args.dtype is not None or args.quantize is not None:
        raise CLIError("--dtype and --quantize apply to an exported program (.pt2), not to IR text")
    after = _pipeline(args.after, "--after") if args.after is not None else ""
    graph = _parse_text(path)
    opaque = xir.verify(graph)
    if args.after is not None:
        bf16 = any(isinstance(v.type, xir.TensorType) and v.type.dtype is xir.DType.bf16 for v in graph.inputs)
        if after is None or after.startswith("+"):
            from lowering.pipeline import DEFAULT_PIPELINE

            pipeline = parse_pipeline(DEFAULT_PIPELINE) + (parse_pipeline(after[1:]) if after else [])
        else:
            pipeline = parse_pipeline(after)
        pipeline = [attrs.evolve(p, enable_bf16=bf16) if isinstance(p, Bf16Rewrite) else p for p in pipeline]
        manager = PassManager(pipeline, _instruments(args))
        with _step(path.name, f"running {manager.pipeline_text or 'an empty pipeline'}", "the pipeline failed"):
            manager.run(graph)
    print(xir.print_graph(graph, show_origin=args.origin), end="")
    _note_opaque(opaque)
    return 0


def _dump(args) -> int:
    path = _model_path(args.model)
    if _is_ir_text(path):
        return _dump_text(path, args)
    _import_torch()

    import xir
    from lowering import XnnpackPartitioner
    from passes import PassManager

    from .examples import edge_program

    after = _pipeline(args.after, "--after") if args.after is not None else ""
    prepared = _prepare(path, args)
    with _step(
        path.name,
        "converting to ExecuTorch's edge dialect and importing",
        f"converting {path} to the edge dialect failed",
    ):
        graph = xir.from_exported_program(edge_program(prepared.ep))
    if args.after is not None:
        pipeline = XnnpackPartitioner(enable_bf16=prepared.bf16, pipeline=after).pipeline
        manager = PassManager(pipeline, _instruments(args))
        with _step(path.name, f"running {manager.pipeline_text or 'an empty pipeline'}", "the pipeline failed"):
            manager.run(graph)
    print(xir.print_graph(graph, show_origin=args.origin), end="")
    _note_opaque(xir.verify(graph))
    return 0


def _note_opaque(opaque) -> None:
    if opaque:
        print(
            f"note: opaque ops (no definition in xir.ops: not type-checked, never delegated): {', '.join(opaque)}",
            file=sys.stderr,
        )


def _explain(args) -> int:
    path = _model_path(args.model)
    if args.dtype == "bf16" and args.quantize:
        raise CLIError("--dtype bf16 and --quantize cannot be combined (XNNPACK's quantized ops take fp32)")
    html = _html_target(args.html, path) if args.html else None
    if _is_ir_text(path):
        return _explain_text(path, args, html)
    args.pipeline = _pipeline(args.pipeline, "--pipeline")
    prepared = _prepare(path, args)
    from .html_report import RecordPasses, write_partitioner_report

    recorder = RecordPasses()
    _, partitioner = _lower_program(path, prepared, args, [recorder] if html or args.explorer else ())
    if html:
        with _step(path.name, f"writing {html}", f"writing {html} failed"):
            write_partitioner_report(partitioner, html)
            report = partitioner.report()
    else:
        report = partitioner.report()
    print(report, end="")
    if html:
        print(f"HTML report: {html} (open it in a browser)")
    if args.explorer:
        from .explorer.data import graph_id
        from .html_report import report_data

        data = report_data(
            partitioner.last_graph, partitioner.last_plan, recorder.changes, pipeline=partitioner.pipeline_text
        )
        _explorer_command(path, data, graph_id(partitioner.last_graph))
    return 0


def _html_target(text: str, source: Path) -> Path:
    html = Path(text)
    _not_an_input("--html", html, [source])
    if html.is_dir():
        raise CLIError(f"--html {text} is a directory; give the .html file to write")
    return _writable(html)


def _walk(args) -> int:
    """``xir walk MODEL.pt2``: the program's intermediates lowered with xir and with stock, against
    the program run eagerly (``xir_tools.walk``)."""
    path = _model_path(args.model)
    prepared = _prepare(path, args)
    if prepared.kwargs:
        raise CLIError("walk needs a program whose inputs are all positional")
    from .walk import walk

    with _step(path.name, f"walking ({args.mode})", f"walking {path} failed"):
        result = walk(prepared.ep.module(), prepared.args, mode=args.mode, threshold=args.threshold, limit=args.limit)
    print(result.table())
    return 0


def _explain_text(path: Path, args, html: Path | None) -> int:
    """``xir explain IR.xir``: the partition plan of IR text as it is (no rewrite runs: the pipeline
    needs the program's constants), with the capability rules partition() applies."""
    import xir
    from lowering.capability import Options
    from lowering.partition import plan_partition

    from .html_report import write_html

    if args.dtype is not None or args.quantize is not None or args.pipeline is not None or args.per_op:
        raise CLIError(
            "--dtype, --quantize, --pipeline and --per-op apply to an exported program (.pt2), "
            "not to IR text (explain plans IR text as it is)"
        )
    graph = _parse_text(path)
    bf16 = any(isinstance(v.type, xir.TensorType) and v.type.dtype is xir.DType.bf16 for v in graph.inputs)
    plan = plan_partition(graph, Options(enable_bf16=bf16))
    print(plan.report(), end="")
    if html:
        write_html(
            html,
            graph,
            plan,
            None,
            passes_recorded=False,
            title=f"xir partition: {path.name}",
            subtitle="IR text, planned as it is",
        )
        print(f"HTML report: {html} (open it in a browser)")
    if args.explorer:
        from .explorer.data import graph_id
        from .html_report import report_data

        _explorer_command(path, report_data(graph, plan, None, passes_recorded=False), graph_id(graph, text=True))
    return 0


def _explorer_command(path: Path, data: dict, graph_id: str) -> None:
    """``xir explain --explorer``: write the delegate colours as Model Explorer node data next to the
    model and print the command that opens the model in Model Explorer with xir's adapter."""
    import importlib.util

    from .explorer.data import write_node_data

    target = path.with_name(path.name + ".xir-delegates.json")
    try:
        write_node_data(target, data, graph_id)
    except OSError as error:
        raise CLIError(f"cannot write {target}: {error.strerror or error}") from error
    if importlib.util.find_spec("model_explorer") is None:
        _progress(path.name, "Model Explorer is not installed: pip install 'xir[explorer]'", more=False)
    print("Model Explorer (xir's IR, coloured by delegate; the nodes' attributes say why a node stayed outside):")
    print(f"  python -m xir_tools.explorer {_quote(str(path))} --node-data {_quote(str(target))}")
    print(
        f"  (or: model-explorer {_quote(str(path))} --extensions=xir_tools.explorer --node_data_paths={_quote(str(target))}"
        f" and pick the adapter 'xir: XNNPACK partition')"
    )


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# ------------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line too, with the command whose --help lists the options."""

    def error(self, message: str):
        raise CLIError(f"{message} (see '{self.prog} --help')")


def _add_debug(parser: argparse.ArgumentParser) -> None:
    # on every command too (``xir lower --debug ...``); SUPPRESS keeps ``xir --debug lower`` working
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks and library warnings"
    )


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.pt2", help="an ExportedProgram saved with torch.export.save")


def _add_trust(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load a .pt2 that holds pickles (tensor subclasses such as torchao's quantized weights, "
        "Python objects, sample inputs beyond tensors) or other code torch runs: this runs code "
        "from the file, so only for files you trust (sizes and CRCs are checked still)",
    )


def _add_preparation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        help="cast the module and its inputs and re-export (bf16 also enables bf16 delegation; "
        "a bf16 program gets it without this option)",
    )
    parser.add_argument(
        "--quantize",
        choices=["static", "dynamic"],
        help="quantize with ExecuTorch's XNNPACKQuantizer, calibrated on the example inputs saved in "
        "the .pt2 (random ones of the input shapes when none were saved), and re-export",
    )


def _add_lowering(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-op", action="store_true", help="one delegate per op (the stock per_op_mode)")
    parser.add_argument(
        "--pipeline",
        metavar="TEXT",
        help="xir's rewrite pipeline, e.g. 'remove-no-ops,dead-code-elimination' "
        "(default: the default pipeline; '+TEXT' appends to it; see 'xir passes')",
    )


def _add_instruments(parser: argparse.ArgumentParser) -> None:
    printing = parser.add_mutually_exclusive_group()
    printing.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass (on stderr)")
    printing.add_argument(
        "--print-ir-after-change", action="store_true", help="print the IR after the passes that changed it (on stderr)"
    )
    parser.add_argument(
        "--dump-dir", metavar="DIR", help="write the IR before and after every pass to DIR (00-input.xir, ...)"
    )
    parser.add_argument("--time-passes", action="store_true", help="print the time each pass took (on stderr)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="xir",
        description="Lower PyTorch programs to ExecuTorch's XNNPACK backend, correctly.",
        epilog="Errors print one line 'xir: error: ...' and exit with status 2 (--debug shows the "
        "traceback); 'xir lower --verify' exits with 1 when the program does not load or "
        "does not match eager PyTorch. Progress goes to stderr, results to stdout.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and library warnings")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="lower the built-in examples with stock and with xir, run and compare them")
    demo.add_argument(
        "--out", default="xir-demo", help="folder for .pte files, IR dumps and reports (default: xir-demo)"
    )
    demo.add_argument(
        "--only",
        nargs="*",
        choices=list(EXAMPLE_NAMES),
        metavar="NAME",
        help=f"run only these examples ({', '.join(EXAMPLE_NAMES)})",
    )
    _add_debug(demo)
    demo.set_defaults(run=_demo)

    lower = commands.add_parser(
        "lower",
        help="lower a saved ExportedProgram (.pt2) to an XNNPACK .pte",
        description="Lower a saved ExportedProgram to ExecuTorch's XNNPACK backend with xir and write the .pte file.",
    )
    _add_model(lower)
    lower.add_argument(
        "-o", "--output", metavar="MODEL.pte", help="the .pte to write (default: MODEL.pte next to MODEL.pt2)"
    )
    _add_trust(lower)
    _add_preparation(lower)
    _add_lowering(lower)
    lower.add_argument(
        "--verify",
        action="store_true",
        help="run the .pte on ExecuTorch's runtime on the example inputs, compare with eager "
        "ep.module() and print the max error (exit status 1 if it does not load or match)",
    )
    lower.add_argument(
        "--report", action="store_true", help="print the partition report (what was delegated, why the rest was not)"
    )
    _add_instruments(lower)
    _add_debug(lower)
    lower.set_defaults(run=_lower)

    dump = commands.add_parser(
        "dump",
        help="print the IR of the program's edge dialect, or of an IR text file (optionally after a pipeline)",
        description="Print the xir IR of the program in ExecuTorch's edge dialect; or read "
        "IR text (a .xir file: a dump, a DumpIR file), verify it, and print it "
        "(after --after PIPELINE).",
    )
    dump.add_argument(
        "model", metavar="MODEL.pt2|IR.xir", help="an ExportedProgram saved with torch.export.save, or IR text"
    )
    dump.add_argument(
        "--after",
        metavar="PIPELINE",
        help="run this pipeline first ('default': the one lowering runs; '+TEXT' appends to it)",
    )
    dump.add_argument(
        "--no-origin", dest="origin", action="store_false", help="do not annotate nodes with the pass that made them"
    )
    _add_trust(dump)
    _add_preparation(dump)
    _add_instruments(dump)
    _add_debug(dump)
    dump.set_defaults(run=_dump)

    explain = commands.add_parser(
        "explain",
        help="lower the program and print the partition report",
        description="Lower the program as 'xir lower' does (without writing it) and print "
        "the partition report: the groups delegated to XNNPACK, and the rule and "
        "reason for each op left outside.",
    )
    explain.add_argument(
        "model",
        metavar="MODEL.pt2|IR.xir",
        help="an ExportedProgram saved with torch.export.save (or IR text, planned as it is)",
    )
    explain.add_argument(
        "--html",
        metavar="FILE.html",
        help="also write the report as one self-contained HTML page: the IR graph coloured by "
        "delegate, the reasons of the nodes left outside, module boxes, search, the passes' diffs",
    )
    explain.add_argument(
        "--explorer",
        action="store_true",
        help="write the delegate colours as Model Explorer node data (MODEL.xir-delegates.json) "
        "and print the command that opens the program in Google's Model Explorer with xir's "
        "adapter (pip install 'xir[explorer]')",
    )
    _add_trust(explain)
    _add_preparation(explain)
    _add_lowering(explain)
    _add_debug(explain)
    explain.set_defaults(run=_explain)

    walk = commands.add_parser(
        "walk",
        help="find the first op where the lowered program departs from the program run eagerly",
        description="Make each intermediate of the program (in a quantized program: each activation "
        "quantize) a graph output, lower it with xir and with stock, run it with ExecuTorch's runtime, "
        "and print each intermediate's error over its peak with both, and the first op that departs.",
    )
    _add_model(walk)
    _add_trust(walk)
    walk.add_argument(
        "--quantize",
        choices=["static"],
        help="quantize with ExecuTorch's XNNPACKQuantizer (per channel), calibrated on the example inputs, first",
    )
    walk.add_argument(
        "--mode",
        choices=["all", "prefix"],
        default="all",
        help="all: every intermediate an output of one program (default); prefix: one program per intermediate",
    )
    walk.add_argument(
        "--threshold", type=float, default=0.05, help="error over peak above which an op departs (default 0.05)"
    )
    walk.add_argument("--limit", type=int, help="walk only the first N intermediates")
    _add_debug(walk)
    walk.set_defaults(run=_walk)

    passes = commands.add_parser("passes", help="list the registered passes")
    passes.add_argument(
        "--phases",
        action="store_true",
        help="print the phases of lowering's default pipeline instead, in run order (lowering.pipeline)",
    )
    _add_debug(passes)
    passes.set_defaults(run=_passes)

    llm = commands.add_parser(
        "llm",
        add_help=False,
        prefix_chars="\0",  # every argument goes to lowering.fx.llm
        help="ExecuTorch's LLM export (export_llm's --config FILE and key=value overrides) "
        "with xir's partitioner (python -m lowering.fx.llm)",
    )
    llm.add_argument("args", nargs=argparse.REMAINDER)
    llm.set_defaults(run=_llm)

    optimum = commands.add_parser(
        "optimum",
        add_help=False,
        prefix_chars="\0",  # every argument goes to optimum's parser
        help="optimum-executorch's export ('optimum-cli export executorch' arguments) with "
        "xir's recipe xnnpack-xir (pip install 'xir[optimum]')",
    )
    optimum.add_argument("args", nargs=argparse.REMAINDER)
    optimum.set_defaults(run=_optimum)

    fuzz = commands.add_parser(
        "fuzz",
        add_help=False,
        prefix_chars="\0",  # every argument goes to xir_fuzz
        help="differential fuzzing of xir's partitioner against stock (python -m xir_tools.fuzz --help)",
    )
    fuzz.add_argument("args", nargs=argparse.REMAINDER)
    fuzz.set_defaults(run=lambda args: importlib.import_module("xir_tools.fuzz.cli").main(args.args))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = _parser()
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported with the command whose --help lists the options
            command = f"xir {args.command}" if getattr(args, "command", None) else "xir"
            raise CLIError(f"unrecognized arguments: {' '.join(extra)} (see '{command} --help')")
        debug = args.debug
        if not debug:
            _quiet_logs()
        global PROGRESS
        # instruments that print on stderr while a step runs: plain progress lines, not a live line
        printing = any(
            getattr(args, name, False) for name in ("print_ir_after_all", "print_ir_after_change", "time_passes")
        )
        PROGRESS = Progress(live=False) if printing else Progress()
        return args.run(args)
    except CLIError as error:
        if debug and error.__cause__ is not None:
            traceback.print_exception(error.__cause__)
        sys.stdout.flush()
        hint = " (--debug shows the traceback)" if error.hint and not debug else ""
        print(f"xir: error: {error}{hint}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        print("xir: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug in xir: still one line unless --debug
        if debug:
            traceback.print_exc()
        sys.stdout.flush()
        print(
            f"xir: error: {_first_line(error)}" + ("" if debug else " (--debug shows the traceback)"), file=sys.stderr
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
