"""Running sweeps: the store (WAL, one row per key, failed rows with reasons), resume
after a SIGKILL of the coordinator and after Ctrl-C, killed workers in the process pool
and on a Dask LocalCluster losing nothing, and `accsim sweep report`."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.sweep import executors
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import Dask, Processes, Serial, executor_for
from simulator.sweep.jobs import make_plan
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from timed_cli import HANG_S

# edge_32x32 points; a 2-byte output buffer holds no int32 accumulator tile at all. One
# small GEMM keeps each point's default-mapping search short.
GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
"""
SPEC = """\
name: edge
platform: edge_32x32
workloads: [small_gemm.yaml]
axes:
  systolic_array.rows: [8, 16, 32]
  systolic_array.cols: [8, 16, 32]
  buffers.output_bytes: [2, 65536]
  offchip.bandwidth_gbps: [10.0, 20.0]
objectives: {time_s: min, tops_per_w: max}
"""
JOBS = 36
FAILED = 18
# For the interruption tests: enough points that a run is still going when stopped,
# even where the test's own polling is slowed by load (135 points took ~1.9 s on 2
# workers, and a loaded run once ended before its first 10 were seen).
LONG_SPEC = SPEC.replace("buffers.output_bytes: [2, 65536]", "").replace(
    "offchip.bandwidth_gbps: [10.0, 20.0]", "offchip.bandwidth_gbps: {range: [10, 300, 10]}")
LONG_JOBS = 9 * 30


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args],
                          capture_output=True, text=True, timeout=300)


def spec_file(tmp_path, text: str = SPEC):
    (tmp_path / "small_gemm.yaml").write_text(GEMM)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def stored(path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT key, status FROM results").fetchall()


def stored_count(path) -> int:
    """Rows stored so far by a running sweep (0 before its tables exist)."""
    try:
        return len(stored(path)) if path.exists() else 0
    except sqlite3.OperationalError:
        return 0


@pytest.fixture(scope="module")
def serial_store(tmp_path_factory):
    """SPEC run serially once; tests that only read a finished store share it."""
    folder = tmp_path_factory.mktemp("serial")
    path = folder / "s.sqlite"
    with Store(path) as store:
        run_sweep(make_plan(load_sweep(spec_file(folder))), store, Serial())
    return path


def check_complete(store_path, plan) -> None:
    """Every job of the plan stored exactly once (the key is the primary key, so a
    duplicate would be a count mismatch), and nothing else."""
    rows = stored(store_path)
    assert len(rows) == len(plan.jobs)
    assert {key for key, _ in rows} == {job.key for job in plan.jobs}


def test_sweep_stores_rows_and_rerun_computes_nothing(tmp_path):
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    assert len(plan.jobs) == JOBS
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        first = run_sweep(plan, store, Serial())
        again = run_sweep(plan, store, Serial())
        rows = store.rows()
        journal = store.db.execute("PRAGMA journal_mode").fetchone()[0]
    assert (first.computed, first.already_stored) == (JOBS, 0)
    assert (again.computed, again.already_stored) == (0, JOBS)
    assert journal == "wal"
    check_complete(path, plan)
    failed = [r for r in rows if r["status"] == "failed"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(failed) == FAILED
    assert all(r["point"]["buffers.output_bytes"] == 2 for r in failed)
    assert all("the output buffer of 2 bytes holds 0" in r["error"] and r["cycles"] is None
               for r in failed)
    for row in ok:
        assert row["error"] is None and isinstance(row["cycles"], int) and row["cycles"] > 0
        assert row["time_s"] == pytest.approx(row["cycles"] / 1e9)  # edge_32x32: 1 GHz
        assert 0 < row["mfu"] <= 1 and row["energy_j"] > 0 and row["tops_per_w"] > 0
        assert row["avg_power_w"] == pytest.approx(row["energy_j"] / row["time_s"])
        assert row["bottleneck"] and row["area_mm2"] is None
        assert row["inputs"]["platform"]["systolic_array"]["rows"] == \
            row["point"]["systolic_array.rows"]
    columns = {c[1] for c in sqlite3.connect(path).execute("PRAGMA table_info(results)")}
    assert {"key", "status", "error", "inputs", "cycles", "time_s", "mfu",
            "memory_stall_fraction", "energy_j", "avg_power_w", "tops_per_w", "area_mm2",
            "bottleneck"} <= columns


def test_interrupted_sweep_computes_only_what_is_missing(tmp_path):
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        for job in plan.jobs[:10]:  # as if a run had stopped after ten jobs
            store.put({"key": job.key, "sweep": "edge", "workload": job.workload.name,
                       "point": "{}", "inputs": "{}", "status": "ok"})
        summary = run_sweep(plan, store, Serial())
    assert (summary.already_stored, summary.computed) == (10, JOBS - 10)
    check_complete(path, plan)


def test_coordinator_killed_mid_sweep_resumes_with_every_point_once(tmp_path):
    spec = spec_file(tmp_path, LONG_SPEC)
    path = tmp_path / "s.sqlite"
    run = subprocess.Popen([sys.executable, "-m", "simulator.cli", "sweep", "run",
                            str(spec), "--store", str(path), "--scheduler", "serial"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and run.poll() is None:
        if stored_count(path) >= 20:
            break
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert run.returncode == -signal.SIGKILL, run.stderr.read()
    before = len(stored(path))
    assert 20 <= before < LONG_JOBS
    plan = make_plan(load_sweep(spec))
    with Store(path) as store:
        summary = run_sweep(plan, store, Serial())
    assert (summary.already_stored, summary.computed) == (before, LONG_JOBS - before)
    check_complete(path, plan)


def test_ctrl_c_stops_cleanly_keeping_what_finished(tmp_path, capsys):
    spec = spec_file(tmp_path, LONG_SPEC)
    path = tmp_path / "s.sqlite"
    run = subprocess.Popen([sys.executable, "-m", "simulator.cli", "sweep", "run",
                            str(spec), "--store", str(path), "--workers", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and run.poll() is None:
        if stored_count(path) >= 10:
            break
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=HANG_S)
    assert run.returncode == 130, err
    assert "Traceback" not in err
    kept = len(stored(path))
    assert f"{kept} computed" in out and "interrupted" in err
    assert f"{LONG_JOBS - kept} jobs not computed" in err
    assert main(["sweep", "run", str(spec), "--store", str(path), "--scheduler",
                 "serial"]) == 0
    assert f"{kept} already stored, {LONG_JOBS - kept} computed" in capsys.readouterr().out
    check_complete(path, make_plan(load_sweep(spec)))


def test_killed_pool_worker_loses_nothing(tmp_path, serial_store):
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    path = tmp_path / "s.sqlite"
    killed = []

    def kill_a_worker(row: dict) -> None:
        if not killed:
            worker = multiprocessing.active_children()[0]
            os.kill(worker.pid, signal.SIGKILL)
            killed.append(worker.pid)

    with Store(path) as store:
        summary = run_sweep(plan, store, Processes(2), on_stored=kill_a_worker)
        statuses = {row["key"]: row["status"] for row in store.rows()}
    assert killed and summary.computed == JOBS and not summary.interrupted
    check_complete(path, plan)
    with Store(serial_store) as store:
        assert statuses == {row["key"]: row["status"] for row in store.rows()}


def test_killed_dask_worker_loses_nothing(tmp_path):
    distributed = pytest.importorskip("distributed", reason="Dask tests need the "
                                      "distributed package: pip install 'accsim[dask]'")
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    path = tmp_path / "s.sqlite"
    killed = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            Dask(cluster.scheduler_address, workers=2) as executor:

        def kill_a_busy_worker(row: dict) -> None:
            if killed:
                return
            busy = [w for w, keys in executor.client.processing().items() if keys]
            if busy:
                pids = executor.client.run(os.getpid, workers=busy[:1])
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])

        with Store(path) as store:
            summary = run_sweep(plan, store, executor, on_stored=kill_a_busy_worker)
            failed = [row for row in store.rows() if "died" in (row["error"] or "")]
    assert killed and summary.computed == JOBS and not failed
    check_complete(path, plan)


def test_scheduler_and_workers_are_checked_first(monkeypatch):
    with pytest.raises(AccsimError, match="unknown scheduler 'dask:/x'"):
        executor_for("dask:/x", None)
    with pytest.raises(AccsimError, match="at least 1 worker"):
        executor_for("processes", 0)
    with pytest.raises(AccsimError, match="--workers: applies to the processes and "
                       "dask-local schedulers, not 'serial'"):
        executor_for("serial", 2)
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    with pytest.raises(AccsimError, match=r"pip install 'accsim\[dask\]'"):
        executor_for("dask://127.0.0.1:8786", None)
    assert isinstance(executor_for("serial", None), executors.Serial)


def test_cli_run_and_report(tmp_path, capsys):
    spec, path = spec_file(tmp_path), tmp_path / "s.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(path), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "36 platforms x 1 workloads = 36 jobs" in out
    assert f"0 already stored, 36 computed ({FAILED} failed)" in out
    csv, plot = tmp_path / "r.csv", tmp_path / "front.png"
    assert main(["sweep", "report", str(path), "--best-by", "mfu", "--failed",
                 "--csv", str(csv), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front (time_s min, tops_per_w max)" in out
    assert "Best by mfu (max)" in out and "Failed points" in out
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + JOBS
    assert lines[0].startswith("key,status,error,sweep,workload,buffers.output_bytes")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_front_matches_brute_force_over_the_store(tmp_path, serial_store):
    path = serial_store
    with Store(path) as store:
        rows = [r for r in store.rows() if r["status"] == "ok"]
    csv = tmp_path / "r.csv"
    assert main(["sweep", "report", str(path), "--pareto", "time_s,energy_j:min",
                 "--csv", str(csv)]) == 0
    flagged = {line.split(",")[0] for line in csv.read_text().splitlines()[1:]
               if line.endswith(",True")}
    expected = {a["key"] for a in rows if not any(
        b["time_s"] <= a["time_s"] and b["energy_j"] <= a["energy_j"]
        and (b["time_s"] < a["time_s"] or b["energy_j"] < a["energy_j"]) for b in rows)}
    assert flagged == expected and expected


def test_parquet_export(tmp_path, monkeypatch, capsys, serial_store):
    path = serial_store
    out = tmp_path / "r.parquet"
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "pyarrow", None)  # as if not installed
        assert main(["sweep", "report", str(path), "--parquet", str(out)]) == 1
    assert "pip install 'accsim[parquet]'" in capsys.readouterr().err
    assert not out.exists()
    parquet = pytest.importorskip("pyarrow.parquet", reason="Parquet export needs "
                                  "pyarrow: pip install 'accsim[parquet]'")
    assert main(["sweep", "report", str(path), "--parquet", str(out)]) == 0
    table = parquet.read_table(out)
    assert table.num_rows == JOBS
    assert {"key", "status", "time_s", "on_front", "systolic_array.rows"} <= set(
        table.column_names)


@pytest.mark.parametrize("args, fragments", [
    (["sweep", "run", "SPEC", "--store", "STORE", "--scheduler", "mpi"],
     ["--scheduler", "unknown scheduler 'mpi'"]),
    (["sweep", "report", "MISSING"], ["MISSING", "no such store"]),
    (["sweep", "report", "STORE", "--pareto", "speed"], ["--pareto", "unknown objective"]),
    (["sweep", "report", "STORE", "--best-by", "mfu,time_s"], ["--best-by", "one objective"]),
    (["sweep", "report", "STORE", "--plot", "x.jpg"], ["--plot", ".png"]),
    (["sweep", "report", "STORE", "--csv", "no/such/dir/r.csv"], ["--csv", "does not exist"]),
    (["sweep", "report", "STORE", "--pareto", "area_mm2,time_s"],
     ["area_mm2 has no values", "no area table"]),
    (["sweep", "report", "SPEC"], ["spec.yaml", "SQLite"]),
])
def test_bad_sweep_options_are_one_line_errors(tmp_path, capsys, serial_store, args,
                                              fragments):
    spec = spec_file(tmp_path)
    args = [str(spec) if a == "SPEC" else str(serial_store) if a == "STORE"
            else str(tmp_path / a) if a == "MISSING" else a for a in args]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("accsim: error:") and len(err.splitlines()) == 1
    for fragment in fragments:
        assert fragment in err


def test_bad_axis_path_from_the_command_line(tmp_path):
    spec = spec_file(tmp_path, SPEC.replace("systolic_array.cols", "systolic_array.colz"))
    done = run_cli("sweep", "run", str(spec), "--store", str(tmp_path / "s.sqlite"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "spec.yaml: axes.systolic_array.colz: no such platform field" in done.stderr
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything was written


def test_results_from_a_worker_of_another_model_version_are_refused(tmp_path):
    class OtherVersion(Serial):
        def outcomes(self, jobs):
            for job, outcome in super().outcomes(jobs):
                yield job, {**outcome, "model_version": outcome["model_version"] + 1}

    plan = make_plan(load_sweep(spec_file(tmp_path)))
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(AccsimError, match="install the same accsim on every machine"):
            run_sweep(plan, store, OtherVersion())
        assert store.keys(status="ok") == set()


def test_workers_that_die_before_any_point_stop_the_sweep(tmp_path, monkeypatch):
    """Forked workers that exit at start (as an environment that cannot import accsim
    would) end the sweep with one error, not an endless round of fresh pools."""
    fork = multiprocessing.get_context("fork")
    monkeypatch.setattr(executors, "multiprocessing",
                        type("Forking", (), {"get_context": staticmethod(lambda _: fork)}))
    monkeypatch.setattr(executors, "ignore_interrupts", lambda: os._exit(1))
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(AccsimError, match="died 3 times before finishing any point"):
            run_sweep(plan, store, Processes(2))
        assert store.keys() == set()


def test_a_heuristic_mapping_is_its_own_key(tmp_path, capsys):
    spec, path = spec_file(tmp_path), tmp_path / "s.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(path), "--scheduler", "serial",
                 "--heuristic", "array_aligned"]) == 0
    assert "mapping: heuristic array_aligned" in capsys.readouterr().out
    searched = make_plan(load_sweep(spec))
    assert not {job.key for job in searched.jobs} & {key for key, _ in stored(path)}
    assert main(["sweep", "run", str(spec), "--store", str(path), "--heuristic",
                 "no_such"]) == 1
    assert "no_such" in capsys.readouterr().err


def test_a_fusion_mode_is_its_own_key(tmp_path, capsys):
    # Since MODEL_VERSION 4 the planner is the default: its keys name it, and the
    # operator-at-a-time mode keeps the plain mapping words it had before the planner.
    spec, path = spec_file(tmp_path), tmp_path / "s.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(path), "--scheduler", "serial",
                 "--fusion", "none"]) == 0
    assert "; fusion" not in capsys.readouterr().out
    default = make_plan(load_sweep(spec))   # the planner (auto), the default
    assert "; fusion auto" in default.jobs[0].inputs["mapping"]
    assert not {job.key for job in default.jobs} & {key for key, _ in stored(path)}
    with pytest.raises(SystemExit):   # argparse names the choices
        main(["sweep", "run", str(spec), "--store", str(path), "--fusion", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err


def test_area_column_comes_from_the_platforms_area_table(tmp_path, capsys):
    from simulator.inputs.loader import locate
    base = locate("edge_32x32", "platform").read_text()
    (tmp_path / "edge_area.yaml").write_text(
        base + "\narea: {pe_mm2: {int8: 0.001}, sram_mm2_per_mib: 1.0, "
        "vector_lane_mm2: 0.01, fixed_mm2: 2.0}\n")
    spec = spec_file(tmp_path, SPEC.replace("platform: edge_32x32",
                                            "platform: edge_area.yaml"))
    plan = make_plan(load_sweep(spec))
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        run_sweep(plan, store, Serial())
        areas = {r["key"]: r["area_mm2"] for r in store.rows() if r["status"] == "ok"}
    expected = {job.key: job.platform.area_mm2 for job in plan.jobs}
    assert areas and all(areas[key] == pytest.approx(expected[key]) for key in areas)
    assert len(set(areas.values())) > 1  # the array and buffer axes change the area
    assert main(["sweep", "report", str(path), "--pareto", "time_s,area_mm2"]) == 0
    assert "Pareto front (time_s min, area_mm2 min)" in capsys.readouterr().out


class _Named:
    """A job of another kind (executors only read its key)."""

    def __init__(self, key: str):
        self.key = key


def _worker_pid(job) -> dict:
    return {"key": job.key, "pid": os.getpid()}


def test_one_pool_serves_every_call_until_the_block_ends():
    """A deployment search hands the pool one stream per search and a sweep one per
    run: the workers started for the first call serve the next, and are gone after."""
    with Processes(2) as pool:
        first = {found["pid"] for _, found in pool.outcomes(
            [_Named(str(i)) for i in range(6)], task=_worker_pid)}
        workers = {child.pid for child in multiprocessing.active_children()}
        second = {found["pid"] for _, found in pool.outcomes(
            [_Named(f"again {i}") for i in range(6)], task=_worker_pid)}
        assert first <= workers and second <= workers and os.getpid() not in workers
    assert not workers & {child.pid for child in multiprocessing.active_children()}


KILLED_COORDINATOR = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from test_sweep_run import _Named, _worker_pid
from simulator.sweep.executors import Processes
with Processes(1) as pool:
    for _, found in pool.outcomes([_Named("one")], task=_worker_pid):
        print(found["pid"], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (an exited child nobody reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_pool_workers_end_when_their_coordinator_is_killed():
    coordinator = subprocess.run([sys.executable, "-c", KILLED_COORDINATOR,
                                  os.path.dirname(__file__)],
                                 capture_output=True, text=True, timeout=HANG_S)
    assert coordinator.returncode == -signal.SIGKILL, coordinator.stderr
    worker = int(coordinator.stdout.split()[0])
    deadline = time.monotonic() + HANG_S  # they check every PARENT_CHECK_S
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(worker)
