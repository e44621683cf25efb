"""xir fuzz --engine ray, on a local Ray cluster of 2 CPUs that the file shares: a campaign journals
what the local worker pool journals for the same seeds; a driver killed and resumed loses no program
and runs none twice (the same campaign: its driver is killed, then resumed, and its journal is the
pool's); an actor killed mid-campaign costs its one program (crashed), and every other is
journalled. Small fp32 programs (at most 4 ops), 3 seeds per campaign."""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from xir_tools.fuzz.cli import main
from xir_tools.fuzz.ray_engine import KILL_ACTOR_ENV

ROOT = Path(__file__).resolve().parents[1]
SEEDS = [0, 1, 2]
ARGS = ["--kind", "fp32", "--seed", "0", "--count", str(len(SEEDS)), "--max-ops", "4", "--shrink", "none"]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs (the campaigns run in this process use it); its address."""
    import ray  # (in the test extra: the Ray tests run wherever the suite does, never skipped)

    temp = tempfile.mkdtemp(prefix="xr", dir="/tmp")  # short: Ray's socket paths are limited
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024**2,
        _temp_dir=temp,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def pool_journal(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool")
    assert main(ARGS + ["--jobs", "2", "--out", str(out)]) == 0
    return entries(out)


def entries(out: Path) -> list[dict]:
    """The journal's entries (not a last line half written by a driver killed)."""
    found = []
    for line in (out / "programs.jsonl").read_text().splitlines()[1:]:
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return found


def deterministic(entry: dict) -> dict:
    """What a journal entry holds that does not depend on timing."""
    record = entry["record"]
    sides = {side: {k: v for k, v in (record[side] or {}).items() if k != "seconds"} for side in ("xir", "stock")}
    return {
        "label": record["label"],
        "via": record.get("via"),
        "ops": record.get("ops"),
        "op_kinds": record.get("op_kinds"),
        "program": entry["program"],
        **sides,
    }


def by_seed(journal: list[dict]) -> dict:
    return {entry["record"]["seed"]: deterministic(entry) for entry in journal}


@pytest.fixture(scope="module")
def resumed(cluster, tmp_path_factory):
    """A campaign on Ray whose driver (a process of its own) is killed with SIGKILL once it has
    journalled a program, then resumed (in this process): the seeds journalled before the kill, and
    the journal at the end."""
    out = tmp_path_factory.mktemp("ray")
    command = [sys.executable, "-m", "xir_tools.fuzz"] + ARGS + ["--engine", "ray", "--address", cluster]
    driver = subprocess.Popen(
        command + ["--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and driver.poll() is None:
        if (out / "programs.jsonl").exists() and entries(out):
            break
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = [e["record"]["seed"] for e in entries(out)]
    assert main(ARGS + ["--engine", "ray", "--address", cluster, "--out", str(out), "--resume"]) == 0
    return before, entries(out), out


def test_a_campaign_on_ray_journals_what_the_pool_does(resumed, pool_journal):
    _, journal, out = resumed
    assert by_seed(journal) == by_seed(pool_journal)
    assert all(e["record"]["xir"]["status"] == "ok" for e in journal)  # (else the comparison says little)
    assert sorted(p.name for p in (out / "logs").iterdir()) == ["ray-0", "ray-1"]


def test_a_driver_killed_and_resumed_loses_and_repeats_no_program(resumed):
    before, journal, _ = resumed
    assert 1 <= len(before) < len(SEEDS), before  # killed mid-campaign
    after = [e["record"]["seed"] for e in journal]
    assert sorted(after) == SEEDS and after[: len(before)] == before


def test_an_actor_killed_costs_its_one_program(cluster, pool_journal, tmp_path, monkeypatch):
    monkeypatch.setenv(KILL_ACTOR_ENV, "fp32:1")  # the actor that starts seed 1 kills itself (SIGKILL)
    assert main(ARGS + ["--engine", "ray", "--out", str(tmp_path)]) == 0
    journal = entries(tmp_path)
    assert sorted(e["record"]["seed"] for e in journal) == SEEDS
    killed = next(e["record"] for e in journal if e["record"]["seed"] == 1)
    for side in ("xir", "stock"):
        assert killed[side]["status"] == "crashed"
        assert killed[side]["error"].startswith("its Ray actor died"), killed[side]["error"]
    others, expected = by_seed(journal), by_seed(pool_journal)
    del others[1], expected[1]
    assert others == expected


def test_without_ray_the_engine_is_refused_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(ARGS + ["--engine", "ray", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == "xir fuzz: --engine ray needs Ray, which is not installed: pip install 'xir[cluster]'\n"
    assert not (tmp_path / "programs.jsonl").exists()


def test_an_address_goes_with_the_ray_engine(capsys):
    with pytest.raises(SystemExit):
        main(ARGS + ["--address", "auto"])
    assert "--address goes with --engine ray" in capsys.readouterr().err
