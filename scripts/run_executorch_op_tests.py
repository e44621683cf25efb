#!/usr/bin/env python
"""Run ExecuTorch's own XNNPACK op tests with the stock partitioner and with xir's.

ExecuTorch ships its XNNPACK op tests in the wheel
(``executorch/backends/xnnpack/test/ops/``).  This script runs them twice, each time in a
pytest subprocess:

* ``stock``: untouched, ExecuTorch's own ``XnnpackPartitioner``;
* ``xir``:   every place the Tester or a test constructs the stock ``XnnpackPartitioner`` (or one
  of its stock subclasses ``XnnpackFloatingPointPartitioner`` / ``XnnpackQuantizedPartitioner`` /
  ``XnnpackDynamicallyQuantizedPartitioner``) gets ``lowering.XnnpackPartitioner`` instead, and
  xir's ``transform_passes()`` are run before partitioning (added to ``transform_passes=`` of every
  ``to_edge_transform_and_lower`` call, and run through ``EdgeProgramManager.transform`` before
  ``to_backend`` in the Tester's legacy ``Partition`` stage).  A construction with ``configs=``
  (which xir rejects by design) falls back to the stock partitioner and the test is counted as
  "not applicable".

Then it prints a side-by-side summary and the tests that pass with stock but fail with xir.

    .venv/bin/python scripts/run_executorch_op_tests.py                       # everything
    .venv/bin/python scripts/run_executorch_op_tests.py --files test_add test_conv2d.py
    .venv/bin/python scripts/run_executorch_op_tests.py --tests "fp32 and not dynamic"
    .venv/bin/python scripts/run_executorch_op_tests.py --mode stock --keep base/   # once
    .venv/bin/python scripts/run_executorch_op_tests.py --reuse-stock base/          # xir vs that
    .venv/bin/python scripts/run_executorch_op_tests.py --reuse-stock base/ --reuse-xir new/  # two kept runs

Cost on 2 busy cores: the 238 tests outside test_linear.py take about 20-23 minutes per run;
test_linear.py alone (26 tests, each looping over many shapes and both lowering paths) is the
slowest file by far (15 of its tests: 15 minutes with stock). ``--files``/``--tests`` make subsets.

The same file doubles as the pytest plugin that the subprocesses load (``-p``); it records every
test's outcome incrementally (so a hard crash, e.g. a segfault in the XNNPACK runtime, loses only
the test that crashed: the run resumes with the tests not yet reported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PLUGIN_NAME = "run_executorch_op_tests"
ENV_MODE = "XIR_OPTESTS_MODE"  # "stock" | "xir"   (set only in the subprocesses)
ENV_RESULTS = "XIR_OPTESTS_RESULTS"  # JSON-lines file the plugin appends to
ENV_TRANSFORMS = "XIR_OPTESTS_TRANSFORMS"  # "1" (default) | "0": run xir's transform passes
OUTCOME_ORDER = {"error": 4, "failed": 3, "passed": 2, "skipped": 1, "missing": 0}


# =====================================================================================
# Part 1: the pytest plugin (imported inside the pytest subprocesses)
# =====================================================================================

_current_test = ["<collection>"]
_events: dict = {}  # test key -> {"xir": n, "stock_fallback": n, "transforms": n, ...}


def _junit_key(nodeid: str) -> str:
    """'test_add.py::TestAdd::test_fp16_add' -> 'test_add.TestAdd::test_fp16_add'."""
    parts = nodeid.split("::")
    module = parts[0].replace("/", ".")
    if module.endswith(".py"):
        module = module[:-3]
    return ".".join([module] + parts[1:-1]) + "::" + parts[-1]


def _note(kind: str) -> None:
    counts = _events.setdefault(_current_test[0], {})
    counts[kind] = counts.get(kind, 0) + 1


def _write(record: dict) -> None:
    path = os.environ.get(ENV_RESULTS)
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def install_xir_patches(apply_transforms: bool = True) -> dict:
    """Substitute xir's partitioner for the stock one everywhere ExecuTorch's Tester and op tests
    can reach it. Returns {what: where} for the log."""
    import executorch.backends.test.harness.stages.partition as harness_partition
    import executorch.backends.test.harness.stages.to_edge_transform_and_lower as harness_lower
    import executorch.backends.xnnpack  # noqa: F401  (re-exports the partitioners)
    import executorch.backends.xnnpack.partition.xnnpack_partitioner as stock_mod
    import executorch.backends.xnnpack.test.tester.tester  # noqa: F401
    import executorch.exir.program._program as program_mod
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
    from executorch.exir.backend.backend_api import validation_disabled

    from lowering.fx.partitioner import XnnpackPartitioner as XirPartitioner

    def make(name: str, stock_cls: type, fixed: dict | None = None, pinned: str | None = None):
        fixed = dict(fixed or {})

        def __new__(cls, *args, **kwargs):
            configs = kwargs.get("configs", args[0] if args else None)
            if configs is not None:  # xir rejects configs= by design: stock it is, "not applicable"
                _note("stock_fallback")
                return stock_cls(*args, **kwargs)
            return XirPartitioner.__new__(cls)

        def __init__(self, *args, **kwargs):
            if pinned and pinned in kwargs:
                raise ValueError(f"{name} pins {pinned} and does not accept it as an argument")
            kwargs.update(fixed)
            _note("xir")
            XirPartitioner.__init__(self, *args, **kwargs)

        return type(
            name,
            (XirPartitioner,),
            {"__new__": __new__, "__init__": __init__, "__module__": __name__, "stock_cls": stock_cls},
        )

    substitutes = {
        "XnnpackPartitioner": make("XnnpackPartitioner", stock_mod.XnnpackPartitioner),
        "XnnpackFloatingPointPartitioner": make(
            "XnnpackFloatingPointPartitioner",
            stock_mod.XnnpackFloatingPointPartitioner,
            {"config_precisions": ConfigPrecisionType.FP32},
        ),
        "XnnpackQuantizedPartitioner": make(
            "XnnpackQuantizedPartitioner",
            stock_mod.XnnpackQuantizedPartitioner,
            {"config_precisions": ConfigPrecisionType.STATIC_QUANT},
        ),
        "XnnpackDynamicallyQuantizedPartitioner": make(
            "XnnpackDynamicallyQuantizedPartitioner",
            stock_mod.XnnpackDynamicallyQuantizedPartitioner,
            {"config_precisions": ConfigPrecisionType.DYNAMIC_QUANT},
            pinned="config_precisions",
        ),
    }
    stock_objects = {id(getattr(stock_mod, name)): sub for name, sub in substitutes.items()}

    # --- to_edge_transform_and_lower: add xir's transform passes for xir partitioners -----------
    original_lower = program_mod.to_edge_transform_and_lower
    import inspect

    signature = inspect.signature(original_lower)

    def to_edge_transform_and_lower(*args, **kwargs):  # same name: stock code inspects the stack
        bound = signature.bind(*args, **kwargs)
        partitioner = bound.arguments.get("partitioner")
        passes = bound.arguments.get("transform_passes")
        if apply_transforms and partitioner:
            if isinstance(partitioner, dict):
                extra = {
                    method: [p for part in parts if isinstance(part, XirPartitioner) for p in part.transform_passes()]
                    for method, parts in partitioner.items()
                }
                extra = {method: ps for method, ps in extra.items() if ps}
                if extra:
                    if passes is None:
                        passes = extra
                    elif isinstance(passes, dict):
                        passes = {m: list(passes.get(m, [])) + extra.get(m, []) for m in set(passes) | set(extra)}
                    elif isinstance(passes, (list, tuple)):
                        passes = {m: list(passes) + extra.get(m, []) for m in partitioner}
                    else:
                        _note("transforms_not_added")
                        extra = None
                    if extra:
                        _note("transforms")
            else:
                extra = [p for part in partitioner if isinstance(part, XirPartitioner) for p in part.transform_passes()]
                if extra:
                    if passes is None or isinstance(passes, (list, tuple)):
                        passes = list(passes or []) + extra
                        _note("transforms")
                    else:
                        _note("transforms_not_added")
            bound.arguments["transform_passes"] = passes
        return original_lower(*bound.args, **bound.kwargs)

    to_edge_transform_and_lower.__wrapped__ = original_lower

    # --- Tester's legacy Partition stage (to_edge + to_backend): transform first -------------------
    original_partition_run = harness_partition.Partition.run

    def partition_run(self, artifact, inputs=None):
        if apply_transforms and isinstance(self.partitioner, XirPartitioner):
            with validation_disabled():
                artifact = artifact.transform(self.partitioner.transform_passes())
            _note("transforms")
        return original_partition_run(self, artifact, inputs)

    harness_partition.Partition.run = partition_run

    # --- rebind every reference already imported into executorch.* modules ------------------------
    patched: dict = {}

    def rebind() -> None:
        for mod_name, module in list(sys.modules.items()):
            if module is None or not (mod_name == "executorch" or mod_name.startswith("executorch.")):
                continue
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and id(value) in stock_objects and attr in substitutes:
                    setattr(module, attr, stock_objects[id(value)])
                    patched.setdefault(attr, set()).add(mod_name)
                elif value is original_lower:
                    setattr(module, attr, to_edge_transform_and_lower)
                    patched.setdefault("to_edge_transform_and_lower", set()).add(mod_name)

    rebind()
    assert harness_lower.to_edge_transform_and_lower is to_edge_transform_and_lower
    assert stock_mod.XnnpackPartitioner is substitutes["XnnpackPartitioner"]
    install_xir_patches.rebind = rebind
    return patched


_MODE = os.environ.get(ENV_MODE)
if _MODE == "xir":
    _PATCHED = install_xir_patches(apply_transforms=os.environ.get(ENV_TRANSFORMS, "1") != "0")
else:
    _PATCHED = {}


def pytest_report_header(config):
    if _MODE is None:
        return None
    lines = [f"xir op-test harness: mode={_MODE}"]
    for what, where in sorted(_PATCHED.items()):
        lines.append(f"  patched {what} in {len(where)} module(s)")
    return lines


def pytest_collection_finish(session):
    if _MODE is None:
        return
    if _MODE == "xir":  # test modules are imported by now; catch any late binding
        install_xir_patches.rebind()
        _write({"kind": "patched", "where": {what: sorted(where) for what, where in _PATCHED.items()}})
    _write({"kind": "collected", "tests": [_junit_key(item.nodeid) for item in session.items]})


def pytest_runtest_logstart(nodeid, location):
    if _MODE is None:
        return
    _current_test[0] = _junit_key(nodeid)
    _events.pop(_current_test[0], None)
    _write({"kind": "start", "test": _current_test[0]})


def _reason(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # skip: (path, lineno, message)
        return str(longrepr[-1])
    crash = getattr(longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or str(longrepr)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[0] if lines else ""


def pytest_runtest_logreport(report):
    if _MODE is None:
        return
    key = _junit_key(report.nodeid)
    if report.passed:
        outcome = "passed" if report.when == "call" else None
    elif report.skipped:
        outcome = "skipped"
    elif report.when == "call":
        outcome = "failed"
    else:
        outcome = "error"
    if hasattr(report, "wasxfail"):
        outcome = "skipped"
    if outcome is None:
        return
    context = getattr(report, "context", None)  # pytest >= 9: a unittest subTest's report
    record = {
        "kind": "report",
        "test": key,
        "when": report.when,
        "outcome": outcome,
        "reason": _reason(report),
        "duration": round(report.duration, 3),
    }
    if context is not None:
        record["subtest"] = f"{getattr(context, 'msg', '') or ''} {getattr(context, 'kwargs', '') or ''}".strip()
    _write(record)


def pytest_runtest_logfinish(nodeid, location):
    if _MODE is None:
        return
    key = _junit_key(nodeid)
    _write({"kind": "finish", "test": key, "events": _events.get(key, {})})
    _current_test[0] = "<between tests>"


# =====================================================================================
# Part 2: the driver
# =====================================================================================


def _ops_dir() -> str:
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not importable from this interpreter; run with the project's venv")
    return os.path.join(list(spec.submodule_search_locations)[0], "backends", "xnnpack", "test", "ops")


def _resolve_files(ops_dir: str, files: list[str] | None) -> list[str]:
    available = sorted(f for f in os.listdir(ops_dir) if f.startswith("test_") and f.endswith(".py"))
    if not files:
        return [os.path.join(ops_dir, f) for f in available]
    chosen = []
    for name in files:
        for piece in name.split(","):
            piece = piece.strip()
            if not piece:
                continue
            base = os.path.basename(piece)
            if not base.endswith(".py"):
                base += ".py"
            if not base.startswith("test_"):
                base = "test_" + base
            if base not in available:
                sys.exit(f"no op test file {base!r} in {ops_dir}; available: {', '.join(available)}")
            chosen.append(os.path.join(ops_dir, base))
    return list(dict.fromkeys(chosen))


def _read_records(path: str) -> list[dict]:
    records = []
    if not os.path.exists(path):
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a crash
                    pass
    return records


def _aggregate(records: list[dict]) -> dict:
    """test key -> {"outcome", "reason", "events", "duration"}."""
    results: dict = {}
    for rec in records:
        kind = rec.get("kind")
        if kind == "collected":
            for test in rec["tests"]:
                results.setdefault(
                    test,
                    {"outcome": "missing", "reason": "never ran", "events": {}, "duration": 0.0, "subtests_failed": 0},
                )
        elif kind == "start":
            entry = results.setdefault(
                rec["test"], {"outcome": "missing", "reason": "", "events": {}, "duration": 0.0, "subtests_failed": 0}
            )
            entry["outcome"], entry["reason"] = "missing", "crashed the test process (no report)"
            entry["started"] = True
        elif kind == "report":
            entry = results[rec["test"]]
            entry["duration"] += rec.get("duration", 0.0)
            outcome, reason = rec["outcome"], rec.get("reason", "")
            if rec.get("subtest") is not None and outcome in ("failed", "error"):
                entry["subtests_failed"] += 1
                reason = f"[subtest {rec['subtest']}] {reason}"
            previous = entry["outcome"]
            if previous == "missing" or OUTCOME_ORDER[outcome] > OUTCOME_ORDER[previous]:
                entry["outcome"], entry["reason"] = outcome, reason
        elif kind == "finish":
            entry = results[rec["test"]]
            entry["events"] = rec.get("events", {})
            entry.pop("started", None)
    return results


def _run_mode(mode: str, files: list[str], args, out_dir: str, ops_dir: str) -> dict:
    import subprocess
    import time

    results_path = os.path.join(out_dir, f"{mode}.jsonl")
    if os.path.exists(results_path):
        os.remove(results_path)
    ini = os.path.join(out_dir, "pytest.ini")  # keep the repo's own pytest config out of it
    with open(ini, "w") as f:
        f.write("[pytest]\nfilterwarnings =\n    ignore::DeprecationWarning\n    ignore::FutureWarning\n")
    env = dict(os.environ)
    env[ENV_MODE] = mode
    env[ENV_RESULTS] = results_path
    env[ENV_TRANSFORMS] = "0" if args.no_transform_passes else "1"
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "2")

    deselect: list[str] = []
    attempt = 0
    start = time.time()
    log_path = os.path.join(out_dir, f"{mode}.log")
    with open(log_path, "w"):
        pass
    while True:
        attempt += 1
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            ini,
            "--rootdir",
            ops_dir,
            "-p",
            "no:cacheprovider",
            "-p",
            PLUGIN_NAME,
            "-q",
            "-o",
            "console_output_style=classic",
            "-p",
            "no:logging",
            "--junitxml",
            os.path.join(out_dir, f"{mode}{'' if attempt == 1 else '.' + str(attempt)}.xml"),
        ]
        if args.tests:
            cmd += ["-k", args.tests]
        for nodeid in deselect:
            cmd += ["--deselect", nodeid]
        cmd += list(args.pytest_arg or [])
        cmd += files
        print(
            f"[{mode}] run {attempt}: pytest on {len(files)} file(s)"
            + (f", -k {args.tests!r}" if args.tests else "")
            + (f", {len(deselect)} deselected (already reported)" if deselect else ""),
            flush=True,
        )
        with open(log_path, "a") as log:
            log.write(f"\n\n===== {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.run(cmd, cwd=out_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
        records = _read_records(results_path)
        results = _aggregate(records)
        if attempt == 1:
            for rec in records:
                if rec.get("kind") == "patched":
                    print(
                        f"[{mode}] substituted: "
                        + "; ".join(f"{what} in {len(where)} module(s)" for what, where in sorted(rec["where"].items()))
                    )
        crashed = [t for t, r in results.items() if r.get("started")]
        if proc.returncode in (0, 1, 5) or attempt > args.max_restarts:
            if proc.returncode not in (0, 1, 5):
                print(f"[{mode}] pytest exited with {proc.returncode}; giving up restarting (see {log_path})")
            break
        if not crashed:
            print(f"[{mode}] pytest exited with {proc.returncode} and no test was running; see {log_path}")
            break
        for test in crashed:
            results[test]["outcome"] = "error"
            results[test]["reason"] = f"crashed the test process (pytest exit code {proc.returncode})"
            results[test].pop("started", None)
            _write_crash(results_path, test, proc.returncode)
        print(f"[{mode}] {crashed[0]} crashed the process (exit {proc.returncode}); resuming", flush=True)
        deselect = [_nodeid(t, results) for t, r in results.items() if r["outcome"] != "missing"]
    for entry in results.values():
        if entry.pop("started", None):
            entry["outcome"] = "error"
    print(f"[{mode}] done in {time.time() - start:.0f}s; log {log_path}", flush=True)
    return results


def _write_crash(results_path: str, test: str, code: int) -> None:
    with open(results_path, "a") as f:
        f.write(
            json.dumps(
                {
                    "kind": "report",
                    "test": test,
                    "when": "call",
                    "outcome": "error",
                    "reason": f"crashed the test process (pytest exit code {code})",
                }
            )
            + "\n"
        )
        f.write(json.dumps({"kind": "finish", "test": test, "events": {}}) + "\n")


def _nodeid(key: str, results: dict) -> str:
    """'test_add.TestAdd::test_x' -> 'test_add.py::TestAdd::test_x' (for --deselect)."""
    dotted, name = key.rsplit("::", 1)
    parts = dotted.split(".")
    return f"{parts[0]}.py::" + "::".join(parts[1:] + [name])


def _xir_revision() -> str:
    """The commit of the xir checkout the xir run imports, and whether its sources are modified."""
    import subprocess

    try:
        import importlib.util

        root = os.path.dirname(os.path.dirname(os.path.abspath(importlib.util.find_spec("lowering").origin)))
        head = subprocess.run(
            ["git", "-C", root, "log", "-1", "--format=%h %ad %s", "--date=iso"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "xir", "passes", "lowering"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return f"{root} at {head}" + (" (with uncommitted changes in xir/passes/lowering)" if dirty else "")
    except Exception as error:  # not a git checkout, no git: not worth failing for
        return f"unknown ({error})"


def _select(results: dict, files: list[str], args) -> dict:
    """Reused results restricted to this invocation's files (``--tests`` cannot be re-evaluated
    here, so the reused run should have been made with the same -k)."""
    modules = {os.path.basename(f)[:-3] for f in files}
    return {t: r for t, r in results.items() if t.split("::")[0].split(".")[0] in modules}


def _counts(results: dict) -> dict:
    counts = {"total": len(results), "passed": 0, "failed": 0, "errors": 0, "skipped": 0, "not run": 0}
    for entry in results.values():
        outcome = entry["outcome"]
        key = {"error": "errors", "missing": "not run"}.get(outcome, outcome)
        counts[key] += 1
    return counts


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _report(results: dict, args) -> int:
    modes = [m for m in ("stock", "xir") if m in results]
    print()
    print("=" * 78)
    print(
        "ExecuTorch XNNPACK op tests"
        + (f"  (-k {args.tests!r})" if args.tests else "")
        + (f"  files: {', '.join(args.files)}" if args.files else "  (all files)")
    )
    print("=" * 78)
    counts = {m: _counts(results[m]) for m in modes}
    header = f"{'':>10}" + "".join(f"{m:>12}" for m in modes)
    print(header)
    for row in ("total", "passed", "failed", "errors", "skipped", "not run"):
        if row == "not run" and not any(counts[m][row] for m in modes):
            continue
        print(f"{row:>10}" + "".join(f"{counts[m][row]:>12}" for m in modes))
    rates = []
    for m in modes:
        ran = counts[m]["total"] - counts[m]["skipped"]
        rates.append(f"{100.0 * counts[m]['passed'] / ran:.1f}%" if ran else "n/a")
    print(f"{'pass rate':>10}" + "".join(f"{r:>12}" for r in rates) + "   (passed / non-skipped)")

    exit_code = 0
    if "xir" in results:
        xir = results["xir"]
        na = sorted(t for t, r in xir.items() if r["events"].get("stock_fallback"))
        untouched = sorted(
            t
            for t, r in xir.items()
            if r["outcome"] in ("passed", "failed", "error")
            and not r["events"].get("xir")
            and not r["events"].get("stock_fallback")
        )
        used = sum(1 for r in xir.values() if r["events"].get("xir"))
        print(
            f"\nxir run: {used} test(s) constructed xir's partitioner; "
            f"{len(na)} not applicable (configs= -> stock fallback); "
            f"{len(untouched)} never constructed a partitioner."
        )
        for t in na:
            print(f"  not applicable: {t}")
        if args.verbose:
            for t in untouched:
                print(f"  no partitioner: {t}")
        no_transforms = sorted(t for t, r in xir.items() if r["events"].get("transforms_not_added"))
        for t in no_transforms:
            print(f"  WARNING: could not add xir's transform passes in {t}")

    if "stock" in results and "xir" in results:
        stock, xir = results["stock"], results["xir"]
        bad = lambda r: r is not None and r["outcome"] in ("failed", "error", "missing")  # noqa: E731
        regressions = sorted(
            t
            for t, r in stock.items()
            if r["outcome"] == "passed" and bad(xir.get(t)) and not xir[t]["events"].get("stock_fallback")
        )
        na_regressions = sorted(
            t
            for t, r in stock.items()
            if r["outcome"] == "passed" and bad(xir.get(t)) and xir[t]["events"].get("stock_fallback")
        )
        fixed = sorted(
            t
            for t, r in stock.items()
            if r["outcome"] in ("failed", "error") and xir.get(t, {}).get("outcome") == "passed"
        )
        both = sorted(t for t, r in stock.items() if r["outcome"] in ("failed", "error") and bad(xir.get(t)))
        only = sorted(set(stock) ^ set(xir))
        print(f"\nPass with stock, fail with xir: {len(regressions)}")
        for t in regressions:
            r = xir[t]
            tag = "ERROR" if r["outcome"] == "error" else "FAIL "
            print(f"  {tag} {t}\n        {_short(r['reason'], args.width)}")
        if na_regressions:
            print(f"\nPass with stock, fail in the xir run but not applicable (stock fallback): {len(na_regressions)}")
            for t in na_regressions:
                print(f"  {t}: {_short(xir[t]['reason'], args.width)}")
        if fixed:
            print(f"\nFail with stock, pass with xir: {len(fixed)}")
            for t in fixed:
                print(f"  {t}   (stock: {_short(stock[t]['reason'], args.width - 12)})")
        if both:
            print(f"\nFail with both: {len(both)}")
            for t in both:
                print(
                    f"  {t}\n        stock: {_short(stock[t]['reason'], args.width)}"
                    f"\n        xir:   {_short(xir[t]['reason'], args.width)}"
                )
        if only:
            print(f"\nTests seen in only one run: {', '.join(only)}")
        exit_code = 1 if regressions else 0
    else:
        for m in modes:
            failing = sorted(t for t, r in results[m].items() if r["outcome"] in ("failed", "error", "missing"))
            print(f"\n{m}: failing {len(failing)}")
            for t in failing:
                print(f"  {t}\n        {_short(results[m][t]['reason'], args.width)}")
    return exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--files",
        nargs="+",
        metavar="FILE",
        help="subset of op test files (test_add, add, test_add.py; comma lists allowed)",
    )
    parser.add_argument("--tests", metavar="PATTERN", help="pytest -k expression selecting tests")
    parser.add_argument("--mode", choices=("both", "stock", "xir"), default="both")
    parser.add_argument(
        "--keep", metavar="DIR", help="directory for logs, junit xml and JSON results (default: a temp dir, removed)"
    )
    parser.add_argument(
        "--reuse-stock",
        metavar="DIR",
        help="take the stock results from a previous --keep DIR instead of running stock again "
        "(the stock partitioner does not change while xir does)",
    )
    parser.add_argument(
        "--reuse-xir",
        metavar="DIR",
        help="take the xir results from a previous --keep DIR (e.g. two runs made side by side)",
    )
    parser.add_argument(
        "--no-transform-passes",
        action="store_true",
        help="xir run: do not add xir's transform_passes() before partitioning",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=20,
        help="how many times to resume after a test crashes the process (default 20)",
    )
    parser.add_argument(
        "--pytest-arg", action="append", metavar="ARG", help="extra argument passed to pytest (repeatable)"
    )
    parser.add_argument("--width", type=int, default=160, help="max width of a failure reason")
    parser.add_argument("--json", metavar="PATH", help="also write per-test outcomes of both runs here")
    parser.add_argument("-v", "--verbose", action="store_true", help="list more detail")
    args = parser.parse_args(argv)

    import shutil
    import tempfile

    ops_dir = _ops_dir()
    files = _resolve_files(ops_dir, args.files)
    out_dir = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="xir-optests-")
    os.makedirs(out_dir, exist_ok=True)
    modes = ("stock", "xir") if args.mode == "both" else (args.mode,)
    results = {}
    try:
        for mode in modes:
            reuse = {"stock": args.reuse_stock, "xir": args.reuse_xir}[mode]
            if reuse:
                path = os.path.join(reuse, f"{mode}.jsonl")
                if not os.path.exists(path):
                    sys.exit(f"--reuse-{mode}: no {path}")
                results[mode] = _select(_aggregate(_read_records(path)), files, args)
                print(f"[{mode}] reused {len(results[mode])} result(s) from {path}")
                continue
            if mode == "xir":
                print(f"[xir] xir source: {_xir_revision()}", flush=True)
            results[mode] = _run_mode(mode, files, args, out_dir, ops_dir)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
        return _report(results, args)
    finally:
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            print(f"\nlogs, junit xml and results kept in {out_dir}")


if __name__ == "__main__":
    sys.exit(main())
