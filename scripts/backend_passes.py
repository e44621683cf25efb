"""What giving a delegate only ExecuTorch's XNNPACK linear rebuild saves (``lowering/fx/backend_passes.py``).

Each program is lowered (``to_edge_transform_and_lower``: ExecuTorch's steps and xir's) three ways,
in random order in every round: stock's partitioner(s), xir with ``all_backend_passes=True`` (every
delegate gets all 17 of ExecuTorch's XNNPACK preprocessing passes), and xir's default. The script
prints the median seconds of each, the ratios, how many of xir's delegates were light, and whether
every delegate's serialized XNNPACK graph is the same bytes with and without the skipped passes.

    .venv/bin/python scripts/backend_passes.py [--rounds 3]             # the zoo (python -m bench --quick's models)
    .venv/bin/python scripts/backend_passes.py --flow [--rounds 3]      # ExecuTorch's LLM flow (bench.llm_flow)
    .venv/bin/python scripts/backend_passes.py --fuzz 50                # the fuzzer's programs, bytes only

``--fuzz N``: the fuzzer's programs of seeds 0..N-1 of each kind (fp32, bf16, static and dynamic
quantization; ``xir fuzz``'s generator), each lowered with xir both ways once: how many had light
delegates, and whether every delegate's bytes were the same (the programs that differ are listed).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

import torch  # noqa: E402

WAYS = ("stock", "xir, all passes", "xir")


def _payloads(edge_manager) -> list[tuple[bytes, bool]]:
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    from lowering.fx.backend_passes import KEY

    modules = get_lowered_submodules(edge_manager.exported_program().graph_module)
    return [(m.processed_bytes, any(s.key == KEY for s in m.compile_specs)) for _, m, _ in modules]


def _rounds(lowerers: dict, rounds: int) -> tuple[dict, dict]:
    """{way: [seconds]}, {way: payloads of the last lowering}."""
    times: dict = {way: [] for way in lowerers}
    payloads: dict = {}
    for _ in range(rounds):
        order = list(lowerers)
        random.shuffle(order)
        for way in order:
            start = time.perf_counter()
            edge = lowerers[way]()
            times[way].append(time.perf_counter() - start)
            payloads[way] = _payloads(edge)
    return times, payloads


def _row(label: str, times: dict, payloads: dict) -> str:
    med = {way: statistics.median(t) for way, t in times.items()}
    light = sum(1 for _, is_light in payloads["xir"] if is_light)
    same = [p for p, _ in payloads["xir"]] == [p for p, _ in payloads["xir, all passes"]]
    return (
        f"{label:<22} {med['stock']:>8.1f} {med['xir, all passes']:>13.1f} {med['xir']:>8.1f} "
        f"{med['xir'] / med['stock']:>10.2f} {med['xir'] / med['xir, all passes']:>12.2f} "
        f"{light:>3}/{len(payloads['xir']):<3} {'yes' if same else 'NO':>11}"
    )


HEADER = (
    f"{'program':<22} {'stock s':>8} {'xir all s':>13} {'xir s':>8} {'xir/stock':>10} {'xir/all':>12} "
    f"{'light':>7} {'same bytes':>11}"
)


def zoo(rounds: int) -> None:
    from bench.zoo import zoo as models
    from xir_tools.harness import lower_edge, make_partitioner

    print(HEADER)
    for model in models(True):
        for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            torch.manual_seed(0)
            module = model.make().eval().to(dtype)
            inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in model.inputs())
            ep = torch.export.export(module, inputs)
            bf16 = dtype == torch.bfloat16

            def way(which, **options):
                return lambda: lower_edge(ep, which, partitioner=make_partitioner(which, enable_bf16=bf16, **options))[
                    0
                ]

            times, payloads = _rounds(
                {"stock": way("stock"), "xir, all passes": way("xir", all_backend_passes=True), "xir": way("xir")},
                rounds,
            )
            print(_row(f"{model.name} {label}", times, payloads), flush=True)


def flow(rounds: int) -> None:
    import executorch.kernels.quantized  # noqa: F401
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from bench import llm_flow
    from lowering import XnnpackPartitioner
    from lowering.fx.llm import llm_partitioners, to_edge_transform_and_lower_llama

    print(HEADER)
    for model in ("llama3", "qwen3"):
        for recipe in ("fp32", "8da4w", "bf16"):
            with tempfile.TemporaryDirectory() as directory:
                params, checkpoint = llm_flow.write_checkpoint(directory, params=llm_flow.FAMILIES[model][2])
                prepared = llm_flow.prepare(
                    llm_flow.llm_config(recipe, params, checkpoint, directory, True, True, model)
                )
                bf16 = recipe == "bf16"

                def way(make):
                    return lambda: (
                        to_edge_transform_and_lower_llama(
                            llm_flow.fresh_builder(prepared.builder), make(), prepared.quantizers
                        ).edge_manager
                    )

                times, payloads = _rounds(
                    {
                        "stock": way(lambda: llm_partitioners("stock", enable_bf16=bf16)),
                        "xir, all passes": way(lambda: [XnnpackPartitioner(enable_bf16=bf16, all_backend_passes=True)]),
                        "xir": way(lambda: llm_partitioners("xir", enable_bf16=bf16)),
                    },
                    rounds,
                )
                print(_row(f"{model} {recipe}", times, payloads), flush=True)


def fuzz(count: int) -> None:
    from xir_tools.fuzz.case import prepare
    from xir_tools.fuzz.generator import generate
    from xir_tools.fuzz.program import KINDS, instantiate
    from xir_tools.harness import lower_edge

    for kind in KINDS:
        lowered = light = 0
        differ, failed = [], []
        for seed in range(count):
            try:
                make_module, make_inputs = instantiate(generate(seed, kind).module_source())
                module, inputs = prepare(make_module, make_inputs, kind, per_channel=kind == "dynamic")
                ep = torch.export.export(module, inputs)
                payloads = {
                    all_passes: _payloads(
                        lower_edge(ep, "xir", enable_bf16=kind == "bf16", all_backend_passes=all_passes)[0]
                    )
                    for all_passes in (True, False)
                }
            except Exception as error:  # (a program neither way lowers: counted, not compared)
                failed.append(f"{seed}: {type(error).__name__}")
                continue
            lowered += 1
            light += any(is_light for _, is_light in payloads[False])
            if [p for p, _ in payloads[True]] != [p for p, _ in payloads[False]]:
                differ.append(seed)
        print(
            f"{kind:<8} {lowered} of {count} programs lowered, {light} with light delegates, "
            f"{'every delegate the same bytes' if not differ else f'DIFFERENT BYTES: seeds {differ}'}"
            f"{f'; not lowered: {failed}' if failed else ''}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flow", action="store_true", help="ExecuTorch's LLM flow instead of the zoo")
    parser.add_argument("--fuzz", type=int, metavar="N", help="the fuzzer's programs instead (bytes only)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    random.seed(0)
    if args.fuzz:
        fuzz(args.fuzz)
        return
    print(
        f"to_edge_transform_and_lower seconds, median of {args.rounds} random-order rounds; light = xir's delegates "
        "that got only the linear rebuild; same bytes = every delegate's XNNPACK graph as with all passes\n"
    )
    (flow if args.flow else zoo)(args.rounds)


if __name__ == "__main__":
    main()
