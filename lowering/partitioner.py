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
import operator
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterable, Sequence

import attrs
import torch

import xir
from passes import Instrument, Pass, PassManager, check_order, format_pipeline, parse_pipeline
from xir.ops import aten

from .backend_passes import delegation_specs
from .capability import Options
from .linear_rebuild import keep_inexact_matmuls
from .partition import PartitionPlan, plan_partition
from .pipeline import Switches, float_op_passes, option_passes, pipeline_text
from .rules import (
    ALL_PRECISIONS,
    DEQUANTIZE_OPS,
    DYNAMIC,
    FP32,
    STATIC,
    STATIC_OPERAND_OPS,
)

FLOAT_LINEARS = (aten.linear, aten.addmm, aten.mm)

logger = logging.getLogger("xir")

IMPLICIT_QDQ_KEY = "IS_IMPLICIT_Q_DQ_TAG"  # executorch.backends.xnnpack.utils.quant_utils.IS_IMPLICIT_Q_DQ_TAG

# ops XNNPACK takes whole: kept from decomposition when (and only when) xir will delegate them
PRESERVED_OPS = (
    "linear.default",
    "hardswish.default",
    "max_pool2d.default",
    "prelu.default",
    "upsample_bilinear2d.vec",
)

# The rewrites xir makes in the edge program before partitioning (see transform_passes()), for the
# default options: the phases of lowering.pipeline.PHASES
DEFAULT_PIPELINE = pipeline_text()

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


def _base():
    from executorch.exir.backend.partitioner import Partitioner

    return Partitioner


class XnnpackPartitioner(_base()):
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
    asks ``ops_to_not_decompose`` after its last ``to_backend`` (``lowering.xir_ops_as_aten``; after
    one's own ``to_backend`` calls, its ``XirOpsAsAten`` pass for ``to_executorch``).

    A delegate whose ops ExecuTorch's XNNPACK preprocessing passes would leave as they are gets
    only the one of them that can change it (``lowering.backend_passes``: the same delegate, in
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
        from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
        from executorch.exir.backend.partitioner import DelegationSpec

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
        if pipeline is None:
            self.pipeline = parse_pipeline(pipeline_text(switches))
        else:
            if isinstance(pipeline, str) and pipeline.startswith("+"):
                passes = parse_pipeline(DEFAULT_PIPELINE) + parse_pipeline(pipeline[1:])
            else:
                passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
            self.pipeline = _switched(passes, switches)
        self.pipeline = [_with_partitioner_options(p, self.options) for p in self.pipeline]
        check_order(self.pipeline)
        self.instruments = list(instruments)
        self.verbose = verbose
        self.all_backend_passes = all_backend_passes
        # why each delegate of the last partition() gets all of XNNPACK's preprocessing passes
        # (the others get only the linear rebuild: lowering.backend_passes)
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
        declare contiguous the values laid out as contiguous ones (``lowering/dim_orders.py``)."""
        from .dim_orders import contiguous_dim_orders_pass

        return [_XirRewritePass(self), contiguous_dim_orders_pass()]

    @property
    def pipeline_text(self) -> str:
        return format_pipeline(self.pipeline)

    # ------------------------------------------------------------ decomposition
    def ops_to_not_decompose(self, ep) -> tuple[list, Any]:
        from .xir_ops_as_aten import rewrite_program, undelegated_xir_nodes

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
        from executorch.exir.backend.partitioner import PartitionResult

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
                "delegates (the others get only its linear rebuild; lowering.backend_passes): "
                + "; ".join(f"{tag}: {why}" for tag, why in sorted(reasons.items()))
                + "\n"
            )
        return text


def _switched(passes: list, switches: Switches) -> list:
    """A pipeline the user wrote, as the partitioner's options switch it (as they switch the steps
    of :data:`lowering.pipeline.PHASES`): the passes an option adds (each where its declared order
    puts it: :func:`_with_pass`), and without ``float_ops``, no pass for XNNPACK's float ops."""
    for option, name in option_passes().items():
        if getattr(switches, option):
            passes = _with_pass(passes, name)
    if not switches.float_ops:
        passes = [p for p in passes if getattr(p, "name", None) not in float_op_passes()]
    return passes


def _with_pass(pipeline: list, name: str) -> list:
    """``pipeline`` with the pass ``name`` right after the last of the passes it runs after
    (``runs_after``) in it, or else before the first it runs before (``runs_before``), before a
    last dead-code-elimination, or at the end; unless it is in it already."""
    names = [getattr(p, "name", None) for p in pipeline]
    if name in names:
        return pipeline
    (rewrite,) = parse_pipeline(name)
    makers = [i for i, other in enumerate(names) if other in rewrite.runs_after]
    readers = [i for i, other in enumerate(names) if other in rewrite.runs_before]
    if makers:
        at = max(makers) + 1
    elif readers:
        at = min(readers)
    elif names and names[-1] == "dead-code-elimination":
        at = len(names) - 1
    else:
        at = len(names)
    return pipeline[:at] + [rewrite] + pipeline[at:]


def planned_rewrites(pipeline: Iterable[Pass]) -> frozenset[str]:
    """The rewrites of ``pipeline`` the plan counts as done before they run (capability's
    ``options.rewrites``): its passes whose class declares ``planned_as_done`` (a torchao weight-only
    linear with a bias is kept whole for ``xnnpack.weight-only-linear-bias``). A pass that declares
    ``runs_for_planning`` (``xnnpack.weight-only-int8-linear``) is run on ops_to_not_decompose's own
    import before planning instead: it turns a linear the plan would reject into one it takes whole,
    and to_edge must keep that linear for it to match."""
    return frozenset(p.name for p in pipeline if getattr(p, "planned_as_done", False))


def _with_partitioner_options(p: Pass, options: Options) -> Pass:
    """Passes that create ops only XNNPACK runs take their settings from the partitioner. A pass
    whose ``enable_bf16`` was set (away from its default) to something else than the partitioner's
    is an error, not overwritten: the partitioner would not delegate what the pass made for it."""
    if not attrs.has(type(p)) or "enable_bf16" not in attrs.fields_dict(type(p)):
        return p
    default = attrs.fields_dict(type(p))["enable_bf16"].default
    if p.enable_bf16 != default and p.enable_bf16 != options.enable_bf16:
        raise ValueError(
            f"the pipeline sets {p.name}{{enable_bf16={str(p.enable_bf16).lower()}}}, the partitioner "
            f"enable_bf16={options.enable_bf16}: set enable_bf16 on XnnpackPartitioner (its passes "
            "follow it), not on the pass"
        )
    return attrs.evolve(p, enable_bf16=options.enable_bf16)


def _aten_op(name: str):
    op, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), overload)


def emit_tags(plan: PartitionPlan, ep: Any, options: Options) -> list[str]:
    """Write the plan into the FX graph: delegation tags on the ops (and their getitems and
    constants), and the Q/DQ fold marks for the groups that really were taken."""
    signature = ep.graph_signature
    constant_names = {
        spec.arg.name
        for spec in signature.input_specs
        if spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and hasattr(spec.arg, "name")
    }
    # Constants outside the state dict (lifted tensors, non-persistent buffers) are shared by the
    # edge program with the program it came from, and ExecuTorch removes a delegated constant from
    # that shared dict: tag them only where XNNPACK needs a static tensor (GEMM weights and biases).
    shared_names = {
        spec.arg.name
        for spec in signature.input_specs
        if hasattr(spec.arg, "name")
        and (spec.kind.name == "CONSTANT_TENSOR" or (spec.kind.name == "BUFFER" and spec.persistent is False))
    }
    mutated_targets = set((getattr(signature, "buffers_to_mutate", None) or {}).values())
    mutated = {name for name, target in signature.inputs_to_buffers.items() if target in mutated_targets}
    for fx_node in ep.graph_module.graph.nodes:
        fx_node.meta.pop("delegation_tag", None)
        if fx_node.meta.get(IMPLICIT_QDQ_KEY):
            fx_node.meta[IMPLICIT_QDQ_KEY] = False
    untagged_operands = _runtime_weights(plan) if options.force_non_static_weights_for_f32_linear else set()
    tags = []
    for group in plan.groups:
        tag = group.tag
        tags.append(tag)
        for node in group.nodes:
            fx_node = node.fx_node
            fx_node.meta["delegation_tag"] = tag
            for user in fx_node.users:
                if user.target is operator.getitem:
                    user.meta["delegation_tag"] = tag
            static_operands = {id(v) for v in node.operands} if node.op in STATIC_OPERAND_OPS else set()
            for value in node.inputs():
                placeholder = value.fx_node
                if (
                    value.is_constant
                    and placeholder is not None
                    and placeholder.name in constant_names
                    and placeholder.name not in mutated
                    and id(value) not in untagged_operands
                    and (placeholder.name not in shared_names or id(value) in static_operands)
                    and (value.rank != 0 or id(value) in static_operands)  # (see partition._zero_d_outputs)
                    and "delegation_tag" not in placeholder.meta
                ):
                    placeholder.meta["delegation_tag"] = tag
        for node in group.implicit:
            node.fx_node.meta[IMPLICIT_QDQ_KEY] = True
    # a matmul XNNPACK's preprocessing would rebuild into a linear of the wrong shape runs as itself
    plan.kept_matmuls = [
        n.name for n in keep_inexact_matmuls(ep.graph_module, exact={lin.matmul.fx_node for lin in plan.whole_linears})
    ]
    return tags


def _runtime_weights(plan: PartitionPlan) -> set[int]:
    """With force_non_static_weights_for_f32_linear: the weights and biases of float linears (seen
    through the layout ops between a weight and its matmul), which stay in the program."""
    from .rules import weight_chain

    result: set[int] = set()
    for node in plan.delegated_nodes:
        if node.op not in FLOAT_LINEARS:
            continue
        if node.input.producer is not None and node.input.producer.op in DEQUANTIZE_OPS:
            continue  # a quantized linear keeps its constants
        for name in node.definition.weights:  # weight and bias, by the op's definition
            weight = node.operand(name)
            if weight is not None:
                result.add(id(weight))
                for layout in weight_chain(weight) or []:
                    result.update(id(v) for v in layout.operands)
    return result


class _XirRewritePass:
    """An ExecuTorch ExportedProgram pass: import, run xir's pipeline, write the rewrites back."""

    def __new__(cls, partitioner: XnnpackPartitioner):
        from executorch.exir.pass_base import (
            ExportedProgramPassBase,
            ExportedProgramPassResult,
        )

        class XirRewritePass(ExportedProgramPassBase):
            def call(self, ep):
                from .writeback import ShapeEnvState, write_back

                # The program is never changed in place (the rewrite is written into a copy), but it
                # shares its ShapeEnv with every program it came from: after any failure, that is put
                # back as it was here, so the caller can lower the program again (with stock)
                state = ShapeEnvState.of_program(ep)
                try:
                    with partitioner._timed("import"):
                        graph = xir.from_exported_program(ep)
                    with partitioner._timed("passes"):
                        result = PassManager(partitioner.pipeline, partitioner.instruments).run(graph)
                    if not result.changed:
                        return ExportedProgramPassResult(ep, False)
                    with partitioner._timed("write-back"):
                        rewritten = write_back(graph, ep)  # (a copy: after a failure, the caller's program is whole)
                except BaseException:
                    state.restore()
                    raise
                partitioner.rewrites_applied.update(result.changed_by)
                return ExportedProgramPassResult(rewritten, True)

        return XirRewritePass()


def to_edge_transform_and_lower(
    programs,
    partitioner=None,
    transform_passes=None,
    constant_methods=None,
    compile_config=None,
    generate_etrecord: bool = False,
):
    """ExecuTorch's ``to_edge_transform_and_lower`` with xir's rewrites: every xir partitioner in
    ``partitioner`` contributes its ``transform_passes()`` before ExecuTorch partitions."""
    from executorch.exir import to_edge_transform_and_lower as et_lower

    partitioners = list(partitioner or [])
    passes = list(transform_passes or [])
    for p in partitioners:
        if isinstance(p, XnnpackPartitioner):
            passes.extend(p.transform_passes())
    try:
        edge = et_lower(
            programs,
            partitioner=partitioners,
            transform_passes=passes or None,
            constant_methods=constant_methods,
            compile_config=compile_config,
            generate_etrecord=generate_etrecord,
        )
    except Exception as error:
        cause = _xir_cause(error)
        if cause is None:
            raise
        error.__cause__ = error.__context__ = None  # (the wrapper becomes the context of its cause: no cycle)
        raise cause from error
    # (xir's partitioners write back the xir ops no partitioner took when ExecuTorch asks them
    # after lowering; transform passes of xir's without an xir partitioner in the list leave theirs)
    from .xir_ops_as_aten import rewrite_edge_manager

    rewrite_edge_manager(edge)
    return edge


def _xir_cause(error: BaseException) -> BaseException | None:
    """The first error of xir's own (a pass's PassFailure, a PipelineError, an IRError) in the chain
    of ``error``, when ``error`` is ExecuTorch's wrapper of it ("An error occurred when running the
    'XirRewritePass' pass ..."); None when ``error`` is xir's own or holds none."""
    seen, current = set(), error.__cause__ or error.__context__
    if type(error).__module__.split(".")[0] in ("xir", "passes", "lowering"):
        return None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.split(".")[0] in ("xir", "passes", "lowering"):
            return current
        current = current.__cause__ or current.__context__
    return None
