"""One differential case: export a program, lower it with xir's XnnpackPartitioner and with
ExecuTorch's stock one, serialize, load and run both on ExecuTorch's runtime, compare with the
eager reference, and classify each side.

This file is self-contained (torch, executorch and xir's ``lowering`` only): repro files embed
it verbatim, so a repro runs exactly the code the fuzzer ran.

Classes: ok, export-failed, lower-failed (lowering or serialization raised), load-failed (the
runtime refused the program; its stderr reason is kept), run-failed (execute raised),
wrong-result (outputs differ beyond the tolerance, or their count/shape/dtype differ);
the worker pool adds crashed and timeout; invalid: the eager reference is not finite.
"""

import contextlib
import math
import os
import sys
import tempfile
import time

import torch

FAILURE_CLASSES = ("export-failed", "lower-failed", "load-failed", "run-failed", "wrong-result", "crashed", "timeout")
QUANTIZED = ("static", "dynamic")

# ------------------------------------------------------------------------------ tolerances
# Each output is compared elementwise: |actual - ref| <= atol + rtol * |ref|.
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


# ------------------------------------------------------------------------------ preparing

_PATTERN_CACHE = {}


def _signature(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, (tuple, list)):
        return tuple(_signature(v) for v in value)
    hash(value)  # TypeError: not cacheable
    return value


def memoize_pattern_exports():
    """Speed only. torchao's convert_pt2e re-exports ~100 QAT conv-bn pattern functions (0.2-0.4 s
    each) whenever the graph has a batch norm (``_fold_conv_bn_qat``). The export of a pattern
    depends only on its code, its closure and the example inputs' shapes: memoized here, every
    caller gets a deep copy of the same GraphModule it would have built."""
    import copy

    from torchao.quantization.pt2e import qat_utils, utils

    original = utils._get_aten_graph_module_for_pattern
    if getattr(original, "memoized", False):
        return

    def cached(pattern, example_inputs, is_cuda=False, **kwargs):
        try:
            fn = pattern.fn if isinstance(pattern, torch.nn.Module) and len(pattern.state_dict()) == 0 else pattern
            key = (type(pattern).__name__, fn.__code__, tuple(_signature(c.cell_contents) for c in (fn.__closure__ or ())),
                   _signature(fn.__defaults__), _signature(tuple(example_inputs)), is_cuda,
                   tuple(sorted((k, _signature(v)) for k, v in kwargs.items())))
        except (TypeError, AttributeError, ValueError):
            return original(pattern, example_inputs, is_cuda, **kwargs)
        if key not in _PATTERN_CACHE:
            _PATTERN_CACHE[key] = original(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(_PATTERN_CACHE[key])

    cached.memoized = True
    utils._get_aten_graph_module_for_pattern = cached
    qat_utils._get_aten_graph_module_for_pattern = cached


def memoize_cia_ops():
    """Speed only. Each export decomposition (``run_decompositions``: to_edge, to_backend's and
    ExecuTorch's passes) lists every CompositeImplicitAutograd op of every op namespace anew
    (torch's ``_collect_all_valid_cia_ops``, uncached because a library can register more): about
    a fifth of a program's time in a worker. The list is memoized here under a key that changes
    when it can: the op namespaces and the number of CompositeImplicitAutograd registrations."""
    from torch._export import utils
    from torch.export import decomp_utils, exported_program

    original = utils._collect_all_valid_cia_ops
    if getattr(original, "memoized", False):
        return
    cache = {}

    def state():
        return (tuple(torch.ops._dir),
                len(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")))

    def cached():
        key = state()
        if key not in cache:
            ops = frozenset(original())
            cache.clear()
            cache[state()] = ops  # listing the ops makes the namespaces it visits: the key after that
            return ops
        return cache[key]

    cached.memoized = True
    for module in (utils, decomp_utils, exported_program):
        module._collect_all_valid_cia_ops = cached


def share_node_sources():
    """Speed only. A node's provenance (``node.meta["from_node"]``, a list of torch.fx
    ``NodeSource``) is deep-copied, chain and all, into every node a pass makes from it and
    whenever node metadata is deep-copied; the chain grows with each pass, so an XNNPACK
    lowering spent a fifth of its time in ``copy.deepcopy`` (quantized programs). A NodeSource is
    never changed once made (torch caches its ``to_dict`` on that; no code in torch, torchao or
    ExecuTorch assigns to one but its constructors), so a deep copy may be the object itself:
    lists of them are still copied, equality, hashes and ``to_dict`` are the same."""
    from torch.fx.traceback import NodeSource

    if getattr(NodeSource, "_xir_fuzz_shared", False):
        return
    NodeSource.__deepcopy__ = lambda self, memo: self
    NodeSource._xir_fuzz_shared = True


def cache_callable_annotations():
    """Speed only. ``OpOverload.py_impl`` evaluates its inner function's annotations
    (``collections.abc.Callable[_P, _T]``, a new alias object each time, uncached) on every
    call, and an export decomposition calls it about 6,000 times (once per
    CompositeImplicitAutograd op and dispatch key it overrides): 15-20% of a float program's
    time. ``typing.Callable`` is the same for annotations and ``isinstance`` (the only other use
    in ``torch._ops``), and caches its subscriptions."""
    import typing

    import torch._ops

    torch._ops.Callable = typing.Callable


def prepare(make_module, make_inputs, kind, per_channel):
    """The module to export and its inputs: eval mode; bf16: module and float inputs cast;
    static/dynamic: quantized with pt2e (xir's helper, ExecuTorch's XNNPACKQuantizer)."""
    module = make_module().eval()
    inputs = tuple(make_inputs())
    if kind == "bf16":
        module = module.to(torch.bfloat16)
        inputs = tuple(t.to(torch.bfloat16) if t.is_floating_point() else t for t in inputs)
    if kind in QUANTIZED:
        from xir_tools.examples import quantize_module

        memoize_pattern_exports()
        module = quantize_module(module, inputs, mode=kind, per_channel=per_channel)
    return module, inputs


def as_list(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def reference(module, ep, inputs, kind):
    """Eager outputs; for quantized kinds the converted pt2e model as exported (ep.module())."""
    with torch.no_grad():
        if kind in QUANTIZED:
            return [t.detach() for t in as_list(ep.module()(*inputs))]
        return [t.detach() for t in as_list(module(*inputs))]


def conditioning(make_module, make_inputs, kind, ref):
    """Per output: max |eager - float64 eager| (float kinds; 0 for quantized kinds or when the
    float64 run is impossible)."""
    if kind in QUANTIZED:
        return [0.0] * len(ref)
    try:
        module = make_module().eval()
        inputs = tuple(make_inputs())
        if kind == "bf16":
            module = module.to(torch.bfloat16)
            inputs = tuple(t.to(torch.bfloat16) if t.is_floating_point() else t for t in inputs)
        module = module.double()
        inputs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
        with torch.no_grad():
            exact = as_list(module(*inputs))
        return [(r.double() - e.double()).abs().max().item() if r.numel() else 0.0 for r, e in zip(ref, exact)]
    except Exception:
        return [0.0] * len(ref)


# ------------------------------------------------------------------------------ lowering

def lower(ep, which, via, bf16):
    """The lowering commands: xir's XnnpackPartitioner or ExecuTorch's, through
    to_edge_transform_and_lower ("etal") or to_edge(...).to_backend ("backend"; xir's
    rewrites applied with edge.transform(partitioner.transform_passes()) first)."""
    import executorch.kernels.quantized  # noqa: F401  (Q/DQ left outside delegates run on these kernels)
    from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower

    if which == "stock":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = XnnpackPartitioner(enable_bf16=bf16)
        if via == "etal":
            return to_edge_transform_and_lower(ep, partitioner=[partitioner])
        return to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_backend(partitioner)
    import lowering

    partitioner = lowering.XnnpackPartitioner(enable_bf16=bf16)
    if via == "etal":
        return lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.transform(partitioner.transform_passes()).to_backend(partitioner)


def delegation(edge) -> dict:
    """How many ops ended inside XNNPACK delegates and how many compute ops outside, in all and by op."""
    try:
        from xir_tools.programs import delegated_ops, outside_ops

        inside, outside = dict(delegated_ops(edge)), dict(outside_ops(edge))
    except Exception:
        return {}
    return {"delegated": sum(inside.values()), "outside": sum(outside.values()),
            "delegated_ops": inside, "outside_ops": outside}


@contextlib.contextmanager
def captured_stderr():
    """What native code writes on file descriptor 2 (the runtime's error log)."""
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


def runtime_reason(log, error):
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


def compare(outputs, ref, kind, lowp, cond):
    """(ok, message, max_err, ratio, scaled): ratio is the worst |err| / allowed over all elements,
    scaled the worst max|err| / max(1, max|ref|) over the outputs."""
    if len(outputs) != len(ref):
        return False, f"{len(outputs)} outputs, expected {len(ref)}", None, None, None
    worst, worst_ratio, worst_scaled, messages = 0.0, 0.0, 0.0, []
    for index, (actual, expected) in enumerate(zip(outputs, ref)):
        if tuple(actual.shape) != tuple(expected.shape):
            return False, f"output {index}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}", None, None, None
        if actual.dtype != expected.dtype:
            return False, f"output {index}: dtype {actual.dtype}, expected {expected.dtype}", None, None, None
        if not expected.numel():
            continue
        atol, rtol = tolerance(kind, expected, lowp[index] if index < len(lowp) else 0.0,
                               cond[index] if index < len(cond) else 0.0)
        a, e = actual.double(), expected.double()
        error = (a - e).abs()
        error = torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)
        allowed = atol + rtol * e.abs()
        ratio = (error / allowed).max().item()
        worst, worst_ratio = max(worst, error.max().item()), max(worst_ratio, ratio)
        worst_scaled = max(worst_scaled, error.max().item() / max(1.0, e.abs().max().item()))
        if ratio > 1.0:
            messages.append(f"output {index}: max err {error.max().item():.3g} (atol {atol:.3g}, rtol {rtol:.3g}, "
                            f"max|ref| {e.abs().max().item():.3g})")
    return not messages, "; ".join(messages), worst, worst_ratio, worst_scaled


def run_side(make_program, inputs, ref, which, kind, via, lowp, cond):
    """Lower, serialize, load, run and compare one side. ``make_program()`` gives a fresh
    ExportedProgram (each side lowers its own export)."""
    result = {"status": "ok", "error": "", "max_err": None, "ratio": None, "delegated": None, "outside": None}
    start = time.perf_counter()
    try:
        try:
            ep = make_program()
            edge = lower(ep, which, via, kind == "bf16")
            result.update(delegation(edge))
            buffer = edge.to_executorch().buffer
        except Exception as error:
            result.update(status="lower-failed", error=first_line(error))
            return result
        from executorch.runtime import Runtime

        with captured_stderr() as log:
            try:
                program = Runtime.get().load_program(buffer)
                method = program.load_method("forward")
                failure = None
            except Exception as error:
                failure = error
        if failure is not None:
            result.update(status="load-failed", error=runtime_reason(log["text"], failure))
            return result
        with captured_stderr() as log:
            try:
                outputs = method.execute(list(inputs))
                failure = None
            except Exception as error:
                failure = error
        if failure is not None:
            result.update(status="run-failed", error=runtime_reason(log["text"], failure))
            return result
        ok, message, max_err, ratio, scaled = compare(as_list(outputs), ref, kind, lowp, cond)
        result.update(max_err=max_err, ratio=ratio, scaled=scaled)
        if not ok:
            result.update(status="wrong-result", error=message)
        return result
    finally:
        result["seconds"] = round(time.perf_counter() - start, 3)


def run_case(make_module, make_inputs, kind, via, per_channel, lowp, sides=("xir", "stock"), on_phase=None,
             on_side=None):
    """Run one program: {"prepare": {...}, "xir": {...}, "stock": {...}}. ``on_phase(name)`` is
    called before each phase (prepare, xir, stock), ``on_side(name, result)`` after each side."""
    on_phase = on_phase or (lambda name: None)
    on_side = on_side or (lambda name, result: None)
    outcome = {"prepare": {"status": "ok", "error": ""}}
    start = time.perf_counter()
    on_phase("prepare")
    shared = None
    try:
        module, inputs = prepare(make_module, make_inputs, kind, per_channel)
        ep = torch.export.export(module, inputs)
    except Exception as error:
        shared = {"status": "export-failed", "error": first_line(error)}
    if shared is None:
        try:
            ref = reference(module, ep, inputs, kind)
        except Exception as error:
            shared = {"status": "export-failed", "error": "reference: " + first_line(error)}
    if shared is None and any(t.is_floating_point() and not torch.isfinite(t).all() for t in ref):
        shared = {"status": "invalid", "error": "the reference has NaN or inf"}
    outcome["prepare"]["seconds"] = round(time.perf_counter() - start, 3)
    if shared is not None:
        outcome["prepare"].update(shared)
        for side in sides:
            outcome[side] = dict(shared)
            on_side(side, outcome[side])
        return outcome
    cond = conditioning(make_module, make_inputs, kind, ref)
    outcome["prepare"]["cond"] = cond

    def make_program():
        return torch.export.export(module, inputs)

    for side in sides:
        on_phase(side)
        outcome[side] = run_side(make_program, inputs, ref, side, kind, via, lowp, cond)
        on_side(side, outcome[side])
    return outcome


def describe(result):
    """One line for one side's result."""
    text = result["status"]
    if result.get("max_err") is not None:
        text += f"  max err {result['max_err']:.3g} ({result['ratio']:.2g} of tolerance)"
    if result.get("delegated") is not None:
        text += f"  [{result['delegated']} delegated, {result['outside']} outside]"
    if result.get("error"):
        text += f"  {result['error']}"
    return text
