"""One differential case: export a program, lower it with xir's XnnpackPartitioner and with
ExecuTorch's stock one, serialize, load and run both on ExecuTorch's runtime, compare with the
eager reference, and classify each side.

Exporting, lowering, running and comparing are xir_tools/harness.py's (the harness the ``xir``
command, the benchmarks and the tests use too); this file adds what a case needs beyond them:
preparing the program for its kind, the eager reference's conditioning and the classification.
Repro files embed the harness and this file verbatim (without the import of the harness), so a
repro runs exactly the code the fuzzer ran.

Classes: ok, export-failed, lower-failed (lowering or serialization raised), load-failed (the
runtime refused the program; its stderr reason is kept), run-failed (execute raised),
wrong-result (outputs differ beyond the tolerance, or their count/shape/dtype differ);
the worker pool adds crashed and timeout; invalid: the eager reference is not finite.
"""

import time

import torch

from xir_tools.harness import (
    QUANTIZED,
    LoadError,
    RunError,
    as_list,
    compare,
    delegation,
    export,
    first_line,
    load_method,
    lower_edge,
    reference,
    run_method,
    runtime_reason,
    to_buffer,
)

FAILURE_CLASSES = ("export-failed", "lower-failed", "load-failed", "run-failed", "wrong-result", "crashed", "timeout")

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
            key = (
                type(pattern).__name__,
                fn.__code__,
                tuple(_signature(c.cell_contents) for c in (fn.__closure__ or ())),
                _signature(fn.__defaults__),
                _signature(tuple(example_inputs)),
                is_cuda,
                tuple(sorted((k, _signature(v)) for k, v in kwargs.items())),
            )
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
        return (
            tuple(torch.ops._dir),
            len(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")),
        )

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


# ------------------------------------------------------------------------------ one side


def quantizes_nan(ep, inputs) -> str | None:
    """The first quantize that reads a NaN when the (pt2e-converted) program ``ep`` runs eagerly on
    ``inputs``, or None. A NaN has no integer: eager's is whatever its float-to-int conversion
    gives (0 on x86), XNNPACK's another, so a program that quantizes one has no reference value.
    (Infinities are fine: they saturate.)"""

    class Watch(torch.fx.Interpreter):
        found = None

        def run_node(self, n):
            if (
                self.found is None
                and n.op == "call_function"
                and "quantize_per" in str(n.target)
                and "dequantize" not in str(n.target)
            ):
                x = self.env.get(n.args[0]) if isinstance(n.args[0], torch.fx.Node) else None
                if isinstance(x, torch.Tensor) and x.is_floating_point() and x.isnan().any():
                    self.found = n.name
            return super().run_node(n)

    watch = Watch(ep.module())
    with torch.no_grad():
        watch.run(*inputs)
    return watch.found


def run_side(make_program, inputs, ref, which, kind, via, lowp, cond, xir_options=None):
    """Lower, serialize, load, run and compare one side. ``make_program()`` gives a fresh
    ExportedProgram (each side lowers its own export). ``xir_options``: xir's bf16 options
    (``bf16_activations_in_fp32``, ``bf16_linears_as_f16``), for xir's side of a bf16 program."""
    result = {"status": "ok", "error": "", "max_err": None, "ratio": None, "delegated": None, "outside": None}
    start = time.perf_counter()
    try:
        try:
            ep = make_program()
            options = dict(xir_options or {}) if which == "xir" and kind == "bf16" else {}
            edge, _ = lower_edge(ep, which, via, enable_bf16=kind == "bf16", **options)
            result.update(delegation(edge))
            buffer = to_buffer(edge)
        except Exception as error:
            result.update(status="lower-failed", error=first_line(error))
            return result
        try:
            _program, method = load_method(buffer)  # (the program stays alive with its method)
        except LoadError as error:
            result.update(status="load-failed", error=runtime_reason(error.log, error.error))
            return result
        try:
            outputs = run_method(method, inputs)
        except RunError as error:
            result.update(status="run-failed", error=runtime_reason(error.log, error.error))
            return result
        ok, message, max_err, ratio, scaled = compare(outputs, ref, kind, lowp, cond)
        result.update(max_err=max_err, ratio=ratio, scaled=scaled)
        if not ok:
            result.update(status="wrong-result", error=message)
        return result
    finally:
        result["seconds"] = round(time.perf_counter() - start, 3)


def run_case(
    make_module,
    make_inputs,
    kind,
    via,
    per_channel,
    lowp,
    sides=("xir", "stock"),
    on_phase=None,
    on_side=None,
    xir_options=None,
):
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
        ep = export(module, inputs)
    except Exception as error:
        shared = {"status": "export-failed", "error": first_line(error)}
    if shared is None:
        try:
            ref = reference(ep, inputs, None if kind in QUANTIZED else module)
        except Exception as error:
            shared = {"status": "export-failed", "error": "reference: " + first_line(error)}
    if shared is None and any(t.is_floating_point() and not torch.isfinite(t).all() for t in ref):
        shared = {"status": "invalid", "error": "the reference has NaN or inf"}
    if shared is None and kind in QUANTIZED:
        nan = quantizes_nan(ep, inputs)
        if nan is not None:
            shared = {"status": "invalid", "error": f"the reference quantizes a NaN ({nan}), which has no integer"}
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
        return export(module, inputs)

    for side in sides:
        on_phase(side)
        outcome[side] = run_side(make_program, inputs, ref, side, kind, via, lowp, cond, xir_options)
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
