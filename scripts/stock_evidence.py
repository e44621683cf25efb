"""What ExecuTorch's stock XNNPACK partitioner does with the fuzz regression programs: evidence
about ExecuTorch, not a check of xir, so it is kept out of the test suite (it took about half the
time of tests/lowering/test_fuzz_regressions.py, which checks xir on the same programs).

For every case whose test used to assert something about stock, the program is built as that
test builds it (xir_tools/fuzz/regressions.py), lowered with xir and with stock through
``xir_tools.harness.lower`` with the test's options, run on ExecuTorch's runtime, and stock's
outcome is checked against the expectation the test asserted (``CASES`` below: each with the
comment that explains it). One line per case: the expectation held or BROKEN, the case (the
test's pytest id), stock's outcome, xir's; then a summary. Exit status 1 when an expectation is
broken: ExecuTorch changed (a failure of stock fixed, or a new one), and the docs and comments
that cite it should say so.

    .venv/bin/python scripts/stock_evidence.py            # every case (several minutes)
    .venv/bin/python scripts/stock_evidence.py -k bmm     # the cases whose name contains "bmm"

The global RNG is seeded (``torch.manual_seed(0)``) before each case: a few cases' inputs read it,
as their tests do (those tests take whatever state the RNG is in; the outcomes checked here do not
depend on the values).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from xir_tools.examples import quantize_module  # noqa: E402
from xir_tools.fuzz import regressions as R  # noqa: E402
from xir_tools.harness import Lowered, lower, reference  # noqa: E402

BF16 = torch.bfloat16

# ------------------------------------------------------------------------------ expectations


@dataclass(frozen=True)
class Expect:
    """What stock does with a case: ``says`` in words, ``holds(stock, ref)`` the check (``stock`` a
    harness.Lowered, ``ref`` the reference outputs)."""

    says: str
    holds: Callable[[Lowered, list], bool]

    def __and__(self, other: "Expect") -> "Expect":
        return Expect(f"{self.says}, {other.says}", lambda s, ref: self.holds(s, ref) and other.holds(s, ref))


RUNS = Expect("runs", lambda s, ref: s.ran)
FAILS = Expect("fails", lambda s, ref: not s.ran)


def fails_with(text: str) -> Expect:
    """Fails (to lower, load or run), the recorded error containing ``text``."""
    return Expect(f"fails with {text!r}", lambda s, ref: not s.ran and text in (s.error or ""))


# lowered, and the runtime refused the program (harness.lower records "load failed: <the runtime's reason>")
LOAD_FAILS = Expect("fails to load", fails_with("load failed").holds)
LOAD_FAILS_FIRST = Expect("fails to load", lambda s, ref: not s.ran and (s.error or "").startswith("load failed"))


def err_above(bound: float) -> Expect:
    """Runs, and is wrong: max |stock - reference| above ``bound``."""
    return Expect(f"runs, err > {bound:g}", lambda s, ref: s.ran and s.err(ref) > bound)


def err_within(bound: float) -> Expect:
    """Runs, and is right: max |stock - reference| at most ``bound``."""
    return Expect(f"runs, err <= {bound:g}", lambda s, ref: s.ran and s.err(ref) <= bound)


def delegated(op: str, count: int) -> Expect:
    return Expect(f"{count} {op} delegated", lambda s, ref: s.delegated[op] == count)


def left_outside(op: str, count: int) -> Expect:
    return Expect(f"{count} {op} outside", lambda s, ref: s.outside[op] == count)


NOTHING_OUTSIDE = Expect("nothing outside", lambda s, ref: not s.outside)


def outside_total(count: int) -> Expect:
    return Expect(f"{count} op(s) outside", lambda s, ref: sum(s.outside.values()) == count)


def delegate_count(count: int) -> Expect:
    return Expect(f"{count} delegate(s)", lambda s, ref: s.delegates == count)


# ------------------------------------------------------------------------------ cases


@dataclass
class Case:
    name: str  # the test's pytest id
    build: Callable[[], tuple]  # () -> (ep, inputs, lower's options), as the test makes them
    expect: Expect
    why: str  # the test's comment on stock's outcome


CASES: list[Case] = []


def case(name, expect, why):
    """Register the builder it decorates (or is called with) as the case ``name``."""

    def register(build):
        CASES.append(Case(name, build, expect, why))
        return build

    return register


def exported(module, inputs):
    return torch.export.export(module, inputs)


def quantized(module, inputs, mode, per_channel=True):
    return R.quantized_program(module, inputs, mode, per_channel)


# test_quantized_8d_elementwise_chain_with_scalar_constants_runs
@case("test_quantized_8d_elementwise_chain_with_scalar_constants_runs", LOAD_FAILS, "stock delegates the 8-D ops")
def _():
    inputs = R.quantized_elementwise_8d_inputs()
    return exported(quantize_module(R.QuantizedElementwise8d().eval(), inputs, mode="static"), inputs), inputs, {}


@case("test_a_0d_constant_is_a_delegate_input_and_its_0d_result_leaves", LOAD_FAILS, "stock delegates the 8-D ops")
def _():
    inputs = R.zero_d_output_inputs()
    return exported(R.ZeroDOutput().eval(), inputs), inputs, {}


for via in ("backend", "etal"):
    # stock delegates the ops with a 0-D result leaving a delegate and runs them right (xir kept
    # them outside before its fix)
    @case(
        f"test_a_0d_result_computed_from_0d_inputs_leaves_a_delegate[{via}]",
        RUNS & delegated("aten.tanh", 1),
        "stock delegates the 0-D results and runs them right",
    )
    def _(via=via):
        inputs = R.zero_d_from_inputs_inputs()
        return exported(R.ZeroDFromInputs().eval(), inputs), inputs, {"via": via}


@case("test_bf16_conv3d_is_decomposed_and_runs", LOAD_FAILS, "stock: bf16 max pooling")
def _():
    torch.manual_seed(0)
    inputs = R.bf16_conv3d_block_inputs()
    return exported(R.Bf16Conv3dBlock().eval().to(BF16), inputs), inputs, {"enable_bf16": True}


@case(
    "test_max_pooling_of_an_unbatched_3d_input_stays_outside",
    RUNS,
    "stock keeps the unbatched max pool outside and runs (xir delegated it: 'non-NHWC compatible node')",
)
def _():
    inputs = R.unbatched_pooling_inputs()
    return exported(R.UnbatchedPooling().eval(), inputs), inputs, {"via": "backend"}


@case(
    "test_quantized_reshape_with_different_qparams_stays_outside",
    RUNS,
    "stock runs it (xir delegated a quantized reshape with different qparams: 'Failed to create squeeze node')",
)
def _():
    inputs = R.quantized_linear_after_slice_and_unsqueeze_inputs()
    module = quantize_module(R.QuantizedLinearAfterSliceAndUnsqueeze().eval(), inputs, mode="static")
    return exported(module, inputs), inputs, {"via": "backend"}


for per_op_mode in (True, False):
    # to_backend: stock leaves the linear's input view outside, XNNPACK's preprocessing rebuilds a
    # linear from the 3-D view to the 4-D output, and the program fails (as xir's did before)
    @case(
        f"test_a_linear_split_across_a_delegate_edge_is_not_rebuilt_by_xnnpack[backend-{per_op_mode}]",
        FAILS,
        "XNNPACK rebuilds a linear split across a delegate edge: 'Size needs to be equal to the number of dimensions'",
    )
    def _(per_op_mode=per_op_mode):
        inputs = R.conv_then_linear_on_a_4d_view_inputs()
        ep = exported(
            quantize_module(R.ConvThenLinearOnA4dView().eval(), inputs, mode="static", per_channel=True), inputs
        )
        return ep, inputs, {"via": "backend", "per_op_mode": per_op_mode}


for via in ("backend", "etal"):

    @case(
        f"test_a_copy_at_a_delegate_edge_beside_its_operand_stays_outside[{via}]",
        RUNS,
        "stock runs it (xir's to_backend program failed: 'Output node ... is already in the inputs')",
    )
    def _(via=via):
        inputs = R.clone_before_cumsum_inputs()
        return exported(R.CloneBeforeCumsum().eval(), inputs), inputs, {"via": via}


for via in ("backend", "etal"):

    @case(
        f"test_alpha_of_an_add_is_a_multiply[{via}]",
        err_above(0.1),
        "stock leaves add/sub with alpha outside, and ExecuTorch's portable add/sub compute them wrong",
    )
    def _(via=via):
        inputs = R.add_and_sub_with_alpha_inputs()
        return exported(R.AddAndSubWithAlpha().eval(), inputs), inputs, {"via": via}


@case(
    "test_a_pad_reading_a_dequantize_is_not_run_between_conversions",
    FAILS,
    "stock delegates the pad and fails to load: 'Failed to create StaticConstantPad'",
)
def _():
    inputs = R.pad_after_quantized_linear_inputs()
    return exported(quantize_module(R.PadAfterQuantizedLinear().eval(), inputs, mode="static"), inputs), inputs, {}


for via in ("backend", "etal"):

    @case(
        f"test_a_dynamically_quantized_linear_after_a_conv_gets_its_own_delegate[{via}]",
        fails_with("Weight and Input should both be quantized"),
        "stock: one delegate, and XNNPACK's channels-last pass puts a copy between the linear and its dynamic dequantize",
    )
    def _(via=via):
        inputs = R.conv_pad_linear_inputs()
        ep = exported(quantize_module(R.ConvPadLinear().eval(), inputs, mode="dynamic", per_channel=True), inputs)
        return ep, inputs, {"via": via}


@case(
    "test_a_dynamically_quantized_conv_after_a_conv_shares_its_delegate",
    RUNS & delegate_count(1),
    "the conv's activation is channels-last already: one delegate (as xir's)",
)
def _():
    inputs = R.conv_relu_conv_inputs()
    ep = exported(quantize_module(R.ConvReluConv().eval(), inputs, mode="dynamic", per_channel=True), inputs)
    return ep, inputs, {}


@case(
    "test_a_softmax_after_a_permuted_conv_output_runs_in_a_delegate_of_its_own[dtype0]",
    err_above(0.1),
    "stock delegates the softmax after the permuted conv output; XNNPACK normalizes over the channels: wrong",
)
def _():
    inputs = R.conv_transpose_softmax_inputs(torch.float32)
    return exported(R.ConvTransposeSoftmax().to(torch.float32).eval(), inputs), inputs, {"enable_bf16": True}


for via in ("backend", "etal"):

    @case(
        f"test_group_norms_are_decomposed_into_xnnpack_ops[{via}]",
        RUNS & left_outside("aten.native_group_norm", 2),
        "stock runs the group norms on ExecuTorch's portable kernel (off by 1.2e-3 here)",
    )
    def _(via=via):
        inputs = R.group_norms_inputs()
        return exported(R.GroupNorms().eval(), inputs), inputs, {"via": via}


BMM_VARIANTS = [(True, False, "of-input"), (False, False, "of-computed"), (False, True, "of-computed-and-returned")]
for index, (dtype, via) in enumerate(
    [(torch.float32, "backend"), (torch.float32, "etal"), (BF16, "backend"), (BF16, "etal")]
):
    for of_input, returned, variant in BMM_VARIANTS:
        if dtype == BF16:  # a bf16 bmm output XNNPACK cannot produce
            expect, why = LOAD_FAILS, "a bf16 bmm output XNNPACK cannot produce"
        elif returned:  # a permute that is also a delegate output is right
            expect, why = err_within(1e-5), "a permute that is also a delegate output is right"
        else:  # stock delegates one permute feeding both operands of the bmm, and XNNPACK is wrong
            expect, why = err_above(0.5), "stock delegates one permute for both bmm operands and is wrong"

        @case(f"test_a_bmm_reading_one_permute_twice_reads_two[dtype{index}-{via}-{variant}]", expect, why)
        def _(dtype=dtype, via=via, of_input=of_input, returned=returned):
            inputs = R.bmm_of_one_permute_inputs(dtype)
            options = {"enable_bf16": True} if dtype == BF16 else {}
            return exported(R.BmmOfOnePermute(of_input, returned).eval(), inputs), inputs, {"via": via, **options}


for via in ("backend", "etal"):
    for module, size, variant in [
        (R.LinearsOfOneInput, 20, "three-linears-of-one-input"),
        (R.LinearThenVectorMatmul, 5, "matmul-of-a-linear-result"),
    ]:

        @case(
            f"test_1d_dynamically_quantized_linears_are_recognised_after_write_back[{via}-{variant}]",
            RUNS,
            "stock runs the 1-D dynamically quantized linears",
        )
        def _(via=via, module=module, size=size):
            inputs = R.vector_input(size)
            return quantized(module().eval(), inputs, "dynamic"), inputs, {"via": via}


for mode in ("fp32", "static"):
    bound = 0.02 if mode == "static" else 1e-5

    # the mean XNNPACK does not take stays outside and its result arrives contiguous: stock
    # delegates the softmax after it and is right
    @case(
        f"test_a_softmax_after_a_mean_left_outside_is_delegated[{mode}]",
        err_within(bound) & delegated("aten._softmax", 1),
        "stock delegates the softmax after a mean left outside, and is right",
    )
    def _(mode=mode):
        inputs = R.softmax_after_a_rejected_mean_inputs()
        module = R.SoftmaxAfterARejectedMean().eval()
        if mode == "static":
            module = quantize_module(module, inputs, mode="static")
        return exported(module, inputs), inputs, {"via": "backend"}


for via in ("backend", "etal"):
    for cin, cout, groups, variant in [(8, 8, 4, "groups-4"), (4, 12, 2, "groups-2-widening")]:

        @case(
            f"test_a_grouped_dynamically_quantized_conv_is_delegated[{via}-{variant}]",
            RUNS & NOTHING_OUTSIDE,
            "stock delegates a grouped dynamically quantized conv and is right",
        )
        def _(via=via, cin=cin, cout=cout, groups=groups):
            module = R.grouped_conv(cin, cout, groups)
            inputs = R.grouped_conv_inputs(cin)
            return quantized(module.eval(), inputs, "dynamic"), inputs, {"via": via}


for via in ("backend", "etal"):

    @case(
        f"test_a_pad_with_a_nonzero_value_runs_between_conversions[{via}]",
        err_within(1e-5) & delegated("aten.constant_pad_nd", 1),
        "XNNPACK's preprocessing leaves a pad with a nonzero value alone: stock delegates it in fp32 and is right",
    )
    def _(via=via):
        inputs = R.pad_with_a_value_after_quantized_linear_inputs()
        module = quantize_module(R.PadWithAValueAfterQuantizedLinear().eval(), inputs, mode="static")
        return exported(module, inputs), inputs, {"via": via}


for via in ("backend", "etal"):
    for returned, variant in [(False, "quantized-only"), (True, "also-returned")]:

        @case(
            f"test_a_zero_pad_whose_output_is_quantized_runs_between_conversions[{via}-{variant}]",
            err_within(1e-5) & delegated("aten.constant_pad_nd", 1) & delegate_count(1),
            "XNNPACK's preprocessing leaves a zero pad whose output a quantize reads alone: stock delegates it and is right",
        )
        def _(via=via, returned=returned):
            inputs = R.zero_pad_before_quantized_linear_inputs()
            module = R.ZeroPadBeforeQuantizedLinear(returned).eval()
            return quantized(module, inputs, "static", per_channel=False), inputs, {"via": via}


for via in ("backend", "etal"):
    for variant in ("plain", "shared-activation", "shared-weight"):

        @case(
            f"test_a_matmul_of_a_dequantized_activation_and_a_float_parameter_runs_in_fp32[{via}-{variant}]",
            err_within(1e-5) & delegated("aten.mm", 2 if variant == "shared-weight" else 1) & delegate_count(1),
            "stock delegates a product of a dequantized activation and a float parameter in fp32 and is right",
        )
        def _(via=via, variant=variant):
            inputs = R.matmul_of_quantized_activation_and_parameter_inputs()
            module = R.MatmulOfQuantizedActivationAndParameter(variant).eval()
            return quantized(module, inputs, "static", per_channel=False), inputs, {"via": via}


for via in ("backend", "etal"):
    for conv, variant in [(False, "linear"), (True, "conv")]:

        @case(
            f"test_a_quantized_output_returned_and_split_is_delegated_whole[{via}-{variant}]",
            err_within(1e-5) & left_outside("aten.split_with_sizes_copy", 1),
            "stock runs it right, with the split (split_with_sizes_copy) outside",
        )
        def _(via=via, conv=conv):
            inputs = R.returned_and_split_quantized_output_inputs(conv)
            module = R.ReturnedAndSplitQuantizedOutput(conv).eval()
            return quantized(module, inputs, "static", per_channel=False), inputs, {"via": via}


for via in ("backend", "etal"):
    for computed, variant in [(False, "input"), (True, "computed")]:

        @case(
            f"test_a_conv_and_a_linear_of_one_dynamic_activation_stay_outside[{via}-{variant}]",
            FAILS,
            "stock delegates the conv and the linear together and XNNPACK's channels-last pass breaks the linear",
        )
        def _(via=via, computed=computed):
            inputs = R.conv_and_linear_of_one_input_inputs(computed)
            return quantized(R.ConvAndLinearOfOneInput(computed).eval(), inputs, "dynamic"), inputs, {"via": via}


for via in ("backend", "etal"):
    for returned, variant in [(False, "quantized-only"), (True, "also-returned")]:
        if returned:  # the deconv's result leaves the delegate in fp32 as well
            expect, why = err_within(1e-5), "the deconv's result also leaves the delegate in fp32: stock is right"
        else:  # XNNPACK's Conv1dUnsqueezePass makes the fp32 deconv's output int8
            expect, why = (
                LOAD_FAILS,
                "the quantize delegated with the fp32 deconv: 'Failed to create deconvolution node'",
            )

        @case(f"test_the_quantize_of_a_float_conv1d_stays_outside[{via}-{variant}]", expect, why)
        def _(via=via, returned=returned):
            inputs = R.float_deconv1d_before_quantized_conv_inputs()
            return (
                quantized(R.FloatDeconv1dBeforeQuantizedConv(returned).eval(), inputs, "static"),
                inputs,
                {"via": via},
            )


for via in ("backend", "etal"):

    @case(
        f"test_a_view_after_a_decomposed_linear_is_not_given_the_linears_module[{via}]",
        RUNS & outside_total(1),
        "stock leaves 1 op outside (xir left 5 via to_backend before its fix)",
    )
    def _(via=via):
        inputs = R.unsqueezed_linear_into_dynamic_linear_inputs()
        return quantized(R.UnsqueezedLinearIntoDynamicLinear().eval(), inputs, "dynamic"), inputs, {"via": via}


for via in ("backend", "etal"):

    @case(
        f"test_a_dynamic_quantization_shared_with_a_float_reader_is_copied_for_it[{via}]",
        err_above(1.0),
        "stock delegates the dynamic quantization folded into the linear and the conv outside reads a wrong tensor",
    )
    def _(via=via):
        inputs = R.dynamic_linear_beside_unbatched_conv_inputs()
        return quantized(R.DynamicLinearBesideUnbatchedConv().eval(), inputs, "dynamic"), inputs, {"via": via}


for via in ("backend", "etal"):

    @case(
        f"test_a_softmax_after_an_amax_left_outside_is_delegated[{via}]",
        RUNS & delegated("aten._softmax", 1),
        "stock delegates the softmax after an amax left outside",
    )
    def _(via=via):
        inputs = R.softmax_after_amax_inputs()
        return exported(R.SoftmaxAfterAmax().eval(), inputs), inputs, {"via": via}


for via in ("backend", "etal"):
    for shared, returned, variant in [
        (False, False, "alone"),
        (True, False, "dequantize-shared"),
        (False, True, "result-returned"),
        (True, True, "shared-and-returned"),
    ]:
        # stock delegates the float transposed conv in fp32, its dequantized input converted beside it
        @case(
            f"test_a_float_conv_on_a_statically_quantized_input_runs_between_conversions[{via}-{variant}]",
            RUNS & delegated("aten.convolution", 2 + shared),
            "stock delegates the float transposed conv on a quantized input in fp32",
        )
        def _(via=via, shared=shared, returned=returned):
            inputs = R.float_grouped_deconv_on_quantized_input_inputs()
            module = R.FloatGroupedDeconvOnQuantizedInput(True, shared, returned).eval()
            return quantized(module, inputs, "static"), inputs, {"via": via}


for via in ("backend", "etal"):

    @case(
        f"test_ops_a_rewrite_writes_after_a_decomposed_linear_are_not_part_of_it[{via}]",
        RUNS & NOTHING_OUTSIDE,
        "stock delegates the dynamically quantized linear and the GELU after it",
    )
    def _(via=via):
        inputs = R.decomposed_gelu_after_dynamic_linear_inputs()
        return quantized(R.DecomposedGeluAfterDynamicLinear().eval(), inputs, "dynamic"), inputs, {"via": via}


for padding in (0, 1):
    # stock delegates the relu6 as a quantized hardtanh with other output qparams: wrong by 1.1-1.4
    # (asserted for to_edge_transform_and_lower only)
    @case(
        f"test_a_quantized_hardtanh_with_other_output_qparams_runs_in_fp32[etal-{padding}]",
        err_above(0.5),
        "stock delegates a quantized hardtanh whose output qparams differ from its input's, and is wrong",
    )
    def _(padding=padding):
        inputs = R.relu6_after_quantized_max_pool_inputs()
        module = R.Relu6AfterQuantizedMaxPool(padding).eval()
        return quantized(module, inputs, "static", per_channel=False), inputs, {"via": "etal"}


for via in ("backend", "etal"):
    for first, matmul in [("conv", True), ("conv", False), ("input", False)]:
        if first == "conv":  # the dequantize shares the conv's delegate; Conv1dUnsqueezePass quantizes again
            expect = fails_with("Weight and Input should both be quantized")
            why = "the dequantize in the float conv1d's delegate, quantized again after the unsqueeze"
        else:  # stock delegates the dequantize of a graph input apart from the conv, and is right
            expect = err_within(1e-4) & NOTHING_OUTSIDE
            why = "stock delegates the dequantize of a graph input apart from the conv, and is right"

        @case(
            f"test_a_float_conv1d_reading_a_dequantize_gets_it_as_an_fp32_delegate_input[{via}-{first}-{matmul}]",
            expect,
            why,
        )
        def _(via=via, first=first, matmul=matmul):
            inputs = R.grouped_conv_transpose1d_on_quantized_input_inputs()
            module = R.GroupedConvTranspose1dOnQuantizedInput(first, matmul).eval()
            return quantized(module, inputs, "static", per_channel=False), inputs, {"via": via}


for via in ("backend", "etal"):
    for source, conv in [("amax", True), ("amax", False), ("returned", False), ("input", False)]:

        @case(
            f"test_a_0d_delegate_input_is_quantized_outside[{via}-{source}-{conv}]",
            fails_with("ChannelsLastTaggedReshapePass"),
            "the quantize of the 0-D value in the delegate: XNNPACK's channels-last pass fails on it",
        )
        def _(via=via, source=source, conv=conv):
            inputs = R.scaled_by_a_0d_value_inputs()
            return (
                quantized(R.ScaledByA0dValue(source, conv).eval(), inputs, "static", per_channel=False),
                inputs,
                {"via": via},
            )


for via in ("backend", "etal"):
    for act in ("relu6", "relu"):  # (returned: nothing asserted about stock)

        @case(
            f"test_a_float_conv1d_with_a_fused_activation_keeps_its_quantize_outside[{via}-{act}-False]",
            LOAD_FAILS_FIRST,
            "the activation fused into the fp32 deconv, whose only reader is a quantize: "
            "'Failed to create deconvolution node'",
        )
        def _(via=via, act=act):
            inputs = R.grouped_conv_transpose1d_activation_linear_inputs()
            module = R.GroupedConvTranspose1dActivationLinear(act, False).eval()
            return quantized(module, inputs, "static", per_channel=False), inputs, {"via": via}


# ------------------------------------------------------------------------------ running


def outcome(result: Lowered, ref) -> str:
    if not result.ran:
        return " ".join((result.error or "failed").split())[:110]
    try:
        err = f"err {result.err(ref):.2g}"
    except AssertionError as e:  # a different number or shape of outputs
        err = str(e)
    return (
        f"ran, {err}, {sum(result.delegated.values())} ops in {result.delegates} delegate(s), "
        f"{sum(result.outside.values())} outside"
    )


def run_case(c: Case):
    """(held, stock's outcome, xir's outcome, xir ran)."""
    torch.manual_seed(0)
    try:
        ep, inputs, options = c.build()
        ref = reference(ep, inputs)
    except Exception as e:  # the program itself: nothing lowered
        return False, f"not built: {type(e).__name__}: {e}", "-", False
    ours = lower(ep, inputs, "xir", **options)  # (xir first, then stock, as the tests did)
    stock = lower(ep, inputs, "stock", **options)
    try:
        held = bool(c.expect.holds(stock, ref))
    except Exception as e:
        held = False
        stock.error = f"{stock.error or ''} (checking: {type(e).__name__}: {e})"
    return held, outcome(stock, ref), outcome(ours, ref), ours.ran


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="only", default="", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    logging.disable(logging.ERROR)  # ExecuTorch's deprecation warnings, torch's logged meta failures (stderr)
    cases = [c for c in CASES if args.only in c.name]
    start = time.perf_counter()
    held = xir_ran = 0
    for c in cases:
        ok, stock, ours, ran = run_case(c)
        held, xir_ran = held + ok, xir_ran + ran
        line = f"{'held' if ok else 'BROKEN'}  {c.name}  | expected: {c.expect.says} | stock: {stock} | xir: {ours}"
        print(line if ok else f"{line} | ({c.why})", flush=True)
    n = len(cases)
    print(f"{held} expectations hold, {n - held} broken; xir ran {xir_ran}/{n} ({time.perf_counter() - start:.0f} s)")
    return 0 if held == n else 1


if __name__ == "__main__":
    sys.exit(main())
