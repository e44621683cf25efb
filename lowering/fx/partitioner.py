"""xir's XNNPACK partitioner: a drop-in for ExecuTorch's, deciding in the IR.

    from lowering import XnnpackPartitioner, to_edge_transform_and_lower

    partitioner = XnnpackPartitioner(enable_bf16=True)
    program = to_edge_transform_and_lower(exported, partitioner=[partitioner]).to_executorch()
    print(partitioner.report())

ExecuTorch forbids a partitioner from changing the graph, so the object has two halves:
``transform_passes()`` (hand them to ExecuTorch's ``transform_passes=``, or to
``edge.transform(...)`` before ``to_backend``) writes xir's rewrites into the edge program;
``partition()`` only tags. Used bare (partitioner only), nodes whose delegation needs a rewrite
that did not run stay outside, and the report says so.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterable, Sequence

import attrs
import torch
from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

import xir
from passes import Instrument, Pass, format_pipeline

from ..capability import Options
from ..partition import PartitionPlan, plan_partition
from ..pipeline import Switches, partitioner_pipeline, planned_rewrites
from ..rules import ALL_PRECISIONS, DYNAMIC, FP32, STATIC
from .backend_passes import delegation_specs
from .dim_orders import ContiguousDimOrders
from .rewrite_pass import XirRewritePass
from .tags import emit_tags
from .xir_ops_as_aten import rewrite_program, undelegated_xir_nodes

logger = logging.getLogger("xir")

# ops XNNPACK takes whole: kept from decomposition when (and only when) xir will delegate them
PRESERVED_OPS = (
    "linear.default",
    "hardswish.default",
    "max_pool2d.default",
    "prelu.default",
    "upsample_bilinear2d.vec",
)

_PRECISION_NAMES = {"FP32": FP32, "STATIC_QUANT": STATIC, "DYNAMIC_QUANT": DYNAMIC}


def _precisions(config_precisions: Any) -> frozenset:
    if config_precisions is None:
        return ALL_PRECISIONS
    items = config_precisions if isinstance(config_precisions, (list, tuple, set, frozenset)) else [config_precisions]
    result = set()
    for item in items:
        name = getattr(item, "name", item)
        if name not in _PRECISION_NAMES:
            raise ValueError(f"unknown config precision {item!r}; expected one of {', '.join(_PRECISION_NAMES)}")
        result.add(_PRECISION_NAMES[name])
    return frozenset(result)


class XnnpackPartitioner(Partitioner):
    """ExecuTorch Partitioner for XNNPACK, deciding in xir's IR.

    Accepts the stock constructor's keyword arguments with the same meaning (``per_op_mode``,
    ``enable_bf16``, ``force_non_static_weights_for_f32_linear``, ``config_precisions``,
    ``verbose``), plus ``pipeline`` (pass list or text replacing the default rewrite pipeline;
    a string starting with ``+`` extends it) and ``instruments`` for the pass manager.

    Without fp32 among ``config_precisions`` (dynamically quantized linears only, as the flow's
    first stage or ``backend.xnnpack.extended_ops=false``) the float ops stay outside, and the
    pipeline drops the passes that would rewrite them for XNNPACK (the steps of
    :data:`lowering.pipeline.PHASES` switched by ``float_ops``).

    ``bf16_linears_as_f16=True`` (with ``enable_bf16``) adds ``xnnpack.bf16-linear-as-f16`` to the
    pipeline: bf16 linears run as XNNPACK's fp16 GEMM, at half the weight bytes of the fp32 GEMM
    XNNPACK otherwise runs for them. Activations beyond fp16's range (+-65504) become infinite there,
    which is why it is not the default.

    ``bf16_activations_in_fp32=True`` (with ``enable_bf16``) adds ``xnnpack.bf16-activations-in-fp32``:
    the bf16 ops XNNPACK defines in fp32 run as fp32 ops on fp32 values, rounded to bf16 only where
    a value leaves them, instead of converting around every op. Faster for bf16 CNNs and encoders;
    the results are the fp32 computation on the bf16 inputs and weights (not eager's per-op bf16
    rounding); a linear's bf16 weight is stored as fp16 (exact but below 2**-14, within 2**-25),
    which XNNPACK widens to fp32 when the program loads, other constants as fp32.

    In a list of partitioners (ExecuTorch's LLM flow: a DQ-only stage, then the rest; stock's
    partitioner before or after xir's) it takes what its plan delegates and leaves the rest, xir's
    own ops (``xir.slice``, ``xir.convert``, ...) among them, to the next. Those no partitioner took
    are written back as the ATen ops they stand for when ExecuTorch's ``to_edge_transform_and_lower``
    asks ``ops_to_not_decompose`` after its last ``to_backend`` (``lowering.fx.xir_ops_as_aten``; after
    one's own ``to_backend`` calls, its ``XirOpsAsAten`` pass for ``to_executorch``).

    A delegate whose ops ExecuTorch's XNNPACK preprocessing passes would leave as they are gets
    only the one of them that can change it (``lowering.fx.backend_passes``: the same delegate, in
    less lowering time); ``all_backend_passes=True`` runs all of them on every delegate.
    """

    def __init__(
        self,
        configs=None,
        config_precisions=None,
        per_op_mode: bool = False,
        verbose: bool = False,
        *,
        enable_bf16: bool = False,
        force_non_static_weights_for_f32_linear: bool = False,
        pipeline: Sequence[Pass] | str | None = None,
        instruments: Iterable[Instrument] = (),
        bf16_linears_as_f16: bool = False,
        bf16_activations_in_fp32: bool = False,
        all_backend_passes: bool = False,
        **kwargs,
    ):
        if configs is not None:
            raise ValueError("xir's partitioner takes its rules from lowering.rules, not stock configs; drop configs=")
        unknown = set(kwargs) - {"dynamic_shape"}
        if unknown:
            raise TypeError(f"unknown keyword argument(s): {', '.join(sorted(unknown))}")
        super().__init__()
        self.delegation_spec = DelegationSpec(XnnpackBackend.__name__, [])
        self.options = Options(
            enable_bf16=enable_bf16,
            precisions=_precisions(config_precisions),
            force_non_static_weights_for_f32_linear=force_non_static_weights_for_f32_linear,
            per_op_mode=per_op_mode,
        )
        on = {"bf16_linears_as_f16": bf16_linears_as_f16, "bf16_activations_in_fp32": bf16_activations_in_fp32}
        for option, value in on.items():
            if value and not enable_bf16:
                raise ValueError(f"{option}=True needs enable_bf16=True (without it bf16 stays outside XNNPACK)")
        switches = Switches(float_ops=FP32 in self.options.precisions, **on)
        self.pipeline = partitioner_pipeline(pipeline, switches, enable_bf16)
        self.instruments = list(instruments)
        self.verbose = verbose
        self.all_backend_passes = all_backend_passes
        # why each delegate of the last partition() gets all of XNNPACK's preprocessing passes
        # (the others get only the linear rebuild: lowering.fx.backend_passes)
        self.all_passes_reasons: dict[str, str] = {}
        self.last_plan: PartitionPlan | None = None
        self.last_graph: xir.Graph | None = None
        self.rewrites_applied: set[str] = set()
        # the last ops_to_not_decompose question and answer: (program, its graph, its nodes, answer)
        self._not_decompose_asked: tuple | None = None
        # seconds of xir's own steps in the lowerings this partitioner took part in, by step:
        # "import" (ExportedProgram -> IR), "plan" (capability and partition plan), "passes" (the
        # rewrite pipeline), "write-back" (IR -> the edge program), "tags" (the plan into the FX graph)
        self.timings: Counter = Counter()
        self.step_counts: Counter = Counter()  # how many times each step ran

    @contextmanager
    def _timed(self, step: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[step] += time.perf_counter() - start
            self.step_counts[step] += 1

    # ----------------------------------------------------------------- rewrites
    def transform_passes(self) -> list:
        """The ExecuTorch transform passes that write xir's rewrites into the edge program, then
        declare contiguous the values laid out as contiguous ones (``lowering/fx/dim_orders.py``)."""
        return [XirRewritePass(self), ContiguousDimOrders()]

    @property
    def pipeline_text(self) -> str:
        return format_pipeline(self.pipeline)

    # ------------------------------------------------------------ decomposition
    def ops_to_not_decompose(self, ep) -> tuple[list, Any]:
        if undelegated_xir_nodes(ep.graph_module):
            # xir's ops exist only after xir's transform passes, and ExecuTorch's
            # to_edge_transform_and_lower asks again only after its last to_backend, about the
            # program to_executorch lowers: what no partitioner of the list took is written back,
            # in place, as the ATen ops it stands for (an xir op has no kernel outside a delegate)
            rewrite_program(ep)
            return [_aten_op(name) for name in PRESERVED_OPS], lambda fx_node: False
        if any(n.op == "call_function" and "executorch_call_delegate" in str(n.target) for n in ep.graph.nodes):
            # ExecuTorch asks again after lowering, to check that no op it kept whole was left out
            # as supported: what is still outside is what xir's plan rejected
            return [_aten_op(name) for name in PRESERVED_OPS], lambda fx_node: False
        nodes = tuple(ep.graph.nodes)
        asked = self._not_decompose_asked
        if asked is not None and asked[0] is ep and asked[1] is ep.graph and asked[2] == nodes:
            ops, keep_whole = asked[3]  # (ExecuTorch asks twice about the same program: the answer is the same)
            return list(ops), keep_whole
        result = self._ops_to_not_decompose(ep)
        self._not_decompose_asked = (ep, ep.graph, nodes, result)
        return result

    def _ops_to_not_decompose(self, ep) -> tuple[list, Any]:
        with self._timed("import"):
            graph = xir.from_exported_program(ep)
        # what the plan delegates, not only what the capability allows: an op kept whole that
        # the plan then leaves outside (e.g. a 0-D result, a repaired group) has no kernel.
        # Planned as after the rewrites of the pipeline the capability asks about (they run later,
        # on the program to_edge makes): those its passes declare (planned_rewrites), the ones that
        # declare runs_for_planning run here on this import
        with self._timed("plan"):
            for rewrite in self.pipeline:
                if getattr(rewrite, "runs_for_planning", False):
                    rewrite.run(graph)  # (part of planning: on this import only, the program is not changed)
            plan = plan_partition(graph, attrs.evolve(self.options, rewrites=planned_rewrites(self.pipeline)))
        plan.raise_if_unlowerable()  # (before the decomposition that would hide why)
        keep = {id(node.fx_node) for node in plan.delegated_nodes}
        # ExecuTorch applies the op list to every node of the op on some of its paths, whatever the
        # filter says: an op is listed only when every node of it in the program will be delegated
        ops = []
        for name in PRESERVED_OPS:
            op = _aten_op(name)
            nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.target == op]
            if all(id(n) in keep for n in nodes):
                ops.append(op)

        def keep_whole(fx_node: torch.fx.Node) -> bool:
            return id(fx_node) in keep

        return ops, keep_whole

    # ------------------------------------------------------------------- tagging
    def partition(self, exported_program) -> Any:
        self._not_decompose_asked = None  # (decomposition is over: do not keep its program alive)
        with self._timed("import"):
            graph = xir.from_exported_program(exported_program)
        options = self.options
        with self._timed("plan"):
            plan = plan_partition(graph, options)
        self.last_plan, self.last_graph = plan, graph
        plan.raise_if_unlowerable()  # (ops that run nowhere else, in a pattern XNNPACK cannot take)
        with self._timed("tags"):
            tags = emit_tags(plan, exported_program, options)
            specs, self.all_passes_reasons = delegation_specs(
                exported_program, tags, self.delegation_spec, all_passes=self.all_backend_passes
            )
        if self.verbose:
            logger.warning("%s", plan.report())
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=specs)

    def report(self) -> str:
        """The partition report as text (as a page: ``xir_tools.html_report.write_partitioner_report``)."""
        if self.last_plan is None:
            return "xir partition: partition() has not run yet\n"
        text = self.last_plan.report()
        kept = self.last_plan.kept_matmuls
        if kept:
            text += (
                "  run as matrix multiplies, not rebuilt into a linear by XNNPACK's preprocessing (part of "
                f"the linear is outside the delegate, or the rebuild would change its shape): {', '.join(kept)}\n"
            )
        reasons = self.all_passes_reasons
        if reasons:
            text += (
                f"  ExecuTorch's XNNPACK preprocessing runs all its passes on {len(reasons)} of {len(self.last_plan.groups)} "
                "delegates (the others get only its linear rebuild; lowering.fx.backend_passes): "
                + "; ".join(f"{tag}: {why}" for tag, why in sorted(reasons.items()))
                + "\n"
            )
        return text


def _aten_op(name: str):
    op, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), overload)
