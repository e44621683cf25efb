"""What ``xnnpack.patch-conv-as-matmul`` changes on the zoo's vision transformers (ViT and SigLIP of
``python -m bench --quick``, fp32 and bf16): each lowered with xir's default pipeline and with the
pass taken out (the patch embedding stays a convolution). Prints the lowering seconds (median of
``--rounds``, the two in turns), whether the delegate got only XNNPACK's linear rebuild, the max
error against eager, and the median latency of ``--runs`` calls (both programs interleaved in 7
rounds).

    .venv/bin/python scripts/patch_conv_as_matmul.py [--rounds 3] [--runs 200]
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

PASS = "xnnpack.patch-conv-as-matmul,"


def median_us(method, inputs, runs: int) -> float:
    for _ in range(10):
        method.execute(inputs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        method.execute(inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    from bench.zoo import siglip, vit
    from lowering.pipeline import DEFAULT_PIPELINE
    from xir_tools.harness import load_method, lower_edge, make_partitioner, reference, run_method, to_buffer

    assert PASS in DEFAULT_PIPELINE
    print(f"{'model':<12} {'form':<14} {'lower s':>8} {'light':>6} {'max err':>9} {'latency us':>11}")
    for make in (vit, siglip):
        model = make(True)
        for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            torch.manual_seed(0)
            module = model.make().eval().to(dtype)
            inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in model.inputs())
            ep = torch.export.export(module, inputs)
            expected = reference(ep, inputs)
            forms = {"convolution": DEFAULT_PIPELINE.replace(PASS, ""), "matrix product": DEFAULT_PIPELINE}
            seconds, rows = {form: [] for form in forms}, {}
            for _ in range(args.rounds):
                for form, pipeline in forms.items():
                    partitioner = make_partitioner("xir", enable_bf16=dtype == torch.bfloat16, pipeline=pipeline)
                    start = time.perf_counter()
                    edge, _ = lower_edge(ep, "xir", partitioner=partitioner)
                    seconds[form].append(time.perf_counter() - start)
                    rows[form] = (partitioner, edge)
            methods = {}
            for form, (partitioner, edge) in rows.items():
                methods[form] = load_method(to_buffer(edge))
                outputs = run_method(methods[form][1], list(inputs))
                error = max((a.float() - b.float()).abs().max().item() for a, b in zip(outputs, expected))
                rows[form] = (not partitioner.all_passes_reasons, error)
            latency = {form: [] for form in forms}
            for _ in range(7):
                for form, (_, method) in methods.items():
                    latency[form].append(median_us(method, list(inputs), args.runs))
            for form in forms:
                light, error = rows[form]
                print(
                    f"{model.name + ' ' + label:<12} {form:<14} {statistics.median(seconds[form]):>8.1f} "
                    f"{'yes' if light else 'no':>6} {error:>9.2g} {statistics.median(latency[form]):>11.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
