"""What ``xnnpack.mean-over-last-dims`` buys by writing an fp32 mean as a matrix product: ExecuTorch's
own LLM flow (``bench.llm_flow``'s Llama 3, 2 layers, dim 256, dynamic shapes, custom SDPA) lowered
four ways: stock's two partitioners, xir with its means as XNNPACK's spatial mean (the pass's
``matmul=false``: views, and a channels-last transpose each way), xir with a product with a
constant ``1/cols`` column between views (``linear=false``), and xir's default (in a program that
keeps linears, a ``linear`` with a ``1/cols`` row: no views). The programs run in random order in
every round (one decode step at position 32, one prefill of 7 and of 64 tokens each); the script
prints the median time of each and the median of the per-round ratios to stock, and the max
difference of the logits of each xir program from stock's.

    .venv/bin/python scripts/mean_as_matmul.py [--recipe fp32 8da4w] [--rounds 400] [--model llama3]
    .venv/bin/python scripts/mean_as_matmul.py --zoo [--zoo-rounds 15]

``--zoo``: instead, the fp32 zoo models of ``python -m bench --quick`` with means (Llama, ViT,
SigLIP, BERT), xir's three forms, in interleaved rounds of 10 runs each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

import torch  # noqa: E402

from bench import llm_flow as flow  # noqa: E402  (sets OMP_NUM_THREADS=1 before torch loads, as the flow benchmark does)

SPATIAL = "xnnpack.mean-over-last-dims{matmul=false}"
MM = "xnnpack.mean-over-last-dims{linear=false}"


def lowered_programs(recipe: str, model: str) -> dict[str, bytes]:
    from lowering import XnnpackPartitioner
    from lowering.fx.llm import llm_partitioners
    from lowering.pipeline import DEFAULT_PIPELINE

    bf16 = recipe == "bf16"
    spatial = DEFAULT_PIPELINE.replace("xnnpack.mean-over-last-dims", SPATIAL)
    mm = DEFAULT_PIPELINE.replace("xnnpack.mean-over-last-dims", MM)
    return flow.lower_variants(
        recipe,
        model,
        {
            "stock": lambda: llm_partitioners("stock", enable_bf16=bf16),
            "xir, spatial means": lambda: [XnnpackPartitioner(enable_bf16=bf16, pipeline=spatial)],
            "xir, mm means": lambda: [XnnpackPartitioner(enable_bf16=bf16, pipeline=mm)],
            "xir (linear means)": lambda: llm_partitioners("xir", enable_bf16=bf16),
        },
        ("aten.mean.dim", "aten.mm", "aten.linear", "aten.view_copy"),
    )


def zoo(rounds: int) -> None:
    from bench import zoo as models
    from lowering import XnnpackPartitioner
    from lowering.pipeline import DEFAULT_PIPELINE

    print(
        f"the zoo (--quick sizes), fp32, xir's means spatial, as mm between views, and as linear (the default); "
        f"{rounds} rounds of 10 runs"
    )
    forms = {
        "spatial": DEFAULT_PIPELINE.replace("xnnpack.mean-over-last-dims", SPATIAL),
        "mm": DEFAULT_PIPELINE.replace("xnnpack.mean-over-last-dims", MM),
        "linear": DEFAULT_PIPELINE,
    }
    for model in models.zoo(True):
        if model.name not in ("llama", "vit", "siglip", "bert"):
            continue
        inputs, loaded, errors, ops = models.lowered_forms(
            model, {name: XnnpackPartitioner(pipeline=pipeline) for name, pipeline in forms.items()}
        )
        times = {name: [] for name in loaded}
        for _ in range(rounds):
            for name, (_, method) in loaded.items():
                start = time.perf_counter()
                for _ in range(10):
                    method.execute(list(inputs))
                times[name].append((time.perf_counter() - start) / 10)
        median = {name: statistics.median(times[name]) * 1e3 for name in loaded}
        cells = ", ".join(f"{name} {median[name]:.3f} ms ({ops[name]} ops, err {errors[name]:.2g})" for name in loaded)
        print(
            f"  {model.name:<8} {cells}; linear/mm {median['linear'] / median['mm']:.2f}x, "
            f"mm/spatial {median['mm'] / median['spatial']:.2f}x",
            flush=True,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", nargs="*", default=["fp32", "8da4w"])
    parser.add_argument("--model", default="llama3", choices=sorted(flow.FAMILIES))
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--zoo", action="store_true", help="the zoo's fp32 models with means instead of the flow")
    parser.add_argument("--zoo-rounds", type=int, default=15)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    if args.zoo:
        zoo(args.zoo_rounds)
        return 0
    print(f"{args.model}, {', '.join(args.recipe)}; {args.rounds} rounds in random order; OMP_NUM_THREADS=1")
    for recipe in args.recipe:
        flow.random_order_rounds(lowered_programs(recipe, args.model), args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
