"""A vision-language model (SmolVLM) in bf16, lowered with xir and with stock's XNNPACK partitioner.

    .venv/bin/python -m bench.vlm [--quick | --size tiny|small|256m] [--parts vision-asis,vision,decode] [--runs N] [--steps N]

A tiny SmolVLM (transformers' SmolVLMForConditionalGeneration: a SigLIP-style vision encoder, the
pixel-shuffle connector, a Llama decoder) is built from a config with random weights, cast to
bf16, and exported in two parts, as ExecuTorch's VLM flow runs it:

- the vision encoder with its connector (pixels -> image embeddings), from the components
  transformers' ``TorchExportableModuleForVLM`` picks (``vision_encoder``, ``connector``), exported
  whole at the config's image size. Its own ``export_*`` methods are not used: they export the
  encoder at 384x384 with dynamic H/W and the connector as a separate program, and the text model
  without its LM head, for ``input_ids``. Two vision programs:
    ``vision-asis``  the encoder as transformers writes it: its position ids are computed in the
                     graph with ``aten.bucketize`` (not core ATen: lowered with it on
                     ``_core_aten_ops_exception_list``; ExecuTorch has no kernel for it);
    ``vision``       the same encoder with the position ids precomputed for a full image (taken
                     from an eager run), as ExecuTorch's own Qualcomm VLM example does; the eager
                     reference is still the unmodified encoder;
- ``decode``: a one-token decode step with a static KV cache (``TorchExportableModuleForDecoderOnlyLM``
  over the whole VLM, fed ``inputs_embeds`` -> logits), run at cache positions 0..steps-1 on the
  image embeddings and then on token embeddings.

Each part is lowered with xir (``enable_bf16=True``), with stock's default partitioner (no
arguments: bf16 stays on portable kernels) and with stock ``enable_bf16=True``; serialized, loaded
with executorch.runtime, run interleaved (median of the timed runs) and compared with eager bf16.
A failure in any phase is printed in its cell; the run goes on. Below the table: the compute ops
left outside delegates by op, and for xir every op its partitioner left outside with its rule and
reason (``partitioner.report()``).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch

from bench.llm import Side, _first_line, _num, _quiet, _reason, first_run, lower_side, print_table, timed_run, warm_up

warnings.filterwarnings("ignore")

PARTS = ("vision-asis", "vision", "decode")
PARTITIONERS = ("xir", "stock default", "stock bf16")
TOLERANCE = 0.05  # matches: max err <= TOLERANCE * max |ref| (bf16 carries 8 bits of mantissa)
CLAIM = 30.0  # the speedup over stock's default partitioner the project claims


@dataclass
class Sizes:
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    image: int
    patch: int
    text_hidden: int
    text_layers: int
    text_heads: int
    vocab: int
    cache: int
    steps: int  # decode steps
    runs: int  # timed vision runs
    scale: int = 2  # the connector's pixel-shuffle factor
    vision_intermediate: int | None = None  # (default: 2x the hidden size)
    text_intermediate: int | None = None
    text_kv_heads: int | None = None  # (default: as many as the heads)

    def describe(self) -> str:
        tokens = (self.image // self.patch) ** 2
        return (
            f"vision {self.vision_layers} layer(s), hidden {self.vision_hidden}, {self.image}x{self.image} image, "
            f"patch {self.patch} ({tokens} patches -> {tokens // self.scale**2} image tokens); "
            f"text {self.text_layers} layers, hidden {self.text_hidden}, {self.text_heads} heads, vocab {self.vocab}, "
            f"cache {self.cache}"
        )


FULL = Sizes(
    vision_hidden=128,
    vision_layers=2,
    vision_heads=4,
    image=64,
    patch=16,
    text_hidden=128,
    text_layers=2,
    text_heads=4,
    vocab=512,
    cache=64,
    steps=16,
    runs=10,
)
# a closer look at real sizes (SmolVLM-256M's vision tower is hidden 768, 12 layers, 512x512; its
# text model hidden 576, 30 layers): too slow on portable kernels to time here, so half-way there
SMALL = Sizes(
    vision_hidden=384,
    vision_layers=4,
    vision_heads=6,
    image=224,
    patch=16,
    text_hidden=256,
    text_layers=4,
    text_heads=4,
    vocab=2048,
    cache=128,
    steps=16,
    runs=5,
)
# SmolVLM-256M's dimensions (its config.json): SigLIP vision tower hidden 768, 12 layers, 12 heads,
# MLP 3072, 512x512 images in patches of 16, pixel shuffle 4 (1024 patches -> 64 image tokens);
# text model hidden 576, 30 layers, 9 heads, 3 KV heads, MLP 1536, vocab 49280. Random weights.
REAL = Sizes(
    vision_hidden=768,
    vision_layers=12,
    vision_heads=12,
    image=512,
    patch=16,
    text_hidden=576,
    text_layers=30,
    text_heads=9,
    vocab=49280,
    cache=128,
    steps=4,
    runs=2,
    scale=4,
    vision_intermediate=3072,
    text_intermediate=1536,
    text_kv_heads=3,
)
QUICK = Sizes(
    vision_hidden=64,
    vision_layers=1,
    vision_heads=2,
    image=64,
    patch=16,
    text_hidden=64,
    text_layers=2,
    text_heads=4,
    vocab=256,
    cache=16,
    steps=6,
    runs=5,
)


# ------------------------------------------------------------------ model and export


def build_vlm(s: Sizes, dtype: torch.dtype):
    from transformers import GenerationConfig, SmolVLMConfig, SmolVLMForConditionalGeneration

    config = SmolVLMConfig(
        vision_config=dict(
            hidden_size=s.vision_hidden,
            intermediate_size=s.vision_intermediate or 2 * s.vision_hidden,
            num_hidden_layers=s.vision_layers,
            num_attention_heads=s.vision_heads,
            image_size=s.image,
            patch_size=s.patch,
        ),
        text_config=dict(
            model_type="llama",
            vocab_size=s.vocab,
            hidden_size=s.text_hidden,
            intermediate_size=s.text_intermediate or 2 * s.text_hidden,
            num_hidden_layers=s.text_layers,
            num_attention_heads=s.text_heads,
            num_key_value_heads=s.text_kv_heads or s.text_heads,
            max_position_embeddings=2 * s.cache,
        ),
        image_token_id=s.vocab - 1,
        scale_factor=s.scale,
    )
    torch.manual_seed(0)
    model = SmolVLMForConditionalGeneration(config).eval().to(dtype)
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": s.cache}
    )
    return model


class VisionEncoder(torch.nn.Module):
    """Pixels -> image embeddings: the vision transformer, then the connector (pixel shuffle and
    projection to the text model's width)."""

    def __init__(self, vision, connector):
        super().__init__()
        self.vision, self.connector = vision, connector

    def forward(self, pixel_values):
        return self.connector(self.vision(pixel_values=pixel_values).last_hidden_state)


class FixedPositionEmbeddings(torch.nn.Module):
    """SmolVLM's patch embeddings with the position ids of a full (unpadded) image as a constant,
    in place of the bucketize arithmetic that computes them from the patch mask."""

    def __init__(self, embeddings, position_ids: torch.Tensor):
        super().__init__()
        self.patch_embedding, self.position_embedding = embeddings.patch_embedding, embeddings.position_embedding
        self.register_buffer("position_ids", position_ids)

    def forward(self, pixel_values, patch_attention_mask=None):
        patches = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        return patches + self.position_embedding(self.position_ids)


def vision_parts(model):
    """The vision encoder and connector, as transformers' VLM export wrapper picks them."""
    from transformers.integrations.executorch import TorchExportableModuleForVLM

    wrapper = TorchExportableModuleForVLM(model, max_batch_size=1)
    return wrapper.vision_encoder, wrapper.connector


def fixed_position_encoder(vision, connector, pixels) -> VisionEncoder:
    """A copy of the encoder whose embeddings use the position ids the original computes for
    ``pixels`` (captured from an eager run, so they are transformers' own)."""
    captured = {}

    def capture(module, args, out):  # returns None: the output is left as it is
        captured.setdefault("ids", args[0].detach().clone())

    hook = vision.embeddings.position_embedding.register_forward_hook(capture)
    try:
        with torch.no_grad():
            vision(pixel_values=pixels)
    finally:
        hook.remove()
    fixed = copy.deepcopy(vision)
    fixed.embeddings = FixedPositionEmbeddings(fixed.embeddings, captured["ids"])
    return VisionEncoder(fixed, connector).eval()


# ------------------------------------------------------------------ lowering one partitioner


@dataclass
class Cell(Side):
    report: str | None = None  # xir's partitioner.report()
    rejected: Counter = field(default_factory=Counter)  # xir: (op, type, rule, reason) -> count


def make_partitioner(which: str):
    from xir_tools.harness import make_partitioner as partitioner

    if which == "xir":
        return partitioner("xir", enable_bf16=True)
    if which == "stock default":
        return partitioner("stock")
    if which == "stock bf16":
        return partitioner("stock", enable_bf16=True)
    raise ValueError(which)


def xir_rejections(partitioner) -> Counter:
    from lowering.report import is_compute

    plan = getattr(partitioner, "last_plan", None)
    counts: Counter = Counter()
    for r in plan.rejected if plan is not None else ():
        if is_compute(r.node.op):
            kind = ", ".join(str(v.type) for v in r.node.results[:1])
            counts[(r.node.op, kind, r.rule, r.reason)] += 1
    return counts


def lower_cell(ep, which: str, compile_config=None) -> Cell:
    """Lower ``ep`` with one partitioner (timing the whole lowering call), serialize and load it
    (bench.llm's lower_side). Failures are recorded in ``Cell.error``, never raised."""
    cell = Cell(which)
    try:
        partitioner = make_partitioner(which)
    except Exception as e:
        cell.error = f"lower failed: {_first_line(e)}"
        return cell
    lower_side(ep, which, side=cell, partitioner=partitioner, compile_config=compile_config, reason=load_reason)
    if which == "xir":
        cell.report, cell.rejected = partitioner.report(), xir_rejections(partitioner)
    return cell


def load_reason(log: str, fallback: str) -> str:
    """The runtime's most specific line: XNNPACK's own message or the missing operators, before
    the generic init failure."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    missing = sorted(
        set(line.split("Missing operator:")[1].strip().split("] ")[-1] for line in lines if "Missing operator:" in line)
    )
    if missing and not any("XNN" in line and "Failed" in line for line in lines):
        return f"missing operator(s): {', '.join(missing)}"
    return _reason(log, fallback)


# ------------------------------------------------------------------ parts


@dataclass
class Part:
    name: str
    cells: list[Cell] = field(default_factory=list)
    error: str | None = None  # export or eager failure: nothing to lower, run or compare
    max_ref: float | None = None
    note: str = ""

    def cell(self, which: str) -> Cell | None:
        return next((c for c in self.cells if c.which == which), None)


def lower_all(part: Part, ep, compile_config=None) -> None:
    for which in PARTITIONERS:
        print(f"[{part.name}] lowering with {which} ...", file=sys.stderr, flush=True)
        part.cells.append(lower_cell(ep, which, compile_config))


def run_all(part: Part, runs: list[tuple], references: list[list[torch.Tensor]]) -> None:
    """An untimed first run of each program, then every run in order, the programs interleaved."""
    part.max_ref = max(t.float().abs().max().item() for ref in references for t in ref)
    live = [c for c in part.cells if c.runs]
    for cell in live:
        first_run(cell, runs[0])
    print(f"[{part.name}] {len(runs)} timed runs ...", file=sys.stderr, flush=True)
    for inputs, reference in zip(runs, references):
        for cell in live:
            if cell.runs:
                timed_run(cell, inputs, reference)


def measure_vision(name: str, model, s: Sizes, runs: int) -> tuple[Part, torch.Tensor | None]:
    """One vision program (``vision-asis`` or ``vision``); returns the part and the eager image
    embeddings (for the decode runs)."""
    from executorch.exir import EdgeCompileConfig

    part = Part(name)
    dtype = model.dtype
    pixels = torch.randn(1, 3, s.image, s.image, generator=torch.Generator().manual_seed(0)).to(dtype)
    try:
        vision, connector = vision_parts(model)
        original = VisionEncoder(vision, connector).eval()
        with torch.no_grad():
            reference = [original(pixels)]
        module = original if name == "vision-asis" else fixed_position_encoder(vision, connector, pixels)
        with torch.no_grad():
            ep = torch.export.export(module, (pixels,), strict=False)
    except Exception as e:
        part.error = f"export failed: {_first_line(e)}"
        return part, None
    config = None
    if name == "vision-asis":
        config = EdgeCompileConfig(_core_aten_ops_exception_list=[torch.ops.aten.bucketize.Tensor])
        part.note = "position ids by aten.bucketize in the graph (on the core-ATen exception list)"
    else:
        part.note = "position ids precomputed for a full image"
    lower_all(part, ep, config)
    run_all(part, [(pixels,)] * runs, [reference] * runs)
    return part, reference[0]


def export_decode(model, cache: int):
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=cache)
    embeds = torch.zeros(1, 1, model.config.text_config.hidden_size, dtype=model.dtype)
    with torch.no_grad():
        return wrapper.export(inputs_embeds=embeds, cache_position=torch.tensor([0]))


def measure_decode(model, s: Sizes, steps: int, image_embeds: torch.Tensor | None) -> Part:
    """One-token steps at cache positions 0..steps-1: the image embeddings first, then the
    embeddings of random tokens; both programs keep their own KV cache, as does the eager run."""
    part = Part("decode", note="inputs_embeds -> logits, static KV cache")
    try:
        ep = export_decode(model, s.cache)
    except Exception as e:
        part.error = f"export failed: {_first_line(e)}"
        return part
    with torch.no_grad():
        tokens = torch.randint(0, s.vocab, (1, steps), generator=torch.Generator().manual_seed(1))
        embeds = model.get_input_embeddings()(tokens)
        if image_embeds is not None:
            embeds = torch.cat([image_embeds.to(embeds.dtype), embeds], dim=1)
        embeds = embeds[:, :steps]
    runs = [(embeds[:, p : p + 1].contiguous(), torch.tensor([p])) for p in range(steps)]
    try:
        module = copy.deepcopy(ep.module())  # its own KV cache: ep's buffers stay as exported
        with torch.no_grad():
            references = [[module(inputs_embeds=e, cache_position=p)] for e, p in runs]
    except Exception as e:
        part.error = f"eager failed: {_first_line(e)}"
        return part
    lower_all(part, ep)
    run_all(part, runs, references)
    return part


# ------------------------------------------------------------------ report


def _speedup(part: Part, cell: Cell) -> str:
    default = part.cell("stock default")
    if cell.which == "stock default" or default is None or not default.ms or not cell.ms:
        return ""
    return f"{default.ms / cell.ms:.1f}x"


def _matches(part: Part, cell: Cell) -> str:
    if cell.ms is None or part.max_ref is None:
        return "-"
    return "yes" if cell.max_err <= TOLERANCE * max(part.max_ref, 1e-6) else "NO"


def row(part: Part, cell: Cell) -> tuple:
    loads = (
        "-"
        if cell.delegates is None or (cell.error or "").startswith(("lower", "to_executorch"))
        else ("NO" if (cell.error or "").startswith("load") else "yes")
    )
    return (
        part.name,
        cell.which,
        loads,
        _num(cell.delegates, "d"),
        "-" if cell.delegates is None else str(sum(cell.outside.values())),
        _num(cell.ms, ".3f"),
        _speedup(part, cell),
        f"{cell.max_err:.3g}" if cell.ms is not None else "-",
        _num(part.max_ref, ".3g"),
        _matches(part, cell),
        _num(cell.lower_s, ".1f"),
        cell.error or "",
    )


HEADER = (
    "part",
    "partitioner",
    "loads",
    "delegates",
    "outside",
    "ms",
    "speedup",
    "max err",
    "max |ref|",
    "matches",
    "lower s",
    "failure",
)


def print_results(parts: list[Part], s: Sizes, steps: int, runs: int) -> None:
    print(f"SmolVLM bf16, random weights: {s.describe()}")
    print(
        f"ms = median of {runs} vision runs / {steps} decode steps (positions 0..{steps - 1}), the three programs "
        f"interleaved; speedup = stock default ms / ms; max err against eager bf16 over all runs; "
        f"matches = max err <= {TOLERANCE} * max |ref|; outside = compute ops left outside delegates"
    )
    rows = []
    for part in parts:
        if part.error:
            rows.append((part.name, "-", "-", "-", "-", "-", "", "-", "-", "-", "-", part.error))
        rows.extend(row(part, cell) for cell in part.cells)
    print_table(HEADER, rows)
    for part in parts:
        if part.note:
            print(f"  {part.name}: {part.note}")

    print("\ncompute ops left outside delegates, by op:")
    for part in parts:
        for cell in part.cells:
            if cell.delegates is None:
                print(f"  {part.name:<12} {cell.which:<14} -")
                continue
            ops = ", ".join(
                f"{op} x{n}" if n > 1 else op for op, n in sorted(cell.outside.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            print(f"  {part.name:<12} {cell.which:<14} ({sum(cell.outside.values())}) {ops or 'none'}")

    print("\nxir: ops its partitioner left outside, with rule and reason (partitioner.report()):")
    for part in parts:
        cell = part.cell("xir")
        if cell is None or cell.report is None:
            print(f"  {part.name}: no report ({cell.error if cell else part.error})")
            continue
        print(f"  {part.name}: {cell.report.splitlines()[0].removeprefix('xir partition: ')}")
        if cell.rejected:
            table = [(str(n), op, kind, rule, reason) for (op, kind, rule, reason), n in cell.rejected.items()]
            widths = [
                max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(("n", "op", "type", "rule", "reason"))
            ]
            print(
                "    " + "  ".join(h.ljust(w) for h, w in zip(("n", "op", "type", "rule", "reason"), widths)).rstrip()
            )
            for r in table:
                print("    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())

    print(
        f"\nclaim: in bf16 each part lowers with xir, loads, matches eager and runs >= {CLAIM:.0f}x faster than "
        f"stock's default partitioner"
    )
    for part in parts:
        cell = part.cell("xir")
        default = part.cell("stock default")
        if cell is None:
            print(f"  {part.name}: NO ({part.error})")
            continue
        speed = default.ms / cell.ms if default and default.ms and cell.ms else None
        matches = _matches(part, cell)
        checks = [
            ("lowers", cell.delegates is not None),
            ("loads", cell.method is not None),
            ("matches", None if matches == "-" else matches == "yes"),
            (f"{_num(speed, '.1f')}x", None if speed is None else speed >= CLAIM),
        ]
        ok = all(v for _, v in checks)
        text = ", ".join(f"{name} {'-' if v is None else 'yes' if v else 'NO'}" for name, v in checks)
        print(
            f"  {part.name:<12} {'yes' if ok else 'NO '}  ({text}; {sum(cell.outside.values()) if cell.delegates is not None else '-'}"
            f" compute ops outside){'  ' + cell.error if cell.error else ''}"
        )


# ------------------------------------------------------------------ main


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.vlm", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller model (1 vision layer, hidden 64), fewer runs")
    parser.add_argument(
        "--size",
        choices=("tiny", "small", "256m"),
        default="tiny",
        help="tiny (default: vision hidden 128 at 64x64, text hidden 128) or small (vision hidden 384, "
        "4 layers at 224x224; text hidden 256, 4 layers, vocab 2048) or 256m (SmolVLM-256M's "
        "dimensions, random weights: vision hidden 768, 12 layers at 512x512; text hidden 576, 30 layers)",
    )
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated: {','.join(PARTS)}")
    parser.add_argument("--runs", type=int, default=None, help="timed vision runs (default 10, quick 5)")
    parser.add_argument("--steps", type=int, default=None, help="timed decode steps (default 16, quick 6)")
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}")
    if args.quick and args.size != "tiny":
        parser.error("--quick is a tiny model: use it without --size")
    sizes = QUICK if args.quick else {"small": SMALL, "256m": REAL}.get(args.size, FULL)
    args.runs = args.runs or sizes.runs
    args.steps = args.steps or sizes.steps
    if args.steps > sizes.cache:
        parser.error(f"--steps must be at most the cache length, {sizes.cache}")
    return args, sizes


def main(argv=None) -> int:
    args, sizes = parse_args(argv)
    _quiet()
    torch.set_num_threads(1)
    start = time.perf_counter()
    warm_up()
    print("[vlm] building ...", file=sys.stderr, flush=True)
    model = build_vlm(sizes, torch.bfloat16)
    parts, image_embeds = [], None
    for name in ("vision-asis", "vision"):
        if name in args.parts:
            part, embeds = measure_vision(name, model, sizes, args.runs)
            parts.append(part)
            image_embeds = embeds if embeds is not None else image_embeds
    if "decode" in args.parts:
        parts.append(measure_decode(model, sizes, args.steps, image_embeds))
    print_results(parts, sizes, args.steps, args.runs)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
