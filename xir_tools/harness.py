"""The one harness of the ``xir`` command, the fuzzer, the benchmarks and the tests: export a
module on sample inputs, lower it with xir's XnnpackPartitioner or ExecuTorch's stock one,
serialize, load and run it with ExecuTorch's runtime, compare with eager PyTorch within a
tolerance for its dtype, and report which ops ended inside XNNPACK delegates.

- exporting: ``export``, ``reference`` (the eager outputs), ``as_list``
- lowering: ``make_partitioner``, ``lower_edge`` (to an EdgeProgramManager), ``to_buffer``
  (``to_executorch``, with the quantized kernels that Q/DQ left outside delegates need)
- delegation: ``delegated_ops``, ``outside_ops``, ``delegate_count``, ``delegation``
- running: ``load_method``, ``run_method``, ``run_pte`` (``LoadError``/``RunError`` carry the
  runtime's stderr: in Python a refused delegate shows only as "Failed to load method forward")
- comparing: ``max_error``, ``allowed_error`` (one bound per dtype), ``tolerance`` and
  ``compare`` (elementwise, the fuzzer's), ``first_line`` (an error in one line)
- all at once: ``lower`` (lower, serialize, load and run; a ``Lowered`` records failures)

Self-contained (torch, ExecuTorch and xir's own ``xir`` and ``lowering``; no other ``xir_tools``
module, no ``from __future__``): the fuzzer's repro files embed it verbatim ahead of
xir_tools/fuzz/case.py, so that a repro runs exactly the code the fuzzer ran.
"""

import contextlib
import math
import operator
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

QUANTIZED = ("static", "dynamic")

# ------------------------------------------------------------------------------ exporting


def as_list(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def export(module, inputs, **options):
    """``torch.export.export`` of ``module`` on the sample ``inputs``."""
    return torch.export.export(module, tuple(inputs), **options)


def reference(ep, inputs, module=None):
    """The eager outputs on ``inputs``, as a list: of ``module``, else of the exported program
    (``ep.module()``; for a pt2e-quantized program that is the converted model)."""
    with torch.no_grad():
        outputs = (module if module is not None else ep.module())(*inputs)
    return [t.detach() if isinstance(t, torch.Tensor) else t for t in as_list(outputs)]


# ------------------------------------------------------------------------------ lowering


def make_partitioner(which="xir", **options):
    """xir's XnnpackPartitioner (``which`` "xir") or ExecuTorch's stock one ("stock")."""
    if which == "stock":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return XnnpackPartitioner(**options)
    import lowering

    return lowering.XnnpackPartitioner(**options)


def lower_edge(ep, which="xir", via="etal", partitioner=None, compile_config=None, **options):
    """Lower ``ep`` to an EdgeProgramManager with ``partitioner`` (else
    ``make_partitioner(which, **options)``); returns ``(edge, partitioner)``. ``via``: "etal"
    (to_edge_transform_and_lower: xir's, which applies its rewrites, or ExecuTorch's for stock),
    "bare" (ExecuTorch's to_edge_transform_and_lower with xir's partitioner, no rewrites) or
    "backend" (to_edge(...).to_backend; xir's rewrites applied with
    edge.transform(partitioner.transform_passes()) first)."""
    from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower

    if partitioner is None:
        partitioner = make_partitioner(which, **options)
    config = {} if compile_config is None else {"compile_config": compile_config}
    if via == "etal" and which != "stock":
        import lowering

        return lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner], **config), partitioner
    if via == "etal" or (via == "bare" and which != "stock"):
        return to_edge_transform_and_lower(ep, partitioner=[partitioner], **config), partitioner
    edge = to_edge(ep, compile_config=compile_config or EdgeCompileConfig(_check_ir_validity=False))
    if which != "stock":
        edge = edge.transform(partitioner.transform_passes())
    return edge.to_backend(partitioner), partitioner


def to_program(edge):
    """``edge.to_executorch()``, with the quantized kernels that Q/DQ left outside delegates run on."""
    import executorch.kernels.quantized  # noqa: F401  (Q/DQ left outside delegates run on these kernels)

    return edge.to_executorch()


def to_buffer(edge) -> bytes:
    """``edge.to_executorch()``, serialized."""
    return to_program(edge).buffer


# ------------------------------------------------------------------------------ delegation

NOT_COMPUTE = ("executorch_call_delegate", "getitem", "sym_size")


def _ops(graph):
    from xir.fx_import import op_name

    return [
        op_name(n.target)
        for n in graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and not any(s in str(n.target) for s in NOT_COMPUTE)
    ]


def delegated_graphs(edge, method="forward") -> list:
    """The FX graph inside each delegate of an EdgeProgramManager (after lowering), in order."""
    ep = edge.exported_program(method)
    modules = (getattr(module, "original_module", None) for _, module in ep.graph_module.named_children())
    return [module.graph for module in modules if module is not None]


def delegated_ops(edge, method="forward") -> Counter:
    """Ops inside XNNPACK delegates of an EdgeProgramManager (after lowering), counted."""
    counts = Counter()
    for graph in delegated_graphs(edge, method):
        counts.update(_ops(graph))
    return counts


def delegated_linear_dtypes(edge, method="forward", means=False) -> list:
    """(result dtype, weight dtype) of every linear inside the delegates, in program order; the
    means ``xnnpack.mean-over-last-dims`` wrote as linears (a ``mean_row_*`` weight) only with
    ``means``."""
    return [
        (node.meta["val"].dtype, node.args[1].meta["val"].dtype)
        for graph in delegated_graphs(edge, method)
        for node in graph.nodes
        if node.op == "call_function"
        and "linear" in str(node.target)
        and (means or not str(node.args[1].target).startswith("mean_row_"))
    ]


def delegated_bf16_ops(edge, method="forward") -> list[str]:
    """The ops inside the delegates that compute a bf16 result, converts aside, in program order."""
    import torch

    return [
        str(node.target)
        for graph in delegated_graphs(edge, method)
        for node in graph.nodes
        if node.op == "call_function"
        and "convert" not in str(node.target)
        and isinstance(node.meta.get("val"), torch.Tensor)
        and node.meta["val"].dtype == torch.bfloat16
    ]


def outside_ops(edge, method="forward") -> Counter:
    """Compute ops left in the top-level program (not delegated), counted."""
    return Counter(_ops(edge.exported_program(method).graph))


def kernels_outside(program, method="forward") -> Counter:
    """The ops that run a kernel outside the delegates of ``program`` (an ``edge.to_executorch()``),
    counted by their functional name (``aten.select_copy.int``): not ExecuTorch's memory ops, an
    allocation or a static view (a ``view_copy`` that ``to_executorch`` made a view of its input's
    memory), which run none."""
    memory = ("executorch.exir.memory.alloc", "executorch.exir.memory.view")
    names = _ops(program.exported_program(method).graph)
    return Counter(name.removesuffix("_out").removesuffix(".out") for name in names if name not in memory)


def delegate_count(edge, method="forward") -> int:
    ep = edge.exported_program(method)
    return sum(1 for n in ep.graph.nodes if n.op == "call_function" and "executorch_call_delegate" in str(n.target))


def delegation(edge) -> dict:
    """How many ops ended inside XNNPACK delegates and how many compute ops outside, in all and by
    op ({} when they cannot be counted)."""
    try:
        inside, outside = dict(delegated_ops(edge)), dict(outside_ops(edge))
    except Exception:
        return {}
    return {
        "delegated": sum(inside.values()),
        "outside": sum(outside.values()),
        "delegated_ops": inside,
        "outside_ops": outside,
    }


# ------------------------------------------------------------------------------ running


class LoadError(RuntimeError):
    """The runtime refused the program. In Python a refused delegate shows only as "Failed to
    load method forward": ``reason`` is the runtime's last lines on stderr, ``log`` all it wrote
    there, ``error`` the exception Python saw."""

    def __init__(self, message, reason, log="", error=None):
        self.reason, self.log, self.error = reason, log, error
        super().__init__(f"{message}\n{reason}".strip())


class RunError(LoadError):
    """A run of a loaded program failed (a LoadError, for the callers that take either as "the
    runtime refused it")."""


@contextlib.contextmanager
def captured_stderr():
    """What native code writes on file descriptor 2 (the runtime's error log): ``box["text"]``."""
    sys.stderr.flush()
    saved = os.dup(2)
    box = {"text": ""}
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield box
        finally:
            try:
                import ctypes

                ctypes.CDLL(None).fflush(None)
            except Exception:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            box["text"] = sink.read().decode("utf-8", "replace")


def _last_lines(log):
    lines = [line for line in log.splitlines() if "cpuinfo" not in line and line.strip()]
    return "\n".join(lines[-4:])


def _runtime_call(error_class, call):
    with captured_stderr() as log:
        try:
            result, failure = call(), None
        except Exception as error:
            result, failure = None, error
    if failure is not None:
        raise error_class(str(failure), _last_lines(log["text"]), log["text"], failure) from None
    return result


def load_method(buffer, method="forward"):
    """Load ``buffer`` with ExecuTorch's runtime: ``(program, loaded method)`` to run many times
    (mutable buffers such as a KV cache persist between runs). Raises LoadError.

    ExecuTorch's ``Method`` does not keep its ``Program`` alive, and running a method whose program
    was collected reads freed memory (a segmentation fault, or not, by the allocator's whim: a test
    that wrote ``ok, message, *_ = compare(...)`` after ``_, method = load_method(...)`` crashed CI).
    The method returned here holds its program, so dropping the first element is safe."""
    from executorch.runtime import Runtime

    def load():
        program = Runtime.get().load_program(buffer)
        loaded = program.load_method(method)
        loaded._xir_program = program  # (the method keeps its program, and so its buffer, alive)
        return program, loaded

    return _runtime_call(LoadError, load)


def run_method(loaded, inputs) -> list:
    """Run a loaded method on ``inputs``; its outputs as a list. Raises RunError."""
    return list(_runtime_call(RunError, lambda: loaded.execute(list(inputs))))


def run_pte(buffer, inputs, method="forward") -> list:
    """Load ``buffer`` and run ``method`` once on ``inputs``. Raises LoadError (RunError: the run)."""
    _, loaded = load_method(buffer, method)
    return run_method(loaded, inputs)


def runtime_reason(log, error):
    """The runtime's last lines on stderr, on one line, with the exception Python saw."""
    lines = [line.strip() for line in log.splitlines() if line.strip() and "cpuinfo" not in line]
    text = " | ".join(lines[-3:])
    return f"{text} ({first_line(error)})" if text else first_line(error)


def first_line(error):
    """``Type: first line``, with the innermost cause when the error wraps another (ExecuTorch's
    pass manager reports "An error occurred when running the 'X' pass" around the real one)."""

    def line(e):
        lines = [text.strip() for text in str(e).splitlines() if text.strip()]
        text = lines[0] if lines else ""
        if len(text) > 240:
            text = text[:237] + "..."
        return f"{type(e).__name__}: {text}" if text else type(e).__name__

    text, root, seen = line(error), error, set()
    while True:
        inner = root.__cause__ or root.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        root = inner
    if root is not error:
        text += f" <- {line(root)}"
    return text


# ------------------------------------------------------------------------------ comparing


def max_error(actual, expected) -> float:
    """The largest |actual - expected| over all outputs; AssertionError when their number or
    shapes differ. Equal infinities and NaN against NaN count 0; an infinity or a NaN against any
    other value counts inf (a plain difference would give NaN there, which every comparison with
    a bound passes)."""
    actual, expected = as_list(actual), as_list(expected)
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} outputs, expected {len(expected)}")
    worst = 0.0
    for a, e in zip(actual, expected):
        if a.shape != e.shape:
            raise AssertionError(f"output shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        if not a.numel():
            continue
        a, e = a.float(), e.float()
        diff = (a - e).abs()
        diff = torch.where((a == e) | (a.isnan() & e.isnan()), torch.zeros_like(diff), diff)
        worst = max(worst, diff.nan_to_num(nan=math.inf, posinf=math.inf).max().item())
    return worst


# One bound on max_error for a whole program, relative to max(1, max|ref|): fp32 1e-4, bf16 2e-2
# (about 5 bf16 ulp), quantized 5e-2 (a few quantization steps of an int8 output).
ALLOWED = {"fp32": 1e-4, "bf16": 2e-2, "quantized": 5e-2}


def allowed_error(expected, kind="fp32") -> float:
    """The max_error allowed against the eager ``expected`` outputs for ``kind`` ("fp32", "bf16",
    "quantized", "static" or "dynamic")."""
    scale = max([1.0] + [t.float().abs().max().item() for t in as_list(expected) if t.numel()])
    return ALLOWED["quantized" if kind in QUANTIZED else kind] * scale


# Elementwise (the fuzzer's): |actual - ref| <= atol + rtol * |ref|.
#
# Float kinds: atol = (2e-5 + lowp) * max(1, max|ref|) + 10 * cond, rtol = max(1e-4, lowp).
#  - 2e-5 * max(1, max|ref|): XNNPACK's fp32 kernels (polynomial exp/sigmoid/tanh, other
#    summation orders, fused multiply-adds) are a few ulp off per op. Measured on 60 fp32
#    programs: xir and stock stay below 1.5e-6 * max(1, max|ref|) (10x margin and more), while
#    a real approximation error, exact GELU computed for approximate='tanh' (up to 4.7e-4 near
#    x = 2.7), is 5-10x above; at 1e-4 it sat right at the boundary.
#  - lowp: the output's rounding budget, summed along its longest path: 2**-5 (8 bf16 ulp) for
#    every op computed in bf16, 2**-8 for fp16 (Program.lowp). bf16 and fp16 kernels round
#    intermediates differently from eager (which often computes in fp32 and rounds once).
#  - cond: how far eager itself is from the same program run in float64 (a measure of the
#    program's conditioning: cancellation, normalizing nearly-constant rows, ...). An
#    implementation as accurate as eager errs by about as much; 10x leaves room.
FP32_ATOL = 2e-5
FP32_RTOL = 1e-4
COND_FACTOR = 10.0
QUANT_ATOL = 0.1


def tolerance(kind, ref, lowp=0.0, cond=0.0):
    """(atol, rtol) for one output."""
    peak = ref.float().abs().max().item() if ref.numel() else 0.0
    if kind in QUANTIZED:
        return QUANT_ATOL * peak + 1e-3, 0.0
    return (FP32_ATOL + lowp) * max(1.0, peak) + COND_FACTOR * cond, max(FP32_RTOL, lowp)


def compare(outputs, ref, kind, lowp=(), cond=()):
    """(ok, message, max_err, ratio, scaled): ratio is the worst |err| / allowed over all elements,
    scaled the worst max|err| / max(1, max|ref|) over the outputs."""
    if len(outputs) != len(ref):
        return False, f"{len(outputs)} outputs, expected {len(ref)}", None, None, None
    worst, worst_ratio, worst_scaled, messages = 0.0, 0.0, 0.0, []
    for index, (actual, expected) in enumerate(zip(outputs, ref)):
        if tuple(actual.shape) != tuple(expected.shape):
            return (
                False,
                f"output {index}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}",
                None,
                None,
                None,
            )
        if actual.dtype != expected.dtype:
            return False, f"output {index}: dtype {actual.dtype}, expected {expected.dtype}", None, None, None
        if not expected.numel():
            continue
        atol, rtol = tolerance(
            kind, expected, lowp[index] if index < len(lowp) else 0.0, cond[index] if index < len(cond) else 0.0
        )
        a, e = actual.double(), expected.double()
        error = (a - e).abs()
        error = torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)
        allowed = atol + rtol * e.abs()
        ratio = (error / allowed).max().item()
        worst, worst_ratio = max(worst, error.max().item()), max(worst_ratio, ratio)
        worst_scaled = max(worst_scaled, error.max().item() / max(1.0, e.abs().max().item()))
        if ratio > 1.0:
            messages.append(
                f"output {index}: max err {error.max().item():.3g} (atol {atol:.3g}, rtol {rtol:.3g}, "
                f"max|ref| {e.abs().max().item():.3g})"
            )
    return not messages, "; ".join(messages), worst, worst_ratio, worst_scaled


# ------------------------------------------------------------------------------ all at once


@dataclass
class Lowered:
    delegated: Counter = field(default_factory=Counter)
    outside: Counter = field(default_factory=Counter)
    delegates: int = 0
    outputs: list | None = None
    error: str | None = None  # lowering or load failure
    partitioner: object = None
    seconds: float = 0.0  # lowering time
    buffer: bytes | None = None
    # the ops outside that run a kernel in the serialized program (kernels_outside: not ExecuTorch's
    # allocations and static views)
    kernels: Counter = field(default_factory=Counter)

    def err(self, reference) -> float:
        assert self.outputs is not None, f"did not run: {self.error}"
        return max_error(self.outputs, reference)

    @property
    def ran(self) -> bool:
        return self.outputs is not None


def lower(ep, inputs, which="xir", via="etal", **options) -> Lowered:
    """Lower ``ep`` with the stock partitioner or xir's (``via`` as in lower_edge), serialize,
    load, run on ``inputs``. Failures are recorded, not raised."""
    result = Lowered()
    start = time.perf_counter()
    try:
        edge, result.partitioner = lower_edge(ep, which, via, **options)
        result.delegated, result.outside, result.delegates = (
            delegated_ops(edge),
            outside_ops(edge),
            delegate_count(edge),
        )
        program = to_program(edge)
        buffer, result.kernels = program.buffer, kernels_outside(program)
        result.seconds, result.buffer = time.perf_counter() - start, buffer
        result.outputs = run_pte(buffer, inputs)
    except LoadError as e:
        result.error = f"load failed: {e.reason}"
    except Exception as e:  # lowering failure: recorded so a test can assert stock's failure
        result.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return result


def compute_count(counter: Counter) -> int:
    return sum(counter.values())
