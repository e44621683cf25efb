"""xir against ExecuTorch's stock XNNPACK partitioner, side by side, in one run.

    .venv/bin/python -m bench [--quick] [--only NAME ...] [--runs N] [--lowerings N] [--no-scaling]

For every zoo model (fp32, bf16, and statically quantized for the CNNs) both partitioners lower
the same exported program; the table gives partition() time and whole-lowering time (xir's
split by pass), delegation coverage, the ops left outside, warm latency, max error against eager,
and load failures with the runtime's reason. Below each pair, what a user would run instead, on
the same inputs (``bench/alternatives.py``): eager PyTorch on one thread and on every core, and
ONNX Runtime's CPU provider with one thread per core, as ExecuTorch's XNNPACK threadpool has.
Latency is the median of ``--runs`` warm runs of each, all five timed in turns (rounds of two
runs each, the order rotated every round), so that a machine whose speed drifts slows them alike.
``xir/this`` is xir's latency over the row's. The scaling run times partition() on synthetic
stacks of growing size and fits the exponent of time against node count.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import time
import warnings
from collections import Counter

import torch

warnings.filterwarnings("ignore")


def _quiet():
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    for name in ("executorch", "torch", "xir"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _timed_partition(partitioner, sink: list):
    original = partitioner.partition

    def partition(ep):
        start = time.perf_counter()
        result = original(ep)
        sink.append(time.perf_counter() - start)
        return result

    partitioner.partition = partition


def lower_once(ep, inputs, which: str, enable_bf16: bool):
    """Lower ``ep`` with one partitioner; returns a dict of measurements (never raises)."""
    from passes import TimePasses
    from xir_tools.harness import (
        LoadError,
        delegate_count,
        delegated_ops,
        load_method,
        lower_edge,
        make_partitioner,
        outside_ops,
        run_method,
        to_buffer,
    )

    record = {"which": which, "partition_s": None, "lower_s": None, "passes": "", "error": None}
    partition_times: list = []
    timer = TimePasses(io.StringIO())
    try:
        options = {} if which == "stock" else {"instruments": [timer]}
        partitioner = make_partitioner(which, enable_bf16=enable_bf16, **options)
        _timed_partition(partitioner, partition_times)
        start = time.perf_counter()
        edge, _ = lower_edge(ep, which, partitioner=partitioner)
        record["lower_s"] = time.perf_counter() - start
        record["partition_s"] = sum(partition_times)
        record["xir_steps"] = dict(getattr(partitioner, "timings", {}))
        record["xir_counts"] = dict(getattr(partitioner, "step_counts", {}))
        if timer.rows:
            record["passes"] = ", ".join(
                f"{name} {seconds * 1e3:.0f}ms" for name, seconds, _ in timer.rows if seconds > 5e-4
            )
        inside, outside = delegated_ops(edge), outside_ops(edge)
        record.update(inside=inside, outside=outside, delegates=delegate_count(edge))
        start = time.perf_counter()
        record["buffer"] = to_buffer(edge)
        record["to_executorch_s"] = time.perf_counter() - start
        program, method = load_method(record["buffer"])
        record.update(program=program, method=method, outputs=run_method(method, inputs))
    except LoadError as e:  # (or RunError: a failed first run)
        reason = [line for line in e.log.splitlines() if "XNN" in line or "Failed" in line]
        record["error"] = f"load failed: {reason[0] if reason else ''}"
    except Exception as e:
        record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    return record


def measure_model(name, ep, inputs, reference, enable_bf16, lowerings=1):
    """Lower with stock and with xir ``lowerings`` times each, in turns (stock first, then xir
    first, ...), keeping each partitioner's fastest lowering: one lowering is at the mercy of
    whatever else the machine does, and the first of a run pays one-time costs."""
    from xir_tools.harness import max_error

    tries: dict = {"stock": [], "xir": []}
    for turn in range(max(1, lowerings)):
        for which in ("stock", "xir") if turn % 2 == 0 else ("xir", "stock"):
            tries[which].append(lower_once(ep, inputs, which, enable_bf16))
    results = [
        min(tries[which], key=lambda r: r["lower_s"] if r["lower_s"] is not None else math.inf)
        for which in ("stock", "xir")
    ]
    for r in results:  # (and the fastest serialization of the same program)
        serialized = [t["to_executorch_s"] for t in tries[r["which"]] if t.get("to_executorch_s") is not None]
        if serialized:
            r["to_executorch_s"] = min(serialized)
    for r in results:
        if "method" in r:
            r["max_err"] = max_error(r["outputs"], reference)
    return results


def alternative_rows(module, inputs) -> tuple[list[dict], dict]:
    """Eager on one thread and on every core, and ONNX Runtime, as rows of the table (an error
    where one cannot run), and {row: (run, setting)} for those that can, to time."""
    from bench import alternatives

    rows, runners = [], {}
    for which, make in (
        ("eager 1 thread", lambda: alternatives.eager_runner(module, inputs, 1)),
        (f"eager {alternatives.CORES} threads", lambda: alternatives.eager_runner(module, inputs, alternatives.CORES)),
        ("onnxruntime", lambda: alternatives.onnxruntime_runner(module, inputs)),
    ):
        runner, error = make()
        rows.append({"which": which, "latency_s": None, "error": error})
        if runner is not None:
            runners[which] = runner
    return rows, runners


def time_all(results: list[dict], runners: dict, inputs, runs: int) -> None:
    """Every program that loaded (stock's, xir's) and every alternative that runs, timed in turns
    (``alternatives.interleaved``): each result's ``latency_s``."""
    from contextlib import nullcontext

    from bench import alternatives

    programs = {
        r["which"]: ((lambda method=r["method"]: method.execute(list(inputs))), nullcontext())
        for r in results
        if "method" in r
    }
    latencies = alternatives.interleaved({**programs, **runners}, runs)
    for r in results:
        if r["which"] in latencies:
            r["latency_s"] = latencies[r["which"]]


def _coverage(r) -> str:
    if "inside" not in r:
        return "-"
    inside, outside = sum(r["inside"].values()), sum(r["outside"].values())
    return f"{inside}/{inside + outside} ({100 * inside / max(1, inside + outside):.0f}%)"


def _outside_kinds(r) -> str:
    if "outside" not in r:
        return ""
    kinds = Counter({k.split(".")[1] if "." in k else k: v for k, v in r["outside"].items()})
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in kinds.most_common(6)) + (" ..." if len(kinds) > 6 else "")


LOWERING_HEADER = (
    "model",
    "dtype",
    "partitioner",
    "export",
    "lower",
    "ExecuTorch's",
    "xir import",
    "xir plan",
    "xir passes",
    "xir write-back",
    "xir tags",
    "to_executorch",
    "whole",
    "xir share",
)


def _lowering_row(name, label, r, export_s) -> tuple:
    steps, counts = r.get("xir_steps") or {}, r.get("xir_counts") or {}
    own = sum(steps.values())
    whole = export_s + r["lower_s"] + (r.get("to_executorch_s") or 0.0)

    def step(key):
        if r["which"] != "xir":
            return "-"
        times = f" x{counts[key]}" if counts.get(key, 0) > 1 else ""
        return f"{steps.get(key, 0.0):.2f}{times}"

    return (
        name,
        label,
        r["which"],
        f"{export_s:.1f}",
        f"{r['lower_s']:.1f}",
        f"{r['lower_s'] - own:.1f}",
        step("import"),
        step("plan"),
        step("passes"),
        step("write-back"),
        step("tags"),
        "-" if r.get("to_executorch_s") is None else f"{r['to_executorch_s']:.1f}",
        f"{whole:.1f}",
        f"{100 * own / whole:.0f}%" if r["which"] == "xir" else "-",
    )


def print_table(rows, header=None):
    header = header or (
        "model",
        "dtype",
        "runs on",
        "partition ms",
        "lower s",
        "coverage",
        "delegates",
        "latency ms",
        "xir/this",
        "max err",
        "left outside / failure",
    )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def run_zoo(args):
    from bench.zoo import zoo
    from xir_tools.examples import quantize_module

    rows, pass_lines, summary, lowering_rows, lowering_summary = [], [], {}, [], []
    for model in zoo(args.quick):
        if args.only and model.name not in args.only:
            continue
        variants = [("fp32", torch.float32, None), ("bf16", torch.bfloat16, None)]
        if model.quantizable:
            variants.append(("int8", torch.float32, "static"))
        for label, dtype, quantize in variants:
            print(f"[{model.name} {label}] exporting ...", file=sys.stderr, flush=True)
            torch.manual_seed(0)
            module = model.make().eval().to(dtype)
            inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in model.inputs())
            try:
                if quantize:
                    module = quantize_module(module, inputs, quantize, per_channel=True)
                start = time.perf_counter()
                ep = torch.export.export(module, inputs)
                export_s = time.perf_counter() - start
                reference = ep.module()(*inputs)
            except Exception as e:
                rows.append(
                    (model.name, label, "-", "-", "-", "-", "-", "-", "-", "-", f"export failed: {str(e)[:60]}")
                )
                continue
            reference = list(reference) if isinstance(reference, (list, tuple)) else [reference]
            print(f"[{model.name} {label}] lowering with stock and xir ...", file=sys.stderr, flush=True)
            results = measure_model(model.name, ep, inputs, reference, dtype == torch.bfloat16, args.lowerings)
            runners = {}
            if not args.no_alternatives:
                print(f"[{model.name} {label}] eager and ONNX Runtime ...", file=sys.stderr, flush=True)
                rows_of_alternatives, runners = alternative_rows(module, inputs)
                results += rows_of_alternatives
            time_all(results, runners, inputs, args.runs)
            xir_latency = results[1].get("latency_s")
            for r in results[:2]:
                if r.get("lower_s") is not None:
                    lowering_rows.append(_lowering_row(model.name, label, r, export_s))
            wholes = [
                export_s + r["lower_s"] + (r.get("to_executorch_s") or 0.0)
                for r in results[:2]
                if r.get("lower_s") is not None and r.get("to_executorch_s") is not None
            ]
            if len(wholes) == 2:
                lowering_summary.append(
                    (
                        f"{model.name} {label}",
                        wholes[1] / wholes[0],
                        sum((results[1].get("xir_steps") or {}).values()) / wholes[1],
                    )
                )
            for r in results:
                latency = r.get("latency_s")
                ratio = f"{xir_latency / latency:.2f}" if r["which"] != "xir" and latency and xir_latency else ""
                if r["which"] not in ("stock", "xir"):
                    rows.append(
                        (
                            model.name,
                            label,
                            r["which"],
                            "-",
                            "-",
                            "-",
                            "-",
                            "-" if latency is None else f"{latency * 1e3:.2f}",
                            ratio,
                            "-",
                            r["error"] or "",
                        )
                    )
                    if latency and xir_latency:
                        summary.setdefault(r["which"], []).append(xir_latency / latency)
                    continue
                if r["which"] == "stock" and latency and xir_latency:
                    summary.setdefault("stock", []).append(xir_latency / latency)
                rows.append(
                    (
                        model.name,
                        label,
                        r["which"],
                        "-" if r["partition_s"] is None else f"{r['partition_s'] * 1e3:.0f}",
                        "-" if r["lower_s"] is None else f"{r['lower_s']:.1f}",
                        _coverage(r),
                        str(r.get("delegates", "-")),
                        "-" if latency is None else f"{latency * 1e3:.2f}",
                        ratio,
                        "-" if "max_err" not in r else f"{r['max_err']:.2g}",
                        r["error"] or _outside_kinds(r),
                    )
                )
                if r["which"] == "xir" and r["passes"]:
                    pass_lines.append(f"{model.name} {label}: {r['passes']}")
    print_table(rows)
    if summary:
        print("\nxir's latency over the others' (median over the models and dtypes both ran; < 1: xir faster):")
        for which, ratios in summary.items():
            ratios = sorted(ratios)
            faster = sum(1 for r in ratios if r < 1)
            print(f"  vs {which:<18} median {ratios[len(ratios) // 2]:.2f}, xir faster on {faster} of {len(ratios)}")
    if lowering_rows:
        print(
            "\nlowering time, seconds: export (torch.export), lower (to_edge_transform_and_lower: ExecuTorch's steps\n"
            "and, for xir, its own: import to IR x times, plan x times, passes, write-back, tags), to_executorch\n"
            "(and serialization); xir share = xir's own steps over the whole"
        )
        print_table(lowering_rows, LOWERING_HEADER)
    if lowering_summary:
        ratios = sorted(ratio for _, ratio, _ in lowering_summary)
        slower = [f"{name} {ratio:.2f}x" for name, ratio, _ in lowering_summary if ratio > 1]
        share = max(share for _, _, share in lowering_summary)
        print(
            f"\nlowering targets (each partitioner's fastest of {args.lowerings} lowerings, in turns): xir's whole over stock's "
            f"median {ratios[len(ratios) // 2]:.2f}, <= 1 on {len(ratios) - len(slower)} of {len(ratios)}"
            f"{' (over: ' + ', '.join(slower) + ')' if slower else ''} [target: all]; xir's own share at most "
            f"{100 * share:.0f}% [target: <= 10%]"
        )
    if pass_lines:
        print("\nxir's rewrite passes (time per pass, over 0.5 ms):")
        for line in pass_lines:
            print("  " + line)


def run_scaling(args):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as Stock
    from executorch.exir import EdgeCompileConfig, to_edge

    import lowering
    from bench.zoo import ConvStack, LinearStack

    sizes = (10, 20, 40, 80) if args.quick else (25, 50, 100, 200, 400)
    print("\nscaling: partition() time against graph size")
    header = f"{'stack':<10} {'blocks':>6} {'nodes':>6} {'stock ms':>9} {'xir ms':>8} {'xir/stock':>9}"
    print(header)
    print("-" * len(header))
    for name, make, inputs in (
        ("linear", LinearStack, lambda: (torch.randn(4, 32),)),
        ("conv", ConvStack, lambda: (torch.randn(1, 8, 8, 8),)),
    ):
        points = {"stock": [], "xir": []}
        for blocks in sizes:
            print(f"[scaling {name} x{blocks}] ...", file=sys.stderr, flush=True)
            ep = torch.export.export(make(blocks).eval(), inputs())
            edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
            program = edge.exported_program()
            nodes = sum(1 for n in program.graph.nodes if n.op == "call_function")
            measured = {}
            for which, partitioner in (("stock", Stock()), ("xir", lowering.XnnpackPartitioner())):
                start = time.perf_counter()
                partitioner.partition(program)
                measured[which] = time.perf_counter() - start
                points[which].append((nodes, measured[which]))
            print(
                f"{name:<10} {blocks:>6} {nodes:>6} {measured['stock'] * 1e3:>9.1f} {measured['xir'] * 1e3:>8.1f} "
                f"{measured['xir'] / measured['stock']:>9.2f}"
            )
        for which in ("stock", "xir"):
            print(f"  {name} {which}: time grows as nodes^{_exponent(points[which]):.2f}")


def _exponent(points) -> float:
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models and sizes: a few minutes on 2 cores")
    parser.add_argument("--only", nargs="*", help="zoo models to run (llama vit siglip bert resnet mobilenetv2)")
    parser.add_argument("--runs", type=int, default=None, help="timed warm runs per program (default 20, quick 10)")
    parser.add_argument(
        "--lowerings",
        type=int,
        default=3,
        help="lowerings per partitioner and program, in turns; the fastest is reported (default 3)",
    )
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--no-zoo", action="store_true")
    parser.add_argument("--no-alternatives", action="store_true", help="without the eager and ONNX Runtime rows")
    args = parser.parse_args(argv)
    args.runs = args.runs or (10 if args.quick else 20)
    _quiet()
    torch.set_num_threads(1)
    if not args.no_zoo:
        run_zoo(args)
    if not args.no_scaling:
        run_scaling(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
