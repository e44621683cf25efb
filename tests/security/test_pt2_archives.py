"""Issue 28, item 2: a .pt2 is checked before torch.export.load touches it (xir_tools.pt2).

Each harmful archive is one torch.export.save wrote, changed as an attacker would change it so
that loading (or running ``ep.module()``, as ``xir lower --verify`` does) runs code from the file:
the code creates a marker file. xir (the CLI, the API, the Model Explorer adapter) must refuse each
with a clear error and leave no marker; then, as a control, torch itself is shown to run it. The
damaged ones (a flipped byte, a decompression bomb, a member larger or smaller than its tensor)
must be refused too, and archives of ordinary models must load as torch.export.load loads them.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from xir_tools.pt2 import BadArchive, UntrustedArchive, load_exported_program

WEIGHTS = "data/weights/model_weights_config.json"
CONSTANTS = "data/constants/model_constants_config.json"
PROGRAM = "models/model.json"
INPUTS = "data/sample_inputs/model.pt"


class Model(torch.nn.Module):
    """A weight and a bias (fc), a buffer and a tensor constant."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.register_buffer("shift", torch.ones(4))
        self.scale = torch.full((4,), 2.0)

    def forward(self, x):
        return self.fc(x) * self.scale + self.shift


X = torch.randn(4, 8)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """The model exported with a dynamic batch (symbolic sizes in its JSON) and saved with its inputs."""
    path = tmp_path_factory.mktemp("pt2") / "model.pt2"
    batch = torch.export.Dim("batch", min=2, max=16)
    torch.export.save(torch.export.export(Model(), (X,), dynamic_shapes=({0: batch},)), path)
    return path


class WritesMarker:
    """Unpickling it creates the marker file: code from the archive ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def torch_save(obj) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def root(path: Path) -> str:
    return next(n for n in zipfile.ZipFile(path).namelist() if n.endswith("/archive_format"))[: -len("archive_format")]


def read(path: Path, member: str) -> bytes:
    return zipfile.ZipFile(path).read(root(path) + member)


def rewrite(source: Path, target: Path, changes: dict, compressed: tuple = ()) -> Path:
    """A copy of the archive with members changed (member -> function of its bytes, or the bytes of
    a new member); the members in ``compressed`` deflated."""
    prefix = root(source)
    changes = dict(changes)
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            name = info.filename[len(prefix) :]
            data = old.read(info)
            if name in changes:
                change = changes.pop(name)
                data = change(data) if callable(change) else change
            new.writestr(info.filename, data, zipfile.ZIP_DEFLATED if name in compressed else zipfile.ZIP_STORED)
        for name, data in changes.items():
            new.writestr(prefix + name, data, zipfile.ZIP_DEFLATED if name in compressed else zipfile.ZIP_STORED)
    return target


def edit_json(change):
    """A rewrite() change that edits a member's JSON in place."""

    def apply(data: bytes) -> bytes:
        document = json.loads(data)
        change(document)
        return json.dumps(document).encode()

    return apply


def walk(document):
    """Every dict in a JSON document."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            yield value
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


# ----------------------------------------------------------------------- harmful archives


def pickled_weight(saved, folder, marker):
    """fc.weight marked use_pickle: torch.load(weights_only=False) of its member."""
    weight = json.loads(read(saved, WEIGHTS))["config"]["fc.weight"]["path_name"]
    return rewrite(
        saved,
        folder / "pickled-weight.pt2",
        {
            WEIGHTS: edit_json(lambda c: c["config"]["fc.weight"].update(use_pickle=True)),
            f"data/weights/{weight}": torch_save(WritesMarker(marker)),
        },
    )


def pickled_inputs(saved, folder, marker):
    """Sample inputs the weights-only unpickler refuses: torch falls back to weights_only=False."""
    return rewrite(saved, folder / "pickled-inputs.pt2", {INPUTS: torch_save(((WritesMarker(marker),), {}))})


def opaque_constant(saved, folder, marker):
    """An opaque_obj_ constant: pickle.loads of its member."""
    entry = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True, "tensor_meta": None}
    return rewrite(
        saved,
        folder / "opaque-constant.pt2",
        {
            CONSTANTS: edit_json(lambda c: c["config"].update(evil=entry)),
            "data/constants/opaque_obj_0": pickle.dumps(WritesMarker(marker)),
        },
    )


def legacy_weights(saved, folder, marker):
    """A legacy state dict member (data/weights/model.pt): torch reads it instead of the weights config."""
    return rewrite(saved, folder / "legacy-weights.pt2", {"data/weights/model.pt": torch_save(WritesMarker(marker))})


def sympy_expression(saved, folder, marker):
    """A symbolic size that calls open(): torch parses it with sympy.sympify, which evals it."""

    def change(program):
        for d in walk(program):
            if "expr_str" in d:
                d["expr_str"] = f"open({str(marker)!r}, 'w') and {d['expr_str']}"

    return rewrite(saved, folder / "sympy-expression.pt2", {PROGRAM: edit_json(change)})


def input_name(saved, folder, marker):
    """The input named ``x=open(...)``: FX writes it as a default argument in the graph module's source."""
    evil = f"x=open({str(marker)!r}, 'w')"

    def change(program):
        for d in walk(program):
            for key in ("name", "as_name"):
                if d.get(key) == "x":
                    d[key] = evil
            if "x" in d and isinstance(d["x"], dict) and "dtype" in d["x"]:  # tensor_values
                d[evil] = d.pop("x")

    return rewrite(saved, folder / "input-name.pt2", {PROGRAM: edit_json(change)})


def guard(saved, folder, marker):
    """A guard that calls open(): ep.module() splices it into the module's source and execs it."""
    return rewrite(
        saved,
        folder / "guard.pt2",
        {PROGRAM: edit_json(lambda p: p.update(guards_code=[f"open({str(marker)!r}, 'w') is not None"]))},
    )


def attribute_name(saved, folder, marker):
    """A buffer named so that ep.module()'s source, getattr(self, "NAME"), calls open()."""
    evil = f'shift") if open("{marker}", "w") else getattr(self, "shift'

    def program(document):
        for d in walk(document):
            if d.get("buffer_name") == "shift":
                d["buffer_name"] = evil

    return rewrite(
        saved,
        folder / "attribute-name.pt2",
        {
            PROGRAM: edit_json(program),
            WEIGHTS: edit_json(lambda c: c["config"].update({evil: c["config"].pop("shift")})),
        },
    )


# name -> (builder, what makes torch run it, what xir's error says)
HARMFUL = {
    "pickled-weight": (pickled_weight, "load", "weight fc.weight (member model/data/weights/weight_"),
    "pickled-inputs": (
        pickled_inputs,
        "load",
        "its sample inputs (data/sample_inputs/model.pt) are a pickle that torch's weights-only unpickler refuses",
    ),
    "opaque-constant": (
        opaque_constant,
        "load",
        "constant evil (member model/data/constants/opaque_obj_0) is a pickled Python object",
    ),
    "legacy-weights": (legacy_weights, "load", "member model/data/weights/model.pt is a pickled state dict"),
    "sympy-expression": (sympy_expression, "load", "is not a shape expression (torch evaluates it with sympify)"),
    "input-name": (input_name, "load", "is not a Python name"),
    "guard": (guard, "run", "is not a check of input sizes"),
    "attribute-name": (attribute_name, "run", "the buffer_name 'shift\") if open("),
}


def run_cli(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    from xir_tools import cli

    monkeypatch.setattr(cli, "_quiet_logs", lambda: None)  # keep this process's logging as it is
    status = cli.main(argv)
    return status, capsys.readouterr().err


def run_with_torch(path: Path, trigger: str) -> None:
    """Load with torch.export.load (and run ep.module() when that is what runs the payload)."""
    try:
        ep = torch.export.load(str(path))
        if trigger == "run":
            ep.module()(X)
    except Exception:  # the payload ran before whatever torch raised
        pass


@pytest.mark.parametrize("name", HARMFUL)
def test_code_in_the_archive_does_not_run(name, saved, tmp_path, capsys, monkeypatch):
    from xir_tools.explorer.main import convert_model

    build, trigger, message = HARMFUL[name]
    marker = tmp_path / "marker"
    path = build(saved, tmp_path, marker)
    status, err = run_cli(["dump", str(path)], capsys, monkeypatch)
    line = err.strip().splitlines()[-1]
    assert status == 2 and "Traceback" not in err, err
    assert line.startswith(f"xir: error: {path}: ") and message in line, line
    assert line.endswith(
        "loading it would run code from the file (--trust-pickle, or trust_pickle=True, loads it if you trust the file)"
    )
    with pytest.raises(UntrustedArchive):
        load_exported_program(path)
    with pytest.raises(UntrustedArchive):
        convert_model(str(path))
    assert not marker.exists()
    run_with_torch(path, trigger)  # the control: torch runs the payload
    assert marker.exists()


def test_trust_pickle_is_the_users_choice(saved, tmp_path, capsys, monkeypatch):
    """With --trust-pickle (trust_pickle=True) torch unpickles the archive: the user said they trust it."""
    marker = tmp_path / "marker"
    path = pickled_weight(saved, tmp_path, marker)
    run_cli(["dump", str(path), "--trust-pickle"], capsys, monkeypatch)
    assert marker.exists()


# ----------------------------------------------------------------------- damaged archives


def flipped_byte(saved, folder):
    """One byte of fc.weight's data changed in place: the zip's CRC no longer matches."""
    weight = json.loads(read(saved, WEIGHTS))["config"]["fc.weight"]["path_name"]
    info = zipfile.ZipFile(saved).getinfo(root(saved) + f"data/weights/{weight}")
    data = bytearray(saved.read_bytes())
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    data[info.header_offset + 30 + name_length + extra_length + 5] ^= 0x40
    target = folder / "flipped.pt2"
    target.write_bytes(bytes(data))
    return target


def bomb(saved, folder):
    """fc.weight declared as 16M floats, its member 64 MiB of zeros deflated to ~64 KB."""
    weight = json.loads(read(saved, WEIGHTS))["config"]["fc.weight"]["path_name"]

    def declare(config):
        meta = config["config"]["fc.weight"]["tensor_meta"]
        meta["sizes"], meta["strides"] = [{"as_int": 4}, {"as_int": 1 << 22}], [{"as_int": 1 << 22}, {"as_int": 1}]

    return rewrite(
        saved,
        folder / "bomb.pt2",
        {WEIGHTS: edit_json(declare), f"data/weights/{weight}": bytes(1 << 26)},
        compressed=(f"data/weights/{weight}",),
    )


def inflates_past_its_tensor(saved, folder):
    """fc.weight (4x8 floats, 128 bytes) in a deflated member of 1 MiB."""
    weight = json.loads(read(saved, WEIGHTS))["config"]["fc.weight"]["path_name"]
    return rewrite(
        saved,
        folder / "inflates.pt2",
        {f"data/weights/{weight}": os.urandom(1 << 20)},
        compressed=(f"data/weights/{weight}",),
    )


def shorter_than_its_tensor(saved, folder):
    """fc.weight's member cut to 8 bytes."""
    weight = json.loads(read(saved, WEIGHTS))["config"]["fc.weight"]["path_name"]
    return rewrite(saved, folder / "short.pt2", {f"data/weights/{weight}": lambda data: data[:8]})


DAMAGED = {
    "flipped-byte": (
        flipped_byte,
        r"member model/data/weights/weight_\d+ is damaged: its CRC-32 does not match its bytes",
    ),
    "bomb": (
        bomb,
        r"member model/data/weights/weight_\d+ inflates to 67,108,864 bytes from [\d,]+ "
        r"\(a decompression bomb\?\)",
    ),
    "inflates": (
        inflates_past_its_tensor,
        r"member model/data/weights/weight_\d+ inflates to 1,048,576 bytes, "
        r"more than the 128 that weight fc.weight declares",
    ),
    "short": (
        shorter_than_its_tensor,
        r"member model/data/weights/weight_\d+ holds 8 bytes, fewer than the 128 "
        r"that weight fc.weight declares",
    ),
}


@pytest.mark.parametrize("name", DAMAGED)
def test_damaged_archives_are_refused(name, saved, tmp_path, capsys, monkeypatch):
    import re

    build, message = DAMAGED[name]
    path = build(saved, tmp_path)
    with pytest.raises(BadArchive, match=message):
        load_exported_program(path, trust_pickle=True)  # checked even when the file is trusted
    status, err = run_cli(["dump", str(path)], capsys, monkeypatch)
    assert status == 2 and "Traceback" not in err, err
    assert re.fullmatch(f"xir: error: {re.escape(str(path))}: {message}", err.strip().splitlines()[-1])


def test_a_flipped_byte_that_torch_reads_as_a_weight(saved, tmp_path):
    """torch.export.load reads the damaged weight as if it were fine; xir refuses the archive."""
    path = flipped_byte(saved, tmp_path)
    with pytest.raises(BadArchive, match="CRC-32"):
        load_exported_program(path)
    ep = torch.export.load(str(path))
    assert not torch.equal(ep.state_dict["fc.weight"], torch.export.load(str(saved)).state_dict["fc.weight"])


# ----------------------------------------------------------------------- ordinary archives


def same_program(ours, theirs) -> bool:
    def tensors_equal(a: dict, b: dict) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))

    inputs = (ours.example_inputs is None) == (theirs.example_inputs is None)
    if ours.example_inputs is not None:
        inputs = all(torch.equal(a, b) for a, b in zip(ours.example_inputs[0], theirs.example_inputs[0]))
    return (
        str(ours.graph) == str(theirs.graph)
        and tensors_equal(ours.state_dict, theirs.state_dict)
        and tensors_equal(ours.constants, theirs.constants)
        and inputs
        and ours.range_constraints == theirs.range_constraints
        and ours._guards_code == theirs._guards_code
    )


@pytest.mark.parametrize("name", ["mlp", "cnn", "attention-bf16", "quantized-conv", "linear-bn-3d"])
@pytest.mark.parametrize("inputs", [True, False], ids=["with-inputs", "without-inputs"])
def test_ordinary_archives_load_without_trust(name, inputs, tmp_path):
    from xir_tools.examples import EXAMPLES, export_example

    ep = export_example(EXAMPLES[name])
    if not inputs:
        ep.example_inputs = None
    path = tmp_path / f"{name}.pt2"
    torch.export.save(ep, path)
    assert same_program(load_exported_program(path), torch.export.load(str(path)))


def test_symbolic_sizes_and_guards_load_without_trust(saved, tmp_path):
    """Symbolic sizes, a guard torch.export wrote, a buffer and a tensor constant."""

    class Halves(torch.nn.Module):
        def forward(self, x, y):
            return x * 2 + y[: x.shape[0] // 2].sum()

    batch = torch.export.Dim("batch", min=5, max=64)
    ep = torch.export.export(
        Halves(), (torch.randn(6, 3), torch.randn(8, 3)), dynamic_shapes=({0: batch}, {0: torch.export.Dim.AUTO})
    )
    assert ep._guards_code  # (L['x'].size()[0] // 2) <= L['y'].size()[0]
    path = tmp_path / "halves.pt2"
    torch.export.save(ep, path)
    for archive in (path, saved):
        ours = load_exported_program(archive)
        assert same_program(ours, torch.export.load(str(archive)))
        ours.module()(*ours.example_inputs[0])


@pytest.mark.parametrize("trust", [False, True], ids=["checked", "trusted"])
def test_a_quantized_program_loads_in_a_fresh_process(trust, tmp_path):
    """A statically quantized program names ``quantized_decomposed`` ops, which exist only once
    torch's quantization library defines them: loaded first thing in a process (as every CLI command
    does), it was refused as "not an exported program" (found on a fuzzer's static program)."""
    import subprocess
    import sys

    from xir_tools.examples import EXAMPLES, export_example

    path = tmp_path / "quantized-conv.pt2"
    torch.export.save(export_example(EXAMPLES["quantized-conv"]), path)
    script = (
        "import sys; from xir_tools.pt2 import load_exported_program\n"
        f"ep = load_exported_program(sys.argv[1], trust_pickle={trust})\n"
        "print(sorted({str(n.target) for n in ep.graph.nodes if 'quantized_decomposed' in str(n.target)}))"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "quantized_decomposed.dequantize_per_tensor.default" in done.stdout
