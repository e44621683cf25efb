"""Encoder-decoder, image classifier and masked LM through optimum-executorch's entry points with
xir's recipe: the command (``xir optimum``), ``main_export``, and the runtime classes that load and
run the .pte. Each is compared with eager and asserts what is delegated."""

import contextlib
import io

import pytest

from bench import optimum as bench

LINEAR_OPS = ("linear", "mm", "addmm", "bmm", "matmul")


def _count(outside):
    return sum(sum(ops.values()) for ops in outside.values())


def _linears(outside):
    return {name: n for ops in outside.values() for name, n in ops.items() if name.split(".")[0] in LINEAR_OPS}


def test_recipe_registered_on_import():
    from optimum.exporters.executorch import recipe_registry

    import xir_tools.optimum as integration

    recipe_registry.discover_recipes()  # (what optimum's export does first: it must not drop xir's)
    assert recipe_registry.recipe_registry["xnnpack-xir"] is integration.export_with_xir
    assert "xnnpack" in recipe_registry.recipe_registry


def test_whisper_through_the_command(model_dirs, tmp_path):
    """``xir optimum`` (optimum's parser and export command): three methods in one program."""
    from optimum.executorch import ExecuTorchModelForSpeechSeq2Seq

    from xir_tools.cli import main

    case = bench.Case("whisper", "whisper")
    folder, out = model_dirs("whisper"), tmp_path / "whisper"
    stdout = io.StringIO()
    with bench.recorded_recipes() as calls, contextlib.redirect_stdout(stdout):
        status = main(["optimum", "--model", str(folder), "--task", case.task, "-o", str(out)])
    assert status == 0
    assert stdout.getvalue().split() == [str(out / "model.pte")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["whisper"]  # (the staging folder is gone)
    ((recipe, _, programs),) = calls
    assert recipe == "xnnpack-xir"
    delegates, outside = bench.delegation(programs["model"])
    assert set(delegates) == {"encoder", "text_decoder", "sampler"}
    assert delegates["encoder"] == 1, outside["encoder"]  # the whole encoder is one delegate
    assert not outside["encoder"], outside["encoder"]
    assert delegates["text_decoder"] >= 1 and not _linears(outside), outside

    runtime = ExecuTorchModelForSpeechSeq2Seq.from_pretrained(str(out))
    eager = bench.eager_model(case, folder)
    error, _ = bench.compare(case, runtime, eager)
    assert error < 1e-4, error
    frames = 2 * eager.config.max_source_positions
    import torch

    tokens = runtime.generate(torch.randn(1, eager.config.num_mel_bins, frames), max_seq_len=4)
    assert 1 <= len(tokens) <= 3


def test_command_errors(tmp_path, capsys):
    from xir_tools.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["optimum", "--model", "m", "--task", "fill-mask"])
    assert stop.value.code == 2 and "-o/--output_dir" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["optimum", "--model", "m", "-o", str(tmp_path / "x"), "--recipe", "xnnpak"])
    err = capsys.readouterr().err
    assert "unknown recipe 'xnnpak'" in err and "xnnpack-xir" in err


@pytest.mark.parametrize("name", ["vit", "bert"])
def test_encoder_against_stock(model_dirs, tmp_path, name):
    """optimum's main_export with both recipes: xir delegates in no more delegates, leaves no more
    ops outside (none at all for the image classifier) and matches eager as stock does."""
    case = bench.Case(name, name)
    folder = model_dirs(name)
    eager = bench.eager_model(case, folder)
    results = {recipe: bench.run_case(case, recipe, folder, tmp_path, eager=eager, runs=0) for recipe in bench.RECIPES}
    xir, stock = results["xnnpack-xir"], results["xnnpack"]
    assert not xir.error and not stock.error, (xir.error, stock.error)
    assert xir.loads and set(xir.delegates) == {"forward"}
    assert sum(xir.delegates.values()) <= sum(stock.delegates.values())
    assert _count(xir.outside) <= _count(stock.outside)
    assert not _linears(xir.outside), xir.outside
    if name == "vit":
        assert xir.delegates == {"forward": 1} and _count(xir.outside) == 0, xir.outside
    assert xir.max_error < 1e-4 and xir.max_error <= max(stock.max_error, 1e-5), (xir.max_error, stock.max_error)


class _Exportable:
    """The part of optimum's exportable modules the recipe reads: export(), metadata, .model.dtype."""

    def __init__(self, dtype):
        import torch

        self.model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).to(dtype)
        self.metadata = {"get_max_seq_len": 8}

    def export(self):
        import torch

        x = torch.randn(2, 8, dtype=self.model[0].weight.dtype)
        return {"anything": torch.export.export(self.model, (x,))}


def test_recipe_dtype_and_options():
    """bf16 from the model's dtype; recipe_kwargs reach the partitioner (enable_bf16 overrides);
    one program is the .pte's forward; the metadata are constant methods."""
    import torch

    import xir_tools.optimum as integration

    for dtype, kwargs, expected in (
        (torch.bfloat16, {}, True),
        (torch.float32, {}, False),
        (torch.bfloat16, {"enable_bf16": False}, False),
    ):
        (program,) = integration.export_with_xir(_Exportable(dtype), **kwargs).values()
        partitioner = integration.export_with_xir.last_partitioner
        assert partitioner.options.enable_bf16 is expected
        assert set(program.methods) == {"forward"}  # (the programs' methods; the metadata are not programs)
        from executorch.runtime import Runtime

        loaded = Runtime.get().load_program(program.buffer)
        assert {"forward", "get_max_seq_len"} <= set(loaded.method_names)
        assert loaded.load_method("get_max_seq_len").execute([])[0] == 8
        delegates, outside = bench.delegation(program)
        # a bf16 linear stays outside without enable_bf16, runs in XNNPACK with it; fp32 always does
        assert (delegates["forward"] == 1) is (expected or dtype == torch.float32), (dtype, kwargs, outside)
    with pytest.raises(ValueError, match="bf16_activations_in_fp32=True needs enable_bf16=True"):
        integration.export_with_xir(_Exportable(torch.float32), bf16_activations_in_fp32=True)
    with pytest.raises(TypeError, match="exportable module"):
        integration.export_with_xir(object())
