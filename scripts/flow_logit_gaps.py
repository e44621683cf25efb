"""Where xir's logits in ExecuTorch's own LLM flow leave stock's, and what the programs run.

The flow's program (``bench.llm_flow``'s tiny two-layer models: dynamic shapes, custom SDPA) is
lowered by stock's two partitioners, by xir's default pipeline, and by xir's pipeline with one
change each (a pass left out, a pass with other options, or every fp32 ``rsqrt`` written
``1 / sqrt(x)`` as ATen and the portable kernel compute it). All of them run one generation (a
prefill of 7 tokens, then 16 decode steps) call by call; the script prints how many ops each has
inside its delegates and the largest difference of its logits from stock's over the generation.
It ends with the instructions of stock's and xir's default programs after ``to_executorch()``, by
kind (delegate calls, kernels).

    .venv/bin/python scripts/flow_logit_gaps.py [--model llama3] [--recipe bf16]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

from bench import llm_flow as flow  # noqa: E402  (sets OMP_NUM_THREADS=1 before torch loads, as the flow benchmark does)

# the variants: (label, how the default pipeline changes: ("without", pass) or ("instead", pass{options}))
VARIANTS = (
    ("means as mm between views", ("instead", "xnnpack.mean-over-last-dims{linear=false}")),
    ("means spatial", ("instead", "xnnpack.mean-over-last-dims{matmul=false}")),
    ("without fold-scale-shift-into-linears", ("without", "fold-scale-shift-into-linears")),
    ("rsqrt as 1 / sqrt", ("add", "scratch.rsqrt-as-div")),
    ("without xnnpack.bf16-in-fp32", ("without", "xnnpack.bf16-in-fp32")),
    ("without xnnpack.rope-as-pair-swap", ("without", "xnnpack.rope-as-pair-swap")),
    ("without xnnpack.casts-as-converts", ("without", "xnnpack.casts-as-converts")),
)


def _register_rsqrt_as_div() -> None:
    """``scratch.rsqrt-as-div``: an fp32 ``rsqrt(x)`` as ``1 / sqrt(x)`` (a pass of this script only)."""
    import attrs

    from lowering.passes._base import _float_constant
    from passes import PatternRewritePass, rewrite_pattern
    from xir import DType
    from xir.ops import aten

    @rewrite_pattern(aten.rsqrt)
    def rsqrt_as_div(node, rewriter):
        x = node.input
        if x.dtype is not DType.f32:
            return rewriter.notify_match_failure(node, "not fp32")
        root = rewriter.op_before(node, aten.sqrt, [x])
        rewriter.replace_node(
            node, [rewriter.op_before(node, aten.div.Tensor, [_float_constant(rewriter, "one", x.type, 1.0), root])]
        )
        return True

    @attrs.frozen
    class RsqrtAsDiv(PatternRewritePass):
        name = "scratch.rsqrt-as-div"
        rules = (rsqrt_as_div,)


def _pipeline(change: tuple[str, str]) -> str:
    from lowering.pipeline import DEFAULT_PIPELINE

    names = DEFAULT_PIPELINE.split(",")
    how, name = change
    if how == "without":
        return ",".join(n for n in names if n != name)
    if how == "instead":
        return ",".join(name if n == name.split("{")[0] else n for n in names)
    return ",".join(names[:-1] + [name, names[-1]])  # (before the last dead-code-elimination)


def _instructions(buffer: bytes) -> Counter:
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(buffer)
    program = getattr(program, "program", program)
    plan = program.execution_plan[0]
    kinds = Counter()
    for instruction in plan.chains[0].instructions:
        args = instruction.instr_args
        if type(args).__name__ == "KernelCall":
            op = plan.operators[args.op_index]
            kinds[op.name + (f".{op.overload}" if op.overload else "")] += 1
        else:
            kinds[type(args).__name__] += 1
    return kinds


def main(argv=None) -> int:
    from lowering import XnnpackPartitioner
    from lowering.fx.llm import llm_partitioners
    from xir_tools.harness import load_method

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama3", choices=sorted(flow.FAMILIES))
    parser.add_argument("--recipe", default="bf16")
    args = parser.parse_args(argv)
    _register_rsqrt_as_div()
    bf16 = args.recipe == "bf16"
    variants = {
        "stock": lambda: llm_partitioners("stock", enable_bf16=bf16),
        "xir": lambda: llm_partitioners("xir", enable_bf16=bf16),
    }
    for label, change in VARIANTS:
        variants[label] = lambda change=change: [XnnpackPartitioner(enable_bf16=bf16, pipeline=_pipeline(change))]
    print(f"{args.model}, {args.recipe}: each program's logits against stock's over a prefill of 7 and 16 decode steps")
    buffers = flow.lower_variants(args.recipe, args.model, variants)
    loaded = {name: load_method(buffer) for name, buffer in buffers.items()}  # (program, method): keep both
    worst = dict.fromkeys(buffers, 0.0)
    for call in flow.sequence_inputs(False):
        outputs = {name: method.execute(list(call))[0].float() for name, (_, method) in loaded.items()}
        for name in buffers:
            worst[name] = max(worst[name], float((outputs[name] - outputs["stock"]).abs().max()))
    for name in buffers:
        print(f"  {name:<40} max |logits - stock's| {worst[name]:.6g}")
    for name in ("stock", "xir"):
        kinds = _instructions(buffers[name])
        print(
            f"  {name} program: {sum(kinds.values())} instructions: "
            + ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
