"""A decoder through optimum-executorch's Python entry point, ExecuTorchModelForCausalLM.from_pretrained
(export=True, recipe="xnnpack-xir"): custom SDPA and KV cache with 8da4w linears; and a bfloat16
decoder, lowered in bf16 where optimum's own recipe leaves it outside XNNPACK."""

from bench import optimum as bench

# ops that compute a linear: none of them may run outside XNNPACK
LINEAR_OPS = ("linear", "mm", "addmm", "bmm", "matmul")


def _linears_outside(outside):
    return {
        name: n
        for ops in outside.values()
        for name, n in ops.items()
        if name.split(".")[0] in LINEAR_OPS or "quantize" in name
    }


def test_decoder_custom_sdpa_kv_cache_8da4w(model_dirs):
    from optimum.executorch import ExecuTorchModelForCausalLM

    import xir_tools.optimum  # noqa: F401  (one import registers the recipe)

    case = bench.Case("llama-sdpa-kv-8da4w", "llama", {**bench.SDPA_KV, "qlinear": "8da4w"})
    folder = model_dirs("llama")
    with bench.recorded_recipes() as calls:
        model = ExecuTorchModelForCausalLM.from_pretrained(
            str(folder),
            export=True,
            task="text-generation",
            recipe="xnnpack-xir",
            max_seq_len=64,
            use_custom_sdpa=True,
            use_custom_kv_cache=True,
            qlinear="8da4w",
        )
    ((recipe, _, programs),) = calls
    assert recipe == "xnnpack-xir"
    delegates, outside = bench.delegation(programs["model"])
    assert set(delegates) == {"forward"} and delegates["forward"] >= 1
    assert not _linears_outside(outside), outside
    # outside: the custom ops (ExecuTorch's llama kernels), the embedding, and the integer positions
    # (cache_position read as a scalar, and cast to float for the rotary embedding)
    ops = set(outside["forward"])
    assert ops <= {
        "llama::custom_sdpa.out",
        "llama::update_cache.out",
        "embedding.out",
        "_local_scalar_dense",
        "select_copy.int_out",
        "_to_copy.out",
    }, sorted(ops)
    assert outside["forward"]["llama::custom_sdpa.out"] == 2 and outside["forward"]["llama::update_cache.out"] == 4

    error, _ = bench.compare(case, model, bench.eager_model(case, folder))
    assert error < 5e-2, error  # 8da4w: the runtime's and eager torchao's dynamic int8 activations
    tokens = model.generate(bench.PROMPT, max_seq_len=len(bench.PROMPT) + 4)
    assert len(tokens) == 4 and all(0 <= t < 256 for t in tokens)


def test_bf16_decoder_lowered_in_bf16(model_dirs, tmp_path):
    """dtype=bfloat16: xir's recipe sets enable_bf16 from the model's dtype; the linears run in XNNPACK."""
    from optimum.exporters.executorch import main_export

    case = bench.Case("llama-sdpa-kv-bf16", "llama", {**bench.SDPA_KV, "dtype": "bfloat16"})
    folder = model_dirs("llama")
    results = {}
    for recipe in bench.RECIPES:
        with bench.recorded_recipes() as calls:
            main_export(
                str(folder), task=case.task, recipe=recipe, output_dir=tmp_path / recipe, **bench.export_options(case)
            )
        ((_, _, programs),) = calls
        results[recipe] = bench.delegation(programs["model"])
    import xir_tools.optimum as integration

    assert integration.export_with_xir.last_partitioner.options.enable_bf16
    (_, xir_outside), (_, stock_outside) = results["xnnpack-xir"], results["xnnpack"]
    assert not _linears_outside(xir_outside), xir_outside
    assert _linears_outside(stock_outside), "optimum's own recipe now delegates bf16 linears: update this test"
    count = lambda outside: sum(sum(ops.values()) for ops in outside.values())  # noqa: E731
    assert count(xir_outside) < count(stock_outside)

    from optimum.executorch import ExecuTorchModelForCausalLM

    runtime = ExecuTorchModelForCausalLM.from_pretrained(str(tmp_path / "xnnpack-xir"))
    error, _ = bench.compare(case, runtime, bench.eager_model(case, folder))
    assert error < 0.1, error  # bf16 logits of a random model (|logit| < ~1)
    assert runtime.generate(bench.PROMPT, max_seq_len=len(bench.PROMPT) + 2)
