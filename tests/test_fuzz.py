"""xir_fuzz: the generator is deterministic and makes valid programs, the shrinker shrinks, repro
files run, and a fixed sample of programs has no failure that is xir's own (stock ok)."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from xir_tools.fuzz import case
from xir_tools.fuzz.cli import label, source_code_id
from xir_tools.fuzz.generator import check_eager, generate
from xir_tools.fuzz.pool import Pool
from xir_tools.fuzz.program import KINDS, Program, drop_op, instantiate
from xir_tools.fuzz.repro import write_repro
from xir_tools.fuzz.shrink import shrink

ROOT = Path(__file__).resolve().parents[1]

# Small programs (at most 4 ops, a few more when an input needs one), 6 seeds per kind, run as a
# campaign runs them (worker pool, 2 workers). The quantized seeds skip the programs with a batch
# norm (dynamic 1004): torchao's convert_pt2e then spends 20-60 s exporting QAT patterns once per
# worker, which would double this file's time.
SAMPLE_SEEDS = {
    "fp32": [1000, 1001, 1002, 1003, 1004, 1005],
    "bf16": [1000, 1001, 1002, 1003, 1004, 1005],
    "static": [1000, 1001, 1002, 1003, 1004, 1005],
    "dynamic": [1000, 1001, 1002, 1003, 1005, 1006],
}
SAMPLE_MAX_OPS = 4


# programs of the sample run with both sides (test_the_workers_speed_ups_change_no_program compares
# both); the others run stock only where xir fails, which is what decides whether a failure is xir's own
BOTH_SIDES = {("fp32", 1000), ("static", 1000)}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    tasks = [
        (
            (kind, seed),
            {
                "seed": seed,
                "kind": kind,
                "max_ops": SAMPLE_MAX_OPS,
                "min_ops": 2,
                "sides": ["xir", "stock"] if (kind, seed) in BOTH_SIDES else ["xir"],
            },
        )
        for kind, seeds in SAMPLE_SEEDS.items()
        for seed in seeds
    ]
    # a native crash (abort) while xir lowers: xir "crashed", stock run again in a fresh worker
    tasks.insert(
        0,
        (
            ("crash", 5),
            {"program": generate(5, "fp32", max_ops=3).to_json(), "sides": ["xir", "stock"], "inject_crash": "xir"},
        ),
    )
    with Pool(2, timeout=300, log_dir=tmp_path_factory.mktemp("fuzz-logs")) as pool:
        outcomes = dict(pool.run(tasks))
        again = [
            (key, {**task, "sides": ["stock"]})
            for key, task in tasks
            if "stock" not in outcomes[key] and outcomes[key]["xir"]["status"] != "ok"
        ]
        for key, outcome in pool.run(again):
            outcomes[key]["stock"] = outcome["stock"]
    return outcomes


def test_generator_is_deterministic():
    for kind in KINDS:
        for seed in (0, 7, 123):
            first, second = generate(seed, kind), generate(seed, kind)
            assert first.module_source() == second.module_source()
            assert first.to_json() == second.to_json()
    sources = {generate(seed, "fp32").module_source() for seed in range(10)}
    assert len(sources) == 10


def test_the_first_generator_edition_builds_the_journals_of_record():
    """Edition 1 (before the select of one index) builds the programs of data/campaigns, whose
    journals name no edition: --rerun and --resume of them run those programs."""
    import gzip
    import json

    from xir_tools.fuzz.generator import GENERATOR

    assert GENERATOR == 2
    for kind in ("fp32", "bf16"):
        lines = gzip.open(ROOT / "data" / "campaigns" / kind / "programs.jsonl.gz", "rt").read().splitlines()
        header = json.loads(lines[0])["campaign"]
        assert "generator" not in header
        for line in lines[1:6]:
            entry = json.loads(line)
            record = entry["record"]
            built = generate(record["seed"], kind, max_ops=header["max_ops"], min_ops=header["min_ops"], generator=1)
            assert json.loads(json.dumps(built.to_json())) == entry["program"], record["seed"]
    firsts = [generate(seed, "fp32", generator=1) for seed in range(40)]
    assert not any(op.kind == "select" for p in firsts for op in p.ops)
    with pytest.raises(ValueError, match="unknown generator edition 3"):
        generate(0, "fp32", generator=3)


def test_generated_programs_run_in_eager():
    shapes = Counter()
    for seed in range(300):
        kind = KINDS[seed % len(KINDS)]
        program = generate(seed, kind)
        outputs = check_eager(program)  # raises when the module does not run or is not finite
        assert len(outputs) == len(program.outputs) >= 1
        assert 3 <= len(program.ops) <= 14
        for output, name in zip(outputs, program.outputs):
            assert list(output.shape) == list(program.meta()[name][0])
            assert output.numel() <= 4096
        uses = Counter(a for op in program.ops for a in op.args)
        shapes["multi-output"] += len(program.outputs) > 1
        shapes["returned-and-consumed"] += any(uses[o] for o in program.outputs)
        shapes["shared"] += any(n > 1 for n in uses.values())
        shapes["multi-input"] += len(program.inputs) > 1
        shapes["select"] += any(op.kind == "select" for op in program.ops)  # a number index: x[:, -1]
    for feature in ("multi-output", "returned-and-consumed", "shared", "multi-input"):
        assert shapes[feature] >= 30, shapes  # DAGs, not chains
    assert shapes["select"] >= 20, shapes


def test_shrinker_reduces_a_program_with_an_injected_failure():
    program = next(
        p
        for p in (generate(seed, "fp32") for seed in range(50))
        if len(p.ops) >= 8 and any(op.kind == "softmax" for op in p.ops)
    )

    def fails(candidate: Program) -> bool:  # the "bug": a softmax, in a program that runs
        if not any(op.kind == "softmax" for op in candidate.ops):
            return False
        try:
            check_eager(candidate)
        except Exception:
            return False
        return True

    small, evals = shrink(program, lambda cs: [fails(c) for c in cs], batch=2, max_evals=200)
    assert fails(small) and evals > 0
    assert len(small.ops) < len(program.ops) and len(small.outputs) == 1
    for op in small.ops:  # locally minimal: no single op can go
        candidate = drop_op(small, op.id)
        assert candidate is None or not fails(candidate)


def test_repro_file_executes(tmp_path):
    program = generate(3, "fp32", max_ops=3)
    outcome = {"xir": {"status": "ok", "error": ""}, "stock": {"status": "ok", "error": ""}}
    path = write_repro(tmp_path, program, outcome, "ok")
    compile(path.read_text(), str(path), "exec")
    child = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "xir:   ok" in child.stdout and "stock: ok" in child.stdout and "reproduced" in child.stdout, child.stdout


def test_worker_crash_is_one_failed_side(sample):
    outcome = sample[("crash", 5)]
    assert outcome["xir"]["status"] == "crashed" and "SIGABRT" in outcome["xir"]["error"]
    assert outcome["stock"]["status"] == "ok"
    assert label(outcome) == "xir-own"


@pytest.mark.parametrize("kind", KINDS)
def test_fixed_sample_has_no_xir_own_failures(sample, kind):
    own = []
    for seed in SAMPLE_SEEDS[kind]:
        outcome = sample[(kind, seed)]
        assert outcome["xir"]["status"] not in ("invalid", "harness-error"), outcome["xir"]
        if label(outcome) == "xir-own":
            program = Program.from_json(outcome["program"])
            own.append(f"seed {seed}: {case.describe(outcome['xir'])}\n{program.module_source()}")
    assert not own, "\n".join(own)


def test_program_source_is_the_module():
    program = generate(11, "bf16")
    module_class, make_inputs = instantiate(program.module_source())
    assert len(make_inputs()) == len(program.inputs)
    assert sum(1 for _ in module_class().parameters()) >= 0


def test_a_campaign_stopped_early_reports_what_ran(tmp_path):
    """SIGTERM (or Ctrl-C) after the first program: the campaign reports it and writes summary.json."""
    import json
    import signal

    command = [
        sys.executable,
        "-m",
        "xir_tools.fuzz",
        "--kind",
        "fp32",
        "--count",
        "50",
        "--seed",
        "1000",
        "--jobs",
        "1",
        "--max-ops",
        "2",
        "--min-ops",
        "2",
        "--timeout",
        "300",
        "--out",
        str(tmp_path),
    ]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in child.stdout:
            lines.append(line)
            if line.startswith("[fp32"):
                child.send_signal(signal.SIGTERM)
                break
        rest, _ = child.communicate(timeout=300)
    finally:
        child.kill()
    output = "".join(lines) + rest
    assert child.returncode == 0, output[-3000:]
    ran = json.loads((tmp_path / "summary.json").read_text())["programs"]
    assert 1 <= len(ran) < 50 and f"interrupted: {len(ran)} of 50 programs ran" in output, output[-3000:]
    assert all(record["kind"] == "fp32" for record in ran)


def test_a_campaign_resumes_where_it_stopped(tmp_path):
    """Every finished program is journalled (programs.jsonl) as it finishes; --resume runs only the
    seeds not yet run and reports all of them; other settings are refused by name."""
    import json

    base = [
        sys.executable,
        "-m",
        "xir_tools.fuzz",
        "--kind",
        "fp32",
        "--seed",
        "1000",
        "--jobs",
        "1",
        "--max-ops",
        "2",
        "--min-ops",
        "2",
        "--timeout",
        "300",
        "--out",
        str(tmp_path),
    ]

    def run(*extra):
        done = subprocess.run(base + list(extra), cwd=ROOT, capture_output=True, text=True, timeout=600)
        return done.returncode, done.stdout + done.stderr

    code, output = run("--count", "1")
    assert code == 0, output[-3000:]
    journal = (tmp_path / "programs.jsonl").read_text().splitlines()
    assert len(journal) == 2 and "campaign" in json.loads(journal[0]), journal
    first = json.loads(journal[1])["record"]
    # a campaign killed before its report: --report reads the journal
    (tmp_path / "summary.json").unlink()
    report = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", "--report", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0 and "1 programs, seeds 1000..1000, xir at" in report.stdout, (
        report.stdout + report.stderr
    )
    assert "kind fp32: 1 programs" in report.stdout, report.stdout
    # a campaign killed while writing its last line: that line is dropped, the rest kept
    with open(tmp_path / "programs.jsonl", "a") as f:
        f.write('{"record": {"kind": "fp32", "se')
    code, output = run("--count", "2", "--resume")
    assert code == 0, output[-3000:]
    assert "resumed: 1 ran before" in output and "[fp32       2/2] seed 1001" in output, output[-3000:]
    assert "seed 1000 " not in output.split("resumed", 1)[1].split("\n\n", 1)[0], output[-3000:]  # not run again
    programs = json.loads((tmp_path / "summary.json").read_text())["programs"]
    assert sorted(r["seed"] for r in programs) == [1000, 1001]
    assert next(r for r in programs if r["seed"] == 1000)["xir"] == first["xir"]
    assert len((tmp_path / "programs.jsonl").read_text().splitlines()) == 3
    code, output = run("--count", "3", "--resume", "--max-ops", "3")
    assert code == 2 and "ran with max_ops 2, this run has 3" in output, output[-3000:]
    # the code the outcomes depend on is what must match, not the commit: a journal kept in the
    # repository goes on at a later commit that changed only docs or tests
    lines = (tmp_path / "programs.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["campaign"]["code"] == source_code_id() and header["campaign"]["commit"]
    header["campaign"]["commit"] = "0" * 40
    (tmp_path / "programs.jsonl").write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    code, output = run("--count", "2", "--resume")
    assert code == 0 and "resumed: 2 ran before" in output, output[-3000:]
    header["campaign"]["code"] = "f" * 16
    (tmp_path / "programs.jsonl").write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    code, output = run("--count", "2", "--resume")
    assert code == 2 and f"ran with code 'ffffffffffffffff', this run has {source_code_id()!r}" in output, output[
        -3000:
    ]


def test_rerun_changes_name_regressions_and_improvements():
    """--rerun compares xir's new outcomes with the journalled ones: a failure where it ran, or a
    new failure of its own, is a regression; running where it failed, or fewer ops outside, an
    improvement; more ops outside is listed."""
    from xir_tools.fuzz.cli import rerun_changes

    def record(seed, xir, stock="ok", outside=0):
        outcome = {
            "xir": {"status": xir, "error": "boom" if xir != "ok" else "", "outside": outside},
            "stock": {"status": stock, "error": "", "outside": 0},
        }
        return ("static", seed), {"kind": "static", "seed": seed, "label": label(outcome), **outcome}

    before = dict(
        [
            record(1, "ok"),
            record(2, "lower-failed", "lower-failed"),
            record(3, "ok", outside=2),
            record(4, "ok", outside=1),
            record(5, "ok"),
            record(6, "ok", "load-failed"),
            record(7, "ok"),
        ]
    )
    after = dict(
        [
            record(1, "load-failed"),
            record(2, "ok", "lower-failed"),
            record(3, "ok", outside=1),
            record(4, "ok", outside=3),
            record(5, "ok"),
            record(6, "wrong-result", "load-failed"),
            record(7, "invalid", "invalid"),
        ]
    )  # (eager's reference not finite: not xir's)
    transitions, regressions, improvements, more_outside, reference_changed = rerun_changes(before, after)
    assert [key[1] for key, _ in regressions] == [1, 6], regressions
    assert "xir ok -> load-failed: boom" in regressions[0][1]
    assert sorted(key[1] for key, _ in improvements) == [2, 3], improvements
    assert more_outside == [(("static", 4), 1, 3)]
    assert transitions[("ok", "xir-own")] == 1 and transitions[("ok", "ok")] == 3, transitions
    assert transitions[("ok", "invalid")] == 1 and reference_changed == [(("static", 7), "ok", "invalid")]


def test_a_campaign_reruns_the_programs_of_another(tmp_path):
    """--rerun DIR runs DIR's programs again (--only-ops: those with one of the op kinds), journals
    them in --out like any campaign, and prints what changed for xir against DIR's journal."""
    import json

    first, again = tmp_path / "first", tmp_path / "again"
    common = ["--kind", "fp32", "--jobs", "1", "--max-ops", "2", "--min-ops", "2", "--timeout", "300"]
    done = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", *common, "--seed", "1000", "--count", "3", "--out", str(first)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = (first / "programs.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines[1:]]
    chosen = entries[0]["record"]["op_kinds"][0]
    selected = sorted(e["record"]["seed"] for e in entries if chosen in e["record"]["op_kinds"])
    # the journal says xir failed on the first program: running it now is an improvement
    entries[0]["record"]["xir"] = {**entries[0]["record"]["xir"], "status": "lower-failed", "error": "old"}
    entries[0]["record"]["label"] = "xir-own"
    for entry in entries:  # (a time no run takes: the re-run's own times cannot equal it by chance)
        entry["record"]["xir"]["seconds"] = -1.0
    (first / "programs.jsonl").write_text("\n".join([lines[0]] + [json.dumps(e) for e in entries]) + "\n")
    # (no --max-ops/--min-ops: a re-run builds its programs with the campaign's; other ones are refused)
    sizes = common.index("--max-ops")
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "xir_tools.fuzz",
            *common[:sizes],
            "--max-ops",
            "3",
            *common[sizes + 4 :],
            "--rerun",
            str(first),
            "--out",
            str(tmp_path / "other"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "built its programs with --max-ops 2, this run asks for 3" in refused.stderr, (
        refused.stdout[-3000:] + refused.stderr[-3000:]
    )
    assert not (tmp_path / "other").exists()
    # a journal whose program is not what its seed builds (edited, or another generator's) is refused
    edited = tmp_path / "edited"
    edited.mkdir()
    changed = [dict(e) for e in entries]
    changed[0]["program"] = {**changed[0]["program"], "outputs": list(changed[0]["program"]["outputs"]) + ["v1"]}
    (edited / "programs.jsonl").write_text("\n".join([lines[0]] + [json.dumps(e) for e in changed]) + "\n")
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "xir_tools.fuzz",
            *common[:sizes],
            *common[sizes + 4 :],
            "--rerun",
            str(edited),
            "--out",
            str(tmp_path / "other"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seed = entries[0]["record"]["seed"]
    assert refused.returncode == 2 and f"fp32 seed {seed} is not the one that seed builds" in refused.stderr, (
        refused.stdout[-3000:] + refused.stderr[-3000:]
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xir_tools.fuzz",
            *common[:sizes],
            *common[sizes + 4 :],
            "--rerun",
            str(first),
            "--only-ops",
            chosen,
            "--out",
            str(again),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    rerun = [json.loads(line)["record"]["seed"] for line in (again / "programs.jsonl").read_text().splitlines()[1:]]
    assert sorted(rerun) == selected, (rerun, selected)
    assert f"those of {first} with {chosen}" in output, output[-3000:]
    assert f"against the campaign re-run ({len(selected)} programs)" in output, output[-3000:]
    assert "xir-own -> ok" in output and "xir better in 1, worse in 0" in output, output[-3000:]
    summary = json.loads((again / "summary.json").read_text())
    assert summary["rerun_of"] == str(first) and summary["regressions"] == []
    # xir ran again, stock's outcome is the journal's (its code did not change)
    old = {e["record"]["seed"]: e["record"] for e in entries}
    for record in summary["programs"]:
        assert record["stock"] == old[record["seed"]]["stock"]
        assert record["xir"]["status"] == "ok" and record["xir"]["seconds"] >= 0 > old[record["seed"]]["xir"]["seconds"]
    # --report prints the same comparison again, from the journal alone
    (again / "summary.json").unlink()
    report = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", "--report", str(again)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    assert output[output.index("against the campaign re-run") :].split("\n\n")[0] in report.stdout, report.stdout
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "xir_tools.fuzz",
            *common,
            "--rerun",
            str(first),
            "--only-ops",
            "nosuchop",
            "--out",
            str(tmp_path / "none"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2 and "with an op among nosuchop" in missing.stderr, missing.stderr[-2000:]


def test_the_report_counts_where_xir_is_worse_than_stock():
    """A failure both share by the label, with xir's the worse outcome (wrong numbers where stock
    refuses the program: fuzz bf16 20645), is counted in the kind's table and listed."""
    from xir_tools.fuzz.cli import _table, _worse

    def record(seed, xir, stock):
        outcome = {"xir": {"status": xir, "error": ""}, "stock": {"status": stock, "error": ""}}
        return {"kind": "bf16", "seed": seed, "label": label(outcome), **outcome}

    records = [
        record(1, "wrong-result", "load-failed"),
        record(2, "wrong-result", "wrong-result"),
        record(3, "ok", "load-failed"),
        record(4, "lower-failed", "lower-failed"),
    ]
    assert [r["seed"] for r in _worse(records)] == [1]
    table = _table("bf16", records)
    assert "xir's own failures: 0" in table and "stock refuses the program): 1" in table, table


def test_the_report_names_ops_stock_delegates_that_xir_leaves_outside(sample):
    """Per-op counts of each side (real ones from the fixed sample), and the report's list of programs
    where xir leaves outside an op stock delegates: not the casts a rewrite of xir adds (fuzz fp32
    10905: a bf16 GELU run in fp32), but a softmax stock delegates (fuzz fp32 11190 before c26d41d)."""
    from xir_tools.fuzz.cli import _table, left_outside_what_stock_delegates

    side = next(o["xir"] for o in sample.values() if o["xir"]["status"] == "ok")
    assert (
        sum(side["delegated_ops"].values()) == side["delegated"]
        and sum(side["outside_ops"].values()) == side["outside"]
    )

    def record(seed, xir_outside, stock_outside, stock_delegated):
        outcome = {
            "xir": {"status": "ok", "error": "", "outside": sum(xir_outside.values()), "outside_ops": xir_outside},
            "stock": {
                "status": "ok",
                "error": "",
                "outside": sum(stock_outside.values()),
                "outside_ops": stock_outside,
                "delegated_ops": stock_delegated,
            },
        }
        outcome["xir"]["delegated_ops"] = {}
        return {"kind": "fp32", "seed": seed, "label": label(outcome), **outcome}

    casts = record(
        10905,
        {"dim_order_ops._to_dim_order_copy": 3, "aten.cat": 2},
        {"dim_order_ops._to_dim_order_copy": 1, "aten.cat": 2, "aten.gelu": 1},
        {"aten.view_copy": 1},
    )
    softmax = record(11190, {"aten.amax": 1, "aten._softmax": 1}, {"aten.amax": 1}, {"aten._softmax": 2})
    assert left_outside_what_stock_delegates(casts["xir"], casts["stock"]) == []
    assert left_outside_what_stock_delegates(softmax["xir"], softmax["stock"]) == ["aten._softmax"]
    assert left_outside_what_stock_delegates({"outside": 3}, {"outside": 1}) == []  # (older records: totals only)
    # fuzz fp32 10071: the view xir leaves outside is the unsqueeze stock leaves outside, written as a view
    unsqueeze = record(10071, {"aten.view_copy": 1}, {"aten.unsqueeze_copy": 1}, {"aten.view_copy": 4})
    assert left_outside_what_stock_delegates(unsqueeze["xir"], unsqueeze["stock"]) == []
    assert left_outside_what_stock_delegates(
        *[
            record(1, {"aten.view_copy": 2}, {"aten.squeeze_copy.dims": 1}, {"aten.view_copy": 1})[side]
            for side in ("xir", "stock")
        ]
    ) == ["reshape (view/unsqueeze/squeeze)"]
    table = _table("fp32", [casts, softmax])
    assert "more ops outside XNNPACK than stock in 2" in table, table
    assert "xir leaves outside an op stock delegates in 1: 11190 (aten._softmax)" in table, table


def test_the_cia_op_list_is_memoized_until_a_library_adds_one():
    """case.memoize_cia_ops (the workers' speed-up) answers what torch's uncached function answers,
    also after a library registers a new CompositeImplicitAutograd op."""
    import torch
    from torch._export import utils
    from torch.export import decomp_utils, exported_program

    modules = (utils, decomp_utils, exported_program)
    original = utils._collect_all_valid_cia_ops
    library = None
    try:
        case.memoize_cia_ops()
        memo = utils._collect_all_valid_cia_ops
        assert memo is not original and all(m._collect_all_valid_cia_ops is memo for m in modules)
        first = memo()
        assert first == original() and memo() is first
        library = torch.library.Library("xir_fuzz_memo_test", "DEF")
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        after = memo()
        assert torch.ops.xir_fuzz_memo_test.twice.default in after and after == original()
    finally:
        for module in modules:
            module._collect_all_valid_cia_ops = original
        if library is not None:
            library._destroy()


def test_the_workers_speed_ups_change_no_program(sample):
    """case.share_node_sources and case.cache_callable_annotations (set in every worker) leave
    provenance and dispatch as they were: a shared NodeSource is equal to a deep copy made without
    the patch, and the fixed sample (run by workers that have both) gets the outcomes a process
    without them gets, for both sides (status, delegated and outside ops, error)."""
    import copy
    import typing

    import torch
    import torch._ops
    from torch.fx.traceback import NodeSource

    class Chain(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x + 1)

    ep = torch.export.export(Chain(), (torch.randn(3),)).run_decompositions()
    sources = [n.meta["from_node"] for n in ep.graph.nodes if n.meta.get("from_node")]
    assert sources
    before = [[s.to_dict() for s in copy.deepcopy(chain)] for chain in sources]
    callable_before = torch._ops.Callable
    try:
        case.share_node_sources()
        case.cache_callable_annotations()
        assert torch._ops.Callable is typing.Callable and isinstance(len, torch._ops.Callable)
        for chain, expected in zip(sources, before):
            copied = copy.deepcopy(chain)
            assert copied is not chain and all(a is b for a, b in zip(copied, chain))
            assert [s.to_dict() for s in copied] == expected
    finally:  # the rest of this test process runs as users' processes do
        del NodeSource.__deepcopy__, NodeSource._xir_fuzz_shared
        torch._ops.Callable = callable_before
    assert copy.deepcopy(sources[0])[0] is not sources[0][0]
    # the sample ran in the pool's workers (both speed-ups); an fp32 and a static program of it
    # again in a fresh spawned process without them
    import multiprocessing

    keys = [min(key for key in sample if key[0] == kind) for kind in ("fp32", "static")]
    with multiprocessing.get_context("spawn").Pool(1) as plain:
        fresh = plain.map(_execute_without_speed_ups, keys)
    for key, outcome in zip(keys, fresh):
        for side in ("xir", "stock"):
            ran = sample[key][side]
            assert (
                outcome[side]["status"],
                outcome[side].get("delegated_ops"),
                outcome[side].get("outside_ops"),
                outcome[side]["error"],
            ) == (ran["status"], ran.get("delegated_ops"), ran.get("outside_ops"), ran["error"]), key


def _execute_without_speed_ups(key):
    import torch

    torch.set_num_threads(1)
    from xir_tools.fuzz.pool import execute

    kind, seed = key
    return execute({"seed": seed, "kind": kind, "max_ops": SAMPLE_MAX_OPS, "min_ops": 2})


def test_a_bf16_option_reaches_xirs_side_of_bf16_programs_and_their_repros(tmp_path):
    """``--bf16-option`` (``xir_options``): xir's side of a bf16 program lowers with the option, a
    float program and stock's side without it; a repro file carries the option."""
    from xir_tools.fuzz.cli import parser, xir_options

    assert xir_options(parser().parse_args(["--bf16-option", "activations-in-fp32"])) == {
        "bf16_activations_in_fp32": True
    }
    assert xir_options(parser().parse_args([])) == {}
    bf16, fp32 = generate(1014, "bf16", max_ops=4, min_ops=2), generate(1014, "fp32", max_ops=4, min_ops=2)
    assert "linear" in [op.kind for op in bf16.ops]  # (the option's fp16 weights)

    def run(program, options, sides=("xir",)):
        module_class, make_inputs = instantiate(program.module_source())
        return case.run_case(
            module_class,
            make_inputs,
            program.kind,
            program.via,
            program.per_channel,
            program.lowp(),
            sides=sides,
            xir_options=options,
        )

    wrong = {"bf16_activations_in_fp32": True, "no_such_option": True}  # (the partitioner refuses it by name)
    outcome = run(bf16, wrong, sides=("xir", "stock"))
    assert outcome["xir"]["status"] == "lower-failed" and "no_such_option" in outcome["xir"]["error"]
    assert outcome["stock"]["status"] == "ok"
    assert run(fp32, wrong)["xir"]["status"] == "ok"
    assert run(bf16, {"bf16_activations_in_fp32": True})["xir"]["status"] == "ok"

    outcome = {"xir": {"status": "ok", "error": ""}, "stock": {"status": "ok", "error": ""}}
    path = write_repro(tmp_path, bf16, outcome, "ok", xir_options={"bf16_activations_in_fp32": True})
    assert "XIR_OPTIONS = {'bf16_activations_in_fp32': True}" in path.read_text()
    child = subprocess.run(
        [sys.executable, str(path), "--side", "xir"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert child.returncode == 0 and '"status": "ok"' in child.stdout, child.stderr[-2000:]


class _LogOfQuantizedZero(torch.nn.Module):
    """fuzz static seed 43064, reduced: a quantized linear output that quantizes to exactly 0, then
    log(sqrt(abs(.))) = -inf, and a product of it with its transpose adds +inf and -inf: a NaN that
    the quantize of the head's input reads (eager's integer for it is an x86 artifact, XNNPACK's another)."""

    def __init__(self, product: bool):
        super().__init__()
        torch.manual_seed(4306403)
        self.linear = torch.nn.Linear(7, 24)
        torch.manual_seed(4306409)
        self.head = torch.nn.Linear(14, 32)
        self.product = product

    def forward(self, x):
        v = torch.log(torch.sqrt(self.linear(torch.cat([x, x], dim=-2)).abs()))
        return self.head(torch.matmul(v, v.transpose(-2, -1))) if self.product else v


@pytest.mark.parametrize("product", [False, True])
def test_a_program_whose_quantized_reference_quantizes_a_nan_is_invalid(product):
    from xir_tools.fuzz import regressions as R

    inputs = (torch.randn(1, 2, 7, 7, generator=torch.Generator().manual_seed(4306492)),)
    ep = R.quantized_program(_LogOfQuantizedZero(product).eval(), inputs, "static", per_channel=True)
    found = case.quantizes_nan(ep, inputs)
    # -inf alone quantizes to the smallest integer on every side: only the NaN is ill-defined
    assert (found is not None) == product, found


def test_a_case_that_quantizes_a_nan_is_invalid_for_both_sides():
    inputs = (torch.randn(1, 2, 7, 7, generator=torch.Generator().manual_seed(4306492)),)
    outcome = case.run_case(lambda: _LogOfQuantizedZero(True), lambda: inputs, "static", "etal", True, [])
    assert outcome["xir"]["status"] == outcome["stock"]["status"] == "invalid"
    assert "quantizes a NaN" in outcome["xir"]["error"]
