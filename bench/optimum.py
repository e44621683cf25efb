"""optimum-executorch's export with its ``xnnpack`` recipe and with xir's ``xnnpack-xir``, side by side.

    python -m bench.optimum            # every task, model and option
    python -m bench.optimum --quick    # one case per task
    python -m bench.optimum --only llama-sdpa-kv-8da4w t5

Needs optimum-executorch (``pip install 'xir[optimum]'``, or the environment ``make test`` makes in
.venv-optimum). Models are tiny, built from configs with random weights (bench.optimum_models). For
each case and recipe: optimum's own ``main_export`` writes the .pte; optimum's runtime class
(ExecuTorchModelFor...) loads it and runs it; the logits are compared with the eager model's (causal
LMs: a prefill and several decode steps, teacher-forced); latency is the median of the model's step
(a decode step, a forward, an encoder run plus a decoder step), stock and xir run in turn.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import optimum_models

RECIPES = ("xnnpack", "xnnpack-xir")
PROMPT = [1, 5, 9, 17, 33, 65, 129, 200]  # prefill tokens (token ids of the tiny vocabularies)
DECODE = [7, 70, 170, 250]  # teacher-forced decode tokens


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # a bench.optimum_models name
    options: dict = field(default_factory=dict)  # optimum's export keyword arguments (the CLI's options)
    quick: bool = False

    @property
    def task(self) -> str:
        return optimum_models.MODELS[self.model][0]


SDPA_KV = {"use_custom_sdpa": True, "use_custom_kv_cache": True}
CASES = (
    Case("llama", "llama", {}),
    Case("llama-sdpa-kv", "llama", SDPA_KV),
    Case("llama-sdpa-kv-8da4w", "llama", {**SDPA_KV, "qlinear": "8da4w"}, quick=True),
    Case("llama-sdpa-kv-8da8w", "llama", {**SDPA_KV, "qlinear": "8da8w"}),
    Case("llama-sdpa-kv-8da4w-qemb8w", "llama", {**SDPA_KV, "qlinear": "8da4w", "qembedding": "8w"}),
    Case("llama-bf16", "llama", {"dtype": "bfloat16"}),
    Case("llama-sdpa-kv-bf16", "llama", {**SDPA_KV, "dtype": "bfloat16"}, quick=True),
    Case("bert", "bert", {}, quick=True),
    Case("vit", "vit", {}, quick=True),
    Case("t5", "t5", {}, quick=True),
    Case("whisper", "whisper", {}, quick=True),
)
# causal LMs: optimum's static cache length (its default, 2048, only makes the tiny models' caches big)
MAX_SEQ_LEN = 64


@dataclass
class Result:
    case: str
    recipe: str
    export_ok: bool = False
    error: str = ""  # the first line of the failure, where one happened
    delegates: dict = field(default_factory=dict)  # method -> number of XNNPACK delegates
    outside: dict = field(default_factory=dict)  # method -> Counter of the ops outside delegates
    loads: bool = False
    max_error: float = math.nan
    lower_seconds: float = math.nan  # the recipe: torch.export of the methods and their lowering
    latency_ms: float = math.nan
    step: object = field(default=None, repr=False)  # one step of the loaded program (for interleaved timing)


# ------------------------------------------------------------------------------------ the recipes
@contextlib.contextmanager
def recorded_recipes():
    """While active, every optimum recipe call is timed and its ExecuTorch programs kept:
    yields a list of (recipe name, seconds, {pte name: ExecutorchProgramManager})."""
    from optimum.exporters.executorch import recipe_registry as registry

    import xir_tools.optimum  # noqa: F401  (registers xnnpack-xir)

    registry.discover_recipes()
    calls = []
    originals = dict(registry.recipe_registry)

    def timed(name, recipe):
        def run(model, **kwargs):
            start = time.perf_counter()
            programs = recipe(model, **kwargs)
            calls.append((name, time.perf_counter() - start, programs))
            return programs

        return run

    for name, recipe in originals.items():
        registry.recipe_registry[name] = timed(name, recipe)
    try:
        yield calls
    finally:
        registry.recipe_registry.update(originals)


def delegation(program_manager) -> tuple[dict, dict]:
    """(method -> XNNPACK delegates, method -> Counter of the ops left outside) of a lowered program."""
    delegates, outside = {}, {}
    for method in program_manager.methods:
        graph = program_manager.exported_program(method).graph_module.graph
        count, ops = 0, Counter()
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", str(node.target))
            if "executorch_call_delegate" in name:
                count += 1
            elif name != "getitem" and _op_name(node.target) not in MEMORY_OPS:
                ops[_op_name(node.target)] += 1
        delegates[method], outside[method] = count, ops
    return delegates, outside


# memory planning's nodes in the ExecuTorch program (buffers and views of them), not ops
MEMORY_OPS = ("alloc", "view")


def _op_name(target) -> str:
    name = str(getattr(target, "_name", None) or getattr(target, "__name__", target))
    for prefix in ("aten::", "aten."):
        name = name.removeprefix(prefix)
    return name.removesuffix(".default")


# ---------------------------------------------------------------------------------- eager models
def eager_model(case: Case, folder: Path):
    """The eager model optimum exports for ``case``: its dtype, its quantization."""
    import transformers

    task = case.task
    dtype = getattr(torch, case.options.get("dtype", "float32"))
    auto = {
        "text-generation": transformers.AutoModelForCausalLM,
        "fill-mask": transformers.AutoModelForMaskedLM,
        "image-classification": transformers.AutoModelForImageClassification,
        "text2text-generation": transformers.AutoModelForSeq2SeqLM,
        "automatic-speech-recognition": transformers.AutoModelForSpeechSeq2Seq,
    }[task]
    model = auto.from_pretrained(folder, dtype=dtype).eval()
    if case.options.get("qlinear") or case.options.get("qembedding"):
        from optimum.exporters.executorch.quantization import quantize_model_

        quantize_model_(
            model, qlinear_config=case.options.get("qlinear"), qembedding_config=case.options.get("qembedding")
        )
    return model


def runtime_class(task: str):
    import optimum.executorch as oe

    return {
        "text-generation": oe.ExecuTorchModelForCausalLM,
        "fill-mask": oe.ExecuTorchModelForMaskedLM,
        "image-classification": oe.ExecuTorchModelForImageClassification,
        "text2text-generation": oe.ExecuTorchModelForSeq2SeqLM,
        "automatic-speech-recognition": oe.ExecuTorchModelForSpeechSeq2Seq,
    }[task]


def _max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise AssertionError(f"runtime output shape {tuple(a.shape)} differs from eager's {tuple(b.shape)}")
    return (a.float() - b.float()).abs().max().item()


def compare(case: Case, runtime, eager) -> tuple[float, object]:
    """(max |runtime - eager| over the compared logits, a callable running one step on the runtime)."""
    task = case.task
    torch.manual_seed(1)
    with torch.no_grad():
        if task == "text-generation":
            tokens = torch.tensor([PROMPT + DECODE])
            expected = eager(tokens, use_cache=False).logits[0]
            prompt = torch.tensor([PROMPT])
            logits = runtime.forward(prompt, torch.arange(len(PROMPT)))
            errors = [_max_error(logits.reshape(-1, logits.shape[-1])[-1], expected[len(PROMPT) - 1])]
            for i, token in enumerate(DECODE[:-1]):
                position = len(PROMPT) + i
                logits = runtime.forward(torch.tensor([[token]]), torch.tensor([position]))
                errors.append(_max_error(logits.reshape(-1, logits.shape[-1])[-1], expected[position]))
            last = len(PROMPT) + len(DECODE) - 1
            return max(errors), lambda: runtime.forward(torch.tensor([[DECODE[-1]]]), torch.tensor([last]))
        if task == "fill-mask":
            ids = torch.tensor([PROMPT + DECODE])
            mask = torch.ones_like(ids)
            with contextlib.redirect_stdout(io.StringIO()):  # (its forward prints a stats report every call)
                logits = runtime.forward(ids, mask)
            # timed: the program's method, without the runtime class's report printing
            return _max_error(logits, eager(ids, attention_mask=mask).logits), lambda: runtime.model.forward(
                (ids, mask)
            )
        if task == "image-classification":
            size, channels = eager.config.image_size, eager.config.num_channels
            pixels = torch.rand(1, channels, size, size, dtype=eager.dtype)
            return _max_error(runtime.forward(pixels), eager(pixel_values=pixels).logits), lambda: runtime.forward(
                pixels
            )
        if task in ("text2text-generation", "automatic-speech-recognition"):
            if task == "text2text-generation":
                encoder_input = torch.tensor([PROMPT])
                decoder_ids = torch.tensor([[eager.config.decoder_start_token_id] + DECODE])
                expected = eager(input_ids=encoder_input, decoder_input_ids=decoder_ids).logits[0]
            else:
                frames = 2 * eager.config.max_source_positions
                encoder_input = torch.randn(1, eager.config.num_mel_bins, frames, dtype=eager.dtype)
                decoder_ids = torch.tensor(
                    [[eager.config.decoder_start_token_id] + [t % eager.config.vocab_size for t in DECODE]]
                )
                expected = eager(input_features=encoder_input, decoder_input_ids=decoder_ids).logits[0]
            errors, encoded = [], None
            for i in range(decoder_ids.shape[1]):
                logits, encoded = runtime.forward(encoder_input, decoder_ids[:, i : i + 1], torch.tensor([i]), encoded)
                errors.append(_max_error(logits.reshape(-1, logits.shape[-1])[-1], expected[i]))

            def step():  # the program's two methods, as the runtime class runs them, without its stats
                encoded = runtime.model.run_method("encoder", (encoder_input,))[0]
                return runtime.model.run_method("text_decoder", (decoder_ids[:, :1], encoded, torch.tensor([0])))

            return max(errors), step
    raise ValueError(f"no comparison for task {task!r}")


def median_ms(*steps, runs: int = 20, warmup: int = 3) -> list[float]:
    """The median milliseconds of each step, run in turn (interleaved: a machine's load falls on all)."""
    for step in steps:
        for _ in range(warmup):
            step()
    times = [[] for _ in steps]
    for _ in range(runs):
        for step, spent in zip(steps, times):
            start = time.perf_counter()
            step()
            spent.append(time.perf_counter() - start)
    return [1000 * statistics.median(spent) for spent in times]


# ------------------------------------------------------------------------------------- one case
def export_options(case: Case) -> dict:
    options = dict(case.options)
    if case.task == "text-generation":
        options.setdefault("max_seq_len", MAX_SEQ_LEN)
    return options


def run_case(case: Case, recipe: str, model_dir: Path, work: Path, eager=None, runs: int = 20) -> Result:
    """Export ``case`` with optimum's ``main_export`` and ``recipe``, load it with optimum's runtime
    class, compare with eager and time it. A failure is recorded in the result, not raised."""
    from optimum.exporters.executorch import main_export

    result = Result(case.name, recipe)
    out = work / f"{case.name}-{recipe}"
    try:
        with recorded_recipes() as calls:
            main_export(str(model_dir), task=case.task, recipe=recipe, output_dir=out, **export_options(case))
        ((_, seconds, programs),) = calls
        result.export_ok, result.lower_seconds = True, seconds
        (program,) = programs.values()
        result.delegates, result.outside = delegation(program)
        runtime = runtime_class(case.task).from_pretrained(str(out))
        result.loads = True
        eager = eager if eager is not None else eager_model(case, model_dir)
        result.max_error, result.step = compare(case, runtime, eager)
        if runs:
            (result.latency_ms,) = median_ms(result.step, runs=runs)
    except Exception as error:  # (the table shows it; --debug prints the traceback)
        result.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[
            :200
        ]
        if os.environ.get("XIR_BENCH_DEBUG"):
            traceback.print_exc()
    return result


# ---------------------------------------------------------------------------------------- table
def _outside_text(outside: dict) -> str:
    total = Counter()
    for ops in outside.values():
        total.update(ops)
    return ", ".join(f"{name} x{count}" for name, count in sorted(total.items())) or "-"


def table(results: list[Result]) -> str:
    by_case: dict[str, dict[str, Result]] = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.recipe] = r
    lines = []
    header = (
        f"{'case':<28} {'recipe':<12} {'export':<6} {'delegates/method':<34} {'outside':>7} {'loads':<5} "
        f"{'max err':>9} {'lower s':>8} {'ms':>8} {'x stock':>7}"
    )
    lines += [header, "-" * len(header)]
    for case, runs in by_case.items():
        stock = runs.get("xnnpack")
        for recipe in RECIPES:
            r = runs.get(recipe)
            if r is None:
                continue
            per_method = " ".join(f"{m}:{n}" for m, n in r.delegates.items()) or "-"
            outside = sum(sum(c.values()) for c in r.outside.values()) if r.export_ok else math.nan
            ratio = (
                r.latency_ms / stock.latency_ms
                if stock
                and recipe != "xnnpack"
                and stock.latency_ms == stock.latency_ms
                and r.latency_ms == r.latency_ms
                else math.nan
            )
            lines.append(
                f"{case:<28} {recipe:<12} {'ok' if r.export_ok else 'FAIL':<6} {per_method:<34} "
                f"{outside:>7} {'yes' if r.loads else 'no':<5} {r.max_error:>9.2e} {r.lower_seconds:>8.2f} "
                f"{r.latency_ms:>8.3f} {ratio:>7.2f}"
            )
            if r.error:
                lines.append(f"{'':<28} {'':<12} error: {r.error}")
    lines.append("")
    lines.append("ops outside delegates, by name:")
    for case, runs in by_case.items():
        for recipe in RECIPES:
            r = runs.get(recipe)
            if r is not None and r.export_ok:
                lines.append(f"  {case:<28} {recipe:<12} {_outside_text(r.outside)}")
    return "\n".join(lines)


def check_targets(results: list[Result]) -> list[str]:
    """The benchmark's targets, as the cases that miss them: xir exports, loads and runs where stock
    does; its delegates and ops outside are at most stock's; its error at most stock's (with a 1e-5
    floor); its median latency at most 0.8x stock's."""
    misses = []
    by_case: dict[str, dict[str, Result]] = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.recipe] = r
    for case, runs in by_case.items():
        stock, xir = runs.get("xnnpack"), runs.get("xnnpack-xir")
        if stock is None or xir is None:
            continue
        if xir.error and not stock.error:
            misses.append(f"{case}: xir fails ({xir.error}), stock does not")
            continue
        if xir.error or stock.error:
            continue
        if sum(xir.delegates.values()) > sum(stock.delegates.values()):
            misses.append(f"{case}: {sum(xir.delegates.values())} delegates, stock {sum(stock.delegates.values())}")
        out_x = sum(sum(c.values()) for c in xir.outside.values())
        out_s = sum(sum(c.values()) for c in stock.outside.values())
        if out_x > out_s:
            misses.append(f"{case}: {out_x} ops outside, stock {out_s}")
        if xir.max_error > max(stock.max_error, 1e-5):
            misses.append(f"{case}: max error {xir.max_error:.2e}, stock {stock.max_error:.2e}")
        if xir.latency_ms > 0.8 * stock.latency_ms:
            misses.append(f"{case}: latency {xir.latency_ms / stock.latency_ms:.2f}x stock")
    return misses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.optimum", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one case per task")
    parser.add_argument("--only", nargs="+", metavar="CASE", help=f"these cases ({', '.join(c.name for c in CASES)})")
    parser.add_argument(
        "--runs", type=int, default=100, help="timed runs per latency, stock and xir in turn (default 100)"
    )
    args = parser.parse_args(argv)
    try:
        import xir_tools.optimum as integration

        integration._require_optimum()
    except ImportError as error:
        parser.error(str(error))
    cases = [c for c in CASES if (not args.quick or c.quick) and (not args.only or c.name in args.only)]
    if args.only and len(cases) != len(set(args.only)):
        known = {c.name for c in CASES}
        parser.error(f"unknown case(s): {', '.join(sorted(set(args.only) - known))}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results = []
    with tempfile.TemporaryDirectory(prefix="xir-bench-optimum-") as tmp:
        work = Path(tmp)
        for case in cases:
            model_dir = work / "models" / case.model
            if not model_dir.exists():
                optimum_models.save(case.model, model_dir)
            eager = eager_model(case, model_dir)
            pair = []
            for recipe in RECIPES:
                print(f"{case.name} / {recipe} ...", file=sys.stderr, flush=True)
                pair.append(run_case(case, recipe, model_dir, work, eager=eager, runs=0))
            timed = [r for r in pair if r.step is not None]
            with contextlib.redirect_stdout(io.StringIO()):  # (optimum's runtime classes print stats reports)
                for r, ms in zip(timed, median_ms(*(r.step for r in timed), runs=args.runs)):
                    r.latency_ms = ms
            results += pair
    print(table(results))
    misses = check_targets(results)
    print("\ntargets: " + ("all met" if not misses else f"{len(misses)} missed"))
    for miss in misses:
        print(f"  {miss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
