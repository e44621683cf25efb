"""Decoder LMs exported as ExecuTorch's LLM flow exports them, lowered with xir and with stock.

    .venv/bin/python -m bench.llm [--quick] [--only NAME ...] [--dtypes float32,bfloat16,bf16-f16,8da4w,8da8w] [--steps N]

Each decoder (Llama, Qwen2, Gemma, Phi-3, built from transformers configs with random weights) is
exported twice with transformers' TorchExportableModuleForDecoderOnlyLM and a static KV cache: a
one-token decode step and a prefill of a few tokens. Both partitioners lower the same exported
program; the decode programs run interleaved at growing cache positions (each keeps its own KV
cache), and every output is compared with the exported program run eagerly at the same
positions. The encoders of the zoo (BERT, ViT, SigLIP) get the same columns for one forward.
The quantized "dtypes" (8da4w, 8da8w, 8da8w-g32, 8w) are the fp32 decoder quantized before export as
ExecuTorch's LLM export quantizes it (:func:`quantize_decoder`). "bf16-f16" is the bf16 model
lowered by xir alone with ``bf16_linears_as_f16=True`` (its linears as XNNPACK's fp16 GEMM).
A failure in any phase (export, lower, load, run) is printed in its cell; the run goes on.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch

warnings.filterwarnings("ignore")

DECODERS = ("llama", "qwen2", "gemma", "phi3")
ENCODERS = ("bert", "vit", "siglip")
QUICK_MODELS = ("llama", "qwen2", "bert")  # --quick without --only
DTYPES = {
    "float32": ("fp32", torch.float32),
    "bfloat16": ("bf16", torch.bfloat16),
    "8da4w": ("8da4w", torch.float32),
    "8da8w": ("8da8w", torch.float32),
    "8da8w-g32": ("8da8w-g32", torch.float32),
    "8w": ("8w", torch.float32),
    "bf16-f16": ("bf16-f16", torch.bfloat16),
}
# dtypes lowered by xir alone, with these XnnpackPartitioner options (stock has no such option):
# "bf16-f16" is the bf16 model with bf16_linears_as_f16 (its linears run as XNNPACK's fp16 GEMM)
XIR_ONLY = {"bf16-f16": {"bf16_linears_as_f16": True}}
# quantized schemes: (weight dtype, group size; 0 = per output channel). ExecuTorch's LLM export
# (extension/llm/export/quantize.py) defaults to groups of 32 for 8da4w and per channel for 8da8w;
# XNNPACK groups int4 weights only, so int8 weights in groups of 32 (8da8w-g32) lower with neither
# partitioner (stock: "Only 4b group quantization is supported"; xir: NotLowerable).
# "8w" is int8 weight-only quantization per output channel (IntxWeightOnlyConfig, ExecuTorch's "8w"):
# fp32 activations, run by XNNPACK as an fp32 x qc8w fully connected.
QUANT_SCHEMES = {"8da4w": ("int4", 32), "8da8w": ("int8", 0), "8da8w-g32": ("int8", 32), "8w": ("int8", 0)}
WEIGHT_ONLY_SCHEMES = ("8w",)


# ------------------------------------------------------------------ models and export


@dataclass
class Sizes:
    hidden: int
    intermediate: int
    heads: int
    vocab: int
    cache: int  # max cache length
    layers: int
    prefill: int  # prefill tokens
    steps: int  # decode steps

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


FULL = Sizes(hidden=256, intermediate=512, heads=8, vocab=2048, cache=128, layers=2, prefill=32, steps=32)
QUICK = Sizes(hidden=64, intermediate=128, heads=4, vocab=256, cache=32, layers=1, prefill=8, steps=8)
# --large: a layer of a 1B-class model (hidden 2048, intermediate 5632: 67 MB of fp32 weights per layer), two of
# them: a decode step then reads its weights from memory, not from the caches
LARGE = Sizes(hidden=2048, intermediate=5632, heads=16, vocab=2048, cache=128, layers=2, prefill=32, steps=32)


def decoder_config(name: str, s: Sizes, **overrides):
    """Llama is multi-head (as many K/V heads as query heads), Qwen2 grouped-query, Gemma
    multi-query (one K/V head, as Gemma-2B), Phi-3 multi-head with fused QKV projections
    (``overrides``: more config fields, e.g. Phi-3's ``partial_rotary_factor``)."""
    import transformers

    common = dict(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        max_position_embeddings=2 * s.cache,
        **overrides,
    )
    if name == "llama":
        return transformers.LlamaConfig(num_key_value_heads=s.heads, head_dim=s.head_dim, **common)
    if name == "qwen2":
        return transformers.Qwen2Config(num_key_value_heads=max(1, s.heads // 4), **common)
    if name == "gemma":
        return transformers.GemmaConfig(num_key_value_heads=1, head_dim=s.head_dim, **common)
    if name == "phi3":
        return transformers.Phi3Config(
            num_key_value_heads=s.heads, pad_token_id=0, bos_token_id=1, eos_token_id=2, **common
        )
    raise ValueError(f"unknown decoder {name!r}; expected one of {', '.join(DECODERS)}")


def build_decoder(name: str, s: Sizes, dtype: torch.dtype, **overrides):
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(decoder_config(name, s, **overrides)).eval().to(dtype)
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": s.cache}
    )
    return model


def quantize_decoder(model, scheme: str):
    """Quantize ``model``'s linears in place as ExecuTorch's LLM export does for ``scheme`` (8da4w,
    8da8w, 8w; extension/llm/export/quantize.py): torchao's ``quantize_`` with
    ``Int8DynamicActivationIntxWeightConfig`` (int8 activations quantized per token at run time; int4
    or int8 weights, symmetric, per group of input channels or per output channel, scales chosen by
    HQQ, ``hqq_scale_only``), or for 8w ``IntxWeightOnlyConfig`` (int8 weights per output channel,
    fp32 activations), on every ``nn.Linear`` whose input channels the group size divides, before
    ``torch.export``."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    weight_dtype, group = QUANT_SCHEMES[scheme]
    granularity = PerGroup(group) if group else PerAxis(0)
    if scheme in WEIGHT_ONLY_SCHEMES:
        config = IntxWeightOnlyConfig(
            weight_dtype=getattr(torch, weight_dtype),
            granularity=granularity,
            intx_choose_qparams_algorithm="hqq_scale_only",
        )
    else:
        config = Int8DynamicActivationIntxWeightConfig(
            weight_dtype=getattr(torch, weight_dtype),
            weight_granularity=granularity,
            intx_choose_qparams_algorithm="hqq_scale_only",
        )
    quantize_(
        model,
        config,
        filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and (group == 0 or m.weight.shape[1] % group == 0),
    )
    return model


def export_decoder(model, cache: int, tokens: int):
    """Exported with a fresh wrapper (and so a fresh static cache) for ``tokens`` input ids at
    cache positions 0..tokens-1."""
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=cache)
    ids = torch.zeros(1, tokens, dtype=torch.long)
    return wrapper.export(input_ids=ids, cache_position=torch.arange(tokens))


def eager_module(ep):
    """The exported program as a module with its own buffers: ``ep.module()`` shares them with
    ``ep``, so running it would change the KV cache the lowered programs start from."""
    return copy.deepcopy(ep.module())


# ------------------------------------------------------------------ one partitioner's program


@dataclass
class Side:
    which: str  # "xir" or "stock"
    lower_s: float | None = None
    delegates: int | None = None
    outside: Counter = field(default_factory=Counter)
    program: object = None
    method: object = None
    error: str | None = None  # the first failure, "<phase> failed: <reason>"
    times: list = field(default_factory=list)
    max_err: float = 0.0

    @property
    def runs(self) -> bool:
        return self.method is not None and self.error is None

    @property
    def ms(self) -> float | None:
        return statistics.median(self.times) * 1e3 if self.times and self.error is None else None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:120] if text else ''}"


def _reason(log: str, fallback: str) -> str:
    """The runtime's most specific line: XNNPACK's own message before the generic init failure."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    specific = [line for line in lines if "XNN" in line and "Failed" in line]
    return (specific or lines or [fallback])[0 if specific else -1]


def lower_side(
    ep,
    which: str,
    enable_bf16: bool = False,
    side: Side | None = None,
    partitioner=None,
    compile_config=None,
    reason=_reason,
    **options,
) -> Side:
    """Lower ``ep`` with one partitioner (``partitioner``, else stock's or xir's by ``which``,
    timing the whole lowering call), serialize and load it into ``side`` (a new one by default).
    Failures are recorded in ``Side.error`` (a load failure's log told by ``reason``), never raised."""
    from xir_tools.harness import LoadError, delegate_count, load_method, lower_edge, outside_ops, to_buffer

    side = side if side is not None else Side(which)
    try:
        start = time.perf_counter()
        edge, _ = lower_edge(
            ep,
            "stock" if which.startswith("stock") else "xir",
            partitioner=partitioner,
            compile_config=compile_config,
            enable_bf16=enable_bf16,
            **options,
        )
        side.lower_s = time.perf_counter() - start
        side.delegates, side.outside = delegate_count(edge), outside_ops(edge)
    except Exception as e:
        side.error = f"lower failed: {_first_line(e)}"
        return side
    try:
        buffer = to_buffer(edge)
    except Exception as e:
        side.error = f"to_executorch failed: {_first_line(e)}"
        return side
    try:
        side.program, side.method = load_method(buffer)  # the program stays alive with its method
    except LoadError as e:
        side.error = f"load failed: {reason(e.reason, str(e))}"
    return side


def lower_both(ep, enable_bf16: bool, label: str, xir_only: dict | None = None) -> list[Side]:
    """xir's and stock's sides; with ``xir_only`` (XnnpackPartitioner options), xir's alone."""
    sides = []
    for which in ("xir",) if xir_only is not None else ("xir", "stock"):
        print(f"[{label}] lowering with {which} ...", file=sys.stderr, flush=True)
        sides.append(lower_side(ep, which, enable_bf16, **(xir_only or {})))
    return sides


def first_run(side: Side, inputs) -> None:
    """An untimed run with the runtime's stderr captured, so a run failure carries its reason."""
    from xir_tools.harness import RunError, run_method

    try:
        run_method(side.method, inputs)
    except RunError as error:
        side.error = f"run failed: {_reason(error.log, _first_line(error.error))}"


def timed_run(side: Side, inputs, reference) -> None:
    """One timed run; its error against ``reference`` is folded into ``side.max_err``."""
    from xir_tools.harness import max_error

    try:
        start = time.perf_counter()
        outputs = side.method.execute(list(inputs))
        side.times.append(time.perf_counter() - start)
    except Exception as e:
        side.error = f"run failed: {_first_line(e)}"
        return
    try:
        side.max_err = max(side.max_err, max_error(list(outputs), reference))
    except Exception as e:
        side.error = f"compare failed: {_first_line(e)}"


def run_interleaved(sides: list[Side], inputs, reference) -> None:
    for side in sides:
        if side.runs:
            timed_run(side, inputs, reference)


# ------------------------------------------------------------------ decoder phases


@dataclass
class Phase:
    """One exported program (decode or prefill) lowered both ways; ``error`` is a failure of the
    export or of the eager reference, which leaves nothing to time or compare."""

    sides: list[Side] = field(default_factory=list)
    error: str | None = None

    def side(self, which: str) -> Side | None:
        return next((s for s in self.sides if s.which == which), None)


def eager_outputs(ep, inputs: list[tuple]) -> list[list[torch.Tensor]]:
    """The exported program run eagerly on each of ``inputs`` in turn (one KV cache throughout)."""
    module = eager_module(ep)
    with torch.no_grad():
        return [[module(input_ids=ids, cache_position=position)] for ids, position in inputs]


def lower_and_run(ep, enable_bf16: bool, label: str, runs: list[tuple], xir_only: dict | None = None) -> Phase:
    """Lower ``ep`` both ways and run both programs interleaved on ``runs`` in order, comparing
    each output with the eager run on the same inputs (computed first, from its own buffers)."""
    phase = Phase(lower_both(ep, enable_bf16, label, xir_only))
    try:
        references = eager_outputs(ep, runs)
    except Exception as e:
        phase.error = f"eager failed: {_first_line(e)}"
        return phase
    for side in phase.sides:
        if side.runs:
            first_run(side, runs[0])  # untimed; every later run rewrites the cache positions it reads
    print(f"[{label}] {len(runs)} timed runs ...", file=sys.stderr, flush=True)
    for inputs, reference in zip(runs, references):
        run_interleaved(phase.sides, inputs, reference)
    return phase


def measure_decode(model, s: Sizes, steps: int, enable_bf16: bool, label: str, xir_only: dict | None = None) -> Phase:
    """One-token steps at cache positions 0..steps-1, the same token ids for both programs."""
    try:
        ep = export_decoder(model, s.cache, 1)
    except Exception as e:
        return Phase(error=f"export failed: {_first_line(e)}")
    tokens = torch.randint(0, s.vocab, (steps,), generator=torch.Generator().manual_seed(0))
    runs = [(tokens[p].view(1, 1), torch.tensor([p])) for p in range(steps)]
    return lower_and_run(ep, enable_bf16, label + " decode", runs, xir_only)


def measure_prefill(
    model, s: Sizes, repeats: int, enable_bf16: bool, label: str, xir_only: dict | None = None
) -> Phase:
    """``s.prefill`` tokens at positions 0..prefill-1, ``repeats`` times (each run rewrites the
    same cache positions, so every run's logits match the eager run's)."""
    try:
        ep = export_decoder(model, s.cache, s.prefill)
    except Exception as e:
        return Phase(error=f"export failed: {_first_line(e)}")
    ids = torch.randint(0, s.vocab, (1, s.prefill), generator=torch.Generator().manual_seed(1))
    return lower_and_run(ep, enable_bf16, label + " prefill", [(ids, torch.arange(s.prefill))] * repeats, xir_only)


@dataclass
class Result:
    """One model at one dtype: the decode and prefill programs (decoders) or the one forward
    program (encoders, in ``decode``)."""

    model: str
    dtype: str
    layers: int | None
    decode: Phase
    prefill: Phase | None = None


def run_decoder(name: str, s: Sizes, dtype_name: str, steps: int, runs: int) -> Result:
    label, dtype = DTYPES[dtype_name]
    tag = f"{name} {label}"
    print(f"[{tag}] building ...", file=sys.stderr, flush=True)
    try:
        model = build_decoder(name, s, dtype)
        if dtype_name in QUANT_SCHEMES:
            quantize_decoder(model, dtype_name)
    except Exception as e:
        failed = Phase(error=f"build failed: {_first_line(e)}")
        return Result(name, label, s.layers, failed, failed)
    bf16 = dtype is torch.bfloat16
    decode = measure_decode(model, s, steps, bf16, tag, XIR_ONLY.get(dtype_name))
    release(decode, keep="xir")  # (xir's decode program runs again in cross_dtype_decode)
    prefill = measure_prefill(model, s, runs, bf16, tag, XIR_ONLY.get(dtype_name))
    release(prefill)
    return Result(name, label, s.layers, decode, prefill)


def release(phase: Phase, keep: str | None = None) -> None:
    """Drop the loaded programs of ``phase`` that run no more (all but ``keep``'s side): at
    ``--large`` sizes every program held to the end exhausted 24 GB."""
    import gc

    for side in phase.sides:
        if side.which != keep:
            side.program = side.method = None
    gc.collect()


def run_encoder(name: str, quick: bool, dtype_name: str, runs: int) -> Result:
    """A zoo encoder (bench/zoo.py's builder), one forward timed interleaved."""
    import bench.zoo
    from xir_tools.harness import reference as eager_reference

    label, dtype = DTYPES[dtype_name]
    tag = f"{name} {label}"
    print(f"[{tag}] exporting ...", file=sys.stderr, flush=True)
    try:
        model = getattr(bench.zoo, name)(quick)
        torch.manual_seed(0)
        module = model.make().eval().to(dtype)
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in model.inputs())
        ep = torch.export.export(module, inputs)
        with torch.no_grad():
            reference = eager_reference(ep, inputs)
    except Exception as e:
        return Result(name, label, None, Phase(error=f"export failed: {_first_line(e)}"))
    phase = Phase(lower_both(ep, dtype is torch.bfloat16, tag, XIR_ONLY.get(dtype_name)))
    for side in phase.sides:
        if side.runs:
            first_run(side, inputs)
    for _ in range(runs):
        run_interleaved(phase.sides, inputs, reference)
    return Result(name, label, None, phase)


# ------------------------------------------------------------------ report


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _ms_cell(phase: Phase | None, which: str) -> str:
    if phase is None:
        return ""
    side = phase.side(which)
    error = (side.error if side else None) or phase.error
    return error.split(":")[0] if error else _num(side.ms if side else None, ".3f")


def _ratio(phase: Phase | None) -> str:
    xir, stock = (phase.side("xir"), phase.side("stock")) if phase else (None, None)
    return f"{xir.ms / stock.ms:.2f}" if xir and stock and xir.ms and stock.ms else "-"


def _err_cell(phase: Phase | None, which: str) -> str:
    side = phase.side(which) if phase else None
    return f"{side.max_err:.2g}" if side and side.ms is not None else "-"


def _lower_cell(phase: Phase | None, which: str) -> str:
    side = phase.side(which) if phase else None
    return _num(side.lower_s if side else None, ".1f")


def _partitioners(result: Result) -> tuple[str, ...]:
    """The rows of a result: xir's and stock's, or xir's alone for a dtype only xir lowers."""
    xir_only_labels = {DTYPES[name][0] for name in XIR_ONLY}  # (a Result carries the dtype's label)
    return ("xir",) if result.dtype in xir_only_labels else ("xir", "stock")


def _failures(result: Result, which: str) -> str:
    failures = []
    for title, phase in (("decode", result.decode), ("prefill", result.prefill)):
        side = phase.side(which) if phase else None
        for error in (side.error if side else None, phase.error if phase else None):
            if error:
                failures.append(error if result.prefill is None else f"{title}: {error}")
    return "; ".join(dict.fromkeys(failures))


def delegation_cells(side: Side | None, layers: int | None) -> tuple[str, str]:
    if side is None or side.delegates is None:
        return "-", "-"
    per_layer = f" ({side.delegates / layers:.1f}/layer)" if layers else ""
    return f"{side.delegates}{per_layer}", str(sum(side.outside.values()))


def decoder_row(result: Result, which: str) -> tuple:
    delegates, outside = delegation_cells(result.decode.side(which), result.layers)
    slash = lambda f: f"{f(result.decode, which)}/{f(result.prefill, which)}"  # noqa: E731
    return (
        result.model,
        result.dtype,
        which,
        delegates,
        outside,
        _ms_cell(result.decode, which),
        _ratio(result.decode) if which == "xir" else "",
        _ms_cell(result.prefill, which),
        _ratio(result.prefill) if which == "xir" else "",
        slash(_err_cell),
        slash(_lower_cell),
        _failures(result, which),
    )


def encoder_row(result: Result, which: str) -> tuple:
    delegates, outside = delegation_cells(result.decode.side(which), None)
    return (
        result.model,
        result.dtype,
        which,
        delegates,
        outside,
        _ms_cell(result.decode, which),
        _ratio(result.decode) if which == "xir" else "",
        _err_cell(result.decode, which),
        _lower_cell(result.decode, which),
        _failures(result, which),
    )


def print_table(header: tuple, rows: list[tuple]) -> None:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


DECODER_HEADER = (
    "model",
    "dtype",
    "partitioner",
    "delegates",
    "outside",
    "decode ms",
    "xir/stock",
    "prefill ms",
    "xir/stock",
    "max err dec/pre",
    "lower s dec/pre",
    "failure",
)
ENCODER_HEADER = (
    "model",
    "dtype",
    "partitioner",
    "delegates",
    "outside",
    "forward ms",
    "xir/stock",
    "max err",
    "lower s",
    "failure",
)


def print_outside(results: list[Result], program: str) -> None:
    print(f"\ncompute ops left outside delegates ({program} program), by op:")
    for result in results:
        if not result.decode.sides:
            continue
        print(f"  {result.model} {result.dtype}")
        for side in result.decode.sides:
            if side.delegates is None:
                print(f"    {side.which:<5} -")
                continue
            by_count = sorted(side.outside.items(), key=lambda kv: (-kv[1], kv[0]))
            ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in by_count)
            print(f"    {side.which:<5} ({sum(side.outside.values())}) {ops or 'none'}")


# ------------------------------------------------------------------ targets


def _decode(results: list[Result], model: str, dtype: str, which: str) -> Side | None:
    for result in results:
        if result.model == model and result.dtype == dtype:
            return result.decode.side(which)
    return None


def _lower_total(result: Result, which: str) -> float | None:
    sides = [p.side(which) for p in (result.decode, result.prefill) if p is not None]
    times = [side.lower_s if side else None for side in sides]
    return None if not times or None in times else sum(times)


def _verdict(value: float | None, limit: float | None, text: str) -> str:
    if value is None or limit is None:
        return "n/a"
    return f"{text} {'yes' if value <= limit else 'NO'}"


def _speed(results: list[Result], model: str, a: tuple[str, str], b: tuple[str, str], limit: float) -> str:
    """The decode time of ``a`` (dtype, partitioner) over ``b``'s, against ``limit``."""
    sides = [_decode(results, model, dtype, which) for dtype, which in (a, b)]
    times = [side.ms if side is not None else None for side in sides]
    ratio = times[0] / times[1] if times[0] and times[1] else None
    return _verdict(ratio, limit, f"{_num(ratio, '.2f')}x")


def _cross_speed(cross: Cross | None, dtype: str, limit: float) -> str:
    """``dtype``'s xir decode time over fp32's from the interleaved loop, against ``limit``."""
    ratio = cross.ratio(dtype) if cross is not None else None
    return _verdict(ratio, limit, f"{_num(ratio, '.2f')}x")


def target_cells(results: list[Result], model: str, cross: Cross | None = None) -> list[tuple[str, str]]:
    """(target, verdict) for one decoder model; the numbers are xir's against the limit (the
    bf16/fp32 ratios from the interleaved loop, ``cross``)."""
    cells = [
        ("fp32 decode <= 0.8x stock fp32", _speed(results, model, ("fp32", "xir"), ("fp32", "stock"), 0.8)),
        ("bf16 decode <= 1.2x xir fp32", _cross_speed(cross, "bf16", 1.2)),
        ("bf16 decode <= 0.8x stock bf16", _speed(results, model, ("bf16", "xir"), ("bf16", "stock"), 0.8)),
        ("bf16-f16 decode <= 0.7x xir fp32", _cross_speed(cross, "bf16-f16", 0.7)),
        ("bf16-f16 decode <= 0.8x stock bf16", _speed(results, model, ("bf16-f16", "xir"), ("bf16", "stock"), 0.8)),
    ]
    mine = [r for r in results if r.model == model]
    for scheme in dict.fromkeys(r.dtype for r in results if r.dtype in QUANT_SCHEMES):  # at least as fast as stock
        cells.append(
            (f"{scheme} decode <= 1.0x stock {scheme}", _speed(results, model, (scheme, "xir"), (scheme, "stock"), 1.0))
        )
    for result in mine:
        xir, stock = _lower_total(result, "xir"), _lower_total(result, "stock")
        text = f"{_num(xir, '.1f')} vs {_num(stock, '.1f')}"
        cells.append((f"lowering s <= stock ({result.dtype})", _verdict(xir, stock, text)))
    for result in mine:
        side = result.decode.side("xir")
        count, limit = (side.delegates if side else None), 2 * result.layers + 1
        text = f"{_num(count, 'd')} <= {limit}"
        cells.append((f"delegates <= 2/layer + 1 ({result.dtype})", _verdict(count, limit, text)))
    return cells


# the dtypes of one model whose xir decode programs are timed against each other, interleaved
CROSS_DTYPES = ("fp32", "bf16", "bf16-f16")


@dataclass
class Cross:
    """One model's xir decode programs in CROSS_DTYPES timed interleaved (same token, position)."""

    model: str
    ms: dict  # dtype label -> median ms

    def ratio(self, dtype: str) -> float | None:
        """``dtype``'s time over fp32's, when both ran."""
        return self.ms[dtype] / self.ms["fp32"] if dtype in self.ms and "fp32" in self.ms else None


def cross_dtype_decode(results: list[Result], steps: int, position: int) -> list[Cross]:
    """For each decoder, the xir decode programs of fp32, bf16 and bf16-f16 (those that ran) run
    interleaved on the same one-token step at ``position``, ``steps`` rounds: the bf16/fp32 ratios
    come from one loop, not from runs minutes apart."""
    crosses = []
    for model in dict.fromkeys(r.model for r in results if r.prefill is not None):
        sides = {r.dtype: r.decode.side("xir") for r in results if r.model == model and r.dtype in CROSS_DTYPES}
        sides = {dtype: side for dtype, side in sides.items() if side is not None and side.runs}
        if len(sides) < 2:
            continue
        inputs = [torch.tensor([[1]]), torch.tensor([position])]
        times = {dtype: [] for dtype in sides}
        for side in sides.values():
            for _ in range(3):
                side.method.execute(inputs)
        for _ in range(steps):
            for dtype, side in sides.items():
                start = time.perf_counter()
                side.method.execute(inputs)
                times[dtype].append(time.perf_counter() - start)
        crosses.append(Cross(model, {dtype: statistics.median(t) * 1e3 for dtype, t in times.items()}))
    return crosses


def print_cross(crosses: list[Cross], steps: int, position: int) -> None:
    if not crosses:
        return
    print(f"\nxir's decode programs by dtype, run interleaved (median ms of {steps} steps at position {position}):")
    header = ("model", *CROSS_DTYPES, "bf16/fp32", "bf16-f16/fp32")
    rows = []
    for cross in crosses:
        ms = [cross.ms.get(dtype) for dtype in CROSS_DTYPES]
        rows.append(
            (
                cross.model,
                *(_num(v, ".3f") for v in ms),
                _num(cross.ratio("bf16"), ".2f"),
                _num(cross.ratio("bf16-f16"), ".2f"),
            )
        )
    print_table(header, rows)


def print_targets(results: list[Result], crosses: list[Cross] = ()) -> None:
    models = list(dict.fromkeys(r.model for r in results))
    if not models:
        return
    columns = {
        model: dict(target_cells(results, model, next((c for c in crosses if c.model == model), None)))
        for model in models
    }
    targets = list(dict.fromkeys(t for model in models for t in columns[model]))
    print("\ntargets (xir; decode programs; lowering = decode + prefill):")
    rows = [(target, *(columns[m].get(target, "n/a") for m in models)) for target in targets]
    rows = [row for row in rows if any(v != "n/a" for v in row[1:])]  # (targets of dtypes not run)
    print_table(("target", *models), rows)
    verdicts = [v for row in rows for v in row[1:] if v != "n/a"]
    print(f"met: {sum(v.endswith('yes') for v in verdicts)} of {len(verdicts)} measured")


# ------------------------------------------------------------------ main


def warm_up() -> None:
    """Lower a tiny decoder both ways, untimed: the first lowering in a process pays for lazy
    imports and first-call set-up, which would otherwise be charged to whichever side goes first."""
    print("[warm-up] lowering a tiny decoder both ways ...", file=sys.stderr, flush=True)
    tiny = Sizes(hidden=32, intermediate=64, heads=2, vocab=64, cache=8, layers=1, prefill=2, steps=1)
    try:
        ep = export_decoder(build_decoder("llama", tiny, torch.float32), tiny.cache, 1)
        for which in ("xir", "stock"):
            lower_side(ep, which, enable_bf16=False)
    except Exception as e:
        print(f"[warm-up] failed: {_first_line(e)}", file=sys.stderr)


def _quiet():
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    for name in ("executorch", "torch", "xir", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.llm", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"tiny 1-layer decoders, few steps, the zoo's quick encoders; only {' '.join(QUICK_MODELS)} unless --only",
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help="decoders with a 1B-class model's layers (hidden 2048, intermediate 5632; two layers)",
    )
    parser.add_argument("--only", nargs="*", help=f"models to run ({' '.join(DECODERS + ENCODERS)})")
    parser.add_argument(
        "--dtypes",
        default="float32,bfloat16,bf16-f16",
        help="comma-separated: float32,bfloat16, bf16-f16 (the bf16 model, xir with bf16_linears_as_f16) "
        "and the quantized decoders 8da4w (int4 weights in groups "
        "of 32), 8da8w (int8 weights per channel), 8da8w-g32 (int8 in groups of 32; XNNPACK cannot), "
        "8w (int8 weight-only per channel, fp32 activations)",
    )
    parser.add_argument("--steps", type=int, default=None, help="decode steps (default 32, quick 8)")
    parser.add_argument(
        "--runs", type=int, default=None, help="timed prefill/encoder runs per program (default 10, quick 3)"
    )
    args = parser.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in args.dtypes if d not in DTYPES] + [m for m in args.only or () if m not in DECODERS + ENCODERS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    if args.quick and args.large:
        parser.error("--quick and --large exclude each other")
    sizes = QUICK if args.quick else LARGE if args.large else FULL
    args.steps = args.steps or sizes.steps
    if args.steps > sizes.cache:
        parser.error(f"--steps must be at most the cache length, {sizes.cache}")
    args.runs = args.runs or (3 if args.quick else 10)
    return args, sizes


def main(argv=None) -> int:
    args, sizes = parse_args(argv)
    _quiet()
    torch.set_num_threads(1)
    only = args.only or (QUICK_MODELS if args.quick else DECODERS + ENCODERS)
    wanted = lambda name: name in only  # noqa: E731
    start = time.perf_counter()
    warm_up()
    decoders = [run_decoder(m, sizes, d, args.steps, args.runs) for m in DECODERS if wanted(m) for d in args.dtypes]
    encoders = [
        run_encoder(m, args.quick, d, args.runs)
        for m in ENCODERS
        if wanted(m)
        for d in args.dtypes
        if d not in QUANT_SCHEMES
    ]  # (the quantized schemes are the decoders' only)
    if decoders:
        print(
            f"decoders: {sizes.layers} layers, hidden {sizes.hidden}, {sizes.heads} heads of {sizes.head_dim}, "
            f"vocab {sizes.vocab}, cache {sizes.cache}; decode = median of {args.steps} one-token steps at positions "
            f"0..{args.steps - 1}, prefill = median of {args.runs} runs of {sizes.prefill} tokens; ms per run, "
            f"programs run interleaved; max err against eager over all runs"
        )
        print_table(DECODER_HEADER, [decoder_row(r, w) for r in decoders for w in _partitioners(r)])
        print_outside(decoders, "decode")
        crosses = cross_dtype_decode(decoders, args.steps, args.steps - 1)
        print_cross(crosses, args.steps, args.steps - 1)
        print_targets(decoders, crosses)
    if encoders:
        print(f"\nencoders (bench/zoo.py{' quick' if args.quick else ''} sizes): forward = median of {args.runs} runs")
        print_table(ENCODER_HEADER, [encoder_row(r, w) for r in encoders for w in _partitioners(r)])
        print_outside(encoders, "forward")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
