"""ExecuTorch's example models, lowered with stock's partitioner and with xir's, in one run.

    .venv/bin/python -m bench.example_zoo [--only NAME ...] [--runs N] [--dtypes fp32 int8] [--fresh P]

The models are those of the wheel's ``executorch/examples/models`` that load here (no torchvision,
torchaudio, timm or torchsr; no download: a factory that downloads weights is replaced by its
architecture with random weights, e.g. MobileBERT from ``MobileBertConfig()``, 4 of its 24
layers), and
torchvision-free replicas of the CNNs the list names (``bench/replicas.py``: mv2, mv3, resnet18,
ic3), named ``*-replica``. int8 is the list's quantization (``examples/xnnpack/__init__.py``'s
``MODEL_NAME_TO_OPTIONS``, with ``examples/xnnpack/quantization/utils.py``'s ``quantize``: one
calibration call on the example inputs); a model the list does not name gets static per-channel
quantization, as its CNNs do. Each program is lowered by both partitioners
(``to_edge_transform_and_lower``), serialized, loaded with ``executorch.runtime`` and run: the
delegates, the ops left outside that run a kernel in the serialized program (not ExecuTorch's
allocations and static views, ``harness.kernels_outside``), the max error against the reference (eager for fp32, the
converted model for int8) and over the reference's peak, and the median latency of ``--runs`` warm
runs, stock and xir in turns (in a random order each turn: whichever runs first in a turn is
slower). ``same`` marks a row whose ``.pte`` is byte for byte stock's: its latency is stock's by
construction, and a difference in the timings is the machine's noise. ``--fresh P`` times the two
programs again in P fresh interpreters (``bench.time_programs``), whose figures replace the
in-process ones: a process keeps the luck of where its buffers landed for all its runs, and on this
machine the same program's latency differs by up to 15% from one process to the next.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

warnings.filterwarnings("ignore")


@dataclass
class Entry:
    name: str
    make: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple]
    quantization: str = "STATIC_PER_CHANNEL"  # the list's QuantType name; "" for fp32 only


def _toy(cls_name):
    from executorch.examples.models import toy_model

    cls = getattr(toy_model, cls_name)
    return lambda: cls(), lambda: cls().get_example_inputs()


def _example(module, cls_name):
    def make():
        import importlib

        return getattr(importlib.import_module(f"executorch.examples.models.{module}"), cls_name)()

    return lambda: make().get_eager_model(), lambda: make().get_example_inputs()


def _mobilebert():
    from transformers import MobileBertConfig, MobileBertModel

    # MobileBERT's own config but 4 of its 24 layers: the whole model's dynamically quantized
    # lowering takes over 15 minutes here per partitioner
    return MobileBertModel(MobileBertConfig(num_hidden_layers=4), add_pooling_layer=False).eval()


class FirstOutput(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args):
        return self.module(*args)[0]


def entries() -> list[Entry]:
    from bench.replicas import replica

    image = lambda size: lambda: (torch.randn(1, 3, size, size),)  # noqa: E731
    return [
        Entry("mul", *_toy("MulModule"), ""),
        Entry("linear", *_toy("LinearModule")),
        Entry("add", *_toy("AddModule"), "STATIC_PER_TENSOR"),
        Entry("add_mul", *_toy("AddMulModule"), "STATIC_PER_TENSOR"),
        Entry("softmax", *_toy("SoftmaxModule"), ""),
        Entry("conv1d", *_toy("Conv1dModule")),
        Entry("ds_cnn", *_example("mlperf_tiny", "DSCNNKWSModel")),
        Entry("mobilenet_v1_025", *_example("mlperf_tiny", "MobileNetV1025Model")),
        Entry("resnet8", *_example("mlperf_tiny", "ResNet8Model")),
        Entry("deep_autoencoder", *_example("mlperf_tiny", "DeepAutoEncoderModel")),
        Entry("lstm", *_example("lstm", "LSTMModel"), ""),
        Entry(
            "mobilebert-4-layers",
            lambda: FirstOutput(_mobilebert()),
            lambda: (torch.randint(0, 30522, (1, 8)),),
            "DYNAMIC_PER_CHANNEL",
        ),
        Entry("mv2-replica", lambda: replica("mv2-replica"), image(224)),
        Entry("mv3-replica", lambda: replica("mv3-replica"), image(224)),
        Entry("resnet18-replica", lambda: replica("resnet18-replica"), image(224)),
        Entry("ic3-replica", lambda: replica("ic3-replica"), image(299)),
    ]


def quantize(module, inputs, quantization: str):
    """The example list's quantization (examples/xnnpack/quantization/utils.py's ``quantize``)."""
    from executorch.examples.xnnpack import QuantType
    from executorch.examples.xnnpack.quantization.utils import quantize as example_quantize

    captured = torch.export.export(module, inputs, strict=False).module()
    return example_quantize(captured, inputs, QuantType[quantization])


def flat(inputs) -> list:
    return [t for t in torch.utils._pytree.tree_leaves(inputs)]


def measure(entry: Entry, dtype: str, runs: int, fresh: int = 0) -> list[dict]:
    from xir_tools import harness

    torch.manual_seed(0)
    module, inputs = entry.make().eval(), entry.inputs()
    if dtype == "int8":
        module = quantize(module, inputs, entry.quantization)
    ep = torch.export.export(module, inputs, strict=False)
    with torch.no_grad():
        expected = [t.detach() for t in torch.utils._pytree.tree_leaves(module(*inputs))]
    peak = max(t.float().abs().max().item() for t in expected)
    rows, methods, buffers = [], {}, {}
    for which in ("stock", "xir"):
        row = {"model": entry.name, "dtype": dtype, "which": which, "error": None}
        rows.append(row)
        try:
            start = time.perf_counter()
            edge, _ = harness.lower_edge(ep, which)
            row["delegates"] = harness.delegate_count(edge)
            program = harness.to_program(edge)
            row["outside"] = harness.kernels_outside(program)
            buffer = buffers[which] = program.buffer
            row["lower_s"] = time.perf_counter() - start
            row["same"] = which == "xir" and buffer == buffers.get("stock")
            _, method = harness.load_method(buffer)
            outputs = harness.run_method(method, flat(inputs))
            row["err"] = harness.max_error(outputs, expected)
            row["rel"] = row["err"] / max(peak, 1e-12)
            methods[which] = method
        except harness.LoadError as e:
            row["error"] = f"load/run failed: {harness.first_line(e.reason) if e.reason else e}"
        except Exception as e:
            row["error"] = harness.first_line(e)
    times = {which: [] for which in methods}
    args = flat(inputs)
    for method in methods.values():
        method.execute(args)  # warm
    order = list(methods)
    turns = random.Random(0)
    for _ in range(runs):
        turns.shuffle(order)
        for which in order:
            start = time.perf_counter()
            methods[which].execute(args)
            times[which].append(time.perf_counter() - start)
    for row in rows:
        if row["which"] in times:
            row["ms"] = statistics.median(times[row["which"]]) * 1e3
    if fresh and len(methods) == 2:
        _time_fresh(rows, {which: buffers[which] for which in methods}, args, runs, fresh)
    return rows


def _time_fresh(rows: list[dict], buffers: dict, args: list, runs: int, processes: int) -> None:
    """Replace the rows' latency with the median of ``processes`` fresh interpreters' medians
    (``bench.time_programs``: ``runs`` shuffled rounds each, no torch model in the process), and give
    xir's row the median of the processes' per-round ratios to stock ("ratio")."""
    from bench.llm_flow import time_in_fresh_processes

    names, results, _ = time_in_fresh_processes(buffers, runs, processes, inputs=args)
    for row in rows:
        i = names.index(row["which"])
        row["ms"] = statistics.median(r["run"]["ms"][i] for r in results)
        if i:
            ratios = [r["run"]["ratio"][i] for r in results]
            row["ratio"], row["ratios"] = statistics.median(ratios), (min(ratios), max(ratios))


def _outside(counter) -> str:
    if counter is None:
        return "-"
    total = sum(counter.values())
    if not total:
        return "0"
    top = ", ".join(f"{op.removeprefix('aten.')} {n}" for op, n in counter.most_common(3))
    return f"{total} ({top})"


def table(rows: list[dict]) -> str:
    header = [
        "model",
        "dtype",
        "partitioner",
        "delegates",
        "outside",
        "max err",
        "err/peak",
        "ms",
        "ratio",
        "same",
        "failure",
    ]
    lines = []
    for r in rows:
        lines.append(
            [
                r["model"],
                r["dtype"],
                r["which"],
                str(r.get("delegates", "-")),
                _outside(r.get("outside")),
                f"{r['err']:.3g}" if "err" in r else "-",
                f"{r['rel']:.4f}" if "rel" in r else "-",
                f"{r['ms']:.3f}" if "ms" in r else "-",
                f"{r['ratio']:.2f} ({r['ratios'][0]:.2f}-{r['ratios'][1]:.2f})" if "ratio" in r else "",
                "same" if r.get("same") else "",
                (r["error"] or "")[:70],
            ]
        )
    widths = [max(len(x[i]) for x in [header] + lines) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(out)


def targets(rows: list[dict]) -> str:
    """Where xir misses a target against stock's row (delegates, ops outside, latency within 10%
    or 5 us)."""
    misses = []
    pairs = {}
    for r in rows:
        pairs.setdefault((r["model"], r["dtype"]), {})[r["which"]] = r
    for (model, dtype), pair in pairs.items():
        stock, xir = pair.get("stock"), pair.get("xir")
        if xir is None or stock is None or "err" not in stock:
            if xir is not None and "err" not in xir:
                misses.append(f"{model} {dtype}: xir fails ({xir['error']})")
            continue
        if "err" not in xir:
            misses.append(f"{model} {dtype}: xir fails where stock runs ({xir['error']})")
            continue
        if xir["delegates"] > stock["delegates"]:
            misses.append(f"{model} {dtype}: delegates {xir['delegates']} > stock's {stock['delegates']}")
        if sum(xir["outside"].values()) > sum(stock["outside"].values()):
            misses.append(
                f"{model} {dtype}: ops outside {_outside(xir['outside'])} > stock's {_outside(stock['outside'])}"
            )
        if "ratio" in xir:  # (fresh processes: xir slower than stock in every one of them)
            if not xir.get("same") and xir["ratios"][0] > 1.0:
                low, high = xir["ratios"]
                misses.append(f"{model} {dtype}: latency {low:.2f}-{high:.2f}x stock's in every fresh process")
        elif not xir.get("same") and xir["ms"] > stock["ms"] * 1.1 + 0.005:  # (10%, or 5 us: noise at the toys' sizes)
            misses.append(f"{model} {dtype}: latency {xir['ms']:.3f} ms > 1.1x stock's {stock['ms']:.3f} ms")
    return "targets: all met" if not misses else "targets missed:\n  " + "\n  ".join(misses)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="only these models (names as in the table)")
    parser.add_argument("--dtypes", nargs="*", default=["fp32", "int8"], choices=["fp32", "int8"])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each program (default 20)")
    parser.add_argument(
        "--fresh",
        type=int,
        default=0,
        metavar="N",
        help="time in N fresh interpreters instead (bench.time_programs, --runs rounds each): ms is "
        "the median of their medians, ratio the median of their per-round xir/stock ratios (their "
        "range in brackets); a latency target is missed when xir is slower in every one",
    )
    args = parser.parse_args(argv)
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    rows = []
    for entry in entries():
        if args.only and entry.name not in args.only and entry.name.split(" ")[0] not in args.only:
            continue
        for dtype in args.dtypes:
            if dtype == "int8" and not entry.quantization:
                continue
            print(f"[{entry.name} {dtype}]", file=sys.stderr, flush=True)
            try:
                rows += measure(entry, dtype, args.runs, args.fresh)
            except Exception as e:  # the model did not export or quantize
                from xir_tools.harness import first_line

                rows.append({"model": entry.name, "dtype": dtype, "which": "-", "error": first_line(e)})
    print(table(rows))
    print(targets(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
