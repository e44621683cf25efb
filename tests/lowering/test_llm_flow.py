"""lowering.fx.llm: the LLM flow's partitioner sets, xir's rewrites handed to the builder as
transform_passes, and ``python -m lowering.fx.llm`` (export_llm's arguments, xir's partitioner) end to
end on tiny models: Llama 3 in fp32, bf16 and 8da4w, with the custom SDPA or ATen's, dynamic or
static shapes; Qwen3 and Phi-4-mini (about three minutes in all; the flow's families and recipes
against stock run in ``python -m bench.llm_flow``)."""

import pytest
import torch

from lowering import XnnpackPartitioner
from lowering.fx.llm import PARTITIONER_SETS, llm_partitioners, to_edge_transform_and_lower_llama, transform_passes


def test_partitioner_sets():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner,
    )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner

    from lowering.rules import DYNAMIC

    stock, xir, dq_xir, xir_dq_xir = (llm_partitioners(kind, enable_bf16=True) for kind in PARTITIONER_SETS)
    assert [type(p) for p in stock] == [XnnpackDynamicallyQuantizedPartitioner, StockPartitioner]
    assert [type(p) for p in xir] == [XnnpackPartitioner]
    assert [type(p) for p in dq_xir] == [XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner]
    assert [type(p) for p in xir_dq_xir] == [XnnpackPartitioner, XnnpackPartitioner]
    assert xir_dq_xir[0].options.precisions == {DYNAMIC} and DYNAMIC in xir_dq_xir[1].options.precisions
    assert xir[0].options.enable_bf16 and dq_xir[1].options.enable_bf16 and xir_dq_xir[0].options.enable_bf16
    assert transform_passes(stock) == []
    kinds = ["XirRewritePass", "ContiguousDimOrders"]  # (xir's rewrites, then the one-channel dim orders)
    assert [type(p).__name__ for p in transform_passes(xir)] == kinds
    assert [type(p).__name__ for p in transform_passes(dq_xir)] == kinds
    assert [type(p).__name__ for p in transform_passes(xir_dq_xir)] == kinds * 2
    with pytest.raises(ValueError, match="unknown partitioner set"):
        llm_partitioners("xnnpack")


class _Builder:
    """The two methods of the flow's LLMEdgeManager that lowering.fx.llm calls, recorded."""

    def __init__(self):
        self.calls = []

    def pt2e_quantize(self, quantizers):
        self.calls.append(("pt2e_quantize", quantizers))
        return self

    def to_edge_transform_and_lower(self, partitioners, transform_passes=None):
        self.calls.append(("to_edge_transform_and_lower", partitioners, transform_passes))
        return self


def test_builder_gets_xir_rewrites():
    partitioners = llm_partitioners("dq+xir")
    builder = to_edge_transform_and_lower_llama(_Builder(), partitioners)
    (_, quantizers), (_, passed, passes) = builder.calls
    assert quantizers == [] and passed == partitioners
    assert [type(p).__name__ for p in passes] == ["XirRewritePass", "ContiguousDimOrders"]
    bare = to_edge_transform_and_lower_llama(_Builder(), partitioners, with_rewrites=False)
    assert bare.calls[1][2] is None


# ------------------------------------------------------------------ python -m lowering.fx.llm, end to end

# the smallest config the flow exports as it does an LLM: 2 layers, KV cache, custom SDPA, dynamic shapes
TINY_PARAMS = dict(
    dim=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    vocab_size=256,
    multiple_of=32,
    norm_eps=1e-5,
    rope_theta=500000.0,
    use_scaled_rope=True,
)
TINY_SEQ_LEN = 32
TINY_YAML = """\
base:
  model_class: llama3
  params: {params}
  checkpoint: {checkpoint}
model:
  use_kv_cache: true
  use_sdpa_with_kv_cache: true
  enable_dynamic_shape: true
export:
  max_seq_length: {seq}
  max_context_length: {seq}
  output_dir: {out}
backend:
  xnnpack:
    enabled: true
    extended_ops: true
"""
# the flow's phone recipe, as a yaml section for _flow_argv's ``extra``
QUANTIZATION_8DA4W = "quantization:\n  qmode: 8da4w\n  group_size: 32\n"
# What the flow's stock partitioners ([XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner])
# make of this config: `python -m lowering.fx.llm --config tiny.yaml xir.partitioners=stock` (its own
# run costs as much as the test; measured with executorch 1.5.1)
STOCK_DELEGATES = 24
# outside xir's delegates (in the ExecuTorch program: out variants, views as memory.view), besides
# the embedding, the custom ops, memory planning and symbolic-size arithmetic
EXPECTED_OUTSIDE = (
    "aten.embedding.",
    "llama.custom_sdpa.",
    "llama.update_cache.",
    "executorch.exir.memory.",
    "executorch_prim.",
    "aten._local_scalar_dense",
    "aten.sym_constrain_range",
    "aten._assert_scalar",
)
# and what XNNPACK's slice cannot take, its offset computed at run time: the rope tables' rows at
# input_pos (a slice each of cos and sin), the last token's row (a select at -1 of the symbolic
# length, of the last attention's output and of its residual input), the input_pos scalar picks
# (selects of an i64 tensor)
KNOWN_OUTSIDE = ("aten.slice_copy.", "aten.select_copy.")


def test_export_llm_command_with_xir(tmp_path, monkeypatch, capsys):
    """``python -m lowering.fx.llm --config tiny.yaml`` as export_llm takes it: the flow's .pte,
    lowered by xir alone, loads on the runtime and matches eager at prefill lengths 1 and 7."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (llama::custom_sdpa, update_cache)

    from bench.llm_flow import write_checkpoint
    from lowering.fx.llm import parse_args, run
    from xir_tools.harness import delegate_count, delegated_ops, max_error, outside_ops

    monkeypatch.chdir(tmp_path)  # hydra writes its outputs/ where it runs
    params, checkpoint = write_checkpoint(str(tmp_path), params=TINY_PARAMS, max_seq_len=TINY_SEQ_LEN)
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML.format(params=params, checkpoint=checkpoint, seq=TINY_SEQ_LEN, out=tmp_path / "out"))
    argv = ["--config", str(config), "+debug.verbose=false"]  # an override, as export_llm takes them

    builder = run(argv)
    pte = builder.get_saved_pte_filename()
    assert pte == str(tmp_path / "out" / "llama3.pte")  # the flow's name: <output_dir>/<model_class>.pte
    delegates, outside = delegate_count(builder.edge_manager), outside_ops(builder.edge_manager)
    unexpected = {op: n for op, n in outside.items() if not op.startswith(EXPECTED_OUTSIDE + KNOWN_OUTSIDE)}
    with capsys.disabled():
        print(
            f"\nlowering.fx.llm on the tiny Llama 3: {delegates} delegates (stock {STOCK_DELEGATES}); outside: "
            + ", ".join(f"{op} x{n}" for op, n in sorted(outside.items()))
        )
    # a layer in at most two delegates (before and after the custom SDPA and cache update), the
    # final norm and head in the last
    assert delegates <= 2 * TINY_PARAMS["n_layers"] < STOCK_DELEGATES
    assert outside["aten.slice_copy.Tensor_out"] == 2, outside
    # the layers' identical picks of input_pos made once (common-subexpression-elimination): 2,
    # where the program as exported has 7; the last token's row picked from the last layer's
    # attention output and its residual input (hoist-row-select), where the flow picked it after the
    # layer: 2
    assert outside["aten.select_copy.int_out"] == 4, outside
    assert not unexpected, f"ops outside xir's delegates beyond the known ones: {unexpected}"
    assert not any(op.startswith(("aten.linear", "aten.mm", "aten.bmm", "aten.addmm")) for op in outside)
    # the rotary embedding as a pair swap (xnnpack.rope-as-pair-swap), q's and k's heads rotated
    # together (xnnpack.merge-head-chains) as one slice of the heads of q, k and v's one projection
    # (xnnpack.fuse-sibling-linears), v's heads another, one slice each back out; no concatenation
    # and no strided slice left inside
    inside = delegated_ops(builder.edge_manager)
    layers = TINY_PARAMS["n_layers"]
    assert "aten.cat" not in inside and inside["xir.slice"] == 4 * layers, inside
    assert not any("slice" in op for op in inside if op != "xir.slice"), inside
    # RMSNorm's means as linears with a 1/dim row (xnnpack.mean-over-last-dims: the program keeps
    # linears): two norms per layer and the final one, besides qkv, o, w1, w2, w3 per layer and the
    # head; the products are the rotary swaps, one per layer; no spatial mean and its transposes
    assert "aten.mean.dim" not in inside and inside["aten.mm"] == layers, inside
    assert inside["aten.linear"] == (5 * layers + 1) + (2 * layers + 1), inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(pte, "rb").read()
    for length, actual, expected in _prefills(eager, buffer, lengths=(1, 7, 20)):
        assert max_error(list(actual), [expected]) < 1e-4, f"prefill of {length}"


def _prefills(eager, buffer: bytes, lengths=(1, 7)):
    """(length, the program's outputs, eager's logits) for a prefill of each length from input_pos
    0, each on a fresh method and a fresh copy of ``eager`` (each has its own KV cache)."""
    import copy

    from xir_tools.harness import load_method

    for length in lengths:
        tokens = torch.randint(
            0, TINY_PARAMS["vocab_size"], (1, length), generator=torch.Generator().manual_seed(length)
        )
        pos = torch.tensor([0], dtype=torch.long)
        with torch.no_grad():
            expected = copy.deepcopy(eager)(tokens, {"input_pos": pos})
        _, method = load_method(buffer)
        yield length, method.execute([tokens, pos]), expected


def _flow_argv(tmp_path, params: dict, *, bf16: bool = False, edit=lambda yaml: yaml, extra: str = "") -> list[str]:
    """``--config tiny.yaml`` for the flow on a seeded checkpoint of ``params`` (the tiny config;
    ``bf16``: dtype_override bf16 and XNNPACK's bf16 on; ``edit``: a change to the yaml text;
    ``extra``: yaml sections appended)."""
    from bench.llm_flow import write_checkpoint

    params_path, checkpoint = write_checkpoint(str(tmp_path), params=params, max_seq_len=TINY_SEQ_LEN)
    yaml = TINY_YAML.format(params=params_path, checkpoint=checkpoint, seq=TINY_SEQ_LEN, out=tmp_path / "out")
    if bf16:
        yaml = yaml.replace("  enable_dynamic_shape: true\n", "  enable_dynamic_shape: true\n  dtype_override: bf16\n")
        yaml = yaml.replace("    extended_ops: true\n", "    extended_ops: true\n    enable_bf16: true\n")
    config = tmp_path / "tiny.yaml"
    config.write_text(edit(yaml) + extra)
    return ["--config", str(config)]


def _close(actual, expected, tolerance: float, what: str):
    """``actual`` within ``tolerance`` of the largest logit of ``expected`` (at least 1)."""
    scale = max(1.0, expected.float().abs().max().item())
    error = (actual.float() - expected.float()).abs().max().item()
    assert error <= tolerance * scale, f"{what}: max error {error:.3g} (max |logit| {scale:.3g})"


def _check_calls(eager, buffer: bytes, calls, tolerance: float):
    """The program ``buffer`` against ``eager`` on one method (its own KV cache) and one copy of
    ``eager``: each (tokens, position) of ``calls`` in turn, within ``tolerance`` (``_close``)."""
    import copy

    from xir_tools.harness import load_method

    _, method = load_method(buffer)
    stateful = copy.deepcopy(eager)
    for step, (ids, position) in enumerate(calls):
        with torch.no_grad():
            expected = stateful(ids, {"input_pos": torch.tensor([position])})
        _close(
            method.execute([ids, torch.tensor([position])])[0],
            expected,
            tolerance,
            f"call {step} at position {position}",
        )


def _check_generation(eager, buffer: bytes, params: dict, tolerance: float):
    """The program ``buffer`` against ``eager`` within ``tolerance`` of the largest logit (at least
    1): prefills of 1, 7 and 20 tokens, each on a fresh method, and on one method (its own KV
    cache) a prefill of 7 then three decode steps."""
    for length, actual, expected in _prefills(eager, buffer, lengths=(1, 7, 20)):
        _close(actual[0], expected, tolerance, f"prefill of {length}")
    tokens = torch.randint(0, params["vocab_size"], (1, 7), generator=torch.Generator().manual_seed(7))
    calls = [(tokens, 0)] + [(torch.tensor([[token]]), 7 + i) for i, token in enumerate((3, 11, 5))]
    _check_calls(eager, buffer, calls, tolerance)


def _inside_outside(builder, delegates: int):
    """The ops (name: count) inside and outside the delegates of the flow's program in ``builder``,
    after checking that it has ``delegates`` delegates."""
    from xir_tools.harness import delegate_count, delegated_ops, outside_ops

    edge = builder.edge_manager
    inside, outside = delegated_ops(edge), outside_ops(edge)
    assert delegate_count(edge) == delegates, (inside, outside)
    return inside, outside


def _one_layer_in_two_delegates(builder):
    """The ops inside and outside the delegates of the flow's 1-layer program in ``builder``, after
    checking that it is the layer in two delegates, before and after the custom SDPA, the final norm
    and head in the second (hoist-row-select: the layer's ops after the attention compute the last
    token's row only, picked where the flow picked it after the layer), with nothing outside but the
    embedding, the custom ops, the symbolic-size arithmetic and the known slices."""
    inside, outside = _inside_outside(builder, delegates=2)
    unexpected = {op: n for op, n in outside.items() if not op.startswith(EXPECTED_OUTSIDE + KNOWN_OUTSIDE)}
    assert not unexpected, f"ops outside xir's delegates beyond the known ones: {unexpected}"
    return inside, outside


def _tensor_ops(ops: dict) -> dict:
    """``ops`` (op name: count) without memory planning and the symbolic-size arithmetic."""
    scalar = (
        "executorch.exir.memory.",
        "executorch_prim.",
        "aten._local_scalar_dense",
        "aten.sym_constrain_range",
        "aten._assert_scalar",
    )
    return {op: n for op, n in ops.items() if not op.startswith(scalar)}


def test_unsupported_option_is_named(tmp_path, monkeypatch):
    from lowering.fx.llm import UnsupportedOption, check_supported, parse_args

    monkeypatch.chdir(tmp_path)
    config, kind, options = parse_args(["backend.coreml.enabled=true", "xir.partitioners=dq+xir"])
    assert kind == "dq+xir" and options == {"bf16_linears_as_f16": False, "bf16_activations_in_fp32": False}
    with pytest.raises(UnsupportedOption, match=r"backend\.coreml\.enabled"):
        check_supported(config)
    with pytest.raises(UnsupportedOption, match=r"xir\.partitioners"):
        parse_args(["xir.partitioners=all"])
    with pytest.raises(UnsupportedOption, match=r"xir\.bf16_linears_as_f16='maybe'"):
        parse_args(["xir.bf16_linears_as_f16=maybe"])
    _, _, options = parse_args(["xir.bf16_linears_as_f16=true"])
    assert options == {"bf16_linears_as_f16": True, "bf16_activations_in_fp32": False}
    _, _, options = parse_args(["xir.bf16_activations_in_fp32=true"])
    assert options == {"bf16_linears_as_f16": False, "bf16_activations_in_fp32": True}


# each of xir's bf16 options in the flow: (linear, weight) dtypes inside the delegates
BF16_OPTIONS = {
    "bf16_linears_as_f16": (torch.float16, torch.float16),
    "bf16_activations_in_fp32": (torch.float32, torch.float16),
}


@pytest.mark.parametrize("option", sorted(BF16_OPTIONS))
def test_export_llm_command_bf16_option(tmp_path, monkeypatch, option):
    """``python -m lowering.fx.llm ... model.dtype_override=bf16 backend.xnnpack.enable_bf16=true
    xir.OPTION=true``: the flow's bf16 program with every linear run as XNNPACK's fp16 GEMM (fp16
    weights inside the delegates), or with the delegated ops in fp32 (fp32 linears on fp16 weights,
    no bf16 op inside but converts), loaded on the runtime, within bf16's tolerance of the eager bf16
    model (``_check_generation``: prefills of 1, 7 and 20 tokens, a prefill of 7 then three decode
    steps); refused for stock's partitioners."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import UnsupportedOption, export_llama, parse_args, run
    from xir_tools.harness import delegate_count, delegated_bf16_ops, delegated_linear_dtypes, outside_ops

    monkeypatch.chdir(tmp_path)
    argv = _flow_argv(tmp_path, TINY_PARAMS, bf16=True)

    with pytest.raises(UnsupportedOption, match="needs xir's partitioner"):
        export_llama(parse_args(argv)[0], "stock", **{option: True})
    builder = run(argv + [f"xir.{option}=true"])
    edge = builder.edge_manager
    linears = delegated_linear_dtypes(edge)
    # qkv (xnnpack.fuse-sibling-linears), o, w1, w2, w3 per layer; the head. As fp16 GEMMs the linears'
    # results are read by converts back to bf16, not by views as heads: q, k and v stay three
    per_layer = 7 if option == "bf16_linears_as_f16" else 5
    assert len(linears) == per_layer * TINY_PARAMS["n_layers"] + 1, linears
    assert set(linears) == {BF16_OPTIONS[option]}, linears
    if option == "bf16_activations_in_fp32":
        # no bf16 arithmetic: q's and k's rotated heads leave their merged chain as one convert to
        # bf16 and two slices of it (xnnpack.merge-head-chains), which copy bf16 values as they are
        inside_bf16 = delegated_bf16_ops(edge)
        assert [op for op in inside_bf16 if "xir.slice" not in op] == [], inside_bf16
        assert len(inside_bf16) <= 2 * TINY_PARAMS["n_layers"], inside_bf16
    assert delegate_count(edge) <= 2 * TINY_PARAMS["n_layers"]
    assert not any(op.startswith(("aten.linear", "aten.mm", "aten.addmm")) for op in outside_ops(edge))

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    assert next(eager.parameters()).dtype is torch.bfloat16
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    _check_generation(eager, buffer, TINY_PARAMS, tolerance=2**-5)


def test_export_llm_command_bf16_one_layer(tmp_path, monkeypatch):
    """``python -m lowering.fx.llm ... model.dtype_override=bf16 backend.xnnpack.enable_bf16=true``, xir's
    default bf16 program, on a 1-layer model: the layer in two delegates, the head in the second, the
    rotary embedding of q and k as one pair swap on fp32 copies of their heads (the flow keeps its
    rope tables in bf16 and casts them for each product: xnnpack.rope-as-pair-swap takes the casts
    as the tables), k's rotated heads converted to bf16 inside the delegate that computes them (the
    cache update reads the delegate's output: no cast left outside), and one program runs prefills
    of 1, 7 and 20 tokens and a prefill of 7 then three decode steps, equal to the eager bf16 model's
    logits."""

    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run

    monkeypatch.chdir(tmp_path)
    params = dict(TINY_PARAMS, n_layers=1)
    argv = _flow_argv(tmp_path, params, bf16=True)
    builder = run(argv)
    inside, outside = _one_layer_in_two_delegates(builder)  # (no _to_copy: every cast is a convert inside)
    # one pair swap for q's and k's heads together, no concatenation (the halves are not re-interleaved)
    assert inside["aten.mm"] == 1 and "aten.cat" not in inside, inside
    # the fused projection's v, q+k (as one slice), and q and k back out of the rotated heads
    assert inside["xir.slice"] == 4, inside
    # converts: the norms' in and out (3 norms), the q+k heads in and out, the tables in (2), the
    # SiLU's in and out; and since xnnpack.bf16-rounded-arithmetic the roundings eager makes inside
    # the layer (the norms' weight products, the gate's product, the residual sums: each an fp32 op
    # between converts), 11 more; and since hoist-row-select moved the final residual sum onto the
    # last token's row, read inside by the final norm, its rounding (2) and the residual's own
    # convert (1: its row is a pick of the layer's input, no longer the value the attention's norm
    # converts)
    assert inside["xir.convert"] == 3 * 2 + 2 + 2 + 2 + 11 + 3, inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    assert next(eager.parameters()).dtype is torch.bfloat16
    buffer = open(builder.get_saved_pte_filename(), "rb").read()

    # eager bf16's logits to the bit: every bf16 result rounded where eager rounds it (before
    # xnnpack.bf16-rounded-arithmetic, within two bf16 ulps of the largest logit)
    _check_generation(eager, buffer, params, tolerance=0)


@pytest.mark.parametrize("extended_ops", [True, False], ids=["extended-ops", "dq-linears-only"])
def test_export_llm_command_8da4w_one_layer(tmp_path, monkeypatch, extended_ops):
    """``python -m lowering.fx.llm ... quantization.qmode=8da4w quantization.group_size=32``, the phone
    recipe, on a 1-layer model: xir's partitioner alone takes every dynamically quantized linear
    into the layer's two delegates, the head in the second (the flow's stock stages make one
    delegate per linear), and one
    program runs prefills of 1, 7 and 20 tokens and a prefill of 7 then three decode steps on its
    own KV cache, against the flow's eager quantized model. With ``backend.xnnpack.extended_ops=false``
    the flow delegates the dynamically quantized linears only, and so does xir
    (``config_precisions=DYNAMIC_QUANT``): none of its passes that make ops only XNNPACK runs
    (``xir.slice``, ...) may run then, or the program could not be lowered."""

    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run
    from xir_tools.harness import delegate_count, delegated_ops, outside_ops

    monkeypatch.chdir(tmp_path)
    params = dict(TINY_PARAMS, n_layers=1)
    argv = _flow_argv(
        tmp_path,
        params,
        extra=QUANTIZATION_8DA4W,
        edit=lambda yaml: yaml.replace("extended_ops: true", f"extended_ops: {str(extended_ops).lower()}"),
    )
    builder = run(argv)
    edge = builder.edge_manager
    inside, outside = delegated_ops(edge), outside_ops(edge)
    if not extended_ops:  # q, k, v, o, w1, w2, w3 and the head, nothing else (and nothing fused)
        assert inside["torchao.choose_qparams_affine"] == 8 and inside["aten.linear"] == 8, (inside, outside)
        assert set(inside) <= {
            "aten.linear",
            "torchao.choose_qparams_affine",
            "torchao.quantize_affine",
            "torchao.dequantize_affine",
        }, inside
        assert not any(op.startswith("xir.") for op in outside), outside
    else:
        # the layer before the custom SDPA and cache update, and the layer after it with the final
        # norm and head: after the attention the layer computes the last token's row only, picked
        # (a select at -1 of the symbolic length, outside) from the attention's output and the
        # residual (hoist-row-select; its torchao quantization per token goes along)
        assert delegate_count(edge) == 2, (inside, outside)
        # qkv (one linear: xnnpack.fuse-sibling-linears), o, w1, w2, w3 and the head, each with its
        # activation quantized dynamically inside
        assert inside["torchao.choose_qparams_affine"] == 6 and inside["torchao.quantize_affine"] == 6, inside
        unexpected = {op: n for op, n in outside.items() if not op.startswith(EXPECTED_OUTSIDE + KNOWN_OUTSIDE)}
        assert not unexpected, unexpected
    assert not any(op.startswith(("aten.linear", "aten.mm", "aten.addmm", "torchao.")) for op in outside), outside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(builder.get_saved_pte_filename(), "rb").read()

    # (the activations' int8 rounding in XNNPACK and in torchao's eager emulation can differ by a
    # step: the flow's own error for this recipe, the same for stock's program)
    _check_generation(eager, buffer, params, tolerance=0.02)


@pytest.mark.parametrize("recipe", ["fp32", "bf16"])
def test_export_llm_command_partial_rotary_one_layer(tmp_path, monkeypatch, recipe):
    """``python -m lowering.fx.llm`` on a 1-layer Phi-4-mini (``model_class: phi_4_mini``: the Hugging
    Face rope on 12 of each head's 16 dims, partial_rotary_factor 0.75), in fp32 and in bf16 (where
    the rotation is bf16 arithmetic): the layer in two delegates, the head in the second, q's and
    k's heads rotated together over the whole head (xnnpack.partial-rotary-whole-head: one swap mm,
    the two tables widened by one mm each), no concatenation and no slice of the head's dims left
    inside, and one program runs prefills of 1, 7 and 20 tokens and a prefill of 7 then three
    decode steps against eager (bf16: within two bf16 ulps of the largest logit)."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run

    monkeypatch.chdir(tmp_path)
    params = dict(
        dim=64,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        hidden_dim=128,
        vocab_size=256,
        norm_eps=1e-5,
        rope_theta=10000.0,
        use_scaled_rope=False,
        use_hf_rope=True,
        partial_rotary_factor=0.75,
        attention_qkv_bias=False,
    )
    argv = _flow_argv(
        tmp_path,
        params,
        bf16=recipe == "bf16",
        edit=lambda yaml: yaml.replace("model_class: llama3", "model_class: phi_4_mini"),
    )
    builder = run(argv)
    inside, outside = _one_layer_in_two_delegates(builder)
    # the swap of q's and k's heads, and each rope table widened from 12 to 16 dims
    assert inside["aten.mm"] == 1 + 2 and "aten.cat" not in inside, inside
    # v's heads and q+k's from the fused projection, q and k back out of the rotated heads: no slice
    # of a head's dims (the partial rotation's two pieces) is left
    assert inside["xir.slice"] == 4 and not any("slice" in op for op in inside if op != "xir.slice"), inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    assert next(eager.parameters()).dtype is (torch.bfloat16 if recipe == "bf16" else torch.float32)
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    _check_generation(eager, buffer, params, tolerance=2**-6 if recipe == "bf16" else 1e-5)


# what stays outside xir's delegates of a 1-layer program with the flow's attention in ATen ops
# (use_sdpa_with_kv_cache off), each tensor op with its count: the embedding; the cache writes at
# input_pos (index_put, and the copies back into the cache buffers); the position arithmetic on
# input_pos in i64 and bool (arange, an add, a cast, scalar_tensor, where); the rows of the rope
# tables and of the mask at input_pos (slice_copy with a bound computed at run time); the
# input_pos picks and the last token's row (select_copy: hoist-row-select picks it where its walk up
# from the flow's select stops)
ATEN_SDPA_OUTSIDE = {
    "aten.embedding.out": 1,
    "aten.index_put.out": 2,
    "aten.copy_": 2,
    "aten.arange.start_out": 1,
    "aten.add.out": 1,
    "aten._to_copy.out": 1,
    "aten.scalar_tensor.out": 1,
    "aten.where.self_out": 1,
    "aten.slice_copy.Tensor_out": 3,
    "aten.select_copy.int_out": 4,
}


@pytest.mark.parametrize("recipe", ["fp32", "bf16", "8da4w"])
def test_export_llm_command_aten_sdpa_one_layer(tmp_path, monkeypatch, recipe):
    """``python -m lowering.fx.llm ... model.use_sdpa_with_kv_cache=false``: the flow's attention as ATen
    ops (the grouped-query repeat of K and V, the additive mask, softmax) on a symbolic sequence
    length, in fp32, bf16 and 8da4w, on a 1-layer model. The layer is two delegates (split by the
    cache writes at input_pos, which run on the portable index_put) and the head a third; attention
    runs inside (two bmm without repeating K and V: xnnpack.fold-repeat-into-bmm; the masked
    softmax: xnnpack.safe-softmax), nothing of float arithmetic stays outside, and one program
    runs prefills of 1, 7 and 20 tokens and a prefill of 7 then three decode steps against eager."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run

    monkeypatch.chdir(tmp_path)
    params = dict(TINY_PARAMS, n_layers=1)
    quantized = QUANTIZATION_8DA4W if recipe == "8da4w" else ""
    argv = _flow_argv(
        tmp_path,
        params,
        bf16=recipe == "bf16",
        extra=quantized,
        edit=lambda yaml: yaml.replace("use_sdpa_with_kv_cache: true", "use_sdpa_with_kv_cache: false"),
    )
    builder = run(argv)
    inside, outside = _inside_outside(builder, delegates=3)
    tensor_ops_outside = _tensor_ops(outside)
    assert tensor_ops_outside == ATEN_SDPA_OUTSIDE, tensor_ops_outside
    # q K^T and its product with V, each one bmm over the grouped heads (no expand of K or V
    # anywhere), and the masked softmax inside
    assert inside["aten.bmm"] == 2 and inside["aten._softmax"] == 1, inside
    assert not any(op.startswith("aten.expand") for op in inside), inside
    if recipe == "8da4w":  # qkv (fused), o, w1, w2, w3, the head: each activation quantized inside
        assert inside["torchao.choose_qparams_affine"] == 6 and inside["torchao.quantize_affine"] == 6, inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    tolerance = {"fp32": 1e-5, "bf16": 2**-6, "8da4w": 0.02}[recipe]
    _check_generation(eager, buffer, params, tolerance=tolerance)


# Qwen3 in the flow, tiny: q/k RMSNorm before the Hugging Face rope (model_class qwen3_0_6b)
TINY_QWEN3_PARAMS = dict(
    dim=64,
    n_layers=1,
    n_heads=4,
    n_kv_heads=2,
    head_dim=32,
    hidden_dim=128,
    vocab_size=256,
    norm_eps=1e-6,
    rope_theta=1000000.0,
    use_scaled_rope=False,
    use_hf_rope=True,
    attention_qkv_bias=False,
    use_qk_norm=True,
    qk_norm_before_rope=True,
)


@pytest.mark.parametrize("recipe", ["fp32", "8da4w"])
def test_export_llm_command_qwen3_one_layer(tmp_path, monkeypatch, recipe):
    """``python -m lowering.fx.llm`` on a 1-layer Qwen3 (``model_class: qwen3_0_6b``: an RMSNorm on each
    of q's and k's heads, then the Hugging Face ``rotate_half`` rope), dynamic sequence length, in
    fp32 and 8da4w: the layer in two delegates, the head in the second, nothing unexpected outside;
    q's and k's heads normed and rotated as one chain (xnnpack.merge-head-chains on the heads of
    the one qkv projection: one rsqrt for both norms), every mean a linear (no spatial mean), the
    rotation one doubled concatenation and its slice (xnnpack.rotate-half-sign-in-sin); and one
    program runs prefills of 1, 7 and 20 tokens and a prefill of 7 then three decode steps against
    eager."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run

    monkeypatch.chdir(tmp_path)
    params = TINY_QWEN3_PARAMS
    quantized = QUANTIZATION_8DA4W if recipe == "8da4w" else ""
    argv = _flow_argv(
        tmp_path,
        params,
        extra=quantized,
        edit=lambda yaml: yaml.replace("model_class: llama3", "model_class: qwen3_0_6b"),
    )
    builder = run(argv)
    inside, outside = _one_layer_in_two_delegates(builder)
    assert outside["aten.slice_copy.Tensor_out"] == 2, outside  # the rope tables' rows at input_pos
    # the two norms of the layer, the final one and q's and k's together: four rsqrt, four mean
    # linears besides qkv, o, w1, w2, w3 and the head
    assert inside["aten.rsqrt"] == 4 and "aten.mean.dim" not in inside and inside["aten.linear"] == 4 + 6, inside
    # q+k's heads and v's out of the projection, the rotated half, q and k back out
    assert inside["xir.slice"] == 5 and inside["aten.cat"] == 1, inside
    if recipe == "8da4w":
        assert inside["torchao.choose_qparams_affine"] == 6 and inside["torchao.quantize_affine"] == 6, inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    _check_generation(eager, buffer, params, tolerance=0.02 if recipe == "8da4w" else 1e-5)


def test_export_llm_command_static_one_layer(tmp_path, monkeypatch):
    """``python -m lowering.fx.llm ... model.enable_dynamic_shape=false``: the flow's one-token program
    (static shapes) on a 1-layer Llama 3 in fp32. The layer's part after the custom SDPA joins the
    final norm and head (no symbolic last-token pick splits them): two delegates; outside only the
    embedding, the rope tables' rows at input_pos (``index``), the input_pos pick, the custom SDPA
    and the cache updates; and one program decodes six tokens one by one from position 0 on its own
    KV cache, each step's logits against eager's."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run

    monkeypatch.chdir(tmp_path)
    params = dict(TINY_PARAMS, n_layers=1)
    argv = _flow_argv(
        tmp_path, params, edit=lambda yaml: yaml.replace("enable_dynamic_shape: true", "enable_dynamic_shape: false")
    )
    builder = run(argv)
    inside, outside = _inside_outside(builder, delegates=2)
    tensor_ops_outside = _tensor_ops(outside)
    assert tensor_ops_outside == {
        "aten.embedding.out": 1,
        "aten.index.Tensor_out": 2,
        "aten.select_copy.int_out": 1,
        "llama.update_cache.out": 2,
        "llama.custom_sdpa.out": 1,
    }, tensor_ops_outside
    assert "aten.mean.dim" not in inside and "aten.cat" not in inside, inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    _check_calls(
        eager,
        buffer,
        [(torch.tensor([[token]]), position) for position, token in enumerate((5, 17, 3, 200, 42, 9))],
        tolerance=1e-5,
    )


# What the flow's stock stages ([XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner]) make of
# the 1-layer tiny config, by recipe (`python -m lowering.fx.llm ... xir.partitioners=stock`; executorch 1.5.1)
STOCK_ONE_LAYER_DELEGATES = {"fp32": 14, "bf16": 19, "8da4w": 14}


@pytest.mark.parametrize("recipe", ["fp32", "bf16", "8da4w"])
def test_export_llm_command_two_xir_stages_one_layer(tmp_path, monkeypatch, capsys, recipe):
    """``python -m lowering.fx.llm ... xir.partitioners=xir-dq+xir``: the flow's two stages, both xir's
    (``config_precisions=DYNAMIC_QUANT``, then all), xir's rewrites as the transform passes of both.
    The DQ-only stage leaves the float ops, xir's own among them (xir.slice, xir.convert), to the
    second (issue 54: it refused the program); no xir op is left outside, no linear either, the
    delegates are at most stock's two stages', and one program runs prefills of 1, 7 and 20 tokens
    and a prefill of 7 then three decode steps against eager."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.examples.models.llama import export_llama_lib as flow
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    from lowering.fx.llm import parse_args, run
    from xir_tools.harness import delegate_count, delegated_ops, outside_ops

    monkeypatch.chdir(tmp_path)
    params = dict(TINY_PARAMS, n_layers=1)
    argv = _flow_argv(tmp_path, params, bf16=recipe == "bf16", extra=QUANTIZATION_8DA4W if recipe == "8da4w" else "")
    builder = run(argv + ["xir.partitioners=xir-dq+xir"])
    edge = builder.edge_manager
    inside, outside = delegated_ops(edge), outside_ops(edge)
    with capsys.disabled():
        print(
            f"\nxir-dq+xir on the 1-layer tiny Llama 3, {recipe}: {delegate_count(edge)} delegates "
            f"(stock's two stages {STOCK_ONE_LAYER_DELEGATES[recipe]})"
        )
    assert not any(op.startswith("xir.") for op in outside), outside
    assert not any(op.startswith(("aten.linear", "aten.mm", "aten.bmm", "aten.addmm", "torchao.")) for op in outside), (
        outside
    )
    unexpected = {op: n for op, n in outside.items() if not op.startswith(EXPECTED_OUTSIDE + KNOWN_OUTSIDE)}
    assert not unexpected, f"ops outside xir's delegates beyond the known ones: {unexpected}"
    assert 2 <= delegate_count(edge) <= STOCK_ONE_LAYER_DELEGATES[recipe], (inside, outside)
    # the second stage took xir's own ops (the first decomposed the float linears it does not take,
    # as ExecuTorch does for each partitioner of a list in turn: fewer of xir's rewrites match)
    assert inside["xir.slice"] >= 2, inside
    if recipe == "bf16":
        assert inside["xir.convert"] >= 2, inside
    if recipe == "8da4w":  # the first stage took the dynamically quantized linears: qkv (fused), o, w1, w2, w3, head
        assert inside["torchao.choose_qparams_affine"] == 6, inside

    eager = flow._prepare_for_llama_export(parse_args(argv)[0]).model.eval()
    buffer = open(builder.get_saved_pte_filename(), "rb").read()
    _check_generation(eager, buffer, params, tolerance={"fp32": 1e-5, "bf16": 2**-6, "8da4w": 0.02}[recipe])
