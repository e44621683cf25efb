"""bf16 against fp32 on the zoo, xir's programs only, in one interleaved timing loop per model.

    .venv/bin/python -m bench.bf16 [--quick] [--only NAME ...] [--runs N]

For every zoo model (the CNNs, the encoders and the small decoder of ``python -m bench``) xir lowers
the fp32 model and the same model cast to bf16 three ways: the default (bf16 where XNNPACK defines
it, converts around what it defines only in fp32), ``bf16_activations_in_fp32`` (every delegated op
in fp32, converts at the delegate's ends) and ``bf16_linears_as_f16`` (linears as XNNPACK's fp16
GEMM). All programs of a model run in one loop, in a new random order each round, so the ratios
compare runs made side by side. Printed per program: median latency, its ratio to fp32, the max
error against eager bf16 and against the fp32 model, and the .pte size; then the target line of
issue 31 (bf16 CNNs and encoders no slower than fp32).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")

CONFIGS = (
    ("fp32", torch.float32, {}),
    ("bf16", torch.bfloat16, {"enable_bf16": True}),
    ("bf16 activations in fp32", torch.bfloat16, {"enable_bf16": True, "bf16_activations_in_fp32": True}),
    ("bf16 linears as f16", torch.bfloat16, {"enable_bf16": True, "bf16_linears_as_f16": True}),
)


def measure(model, runs: int) -> list[dict]:
    from xir_tools.harness import load_method, lower, max_error

    torch.manual_seed(0)
    state = model.make().eval().state_dict()
    inputs32 = model.inputs()
    fp32_reference = None
    rows = []
    for label, dtype, options in CONFIGS:
        print(f"[{model.name}] {label} ...", file=sys.stderr, flush=True)
        module = model.make().eval()
        module.load_state_dict(state)
        module = module.to(dtype)
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs32)
        ep = torch.export.export(module, inputs)
        eager = ep.module()(*inputs)
        if dtype == torch.float32:
            fp32_reference = eager
        row = {"label": label, "inputs": inputs, "eager": eager}
        result = lower(ep, inputs, "xir", **options)
        if not result.ran:
            row["error"] = (result.error or "did not run")[:90]
            rows.append(row)
            continue
        row.update(size=len(result.buffer), delegates=result.delegates, loaded=load_method(result.buffer), times=[])
        row["err_eager"] = max_error(result.outputs, eager)  # (lower() ran the program on these inputs)
        row["err_fp32"] = max_error(result.outputs, fp32_reference)
        row["eager_err_fp32"] = max_error(eager, fp32_reference)
        rows.append(row)
    timed = [r for r in rows if "loaded" in r]
    for _ in range(runs):
        random.shuffle(timed)
        for r in timed:
            method = r["loaded"][1]
            start = time.perf_counter()
            method.execute(list(r["inputs"]))
            r["times"].append(time.perf_counter() - start)
    for r in timed:
        r["ms"] = sorted(r["times"])[len(r["times"]) // 2] * 1e3
    return rows


def main(argv=None) -> int:
    from bench.__main__ import _quiet, print_table
    from bench.zoo import zoo

    parser = argparse.ArgumentParser(prog="python -m bench.bf16", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the zoo's small sizes")
    parser.add_argument("--only", nargs="*", help="zoo models (llama vit siglip bert resnet mobilenetv2)")
    parser.add_argument("--runs", type=int, default=200, help="timed rounds (each runs every program once)")
    args = parser.parse_args(argv)
    _quiet()
    torch.set_num_threads(1)
    table, ratios = [], {}
    for model in zoo(args.quick):
        if args.only and model.name not in args.only:
            continue
        rows = measure(model, args.runs)
        fp32_ms = next((r.get("ms") for r in rows if r["label"] == "fp32"), None)
        for r in rows:
            ratio = r["ms"] / fp32_ms if fp32_ms and "ms" in r else None
            if ratio is not None and r["label"] != "fp32":
                ratios.setdefault(r["label"], []).append((model.name, ratio))
            table.append(
                (
                    model.name,
                    r["label"],
                    "-" if "ms" not in r else f"{r['ms']:.3f}",
                    "-" if ratio is None else f"{ratio:.2f}",
                    "-" if "err_eager" not in r else f"{r['err_eager']:.2g}",
                    "-" if "err_fp32" not in r else f"{r['err_fp32']:.2g}",
                    "-" if "eager_err_fp32" not in r or r["label"] == "fp32" else f"{r['eager_err_fp32']:.2g}",
                    "-" if "size" not in r else f"{r['size'] / 1024:.0f}",
                    str(r.get("delegates", "-")),
                    r.get("error", ""),
                )
            )
    print(
        f"xir's programs, bf16 against fp32 ({args.runs} interleaved rounds, median; errors: max |program - eager "
        "bf16|, max |program - fp32 model|, and eager bf16's own max |eager bf16 - fp32 model|)"
    )
    print_table(
        table,
        (
            "model",
            "program",
            "ms",
            "/fp32",
            "err vs eager",
            "err vs fp32",
            "eager bf16 vs fp32",
            "pte KB",
            "delegates",
            "failure",
        ),
    )
    print("\nbf16 over fp32, CNNs and encoders (target <= 1.0; the decoder, llama, is bench.llm's):")
    for label, pairs in ratios.items():
        kept = [(name, ratio) for name, ratio in pairs if name != "llama"]
        if not kept:
            continue
        over = [f"{name} {ratio:.2f}" for name, ratio in kept if ratio > 1.0]
        print(
            f"  {label:<26} median {sorted(r for _, r in kept)[len(kept) // 2]:.2f}, <= 1.0 on "
            f"{len(kept) - len(over)} of {len(kept)}" + (f" (over: {', '.join(over)})" if over else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
