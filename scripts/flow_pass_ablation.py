"""What one of xir's passes buys in ExecuTorch's own LLM flow (``bench.llm_flow``'s tiny two-layer
models: dynamic shapes, custom SDPA): the program lowered three ways, stock's two partitioners,
xir's default pipeline without the pass, and xir's default; the three run in random order in every
round (a decode step at position 32, prefills of 7 and 64 tokens), and the script prints the median
time of each, the median of the per-round ratios to stock, and how far each program's logits are
from stock's after a prefill of 7.

    .venv/bin/python scripts/flow_pass_ablation.py [--without xnnpack.rotate-half-sign-in-sin]
        [--instead 'xnnpack.mean-over-last-dims{linear=false}'] [--model qwen3] [--recipe fp32 8da4w]
        [--rounds 400] [--processes N [--threads T]] [--layers N]

The default is Qwen3 (which rotates q and k the Hugging Face way, ``rotate_half``) without
``xnnpack.rotate-half-sign-in-sin``. ``--instead`` runs the pass it names with the options given
in place of the default's, where ``--without`` leaves a pass out. ``--processes N`` times the
three programs in N fresh processes of ``--rounds`` rounds each (``bench.time_programs``) instead of
in the lowering process: one process's ratio can sit 0.1 away from another's (its buffers' layout),
so it prints the median over the processes and their range.

``--zoo [NAME ...]``: instead of the flow, the fp32 models of ``python -m bench --quick``'s zoo
(``--full``: of ``python -m bench``'s)
(``bench.zoo``: llama, vit, siglip, bert, resnet, mobilenetv2; all when no name is given), each
lowered the same three ways and run in random order in every round of ``--rounds // 10``, with
each program's max error against eager.
"""

from __future__ import annotations

import argparse
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

from bench import llm_flow as flow  # noqa: E402  (sets OMP_NUM_THREADS=1 before torch loads, as the flow benchmark does)


def main(argv=None) -> int:
    from lowering import XnnpackPartitioner
    from lowering.fx.llm import llm_partitioners
    from lowering.pipeline import DEFAULT_PIPELINE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--without", default="xnnpack.rotate-half-sign-in-sin", help="the pass to leave out")
    parser.add_argument(
        "--instead",
        help="a pass with options, e.g. 'xnnpack.mean-over-last-dims{linear=false}', "
        "run in place of the default's (instead of --without)",
    )
    parser.add_argument("--model", default="qwen3", choices=sorted(flow.FAMILIES))
    parser.add_argument("--recipe", nargs="*", default=["fp32", "8da4w"])
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (default: the family's 2)")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="time in this many fresh processes, one after the other (bench.time_programs), "
        "instead of in this one: a process keeps its memory layout's luck for all its rounds",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="with --processes: XNNPACK's threads in each (0: the runtime's default)"
    )
    parser.add_argument("--zoo", nargs="*", help="the zoo's fp32 models (bench.zoo, --quick sizes) instead of the flow")
    parser.add_argument(
        "--full", action="store_true", help="with --zoo: the zoo's full sizes (python -m bench's), not --quick's"
    )
    args = parser.parse_args(argv)
    names = DEFAULT_PIPELINE.split(",")
    if args.instead:
        base = args.instead.split("{")[0]
        pipeline, label = [args.instead if name == base else name for name in names], f"xir with {args.instead}"
        missing = base not in names
    else:
        pipeline, label = [name for name in names if name != args.without], f"xir without {args.without}"
        missing = len(pipeline) == len(names)
    if missing:
        parser.error(f"{args.instead or args.without} is not in xir's default pipeline")
    if args.zoo is not None:
        return zoo(args.zoo, pipeline, label, max(args.rounds // 10, 5), quick=not args.full)
    print(
        f"{args.model}{'' if args.layers is None else f' ({args.layers} layers)'}, {', '.join(args.recipe)}; {label}; {args.rounds} rounds in random order; OMP_NUM_THREADS=1"
    )
    for recipe in args.recipe:
        bf16 = recipe == "bf16"
        buffers = flow.lower_variants(
            recipe,
            args.model,
            {
                "stock": lambda: llm_partitioners("stock", enable_bf16=bf16),
                "xir with" if args.instead else "xir without": lambda: [
                    XnnpackPartitioner(enable_bf16=bf16, pipeline=",".join(pipeline))
                ],
                "xir": lambda: llm_partitioners("xir", enable_bf16=bf16),
            },
            layers=args.layers,
        )
        if args.processes:
            flow.fresh_process_rounds(buffers, args.rounds, args.processes, args.threads)
        else:
            flow.random_order_rounds(buffers, args.rounds)
    return 0


def zoo(names: list[str], pipeline: list[str], label: str, rounds: int, quick: bool = True) -> int:
    """The zoo's fp32 models lowered by stock, by xir with ``pipeline`` and by xir's default; the
    three run in random order in every round (10 runs each); median ms, ratio to stock, max error."""
    import random
    import statistics
    import time

    from bench import zoo as models
    from lowering import XnnpackPartitioner

    name_of = " ".join(label.split()[:2])  # "xir with" or "xir without"
    print(
        f"the zoo ({'--quick' if quick else 'full'} sizes), fp32; {label}; {rounds} rounds of 10 runs in random order"
    )
    rng = random.Random(0)
    for model in models.zoo(quick):
        if names and model.name not in names:
            continue
        forms = {"stock": None, name_of: XnnpackPartitioner(pipeline=",".join(pipeline)), "xir": XnnpackPartitioner()}
        inputs, loaded, errors, ops = models.lowered_forms(model, forms)
        times = {name: [] for name in loaded}
        for _ in range(rounds):
            order = list(loaded)
            rng.shuffle(order)
            for name in order:
                start = time.perf_counter()
                for _ in range(10):
                    loaded[name][1].execute(list(inputs))
                times[name].append((time.perf_counter() - start) / 10)
        ratio = {name: statistics.median(a / b for a, b in zip(times[name], times["stock"])) for name in loaded}
        print(
            f"  {model.name:<12}"
            + ", ".join(
                f"{name} {statistics.median(times[name]) * 1e3:.3f} ms ({ratio[name]:.2f}x, {ops[name]} ops, err {errors[name]:.2g})"
                for name in loaded
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
