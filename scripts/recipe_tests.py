#!/usr/bin/env python
"""Run ExecuTorch's own XNNPACK recipe tests with XNNPACK's recipe provider and with xir's.

ExecuTorch's wheel ships ``executorch/backends/xnnpack/test/recipes/test_xnnpack_recipes.py``:
its tests export models with ``executorch.export.export`` and ``XNNPackRecipeType`` recipes made
by ``XNNPACKRecipeProvider``. This script runs that file twice, each time in a pytest subprocess:

* ``stock``: untouched;
* ``xir``:   ``XNNPackRecipeType`` and ``XNNPACKRecipeProvider`` are xir's ``XirRecipeType`` and
  ``XirRecipeProvider`` (``lowering.fx.recipes``) wherever the test file takes them from, so the same
  test bodies get xir's recipes: XNNPACK's quantization, xir's partitioner and rewrites.

In both runs every ``partition()`` of xir's partitioner and of ExecuTorch's is counted per test,
which shows that the swap is complete (the xir run partitions with xir's only). Then it prints the
outcomes side by side, per test and per subtest (``test_all_models_with_recipes`` runs one per
example model), and the ones that pass with stock but fail with xir, with their reasons.

    .venv/bin/python scripts/recipe_tests.py                       # both, side by side
    .venv/bin/python scripts/recipe_tests.py --tests "not all_models"   # skip the model zoo
    .venv/bin/python scripts/recipe_tests.py --mode xir --keep out/

The models of ``test_all_models_with_recipes`` with pretrained weights (torchvision's, timm's)
download them on first use: without network access those subtests fail in both runs, at the
download. The mechanism is that of ``run_executorch_op_tests.py`` (this file is also the pytest
plugin the subprocesses load with ``-p``; outcomes go to a JSON-lines file as the tests report).

Last run (ExecuTorch 1.5.1, at 6f96ef3; about 2 minutes per run on 2 loaded cores):
stock and xir alike, 6 of 7 tests and 8 of 17 subtests pass (pytest: "9 failed, 7 passed,
8 subtests passed"); every failure, in both, is a model of ``test_all_models_with_recipes`` whose
package is not installed here (torchvision for dl3, ic3, mv2, mv3, resnet18, resnet50, vit; timm
for ic4; torchaudio for w2l). In the xir run every partition() was xir's (9), in the stock run
ExecuTorch's (9); no test passes with stock and fails with xir.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PLUGIN_NAME = "recipe_tests"
ENV_MODE = "XIR_RECIPE_TESTS_MODE"  # "stock" | "xir"   (set only in the subprocesses)
ENV_RESULTS = "XIR_RECIPE_TESTS_RESULTS"  # JSON-lines file the plugin appends to
TEST_FILE = ("backends", "xnnpack", "test", "recipes", "test_xnnpack_recipes.py")
MODES = ("stock", "xir")
BAD = ("failed", "error", "missing")


# =====================================================================================
# Part 1: the pytest plugin (imported inside the pytest subprocesses)
# =====================================================================================

_current = ["<collection>"]
_events: dict = {}  # test -> {"xir_partition": n, "stock_partition": n}


def _note(kind: str) -> None:
    counts = _events.setdefault(_current[0], {})
    counts[kind] = counts.get(kind, 0) + 1


def _write(record: dict) -> None:
    path = os.environ.get(ENV_RESULTS)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def _count_partitions() -> None:
    """Count every partition() of xir's partitioner and of ExecuTorch's XNNPACK partitioner."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as Stock

    from lowering.fx.partitioner import XnnpackPartitioner as Xir

    for cls, kind in ((Stock, "stock_partition"), (Xir, "xir_partition")):
        original = cls.partition

        def partition(self, exported_program, _original=original, _kind=kind):
            _note(_kind)
            return _original(self, exported_program)

        cls.partition = partition


def install_xir_recipes() -> dict:
    """Make the names the recipe tests import XNNPACK's recipe types and provider by xir's.
    Done before the test file is imported (``from ... import`` then binds xir's); returns
    {name: module} of what was replaced."""
    import executorch.backends.xnnpack.recipes as recipes_pkg
    import executorch.backends.xnnpack.recipes.xnnpack_recipe_provider as provider_mod
    import executorch.backends.xnnpack.recipes.xnnpack_recipe_types as types_mod

    from lowering.fx.recipes import XirRecipeProvider, XirRecipeType  # (binds the stock classes it builds on first)

    # (not the recipe types the stock provider's module holds: xir's provider builds on that
    # provider, which checks the types it is given against them)
    swaps = (
        (types_mod, "XNNPackRecipeType", XirRecipeType),
        (provider_mod, "XNNPACKRecipeProvider", XirRecipeProvider),
        (recipes_pkg, "XNNPackRecipeType", XirRecipeType),
        (recipes_pkg, "XNNPACKRecipeProvider", XirRecipeProvider),
    )
    replaced: dict = {}
    for module, name, substitute in swaps:
        if name not in vars(module):
            raise RuntimeError(f"{module.__name__} has no {name}: this ExecuTorch's recipe tests need another swap")
        setattr(module, name, substitute)
        replaced.setdefault(name, []).append(module.__name__)
    return replaced


_MODE = os.environ.get(ENV_MODE)
_REPLACED = install_xir_recipes() if _MODE == "xir" else {}
if _MODE is not None:
    _count_partitions()


def pytest_report_header(config):
    if _MODE is None:
        return None
    return [f"xir recipe-test harness: mode={_MODE}"] + [
        f"  {name} -> xir's in {', '.join(where)}" for name, where in sorted(_REPLACED.items())
    ]


def pytest_collection_finish(session):
    if _MODE is None:
        return
    bound = {}
    for item in session.items:  # what the test module bound: must be xir's in the xir run
        module = getattr(item, "module", None)
        if module is not None:
            for name in ("XNNPackRecipeType", "XNNPACKRecipeProvider"):
                value = getattr(module, name, None)
                if value is not None:
                    bound[name] = f"{value.__module__}.{value.__qualname__}"
    _write({"kind": "collected", "tests": [item.nodeid.split("::")[-1] for item in session.items], "bound": bound})


def pytest_runtest_logstart(nodeid, location):
    if _MODE is None:
        return
    _current[0] = nodeid.split("::")[-1]
    _events.pop(_current[0], None)
    _write({"kind": "start", "test": _current[0]})


def _reason(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (path, lineno, message)
        return str(longrepr[-1])
    crash = getattr(longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or str(longrepr)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return " | ".join(lines[:3])


def _subtest_value(value) -> str:
    """A subtest's parameter as the same text in both runs: an ExportRecipe by its name without
    its backend's prefix ('xnnpack_fp32' and 'xir_fp32' are 'fp32')."""
    import re

    text = str(value)  # (pytest keeps a subtest's parameters as their repr)
    recipe = re.match(r"ExportRecipe\(name='([^']*)'", text)
    if recipe:
        return re.sub(r"^(xnnpack|xir)_", "", recipe.group(1))
    return text.strip("'\"")


def pytest_runtest_logreport(report):
    if _MODE is None:
        return
    if report.passed:
        outcome = "passed" if report.when == "call" else None
    elif report.skipped:
        outcome = "skipped"
    else:
        outcome = "failed" if report.when == "call" else "error"
    if outcome is None:
        return
    record = {
        "kind": "report",
        "test": report.nodeid.split("::")[-1],
        "outcome": outcome,
        "reason": _reason(report),
        "duration": round(report.duration, 2),
    }
    context = getattr(report, "context", None)  # pytest >= 9: a unittest subTest's report
    if context is not None:
        kwargs = getattr(context, "kwargs", None) or {}
        record["subtest"] = ", ".join(f"{k}={_subtest_value(v)}" for k, v in kwargs.items()) or str(
            getattr(context, "msg", "")
        )
    _write(record)


def pytest_runtest_logfinish(nodeid, location):
    if _MODE is None:
        return
    test = nodeid.split("::")[-1]
    _write({"kind": "finish", "test": test, "events": _events.get(test, {})})
    _current[0] = "<between tests>"


# =====================================================================================
# Part 2: the driver
# =====================================================================================


def _test_file() -> str:
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch is not importable from this interpreter; run with the project's venv")
    path = os.path.join(list(spec.submodule_search_locations)[0], *TEST_FILE)
    if not os.path.exists(path):
        sys.exit(f"ExecuTorch's recipe tests are not in this wheel: no {path}")
    return path


def _read(path: str) -> list[dict]:
    records = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a crash
                    pass
    return records


def _aggregate(records: list[dict]) -> dict:
    """{"tests": {test: entry}, "subtests": {"test[subtest]": entry}, "bound": {...}}; an entry is
    {"outcome", "reason", "events", "duration"}. A test's outcome is its call's, or failed when a
    subtest failed (unittest's subTest: the test itself then reports nothing more)."""
    rank = {"error": 4, "failed": 3, "passed": 2, "skipped": 1, "missing": 0}
    tests: dict = {}
    subtests: dict = {}
    bound: dict = {}

    def entry(table, key):
        return table.setdefault(key, {"outcome": "missing", "reason": "never ran", "events": {}, "duration": 0.0})

    for rec in records:
        kind = rec.get("kind")
        if kind == "collected":
            bound = rec.get("bound", {})
            for test in rec["tests"]:
                entry(tests, test)
        elif kind == "start":
            e = entry(tests, rec["test"])
            e["outcome"], e["reason"], e["started"] = "missing", "crashed the test process (no report)", True
        elif kind == "report":
            if rec.get("subtest") is not None:
                table, key = subtests, f"{rec['test']}[{rec['subtest']}]"
                entry(tests, rec["test"])["duration"] += rec.get("duration", 0.0)
            else:
                table, key = tests, rec["test"]
            e = entry(table, key)
            e["duration"] += rec.get("duration", 0.0)
            outcome = rec["outcome"]
            if e["outcome"] == "missing" or rank[outcome] > rank[e["outcome"]]:
                e["outcome"], e["reason"] = outcome, rec.get("reason", "")
            if table is subtests and outcome in ("failed", "error"):
                t = entry(tests, rec["test"])
                if rank[t["outcome"]] < rank["failed"]:
                    t["outcome"], t["reason"] = "failed", f"[{rec['subtest']}] {rec.get('reason', '')}"
        elif kind == "finish":
            e = entry(tests, rec["test"])
            e["events"] = rec.get("events", {})
            e.pop("started", None)
            if e["outcome"] == "missing":
                e["outcome"], e["reason"] = "error", "no outcome reported"
    for e in tests.values():
        if e.pop("started", None):
            e["outcome"] = "error"
    return {"tests": tests, "subtests": subtests, "bound": bound}


def _run_mode(mode: str, test_file: str, args, out_dir: str) -> dict:
    import subprocess
    import time

    results_path = os.path.join(out_dir, f"{mode}.jsonl")
    if os.path.exists(results_path):
        os.remove(results_path)
    ini = os.path.join(out_dir, "pytest.ini")  # (keep the project's pytest config out of it)
    with open(ini, "w") as f:
        f.write("[pytest]\nfilterwarnings =\n    ignore::DeprecationWarning\n    ignore::FutureWarning\n")
    env = dict(os.environ)
    env[ENV_MODE] = mode
    env[ENV_RESULTS] = results_path
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "2")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        ini,
        "--rootdir",
        os.path.dirname(test_file),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        PLUGIN_NAME,
        "-q",
        "-p",
        "no:logging",
        "--junitxml",
        os.path.join(out_dir, f"{mode}.xml"),
    ]
    if args.tests:
        cmd += ["-k", args.tests]
    cmd += list(args.pytest_arg or []) + [test_file]
    log_path = os.path.join(out_dir, f"{mode}.log")
    print(f"[{mode}] pytest {os.path.basename(test_file)}" + (f" -k {args.tests!r}" if args.tests else ""), flush=True)
    start = time.time()
    work = os.path.join(out_dir, f"{mode}-cwd")  # (the model tests write files in the current directory)
    os.makedirs(work, exist_ok=True)
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    results = _aggregate(_read(results_path))
    if proc.returncode not in (0, 1, 5):
        print(f"[{mode}] pytest exited with {proc.returncode} (see {log_path})")
    print(f"[{mode}] done in {time.time() - start:.0f}s; log {log_path}", flush=True)
    return results


def _counts(table: dict) -> dict:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "missing": 0}
    for e in table.values():
        counts[e["outcome"]] += 1
    return counts


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _report(results: dict, args) -> int:
    modes = [m for m in MODES if m in results]
    print("\n" + "=" * 78)
    print(
        "ExecuTorch's XNNPACK recipe tests: XNNPACK's recipes (stock) vs xir's"
        + (f"  (-k {args.tests!r})" if args.tests else "")
    )
    print("=" * 78)
    for level in ("tests", "subtests"):
        counts = {m: _counts(results[m][level]) for m in modes}
        print(f"\n{level:>10}" + "".join(f"{m:>10}" for m in modes))
        for row in ("passed", "failed", "error", "skipped", "missing"):
            if row in ("skipped", "missing") and not any(counts[m][row] for m in modes):
                continue
            print(f"{row:>10}" + "".join(f"{counts[m][row]:>10}" for m in modes))

    names = sorted(set().union(*(results[m]["tests"] for m in modes)))
    print("\nper test" + "".join(f"  {m:>8}" for m in modes) + "   partition() calls (xir's / ExecuTorch's)")
    for name in names:
        row = f"  {name}"
        cells = []
        calls = []
        for m in modes:
            e = results[m]["tests"].get(name)
            cells.append(e["outcome"] if e else "-")
            ev = e["events"] if e else {}
            calls.append(f"{m}: {ev.get('xir_partition', 0)}/{ev.get('stock_partition', 0)}")
        print(row)
        print("      " + "  ".join(f"{m}={c}" for m, c in zip(modes, cells)) + "   (" + "; ".join(calls) + ")")
        for m in modes:
            for key, e in sorted(results[m]["subtests"].items()):
                if key.startswith(name + "[") and e["outcome"] in BAD:
                    print(f"      {m} subtest {key[len(name) :]} {e['outcome']}: {_short(e['reason'], args.width)}")

    exit_code = 0
    if "xir" in results:
        leaks = [n for n, e in results["xir"]["tests"].items() if e["events"].get("stock_partition")]
        bound = results["xir"]["bound"]
        print(f"\nxir run: the test module's names bound to {bound}")
        if leaks:
            print(f"WARNING: ExecuTorch's partitioner partitioned in the xir run in: {', '.join(leaks)}")
            exit_code = 1
    if "stock" in results and "xir" in results:
        for level in ("tests", "subtests"):
            stock, xir = results["stock"][level], results["xir"][level]
            regressions = sorted(
                k
                for k, e in stock.items()
                if e["outcome"] == "passed" and xir.get(k, {"outcome": "missing"})["outcome"] in BAD
            )
            fixed = sorted(
                k for k, e in stock.items() if e["outcome"] in BAD and xir.get(k, {}).get("outcome") == "passed"
            )
            print(f"\n{level}: pass with stock, fail with xir: {len(regressions)}")
            for k in regressions:
                print(f"  {k}\n      {_short(xir.get(k, {}).get('reason', 'not run'), args.width)}")
            if fixed:
                print(f"{level}: fail with stock, pass with xir: {len(fixed)}")
                for k in fixed:
                    print(f"  {k}   (stock: {_short(stock[k]['reason'], args.width - 12)})")
            if regressions:
                exit_code = 1
    return exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=("both",) + MODES, default="both")
    parser.add_argument("--tests", metavar="PATTERN", help="pytest -k expression selecting tests")
    parser.add_argument("--keep", metavar="DIR", help="directory for logs and results (default: a temp dir, removed)")
    parser.add_argument("--pytest-arg", action="append", metavar="ARG", help="extra pytest argument (repeatable)")
    parser.add_argument("--json", metavar="PATH", help="also write the outcomes of both runs here")
    parser.add_argument("--width", type=int, default=200, help="max width of a failure reason")
    args = parser.parse_args(argv)

    import shutil
    import tempfile

    test_file = _test_file()
    out_dir = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="xir-recipe-tests-")
    os.makedirs(out_dir, exist_ok=True)
    modes = MODES if args.mode == "both" else (args.mode,)
    try:
        results = {mode: _run_mode(mode, test_file, args, out_dir) for mode in modes}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
        return _report(results, args)
    finally:
        if args.keep:
            print(f"\nlogs and results kept in {out_dir}")
        else:
            shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
