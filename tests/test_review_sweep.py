"""The review packet's design-sweep section (scope.sweep; DESIGN.md sections 11 and
12): the sweep runs through simulator.sweep into a store in the run cache, resumed by
point key on the next review; the section shows each workload's Pareto front over the
spec's objectives, with the same numbers in the three formats; the export it reads is
a hashed packet file that `accsim verify` checks and reruns; a bad spec is one error."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.review.packet import NUMBER_FORMATS
from simulator.review.study import load_study
from simulator.sweep import executors
from test_review import html_tables, md_cell_text, md_tables, parse_number, resolution
from timed_cli import HANG_S

# One small GEMM on edge_32x32 variants: each point's default-mapping search is short.
GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
"""
ROWS, BANDWIDTHS = [16, 32], [10.0, 40.0]
SWEEP = f"""\
name: edge_tiny
platform: edge_32x32
workloads: [small_gemm.yaml]
axes:
  systolic_array.rows: {ROWS}
  offchip.bandwidth_gbps: {BANDWIDTHS}
objectives: {{time_s: min, mfu: max}}
"""
STUDY = """\
title: a tiny sweep
objective: check the design-sweep section
owners: [a tester]
scope:
  platforms: [edge_32x32]
  workloads: [small_gemm.yaml]
  sweep: sweeps/tiny.yaml
baseline: edge_32x32
"""
EXPORT = "results/sweep.edge_tiny.json"
STORE = Path("sweeps") / "edge_tiny.sqlite"


def study_folder(folder: Path, sweep: str = SWEEP, study: str = STUDY) -> Path:
    """The study beside its workload, the sweep spec in a subfolder (paths in the spec
    are relative to the spec, the spec's path relative to the study)."""
    (folder / "sweeps").mkdir(parents=True, exist_ok=True)
    (folder / "small_gemm.yaml").write_text(GEMM)
    (folder / "sweeps" / "small_gemm.yaml").write_text(GEMM)
    (folder / "sweeps" / "tiny.yaml").write_text(sweep)
    (folder / "study.yaml").write_text(study)
    return folder / "study.yaml"


def review(study: Path, out: Path, *flags: str) -> dict:
    assert main(["review", str(study), "--out", str(out), *flags]) == 0
    return json.loads((out / "packet.json").read_text())


def sweep_section(packet: dict) -> dict:
    return next(s for s in packet["sections"] if s["id"] == "sweep")


def dominates(a: dict, b: dict, senses: dict) -> bool:
    """a is no worse than b on every objective and better on one."""
    sign = {"min": 1, "max": -1}
    no_worse = all(sign[s] * a[n] <= sign[s] * b[n] for n, s in senses.items())
    return no_worse and any(sign[s] * a[n] < sign[s] * b[n] for n, s in senses.items())


class Counted:
    """evaluate_point, counting the points the serial executor simulates."""

    def __init__(self, real) -> None:
        self.real, self.calls = real, 0

    def __call__(self, *args):
        self.calls += 1
        return self.real(*args)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The study reviewed once on the local process pool into a fresh cache."""
    folder = tmp_path_factory.mktemp("sweep")
    study = study_folder(folder)
    out, cache = folder / "packet", folder / "cache"
    argv = ["review", str(study), "--out", str(out), "--cache", str(cache),
            "--workers", "2"]
    assert main(argv) == 0
    return study, out, cache, json.loads((out / "packet.json").read_text())


def test_the_sweep_runs_into_a_store_in_the_run_cache(built):
    study, out, cache, packet = built
    with sqlite3.connect(cache / STORE) as db:
        stored = dict(db.execute("SELECT key, time_s FROM results WHERE status = 'ok'"))
    export = json.loads((out / EXPORT).read_text())
    assert len(stored) == len(ROWS) * len(BANDWIDTHS) == len(export["points"])
    assert {p["key"]: p["metrics"]["time_s"] for p in export["points"]} == stored
    entry = next(r for r in packet["results"] if r["kind"] == "sweep")
    assert entry["path"] == EXPORT
    assert entry["sha256"] == hashlib.sha256((out / EXPORT).read_bytes()).hexdigest()
    assert export["sweep"]["path"] == str(study.parent / "sweeps" / "tiny.yaml")


def test_the_section_shows_the_pareto_front_of_the_points(built):
    _, out, _, packet = built
    section = sweep_section(packet)
    export = json.loads((out / EXPORT).read_text())
    senses = export["sweep"]["objectives"]
    assert senses == {"time_s": "min", "mfu": "max"}  # the spec's, in its order
    points = [dict(p["metrics"], index=i, p=p) for i, p in enumerate(export["points"])]
    front = [p for p in points if not any(dominates(q, p, senses) for q in points)]
    # At one array size, 10 GB/s is no faster than 40 GB/s and MFU is FLOPs over time
    # x the same peak, so each 10 GB/s point is dominated unless both times tie.
    assert 0 < len(front) < len(points)
    assert [p["p"]["on_front"] for p in points] == [p in front for p in points]
    front_table, counts = section["tables"]
    assert [c["name"] for c in front_table["columns"]] == [
        "workload", "bandwidth_gbps", "rows", "time_s (min)", "mfu (max)", "bottleneck",
        "evidence"]
    by_time = sorted(front, key=lambda p: p["time_s"])
    assert [row[1:5] for row in front_table["rows"]] == [
        [p["p"]["point"]["offchip.bandwidth_gbps"], p["p"]["point"]["systolic_array.rows"],
         p["time_s"], p["mfu"]] for p in by_time]
    assert [row[6]["href"] for row in front_table["rows"]] == [
        f"{EXPORT}#/points/{p['index']}" for p in by_time]
    assert counts["rows"] == [["small_gemm", 4, 4, 0, len(front),
                               {"text": "points", "href": f"{EXPORT}#/points"}]]
    assert section["verdict"] == "pass"
    assert section["reason"] == (f"Pareto front (time_s min, mfu max): {len(front)} of 4 "
                                 "points that ran (0 failed)")
    (figure,) = section["figures"]
    svg = (out / figure["file"]).read_text()
    assert figure["file"] == "figures/sweep-edge_tiny.svg"
    assert hashlib.sha256(svg.encode()).hexdigest() == figure["sha256"]
    assert (out / "index.html").read_text().count("<svg") == sum(
        len(s["figures"]) for s in packet["sections"])


def test_markdown_and_html_carry_the_sweep_numbers_of_the_json(built):
    _, out, _, packet = built
    in_html, in_md = html_tables(out).tables, md_tables(out)
    compared = 0
    for table in sweep_section(packet)["tables"]:
        html_rows, md_rows = in_html[f"table-{table['id']}"], in_md[table["id"]]
        assert len(html_rows) == len(md_rows) == len(table["rows"]) > 0
        for row, html_row, md_row in zip(table["rows"], html_rows, md_rows):
            for value, column, html_text, md_text in zip(row, table["columns"],
                                                         html_row, md_row):
                assert html_text == md_cell_text(md_text), column["name"]
                if isinstance(value, (int, float)) and column["format"] in NUMBER_FORMATS:
                    shown = parse_number(html_text, column["format"])
                    assert abs(shown - value) <= resolution(html_text, column["format"]) \
                        + 5e-4 * abs(value)  # g4: four significant digits
                    compared += 1
    assert compared == 4 * len(sweep_section(packet)["tables"][0]["rows"]) + 4


def test_a_second_review_computes_nothing_and_a_changed_spec_only_what_is_new(
        built, tmp_path, monkeypatch, capsys):
    study, out, cache, packet = built
    counted = Counted(executors.evaluate_point)
    monkeypatch.setattr(executors, "evaluate_point", counted)
    again = review(study, tmp_path / "again", "--cache", str(cache), "--scheduler",
                   "serial")
    assert counted.calls == 0
    assert "sweep edge_tiny: 4 point x workload jobs, 4 already stored, 0 computed" in \
        capsys.readouterr().out
    assert again == packet
    for name in ("packet.json", "packet.md", "index.html", EXPORT):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()
    # one more bandwidth: only its two points are simulated, the store resumes by key
    (study.parent / "sweeps" / "tiny.yaml").write_text(
        SWEEP.replace(f"{BANDWIDTHS}", f"{BANDWIDTHS + [80.0]}"))
    try:
        wider = review(study, tmp_path / "wider", "--cache", str(cache), "--scheduler",
                       "serial")
        assert counted.calls == len(ROWS)
        assert "6 point x workload jobs, 4 already stored, 2 computed" in \
            capsys.readouterr().out
        assert sweep_section(wider)["tables"][1]["rows"][0][1] == 6
    finally:
        (study.parent / "sweeps" / "tiny.yaml").write_text(SWEEP)
    # the store keeps all 6; the original spec's packet still shows only its 4
    with sqlite3.connect(cache / STORE) as db:
        assert db.execute("SELECT count(*) FROM results").fetchone() == (6,)
    assert review(study, tmp_path / "back", "--cache", str(cache), "--scheduler",
                  "serial") == packet
    assert counted.calls == len(ROWS)


def copy_packet(built, tmp_path) -> Path:
    """A copy of the built packet a test may tamper with."""
    _, out, _, _ = built
    shutil.copytree(out, tmp_path / "packet")
    return tmp_path / "packet"


def rehash(packet_dir: Path) -> None:
    """Record the files' current hashes, as a forger would."""
    packet = json.loads((packet_dir / "packet.json").read_text())
    for entry in packet["results"]:
        entry["sha256"] = hashlib.sha256((packet_dir / entry["path"]).read_bytes()) \
            .hexdigest()
    (packet_dir / "packet.json").write_text(json.dumps(packet))


def tampered(packet_dir: Path, edit) -> None:
    """The packet's sweep export rewritten after `edit(export)`."""
    export = json.loads((packet_dir / EXPORT).read_text())
    edit(export)
    (packet_dir / EXPORT).write_text(json.dumps(export, indent=1) + "\n")


def test_verify_reruns_the_front_and_names_a_tampered_export(built, tmp_path, capsys):
    packet_dir = copy_packet(built, tmp_path)
    assert main(["verify", str(packet_dir / "packet.json")]) == 0
    assert "verified" in capsys.readouterr().out
    original = (packet_dir / EXPORT).read_text()
    front = [i for i, p in enumerate(json.loads(original)["points"]) if p["on_front"]]
    off = [i for i, p in enumerate(json.loads(original)["points"]) if not p["on_front"]]

    def faster(export):
        export["points"][front[0]]["metrics"]["time_s"] /= 2

    tampered(packet_dir, faster)
    assert main(["verify", str(packet_dir / "packet.json")]) == 1
    printed = capsys.readouterr().out
    assert f"changed input: result: {packet_dir / EXPORT} (sha256 changed since the " \
        "packet)" in printed
    rehash(packet_dir)  # the recorded hash edited too: the rerun still catches it
    assert main(["verify", str(packet_dir / "packet.json")]) == 1
    assert f"differs on rerun: {EXPORT}: .points[{front[0]}].metrics.time_s: " in \
        capsys.readouterr().out

    def promoted(export):
        export["points"][off[0]]["on_front"] = True

    def edited_input(export):
        export["points"][front[0]]["inputs"]["platform"]["clock_ghz"] *= 2

    for edit, said in ((promoted, [f".points[{off[0]}].on_front: True != False",
                                   f".points[{off[0]}]: a front point without its "
                                   "inputs"]),
                       (edited_input, [f".points[{front[0]}]: its inputs do not hash "
                                       "to its key"])):
        (packet_dir / EXPORT).write_text(original)
        tampered(packet_dir, edit)
        rehash(packet_dir)
        assert main(["verify", str(packet_dir / "packet.json")]) == 1
        printed = capsys.readouterr().out
        for text in said:
            assert f"differs on rerun: {EXPORT}: {text}" in printed


def test_verify_names_an_edited_sweep_spec_and_a_malformed_export(built, tmp_path,
                                                                 capsys):
    packet_dir = copy_packet(built, tmp_path)
    study, _, _, _ = built
    spec = study.parent / "sweeps" / "tiny.yaml"
    spec.write_text(SWEEP + "# edited\n")
    try:
        assert main(["verify", str(packet_dir / "packet.json")]) == 1
        assert f"changed input: {EXPORT}: sweep spec: {spec} (sha256 changed since " \
            "the packet)" in capsys.readouterr().out
    finally:
        spec.write_text(SWEEP)
    tampered(packet_dir, lambda export: export.update(points="none"))
    rehash(packet_dir)
    assert main(["verify", str(packet_dir / "packet.json")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"accsim: error: {packet_dir / EXPORT}: points: ")


def test_a_sweep_whose_every_point_fails_fails_the_section(tmp_path, capsys):
    # A 2-byte output buffer holds no int32 accumulator tile: no tiling fits anywhere.
    study = study_folder(tmp_path, SWEEP.replace(
        f"  offchip.bandwidth_gbps: {BANDWIDTHS}", "  buffers.output_bytes: [2]"))
    packet = review(study, tmp_path / "packet", "--no-cache", "--scheduler", "serial")
    section = sweep_section(packet)
    assert section["verdict"] == "fail" and packet["verdict"] == "fail"
    assert section["reason"] == "no Pareto front for small_gemm"
    assert section["tables"][0]["rows"] == [] and section["figures"] == []
    assert section["tables"][1]["rows"][0][1:5] == [2, 0, 2, 0]
    (found,) = [f for f in packet["findings"] if f["kind"] == "no sweep front"]
    assert found["text"] == "sweep edge_tiny: no point of small_gemm ran (2 of 2 failed)"
    assert found["href"] == "#table-sweep-points"
    assert any(line.startswith("2 points failed: ") and "output" in line
               for line in section["text"])
    assert "store none kept (--no-cache)" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "packet" / "packet.json")]) == 0


def test_the_example_study_plans_its_sweep_relative_to_itself():
    study = load_study(str(Path(__file__).resolve().parents[1] / "experiments" / "studies"
                           / "edge_resnet50_sweep.yaml"))
    plan = study.sweep
    assert plan.sweep.file.endswith("studies/../sweeps/edge_32x32_array_and_dram.yaml")
    assert (plan.samples, plan.excluded, len(plan.jobs)) == (9, 0, 9)  # 3 linked x 3
    assert {job.workload.name for job in plan.jobs} == {"resnet50_b1"}


# --- a bad sweep spec, or bad sweep options: one line, before any simulation ---

BAD_SWEEPS = [
    ("no such spec", {"study": STUDY.replace("sweeps/tiny.yaml", "sweeps/nope.yaml")},
     "study.yaml", "scope.sweep: 'sweeps/nope.yaml': no such sweep spec file"),
    ("empty spec path", {"study": STUDY.replace("sweeps/tiny.yaml", "''")}, "study.yaml",
     "scope.sweep: String should have at least 1 character"),
    ("misspelt axis", {"sweep": SWEEP.replace("systolic_array.rows", "systolic_array.rowz")},
     "sweeps/tiny.yaml", "axes.systolic_array.rowz: no such platform field"),
    ("unknown objective", {"sweep": SWEEP.replace("mfu: max", "speed: max")},
     "sweeps/tiny.yaml", "objectives: unknown objective 'speed'"),
    ("area without a table", {"sweep": SWEEP.replace("mfu: max", "area_mm2: min")},
     "sweeps/tiny.yaml", "objectives.area_mm2: objective area_mm2 has no values"),
    ("impossible value", {"sweep": SWEEP.replace("[16, 32]", "[16, -32]")},
     "sweeps/tiny.yaml", "axes.systolic_array.rows[1]: value -32"),
    ("grid with n", {"sweep": SWEEP + "sampling: {method: grid, n: 3}\n"},
     "sweeps/tiny.yaml", "sampling: n applies to random and lhs"),
    ("duplicate key", {"sweep": SWEEP + "name: again\n"}, "sweeps/tiny.yaml",
     "duplicate key"),
    ("constraint as Python", {"sweep": SWEEP + "constraints: ['__import__(\"os\")']\n"},
     "sweeps/tiny.yaml", "constraints[0]"),
    ("missing workload", {"sweep": SWEEP.replace("[small_gemm.yaml]", "[nope.yaml]")},
     "sweeps/nope.yaml", "not found"),
]


@pytest.mark.parametrize("files,where,expected", [c[1:] for c in BAD_SWEEPS],
                         ids=[c[0] for c in BAD_SWEEPS])
def test_a_bad_sweep_spec_gets_one_clear_error(tmp_path, capsys, files, where, expected):
    study = study_folder(tmp_path, files.get("sweep", SWEEP), files.get("study", STUDY))
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"accsim: error: {tmp_path / where}: ") and expected in line, \
        line
    assert not out.exists()  # refused before any simulation or output


@pytest.mark.parametrize("flags,expected", [
    (["--scheduler", "threads"], "--scheduler: unknown scheduler 'threads'"),
    (["--workers", "0"], "--workers: needs at least 1 worker"),
    (["--scheduler", "serial", "--workers", "2"], "--workers: applies to the processes")])
def test_bad_sweep_options_are_refused_first(tmp_path, capsys, flags, expected):
    study = study_folder(tmp_path)
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache", *flags]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"accsim: error: {expected}" or line.startswith(
        f"accsim: error: {expected}")
    assert not out.exists()


def test_a_bad_sweep_spec_from_the_shell_has_no_traceback(tmp_path):
    study = study_folder(tmp_path, SWEEP.replace("rows", "rowz"))
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "review", str(study),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=HANG_S)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "tiny.yaml: axes.systolic_array.rowz: no such platform field" in line
