"""The XNNPACK backend's rewrite pipeline, as data: phases in run order, each a short list of
passes, some switched by the partitioner's options.

:data:`PHASES` is the table, one pass a line; :func:`pipeline_text` reads it for the options
(:class:`Switches`), and :data:`DEFAULT_PIPELINE` is its text for the default ones. Why a pass
stands where it does is its phase's ``why``, and, between two passes, the ordering the pass
declares (``runs_after``/``runs_before`` on its class, checked by the pass manager:
:func:`passes.check_order`). :func:`describe` prints the table (``xir passes --phases``).

What the table switches:

* ``float_ops``: fp32 among the partitioner's ``config_precisions``. Without it (dynamically
  quantized linears only: the LLM flow's first stage, ``backend.xnnpack.extended_ops=false``)
  the float ops stay outside, and the passes that make xir's own ops for XNNPACK's float ops
  (``xir.slice``, ``xir.convert``, ... which have no kernel outside a delegate) or write a float
  op in the form only XNNPACK wants (a mean as a linear) are left out;
* ``bf16_linears_as_f16``, ``bf16_activations_in_fp32``: the partitioner's options of those names
  (both need ``enable_bf16``) add their pass.

Torch-free: pass names only; a pass's module is imported when a pipeline is parsed.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from passes import Pass, check_order, parse_pipeline

FLOAT_OPS = "float_ops"


@attrs.frozen
class Switches:
    """What the partitioner's options switch in its pipeline (see the module's doc)."""

    float_ops: bool = True
    bf16_linears_as_f16: bool = False
    bf16_activations_in_fp32: bool = False


@attrs.frozen
class Step:
    """One pass of a phase (its pipeline text: a name, or a name with options), run only when every
    switch of ``when`` is on."""

    text: str
    when: tuple[str, ...] = ()

    def __attrs_post_init__(self):
        unknown = [w for w in self.when if w not in attrs.fields_dict(Switches)]
        if unknown:
            raise ValueError(
                f"{self.text}: unknown switch(es) {', '.join(unknown)}; known: {', '.join(attrs.fields_dict(Switches))}"
            )

    @property
    def name(self) -> str:
        return self.text.partition("{")[0]

    def runs(self, switches: Switches) -> bool:
        return all(getattr(switches, w) for w in self.when)


def float_op(text: str) -> Step:
    """A pass for XNNPACK's float ops: left out without ``float_ops``."""
    return Step(text, (FLOAT_OPS,))


def _steps(steps) -> tuple[Step, ...]:
    return tuple(s if isinstance(s, Step) else Step(s) for s in steps)


@attrs.frozen
class Phase:
    """A stretch of the pipeline: ``name``, ``why`` its passes stand there, and its ``steps`` in run
    order (pass names, or :class:`Step` for those an option switches)."""

    name: str
    why: str
    steps: tuple[Step, ...] = attrs.field(converter=_steps)

    def passes(self, switches: Switches) -> list[str]:
        return [s.text for s in self.steps if s.runs(switches)]


PHASES = (
    Phase(
        "as-exported",
        "match the program as torch.export and to_edge wrote it: before any pass rewrites "
        "its casts, constants or no-ops",
        (
            "hoist-row-select",
            "xnnpack.eager-scalar-promotion",
            "xnnpack.remove-no-ops",
            "xnnpack.weight-only-int8-linear",
            "xnnpack.merge-clamps",
            "xnnpack.pow-as-multiplies",
            "xnnpack.avg-pool-padding-as-pad",
        ),
    ),
    Phase(
        "decompose",
        "ops XNNPACK has no operator for, as ops it has",
        (
            "fold-batch-norm",
            "xnnpack.mean-keepdim",
            "xnnpack.decompose-gelu-tanh",
            "xnnpack.decompose-conv3d",
        ),
    ),
    Phase(
        "views-and-slices",
        "rotary embeddings first (they match the selects and slices the next passes "
        "rewrite), then shape ops, splits, selects and slices as views and slices "
        "XNNPACK takes",
        (
            float_op("xnnpack.rope-as-pair-swap"),
            float_op("xnnpack.rotate-half-sign-in-sin"),
            "shape-ops-as-views",
            "xnnpack.split-as-slices",
            "xnnpack.select-as-slice",
            float_op("xnnpack.slices-as-xir-slices"),
            "xnnpack.fold-repeat-into-bmm",
        ),
    ),
    Phase(
        "shared",
        "equal values made one (every layer's rotary tables), then the rewrites that want them shared or apart",
        (
            "common-subexpression-elimination",
            float_op("xnnpack.partial-rotary-whole-head"),
            "xnnpack.bmm-distinct-operands",
            "xnnpack.expand-as-broadcast",
            "xnnpack.safe-softmax",
        ),
    ),
    Phase(
        "constants",
        "constant subgraphs folded, then the rewrites that need constants (an index, a "
        "stride, a scalar operand, a weight-only linear's bias); the program's own means "
        "as linears (the norms' come in 'norms'), the no-ops all this left removed, and attention "
        "scores of a dynamic length kept 3-D",
        (
            "fold-constants",
            float_op("xnnpack.index-select-as-slices"),  # (their slices of a symbolic tensor are xir.slice)
            float_op("xnnpack.step-slice-as-view"),
            "xnnpack.as-strided-as-view",
            "xnnpack.scalar-operands-as-constants",
            "xnnpack.weight-only-linear-bias",
            float_op("xnnpack.dynamic-mm-as-bmm"),
            float_op("xnnpack.mean-over-last-dims"),
            "xnnpack.remove-no-ops",
            "dead-code-elimination",  # (what safe-softmax replaced, before the next pass reads the views)
            "xnnpack.drop-leading-unit-dims",
        ),
    ),
    Phase(
        "bf16",
        "bf16 ops as XNNPACK computes them (in fp32 between converts, or rounded where eager "
        "rounds; only with enable_bf16), then what reads their fp32 ops: a patch convolution as "
        "a matrix product, layer norms widened to fp32",
        (
            float_op("xnnpack.bf16-bmm-f32-output"),
            Step("xnnpack.bf16-linear-as-f16", (FLOAT_OPS, "bf16_linears_as_f16")),
            float_op("xnnpack.bf16-in-fp32"),
            float_op("xnnpack.bf16-rounded-arithmetic"),
            "xnnpack.patch-conv-as-matmul",
            "xnnpack.layer-norm-in-fp32",
        ),
    ),
    Phase(
        "norms",
        "norms (fp32 by now) as means and products, the means as linears, norm weights "
        "folded into the linears they feed",
        (
            "xnnpack.decompose-layer-norm",
            "xnnpack.decompose-group-norm",
            float_op("xnnpack.mean-over-last-dims"),
            "fold-scale-shift-into-linears",
        ),
    ),
    Phase(
        "converts",
        "the bf16 casts left as XNNPACK's converts (after every pass that makes them), shared, and dead code removed",
        (
            float_op("xnnpack.casts-as-converts"),
            Step("xnnpack.bf16-activations-in-fp32", (FLOAT_OPS, "bf16_activations_in_fp32")),
            "common-subexpression-elimination",
            "dead-code-elimination",
        ),
    ),
    Phase(
        "merge",
        "linears and head chains merged on the final, shared graph",
        (
            float_op("xnnpack.fuse-sibling-linears"),
            float_op("xnnpack.merge-head-chains"),
        ),
    ),
    Phase(
        "quantized-boundaries",
        "what the partition's quantized delegates and the portable quantize "
        "ops get wrong, on the graph as it will be partitioned",
        (
            "xnnpack.dequantize-per-float-reader",
            "xnnpack.saturate-portable-quantize",
            "dead-code-elimination",
        ),
    ),
)


def pipeline_passes(switches: Switches = Switches(), phases: Iterable[Phase] = PHASES) -> list[str]:
    """The pipeline's passes (their text) for ``switches``, in run order."""
    return [text for phase in phases for text in phase.passes(switches)]


def pipeline_text(switches: Switches = Switches(), phases: Iterable[Phase] = PHASES) -> str:
    return ",".join(pipeline_passes(switches, phases))


DEFAULT_PIPELINE = pipeline_text()


def float_op_passes(phases: Iterable[Phase] = PHASES) -> frozenset[str]:
    """The passes left out without ``float_ops`` (also from a pipeline the user wrote)."""
    return frozenset(s.name for phase in phases for s in phase.steps if FLOAT_OPS in s.when)


def option_passes(phases: Iterable[Phase] = PHASES) -> dict[str, str]:
    """The partitioner's options that add a pass (also to a pipeline the user wrote): option -> pass."""
    return {w: s.name for phase in phases for s in phase.steps for w in s.when if w != FLOAT_OPS}


def describe(switches: Switches = Switches(), phases: Iterable[Phase] = PHASES) -> str:
    """The table as text: each phase, why, and its passes, numbered by their position in the
    pipeline for ``switches`` (``--`` for a pass they leave out), with the switches a pass needs."""
    lines = []
    position = 0
    for phase in phases:
        lines.append(f"{phase.name}: {phase.why}")
        for step in phase.steps:
            number = "--"
            if step.runs(switches):
                position += 1
                number = f"{position:2d}"
            only = f"  (with {' and '.join(step.when)})" if step.when else ""
            lines.append(f"  {number} {step.text}{only}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------- the partitioner's pipeline


def partitioner_pipeline(pipeline: "Sequence[Pass] | str | None", switches: Switches, enable_bf16: bool) -> list:
    """The rewrite pipeline of a partitioner: the table's for its switches when ``pipeline`` is
    None; else the user's (text, a ``+``-prefixed text extending the default, or pass objects) as
    the switches switch it. Passes that make ops only XNNPACK runs follow ``enable_bf16``; the
    declared orderings are checked."""
    if pipeline is None:
        passes = parse_pipeline(pipeline_text(switches))
    else:
        if isinstance(pipeline, str) and pipeline.startswith("+"):
            passes = parse_pipeline(DEFAULT_PIPELINE) + parse_pipeline(pipeline[1:])
        else:
            passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
        passes = switched(passes, switches)
    passes = [with_partitioner_options(p, enable_bf16) for p in passes]
    check_order(passes)
    return passes


def switched(passes: list, switches: Switches) -> list:
    """A pipeline the user wrote, as the partitioner's options switch it (as they switch the steps
    of :data:`lowering.pipeline.PHASES`): the passes an option adds (each where its declared order
    puts it: :func:`with_pass`), and without ``float_ops``, no pass for XNNPACK's float ops."""
    for option, name in option_passes().items():
        if getattr(switches, option):
            passes = with_pass(passes, name)
    if not switches.float_ops:
        passes = [p for p in passes if getattr(p, "name", None) not in float_op_passes()]
    return passes


def with_pass(pipeline: list, name: str) -> list:
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


def with_partitioner_options(p: Pass, enable_bf16: bool) -> Pass:
    """Passes that create ops only XNNPACK runs take their settings from the partitioner. A pass
    whose ``enable_bf16`` was set (away from its default) to something else than the partitioner's
    is an error, not overwritten: the partitioner would not delegate what the pass made for it."""
    if not attrs.has(type(p)) or "enable_bf16" not in attrs.fields_dict(type(p)):
        return p
    default = attrs.fields_dict(type(p))["enable_bf16"].default
    if p.enable_bf16 != default and p.enable_bf16 != enable_bf16:
        raise ValueError(
            f"the pipeline sets {p.name}{{enable_bf16={str(p.enable_bf16).lower()}}}, the partitioner "
            f"enable_bf16={enable_bf16}: set enable_bf16 on XnnpackPartitioner (its passes "
            "follow it), not on the pass"
        )
    return attrs.evolve(p, enable_bf16=enable_bf16)
