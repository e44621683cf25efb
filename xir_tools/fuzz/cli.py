"""``python -m xir_tools.fuzz`` / ``xir fuzz``: differential fuzzing of xir's XnnpackPartitioner
against ExecuTorch's stock one.

    python -m xir_tools.fuzz --kind all --count 60 --seed 0 --jobs 2 --out fuzz-out --timeout 60
    python -m xir_tools.fuzz --replay 17 --kind static [--shrink]
    python -m xir_tools.fuzz --kind all --count 2000 --engine ray --address auto --out fuzz-out   # on a Ray cluster

Every program (seed, kind) is generated, exported, lowered with xir and with stock, run on
ExecuTorch's runtime in a worker process and compared with eager PyTorch. Failures get a
standalone repro file in the output folder (shrunk first for the failures selected by
--shrink); summary.json holds every program's outcome. SIGINT (Ctrl-C) or SIGTERM stops a campaign
early: the programs that ran are reported and kept in summary.json. --engine ray runs the programs
(and the shrinking) as tasks of Ray actors on a Ray cluster (pip install 'xir[cluster]'; see
docs/fuzzing.md), with the same outcomes and journal as the local worker pool.
"""

from __future__ import annotations

import argparse
import gzip
import json
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from .engines import ENGINES, EngineError, open_engine, require_engine
from .program import KINDS, Program
from .source import OUTCOME_SOURCES, source_code_id, source_commit  # noqa: F401  (also cli's names, as before)

CLASSES = (
    "ok",
    "export-failed",
    "lower-failed",
    "load-failed",
    "run-failed",
    "wrong-result",
    "crashed",
    "timeout",
    "invalid",
    "harness-error",
)
SIDES = ("xir", "stock")


def label(outcome: dict) -> str:
    """ok, xir-own (xir fails, stock ok), shared (both fail), stock-only, invalid."""
    xir = (outcome.get("xir") or {}).get("status")
    stock = (outcome.get("stock") or {}).get("status")
    if "invalid" in (xir, stock):
        return "invalid"
    if xir == "ok":
        return "ok" if stock == "ok" else "stock-only"
    return "shared" if stock != "ok" else "xir-own"


def compact_error(text: str) -> str:
    """ExecuTorch's "An error occurred when running the 'P' pass after the following passes: [...]
    <- Root: message" as "[P] Root: message"."""
    import re

    text = " ".join((text or "").split())
    match = re.match(r"Exception: An error occurred when running the '(\w+)' pass.*? <- (.*)$", text)
    return f"[{match.group(1)}] {match.group(2)}" if match else text


def _short(result: dict | None, width: int = 110) -> str:
    if not result:
        return ""
    text = compact_error(result.get("error") or "")
    return text if len(text) <= width else text[: width - 3] + "..."


def _progress_line(record: dict, index: int, total: int) -> str:
    xir, stock = record["xir"] or {}, record["stock"] or {}
    detail = ""
    if record["label"] in ("xir-own", "shared"):
        detail = "  xir: " + _short(xir, 100)
    elif record["label"] == "stock-only":
        detail = "  stock: " + _short(stock, 100)
    seconds = record.get("seconds")
    return (
        f"[{record['kind']:<7} {index:>4}/{total}] seed {record['seed']:<6} {record.get('via') or '-':<7} "
        f"{record.get('ops') if record.get('ops') is not None else '-':>2} ops  xir {xir.get('status', '-'):<13} "
        f"stock {stock.get('status', '-'):<13} {record['label']:<10} "
        f"{seconds if seconds is not None else 0:5.1f}s{detail}"
    )


def _record(kind: str, seed: int, outcome: dict) -> dict:
    program = Program.from_json(outcome["program"]) if outcome.get("program") else None
    record = {
        "kind": kind,
        "seed": seed,
        "label": label(outcome),
        "xir": outcome.get("xir"),
        "stock": outcome.get("stock"),
        "seconds": outcome.get("seconds"),
        "prepare": outcome.get("prepare"),
    }
    if program is not None:
        record.update(
            via=program.via,
            per_channel=program.per_channel,
            ops=len(program.ops),
            outputs=len(program.outputs),
            op_kinds=sorted({op.kind for op in program.ops}),
        )
    return record


def _task(kind: str, seed: int, args, sides=None) -> dict:
    return {
        "seed": seed,
        "kind": kind,
        "max_ops": args.max_ops,
        "min_ops": args.min_ops,
        "generator": args.generator,
        "sides": list(sides or SIDES),
    }


def _should_shrink(record: dict, mode: str) -> bool:
    if mode == "none" or record["label"] in ("ok", "invalid"):
        return False
    if mode == "own":
        return record["label"] == "xir-own"
    if mode == "xir":
        return record["label"] in ("xir-own", "shared")
    return True  # all failures


def shrink_failure(pool, program: Program, outcome: dict, args, log=print):
    """Shrink with the worker pool; returns (program, outcome of the shrunk program, evaluations)."""
    from .shrink import shrink, signature

    target = signature(outcome)
    latest = {program.module_source(): outcome}

    def evaluate(candidates):
        results = pool.map([{"program": c.to_json(), "sides": list(SIDES)} for c in candidates])
        verdicts = []
        for candidate, result in zip(candidates, results):
            latest[candidate.module_source()] = result
            verdicts.append(signature(result) == target)
        return verdicts

    def on_step(current, evals):
        log(f"    shrinking: {len(current.ops)} ops, {len(current.outputs)} outputs ({evals} runs)")

    small, evals = shrink(
        program, evaluate, batch=pool.jobs, max_evals=args.shrink_evals, time_budget=args.shrink_time, on_step=on_step
    )
    return small, latest[small.module_source()], evals


def _worse(records: list) -> list:
    """Failures shared by the label's definition where xir's outcome is the worse one: silently wrong
    numbers (or a crash) where stock refuses the program."""
    return [
        r
        for r in records
        if r["label"] == "shared"
        and r["xir"]["status"] in ("wrong-result", "crashed")
        and r["stock"]["status"] not in ("wrong-result", "crashed")
    ]


def _table(kind: str, records: list) -> str:
    counts = {side: Counter((r[side] or {}).get("status", "-") for r in records) for side in SIDES}
    labels = Counter(r["label"] for r in records)
    times = [r["seconds"] for r in records if r.get("seconds") is not None]
    own = Counter((r["xir"] or {}).get("status") for r in records if r["label"] == "xir-own")
    lines = [
        f"kind {kind}: {len(records)} programs"
        + (
            f", {statistics.mean(times):.1f} s/program (median {statistics.median(times):.1f}, max {max(times):.1f})"
            if times
            else ""
        )
    ]
    lines.append(f"  {'outcome':<15}{'xir':>6}{'stock':>7}")
    for status in CLASSES:
        if (
            counts["xir"][status]
            or counts["stock"][status]
            or status in ("ok", "lower-failed", "load-failed", "wrong-result")
        ):
            lines.append(f"  {status:<15}{counts['xir'][status]:>6}{counts['stock'][status]:>7}")
    lines.append(
        f"  xir's own failures: {labels['xir-own']}"
        + (f" ({', '.join(f'{k} {v}' for k, v in sorted(own.items()))})" if own else "")
    )
    lines.append(f"  xir worse than stock (wrong or crashed where stock refuses the program): {len(_worse(records))}")
    lines.append(
        f"  shared failures: {labels['shared']}   stock fails, xir ok: {labels['stock-only']}   "
        f"invalid (non-finite reference): {labels['invalid']}"
    )
    both = [
        (r["xir"], r["stock"])
        for r in records
        if r["label"] == "ok"
        and (r["xir"] or {}).get("outside") is not None
        and (r["stock"] or {}).get("outside") is not None
    ]
    if both:
        more = sum(1 for x, s in both if x["outside"] > s["outside"])
        fewer = sum(1 for x, s in both if x["outside"] < s["outside"])
        lines.append(
            f"  both ok ({len(both)}): xir leaves more ops outside XNNPACK than stock in {more}, fewer in {fewer}"
        )
    kept_out = [
        (r["seed"], ops)
        for r in records
        if r["label"] == "ok"
        for ops in [left_outside_what_stock_delegates(r["xir"], r["stock"])]
        if ops
    ]
    if kept_out:
        shown = ", ".join(f"{seed} ({' '.join(ops)})" for seed, ops in kept_out[:10])
        lines.append(
            f"  xir leaves outside an op stock delegates in {len(kept_out)}: {shown}"
            + (" ..." if len(kept_out) > 10 else "")
        )
    return "\n".join(lines)


def left_outside_what_stock_delegates(xir: dict | None, stock: dict | None) -> list[str]:
    """The ops xir leaves outside more often than stock does where stock delegates that op too (a
    regression to fix). xir's rewrites may add ops outside that stock never sees (the casts around
    a bf16 GELU it runs in fp32, the multiply of an add's alpha): those count in the raw totals only.
    Empty for records without the per-op counts (campaigns before they were recorded)."""
    xo, so, sd = (
        _op_families((side or {}).get(key))
        for side, key in ((xir, "outside_ops"), (stock, "outside_ops"), (stock, "delegated_ops"))
    )
    if xo is None or so is None or sd is None:
        return []
    return sorted(op for op, n in xo.items() if n > so.get(op, 0) and sd.get(op, 0) > 0)


# ops that only reshape: xir writes unsqueeze and squeeze as views (shape-ops-as-views), so a view
# xir leaves outside may be an unsqueeze stock leaves outside
_RESHAPES = (
    "aten.view_copy",
    "aten.unsqueeze_copy",
    "aten.squeeze_copy",
    "aten.squeeze_copy.dim",
    "aten.squeeze_copy.dims",
)


def _op_families(counts: dict | None) -> dict | None:
    if counts is None:
        return None
    merged = Counter()
    for op, n in counts.items():
        merged["reshape (view/unsqueeze/squeeze)" if op in _RESHAPES else op] += n
    return merged


def print_report(kinds: list, records: list) -> None:
    """The tables per kind and the list of xir's own failures."""
    by_kind = defaultdict(list)
    for record in records:
        by_kind[record["kind"]].append(record)
    print()
    for kind in kinds:
        if by_kind[kind]:
            print(_table(kind, by_kind[kind]))
            print()
    worse = _worse(records)
    if worse:
        print("shared failures where xir gives wrong results (or crashes) and stock refuses the program:")
        for r in worse:
            print(
                f"  {r['kind']} seed {r['seed']} ({r.get('via')}): xir {r['xir']['status']}: {_short(r['xir'], 120)}; "
                f"stock {r['stock']['status']}"
            )
            if r.get("repro"):
                print(f"      {r['repro']}")
        print()
    own = [r for r in records if r["label"] == "xir-own"]
    if not own:
        return
    from .shrink import signature

    groups = Counter(signature(r) for r in own)
    print("xir's own failures, by signature (xir class / key / stock class):")
    for sig, n in groups.most_common():
        print(f"  {n:>3} x {' / '.join(str(part) for part in sig)}")
    print("xir's own failures:")
    for r in own:
        shrunk = r.get("shrunk")
        size = f"{r.get('ops')} ops" + (f" -> {shrunk['ops']}" if shrunk else "")
        print(f"  {r['kind']} seed {r['seed']} ({r.get('via')}, {size}): {r['xir']['status']}: {_short(r['xir'], 200)}")
        if r.get("repro"):
            print(f"      {r['repro']}")


def report(args) -> int:
    """Print the tables of a finished campaign from its summary.json."""
    folder = Path(args.report)
    if (folder / "summary.json").exists():
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            print(f"xir fuzz: {folder / 'summary.json'} is no campaign summary: {error}", file=sys.stderr)
            return 2
    elif journal_path(folder) is not None:  # a campaign still running, stopped, or kept as data
        try:
            header, entries = read_journal(journal_path(folder), lenient=True)
        except CampaignError as error:
            print(f"xir fuzz: {error}", file=sys.stderr)
            return 2
        summary = {
            "commit": header.get("commit"),
            "code": header.get("code"),
            "programs": [e["record"] for e in entries],
            "rerun_of": header.get("rerun_of"),
            "only_ops": header.get("only_ops"),
        }
    else:
        print(f"xir fuzz: no summary.json nor {JOURNAL}[.gz] in {folder}", file=sys.stderr)
        return 2
    kinds = [k for k in KINDS if any(r["kind"] == k for r in summary["programs"])]
    seeds = sorted(r["seed"] for r in summary["programs"])
    if seeds:
        code = f" (code {summary['code']})" if summary.get("code") else ""
        print(
            f"{len(seeds)} programs, seeds {seeds[0]}..{seeds[-1]}, xir at {summary.get('commit') or 'an unknown commit'}"
            + code
        )
    print_report(kinds, summary["programs"])
    if summary.get("rerun_of"):  # a re-run: what changed against the campaign it re-ran
        try:
            before = rerun_selection(Path(summary["rerun_of"]), kinds, summary.get("only_ops"))
        except CampaignError as error:
            print(f"\n(not compared with the campaign re-run: {error})")
        else:
            print_changes(before, {(r["kind"], r["seed"]): r for r in summary["programs"]})
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


RESUMABLE_ARGS = ("max_ops", "min_ops", "timeout", "bf16_option", "generator")
FIRST_EDITION = 1  # the generator edition of a journal that names none (written before editions were recorded)

# --bf16-option: xir's partitioner option its side of every bf16 program lowers with
BF16_OPTIONS = {"activations-in-fp32": "bf16_activations_in_fp32", "linears-as-f16": "bf16_linears_as_f16"}


def xir_options(args) -> dict:
    """xir's partitioner options for bf16 programs (``--bf16-option``)."""
    return {BF16_OPTIONS[args.bf16_option]: True} if getattr(args, "bf16_option", None) else {}


class CampaignError(Exception):
    pass


JOURNAL = "programs.jsonl"


def journal_path(folder: Path) -> Path | None:
    """The journal of the campaign in ``folder``: ``programs.jsonl`` (written as a campaign runs),
    else ``programs.jsonl.gz`` (a finished campaign kept as data, compressed); None when neither is there."""
    for name in (JOURNAL, JOURNAL + ".gz"):
        if (folder / name).exists():
            return folder / name
    return None


def _journal_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def read_journal(path: Path, lenient: bool = False) -> tuple[dict, list[dict]]:
    """A campaign journal (``programs.jsonl``): its header (the ``campaign`` settings of its first
    line) and its entries ({"record", "program"}), in order. The last line of a campaign killed
    while writing it is dropped, with a note on stderr; another line that is no entry raises
    CampaignError, or with ``lenient`` is skipped as well. A journal is data: nothing in it is
    run (see ``journalled_program``)."""
    try:
        lines = [line for line in _journal_text(path).splitlines() if line.strip()]
        first = json.loads(lines[0]) if lines else {}
        header = first.get("campaign", {})
        if not isinstance(header, dict):
            raise TypeError
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, TypeError, OSError, EOFError):
        raise CampaignError(f"{path} line 1 is not a campaign journal's header") from None
    entries = []
    for number, line in enumerate(lines[1:], 2):
        try:
            entry = _journal_entry(line)
        except CampaignError as error:
            if lenient:
                continue
            raise CampaignError(f"{path} line {number}: {error}") from None
        if entry is not None:
            entries.append(entry)
        elif number == len(lines):
            print(
                f"xir fuzz: {path} line {number} is no complete entry (a campaign stopped while writing it): ignored",
                file=sys.stderr,
                flush=True,
            )
        elif not lenient:
            raise CampaignError(f"{path} line {number} is not a journal entry")
    return header, entries


def _journal_entry(line: str) -> dict | None:
    """A journal line as its entry: a record of a known kind, an integer seed and the sides'
    results (objects or null), and a program (an object or null); None when it is not JSON of that
    shape. The record's label is rebuilt from the sides' statuses; a status outside CLASSES, or
    another field of the wrong type, raises CampaignError (a journal is data anyone may have
    edited: its label and statuses become file names and text of the repros)."""
    try:
        entry = json.loads(line)
        record = entry["record"]
        valid = (
            record["kind"] in KINDS
            and type(record["seed"]) is int
            and isinstance(record["label"], str)
            and all(isinstance(record.get(side), (dict, type(None))) for side in SIDES)
            and isinstance(entry.get("program"), (dict, type(None)))
        )
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if not valid:
        return None
    where = f"the record of {record['kind']} seed {record['seed']}"
    for side in SIDES:
        result = record.get(side)
        if result is None:
            continue
        if result.get("status") not in CLASSES:
            raise CampaignError(
                f"{where}: its {side} status {_quoted(result.get('status'))} is none of {', '.join(CLASSES)}"
            )
        for name, kinds in RESULT_FIELDS.items():
            if result.get(name) is not None and not isinstance(result[name], kinds):
                raise CampaignError(
                    f"{where}: its {side} {name} {_quoted(result[name])} is not a "
                    f"{' or '.join(k.__name__ for k in kinds)}"
                )
    rebuilt = label({side: record.get(side) for side in SIDES})
    record["label"] = rebuilt  # (not the journal's own: it becomes a file name)
    return entry


# the types of the fields of a journal's results that repros and the report format
RESULT_FIELDS = {"error": (str,), "max_err": (int, float), "ratio": (int, float)}


def _quoted(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def built_program(kind: str, seed: int, args) -> dict:
    """The program (kind, seed) builds with ``args``' settings, as a journal stores it (JSON)."""
    from .generator import generate

    return json.loads(
        json.dumps(generate(seed, kind, max_ops=args.max_ops, min_ops=args.min_ops, generator=args.generator).to_json())
    )


def with_edition(header: dict) -> dict:
    """A journal's header with its generator edition: FIRST_EDITION when it names none."""
    return {"generator": FIRST_EDITION, **header}


def journalled_program(record: dict, stored: dict | None, args) -> dict | None:
    """The program of a journal entry, rebuilt from its (kind, seed) with the generator, as
    --rerun runs programs: the program stored in a journal is never run (its text is Python
    source, and a journal is a file anyone may have edited). The stored one must be what the
    seed builds, else CampaignError names the seed. None when the journal kept no program."""
    if stored is None:
        return None
    kind, seed = record["kind"], record["seed"]
    program = built_program(kind, seed, args)
    if program != stored:
        raise CampaignError(
            f"the program journalled for {kind} seed {seed} is not the one seed {seed} builds "
            f"(--max-ops {args.max_ops} --min-ops {args.min_ops} --generator {args.generator}): the "
            f"journal was edited, or written "
            f"by other code; nothing of it was run. Delete that line to run seed {seed} again, or "
            f"use another --out"
        )
    return program


def _journal(out: Path, args, commit: str | None, code: str | None) -> tuple[dict, dict]:
    """``out/programs.jsonl``: a header line (the campaign's settings, code and commit), then one
    line per finished program, written as it finishes, so that a campaign killed without warning (a
    machine shut down) loses nothing. Without --resume it is started afresh; with --resume its
    programs are read back (records and outcomes by key) and the settings and the code
    (source_code_id: the commit may differ) must match. A journal from before the code id was
    recorded must match the commit."""
    path = out / JOURNAL
    if args.resume and not path.exists() and (out / (JOURNAL + ".gz")).exists():
        raise CampaignError(
            f"--resume: {out} holds a compressed journal; to go on with it, decompress it first "
            f"(gunzip {out / (JOURNAL + '.gz')})"
        )
    settings = {"code": code, **{name: getattr(args, name) for name in RESUMABLE_ARGS}}
    if args.rerun:  # (what --report compares a re-run with)
        settings.update(rerun_of=str(args.rerun), only_ops=args.only_ops)
    records, outcomes = {}, {}
    if not args.resume or not path.exists():
        if args.resume:
            print(f"--resume: no {path} yet; starting the campaign", flush=True)
        _write(path, json.dumps({"campaign": {"commit": commit, **settings}}) + "\n")
        return records, outcomes
    try:
        header, entries = read_journal(path)
    except CampaignError as error:
        raise CampaignError(f"--resume: {error}") from None
    if "code" not in header:
        settings = {"commit": commit, **{k: v for k, v in settings.items() if k != "code"}}
    header = with_edition(header)
    for name, value in settings.items():
        if header.get(name) != value:
            raise CampaignError(
                f"--resume: the campaign in {out} ran with {name} {header.get(name)!r}, this run has "
                f"{value!r}; resume it with the same settings (and checkout), or use another --out"
            )
    for entry in entries:
        record = entry["record"]
        key = (record["kind"], record["seed"])
        try:
            program = journalled_program(record, entry.get("program"), args)
        except CampaignError as error:
            raise CampaignError(f"--resume: {error}") from None
        records[key] = record
        outcomes[key] = {
            "xir": record.get("xir"),
            "stock": record.get("stock"),
            "prepare": record.get("prepare"),
            "seconds": record.get("seconds"),
            "program": program,
        }
    _write(
        path,
        "\n".join(
            [json.dumps({"campaign": header})]
            + [json.dumps({"record": records[k], "program": outcomes[k]["program"]}) for k in records]
        )
        + "\n",
    )
    return records, outcomes


def _write(path: Path, text: str) -> None:
    """Write ``path`` atomically (a journal rewritten on --resume is never half written); a
    failure is a CampaignError naming the file."""
    from xir.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as error:
        raise CampaignError(f"cannot write {path}: {error.strerror or error}") from None


def campaign(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = list(KINDS) if args.kind == "all" else [args.kind]
    before: dict = {}
    if args.rerun:
        try:
            before = rerun_selection(Path(args.rerun), kinds, args.only_ops)
            check_rerun_programs(Path(args.rerun), before, args)
        except CampaignError as error:
            print(f"xir fuzz: {error}", file=sys.stderr)
            return 2
        keys = list(before)
        kinds = [kind for kind in kinds if any(k == kind for k, _ in keys)]
    else:
        keys = [(kind, seed) for kind in kinds for seed in range(args.seed, args.seed + args.count)]
    commit, code = source_commit(), source_code_id()
    try:
        records, outcomes = _journal(out, args, commit, code)
    except CampaignError as error:
        print(f"xir fuzz: {error}", file=sys.stderr)
        return 2
    run = _Run(args, out, kinds, keys, before, records, outcomes)
    try:
        engine = _engine(args, out / "logs", code)
        # `kill` stops it as Ctrl-C does (a background job ignores SIGINT); set after the engine
        # started, since ray.init installs a SIGTERM handler of its own, which ends the process
        signal.signal(signal.SIGTERM, _interrupt)
        print(run.banner(commit, code, engine), flush=True)
        start = time.monotonic()
        with engine:
            run.run_programs(engine)
            run_seconds = time.monotonic() - start
            run.write_repros(engine)
    except EngineError as error:
        print(f"xir fuzz: {error} ({out / JOURNAL} keeps the programs that ran: --resume goes on)", file=sys.stderr)
        return 2
    return run.summarize(commit, code, run_seconds, time.monotonic() - start)


def _engine(args, log_dir: Path, code: str | None, jobs: int | None = None):
    """The engine of ``--engine`` (pool.Pool or ray_engine.RayEngine) with ``jobs`` workers (None:
    --jobs); ``args.jobs`` becomes its number of workers (a Ray cluster's CPUs by default)."""
    engine = open_engine(
        args.engine, jobs or args.jobs, args.timeout, log_dir, xir_options(args), address=args.address, code=code
    )
    args.jobs = args.jobs or engine.jobs
    return engine


class _Run:
    """One campaign's programs: run them (journalled as they finish), write repros of the
    failures (shrunk), print the report and write the summary."""

    def __init__(self, args, out: Path, kinds: list[str], keys: list, before: dict, records: dict, outcomes: dict):
        self.args, self.out, self.kinds, self.keys, self.before = args, out, kinds, keys, before
        self.records, self.outcomes = records, outcomes
        self.keyed = [
            (key, _task(key[0], key[1], args, sides=["xir"] if before else None)) for key in keys if key not in records
        ]
        self.done = sum(1 for key in keys if key in records)
        self.total = len(self.keyed) + self.done

    def banner(self, commit, code, engine) -> str:
        args, seeds = self.args, sorted({seed for _, seed in self.keys})
        rerun = ""
        if args.rerun:
            rerun = f", those of {args.rerun}" + (f" with {', '.join(args.only_ops)}" if args.only_ops else "")
        return (
            f"xir fuzz: {self.total} programs ({', '.join(self.kinds)}; seeds {seeds[0]}..{seeds[-1]}{rerun}), "
            f"{_workers(engine)}, timeout {args.timeout:g} s per phase, output in {self.out}/, "
            f"xir at {commit or 'an unknown commit'} (code {code})"
            + (f"; xir's bf16 programs with {xir_options(args)}" if xir_options(args) else "")
            + (f"; resumed: {self.done} ran before" if self.done else "")
        )

    def run_programs(self, pool) -> None:
        records, outcomes, before = self.records, self.outcomes, self.before
        with open(self.out / JOURNAL, "a") as journal:
            try:
                for index, (key, outcome) in enumerate(pool.run(self.keyed), self.done + 1):
                    if before and outcome.get("stock") is None:  # a rerun runs xir only: stock's code did not change
                        outcome["stock"] = before[key]["stock"]
                    record = _record(key[0], key[1], outcome)
                    records[key], outcomes[key] = record, outcome
                    journal.write(json.dumps({"record": record, "program": outcome.get("program")}, default=str) + "\n")
                    journal.flush()
                    print(_progress_line(record, index, self.total), flush=True)
            except KeyboardInterrupt:  # a campaign stopped early still reports and keeps what ran
                print(
                    f"\ninterrupted: {len(records)} of {self.total} programs ran; reporting those (repros unshrunk)",
                    flush=True,
                )
                self.total, self.args.shrink = len(records), "none"  # records: this run's and a resumed campaign's
                self.kinds = [kind for kind in self.kinds if any(key[0] == kind for key in records)]

    def write_repros(self, pool) -> None:
        from .repro import write_repro
        from .shrink import signature

        args, records = self.args, self.records
        failures = [key for key in records if records[key]["label"] not in ("ok", "invalid")]
        if failures:
            print(
                f"\n{len(failures)} failing programs: writing repros"
                + (f" (shrinking the {args.shrink} ones)" if args.shrink != "none" else ""),
                flush=True,
            )
        shrunk_signatures = Counter()
        timeout = max(600.0, 3 * args.timeout)
        for key in failures:
            record, outcome = records[key], self.outcomes[key]
            record["signature"] = list(signature(outcome))
            if not outcome.get("program"):
                continue
            program = Program.from_json(outcome["program"])
            small, small_outcome = program, outcome
            if (
                _should_shrink(record, args.shrink)
                and shrunk_signatures[signature(outcome)] < args.shrink_per_signature
            ):
                shrunk_signatures[signature(outcome)] += 1
                print(
                    f"  {key[0]} seed {key[1]}: {record['label']} {record['xir']['status']} ({len(program.ops)} ops)",
                    flush=True,
                )
                small, small_outcome, evals = shrink_failure(
                    pool, program, outcome, args, log=lambda text: print(text, flush=True)
                )
                record["shrunk"] = {
                    "ops": len(small.ops),
                    "outputs": len(small.outputs),
                    "runs": evals,
                    "xir": small_outcome.get("xir"),
                    "stock": small_outcome.get("stock"),
                }
            path = write_repro(
                self.out,
                small,
                small_outcome,
                record["label"],
                original=program,
                timeout=timeout,
                xir_options=xir_options(self.args),
            )
            if small is not program:
                write_repro(
                    self.out / "original",
                    program,
                    outcome,
                    record["label"],
                    timeout=timeout,
                    xir_options=xir_options(self.args),
                )
            record["repro"] = str(path)

    def summarize(self, commit, code, run_seconds: float, total_seconds: float) -> int:
        from xir.files import write_atomic

        args, records, before, done = self.args, self.records, self.before, self.done
        by_kind = defaultdict(list)
        for (kind, _), record in records.items():
            by_kind[kind].append(record)
        kinds = [kind for kind in KINDS if by_kind[kind]]
        print_report(kinds, list(records.values()))
        regressions = print_changes(before, records) if before else []
        ran = len(records) - done
        print(
            f"\n{ran} programs in {run_seconds:.0f} s ({run_seconds * args.jobs / max(1, ran):.1f} worker-s/program)"
            + (f" (and {done} before resuming)" if done else "")
            + f", total with shrinking {total_seconds:.0f} s; summary: {self.out / 'summary.json'}"
        )
        summary = {
            "args": {k: v for k, v in vars(args).items() if k != "run"},
            "commit": commit,
            "code": code,
            "seconds": round(total_seconds, 1),
            "programs": list(records.values()),
            "tables": {
                kind: {side: dict(Counter((r[side] or {}).get("status") for r in by_kind[kind])) for side in SIDES}
                | {"labels": dict(Counter(r["label"] for r in by_kind[kind]))}
                for kind in kinds
            },
        }
        if before:
            summary["rerun_of"], summary["only_ops"] = str(args.rerun), args.only_ops
            summary["regressions"] = [{"kind": k, "seed": seed, "why": why} for (k, seed), why in regressions]
        write_atomic(self.out / "summary.json", json.dumps(summary, indent=1, default=str))
        return 1 if regressions else 0


def _workers(engine) -> str:
    return engine.describe() if hasattr(engine, "describe") else f"{engine.jobs} workers"


def rerun_selection(folder: Path, kinds: list[str], only_ops: list[str] | None) -> dict:
    """The records of the campaign journalled in ``folder`` (its programs.jsonl) to run again:
    those of ``kinds``, and with ``only_ops``, those whose program has one of these op kinds
    (``op_kinds`` in the journal: softmax, conv1d, ...). Keyed by (kind, seed), in journal order."""
    path = journal_path(folder)
    if path is None:
        raise CampaignError(
            f"--rerun: no {JOURNAL}[.gz] in {folder} (a campaign's folder, with its journal, was expected)"
        )
    selected = {}
    try:
        _, entries = read_journal(path)
    except CampaignError as error:
        raise CampaignError(f"--rerun: {error}") from None
    for record in (entry["record"] for entry in entries):
        if record["kind"] in kinds and (not only_ops or set(only_ops) & set(record.get("op_kinds") or ())):
            selected[(record["kind"], record["seed"])] = record
    if not selected:
        raise CampaignError(
            f"--rerun: no program of {path} is of kind {', '.join(kinds)}"
            + (f" with an op among {', '.join(only_ops)}" if only_ops else "")
        )
    return selected


def check_rerun_programs(folder: Path, selected: dict, args) -> None:
    """Each program of ``selected`` that ``folder``'s journal kept must be what its seed builds with
    ``args``' settings (the campaign's): else a re-run would run other programs and compare them with
    the journal's as if they were the same (a campaign of another generator, a journal edited).
    CampaignError names the first that is not."""
    _, entries = read_journal(journal_path(folder))
    for entry in entries:
        record, stored = entry["record"], entry.get("program")
        key = (record["kind"], record["seed"])
        if key not in selected or stored is None:
            continue
        if built_program(*key, args) != stored:
            raise CampaignError(
                f"--rerun: the program journalled for {key[0]} seed {key[1]} is not the one that seed "
                f"builds with --max-ops {args.max_ops} --min-ops {args.min_ops} --generator "
                f"{args.generator}: the journal was edited, or written by another generator; nothing "
                f"was run"
            )


def rerun_changes(before: dict, after: dict) -> tuple[Counter, list, list, list, list]:
    """What changed for xir between two runs of the same programs: (label transitions; regressions
    [(key, why)]: xir failed where it had run, or a failure of xir's own or worse than stock
    appeared; improvements [(key, why)]: xir runs where it failed, or delegates ops it left
    outside; the programs where xir left more ops outside than before, [(key, before, after)];
    the programs whose eager reference is finite in one run and not in the other, [(key, old
    label, new label)]: neither regressions nor improvements, eager's outcome, not xir's)."""
    transitions, regressions, improvements, more_outside, reference_changed = Counter(), [], [], [], []
    worse_now = {(r["kind"], r["seed"]) for r in _worse(list(after.values()))} - {
        (r["kind"], r["seed"]) for r in _worse(list(before.values()))
    }
    for key, new in after.items():
        old = before.get(key)
        if old is None:
            continue
        transitions[(old["label"], new["label"])] += 1
        was, now = (old["xir"] or {}).get("status"), (new["xir"] or {}).get("status")
        if "invalid" in (was, now):  # the eager reference, not xir, changed
            if was != now:
                reference_changed.append((key, old["label"], new["label"]))
            continue
        if was == "ok" and now != "ok":
            regressions.append((key, f"xir {was} -> {now}: {_short(new['xir'], 120)}"))
        elif new["label"] == "xir-own" and old["label"] != "xir-own":
            regressions.append((key, f"a failure of xir's own: {_short(new['xir'], 120)}"))
        elif key in worse_now:
            regressions.append((key, f"worse than stock: {_short(new['xir'], 120)}"))
        elif was != "ok" and now == "ok":
            improvements.append((key, f"xir {was} -> ok"))
        if was == now == "ok":
            old_out, new_out = (old["xir"] or {}).get("outside"), (new["xir"] or {}).get("outside")
            if old_out is not None and new_out is not None:
                if new_out > old_out:
                    more_outside.append((key, old_out, new_out))
                elif new_out < old_out:
                    improvements.append((key, f"{old_out - new_out} op(s) fewer outside XNNPACK"))
    return transitions, regressions, improvements, more_outside, reference_changed


def print_changes(before: dict, after: dict) -> list:
    """Print how xir's outcomes changed against the campaign re-run; return the regressions."""
    transitions, regressions, improvements, more_outside, reference_changed = rerun_changes(before, after)
    print(f"\nagainst the campaign re-run ({sum(transitions.values())} programs):")
    for (old, new), count in sorted(transitions.items()):
        print(f"  {old:>10} -> {new:<10} {count:>5}")
    print(
        f"  xir better in {len(improvements)}, worse in {len(regressions)}; "
        f"more ops outside XNNPACK than before in {len(more_outside)}"
    )
    for (kind, seed), why in regressions:
        print(f"  REGRESSION {kind} seed {seed}: {why}")
    for (kind, seed), old, new in reference_changed:
        print(
            f"  {kind} seed {seed}: the eager reference is {'not ' if new == 'invalid' else ''}"
            f"finite now ({old} -> {new}; not xir's outcome: eager's)"
        )
    for (kind, seed), old, new in more_outside[:20]:
        print(f"  {kind} seed {seed}: {old} -> {new} ops outside")
    return regressions


def replay(args) -> int:
    from . import case
    from .generator import generate
    from .repro import write_repro

    kind = "fp32" if args.kind == "all" else args.kind
    program = generate(args.replay, kind, max_ops=args.max_ops, min_ops=args.min_ops, generator=args.generator)
    print(
        f"# {program.describe()}; rebuilt at code {source_code_id() or 'unknown'} (a journal made at another "
        "code id may hold another program for this seed)"
    )
    print(program.module_source())
    try:
        engine = _engine(args, Path(args.out) / "logs", source_code_id(), jobs=1)
    except EngineError as error:
        print(f"xir fuzz: {error}", file=sys.stderr)
        return 2
    with engine as pool:
        outcome = pool.map([{"program": program.to_json(), "sides": list(SIDES)}])[0]
        result = label(outcome)
        print(f"xir:   {case.describe(outcome['xir'])}")
        print(f"stock: {case.describe(outcome['stock'])}")
        print(f"=> {result}")
        if result not in ("ok", "invalid") and (args.shrink != "none"):
            small, small_outcome, evals = shrink_failure(pool, program, outcome, args)
            path = write_repro(args.out, small, small_outcome, result, original=program, xir_options=xir_options(args))
            print(f"shrunk to {len(small.ops)} ops in {evals} runs:\n{small.module_source()}")
            print(f"xir:   {case.describe(small_outcome['xir'])}")
            print(f"stock: {case.describe(small_outcome['stock'])}")
            print(f"repro: {path}")
        elif result not in ("ok", "invalid"):
            print(f"repro: {write_repro(args.out, program, outcome, result, xir_options=xir_options(args))}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m xir_tools.fuzz",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("--kind", default="all", choices=list(KINDS) + ["all"], help="program kind (default: all)")
    p.add_argument("--count", type=int, default=20, help="programs per kind (default: 20)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default: 0)")
    p.add_argument(
        "--jobs",
        type=int,
        help="programs run at once: worker processes, or Ray actors of one CPU each (default: 2; with "
        "--engine ray --address, one per CPU of the cluster)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="pool",
        help="what runs the programs: pool, worker processes on this machine (default); ray, Ray actors on "
        "a Ray cluster (--address; without it, a local cluster of --jobs CPUs). Needs Ray: pip install "
        "'xir[cluster]'. The journal is the same: a campaign resumes with either",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="with --engine ray: the Ray cluster to run on (auto: the one this node belongs to, or "
        "HOST:6379, its head node)",
    )
    p.add_argument("--out", default="fuzz-out", help="folder for repros, logs and summary.json (default: fuzz-out)")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds per phase (prepare, xir, stock) of one program (default: 60)",
    )
    p.add_argument(
        "--bf16-option",
        choices=sorted(BF16_OPTIONS),
        default=None,
        help="xir lowers every bf16 program with this option of its partitioner (activations-in-fp32: "
        "bf16_activations_in_fp32=True; linears-as-f16: bf16_linears_as_f16=True); default: none",
    )
    p.add_argument("--max-ops", type=int, help="ops per program at most (default: 12; with --rerun, the campaign's)")
    p.add_argument("--min-ops", type=int, help="ops per program at least (default: 3; with --rerun, the campaign's)")
    p.add_argument(
        "--generator",
        type=int,
        help="the generator's edition: 1 (before the select of one index) or 2 "
        "(default: the latest; with --rerun and --resume, the campaign's)",
    )
    p.add_argument(
        "--shrink",
        choices=["own", "xir", "all", "none"],
        default="xir",
        help="which failures to shrink before writing their repro: own (xir's own), xir (every program xir "
        "fails; default), all (stock-only too), none",
    )
    p.add_argument("--shrink-evals", type=int, default=120, help="runs per shrink at most (default: 120)")
    p.add_argument(
        "--shrink-per-signature",
        type=int,
        default=2,
        metavar="N",
        help="shrink at most N failures of each signature (xir's class and error site, stock's class); "
        "the others get unshrunk repros (default: 2)",
    )
    p.add_argument("--shrink-time", type=float, default=600.0, help="seconds per shrink at most (default: 600)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the campaign in --out (its programs.jsonl): run only the seeds not yet run, then "
        "report them all; the checkout and --max-ops/--min-ops/--timeout must be the same. Journalled "
        "programs are rebuilt from their seeds, never run from the journal: one that is not what its "
        "seed builds is refused",
    )
    p.add_argument(
        "--rerun",
        metavar="DIR",
        help="run the programs of the campaign in DIR (its programs.jsonl) again with xir, at this "
        "checkout (stock's outcomes are DIR's: its code is ExecuTorch's), and print what changed "
        "for xir; exit status 1 if xir fails where it ran, or a failure of its own appears (with "
        "--kind: those of one kind)",
    )
    p.add_argument(
        "--only-ops",
        type=lambda text: [t for t in text.split(",") if t],
        metavar="KINDS",
        help="with --rerun: only the programs with one of these op kinds (comma-separated: softmax,conv1d)",
    )
    p.add_argument(
        "--replay", type=int, metavar="SEED", help="re-run one program (with --kind): print its source and outcomes"
    )
    p.add_argument(
        "--report",
        metavar="DIR",
        help="print the tables of a campaign (DIR/summary.json, or the programs "
        "journalled so far in DIR/programs.jsonl)",
    )
    return p


def _program_settings(args) -> None:
    """Set ``args.max_ops``, ``args.min_ops`` and ``args.generator``: a seed builds its program with
    them, so --rerun takes the campaign's own, and --resume the campaign's generator edition (other
    values would build other programs under the same seeds, and compare them with the campaign's as
    if they were the same; one given that differs is refused); else the values given, or the
    defaults."""
    from .generator import GENERATOR

    defaults = {"max_ops": 12, "min_ops": 3, "generator": GENERATOR}
    header, source = {}, None
    if args.rerun:
        source, path = "--rerun", journal_path(Path(args.rerun))
    elif args.resume:
        source, path = "--resume", Path(args.out) / JOURNAL
        path = path if path.exists() else None
    else:
        path = None
    if path is not None:
        header, _ = read_journal(path, lenient=True)
        header = with_edition(header)
    for name, default in defaults.items():
        given, theirs = getattr(args, name), header.get(name)
        if source == "--resume" and name != "generator":
            theirs = None  # (--resume refuses other sizes itself, naming the setting: _journal)
        if given is not None and theirs is not None and given != theirs:
            option = "--" + name.replace("_", "-")
            raise CampaignError(
                f"{source}: the campaign in {path.parent} built its programs with {option} {theirs}, "
                f"this run asks for {given}: the same seeds would build other programs; leave "
                f"{option} out (it takes the campaign's)"
            )
        setattr(args, name, given if given is not None else theirs if theirs is not None else default)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.count < 1:
        parser().error("--count must be at least 1")
    if args.only_ops and not args.rerun:
        parser().error("--only-ops goes with --rerun")
    if args.address and args.engine != "ray":
        parser().error("--address goes with --engine ray")
    if args.jobs is not None and args.jobs < 1:
        parser().error("--jobs must be at least 1")
    try:
        require_engine(args.engine)
    except EngineError as error:
        print(f"xir fuzz: {error}", file=sys.stderr)
        return 2
    try:
        _program_settings(args)
    except CampaignError as error:
        print(f"xir fuzz: {error}", file=sys.stderr)
        return 2
    if args.replay is not None:
        return replay(args)
    if args.report is not None:
        return report(args)
    return campaign(args)
