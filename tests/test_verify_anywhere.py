"""`accsim verify` accepts what accsim writes from any working directory (the paths a
result records are relative to the file recording them, simulator.inputs.anchors), and
refuses up front a forged serving result too large to rerun (issue 23 item 6)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.serving.verification import MAX_VERIFY_WORK
from timed_cli import cpu_seconds
from test_review import SERVING_STUDY, write_packet
from test_review_sweep import GEMM, STUDY, SWEEP

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ROOT / "experiments" / "studies"


def review_then_verify_elsewhere(study: str, tmp_path: Path, monkeypatch, capsys,
                                 root: Path = ROOT):
    """Review a study from `root` (the repository's by default) with a relative study
    path (as experiments/make_packets.py does), then verify the packet from another
    folder."""
    out = tmp_path / "packet"
    monkeypatch.chdir(root)
    assert main(["review", f"experiments/studies/{study}.yaml", "--out", str(out),
                 "--no-cache"]) == 0
    packet = json.loads((out / "packet.json").read_text())
    assert not Path(packet["study"]["path"]).is_absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    code = main(["verify", str(out / "packet.json")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verified (inputs unchanged, rerun identical)" in printed


def test_sweep_study_packet_verifies_from_another_directory(tmp_path, monkeypatch,
                                                            capsys):
    """A study whose sweep spec is `../sweeps/...` beside its folder, laid out as the
    shipped edge_resnet50_sweep is (a relative study path, a spec up and across, the
    spec's workload beside it), on one small GEMM: the paths are what is checked, and
    the slow test below reviews every shipped study."""
    root = tmp_path / "repository"
    for folder in ("experiments/studies", "experiments/sweeps"):
        (root / folder).mkdir(parents=True)
    (root / "experiments/studies/small_gemm.yaml").write_text(GEMM)
    (root / "experiments/sweeps/small_gemm.yaml").write_text(GEMM)
    (root / "experiments/sweeps/tiny.yaml").write_text(SWEEP)
    assert "sweep: sweeps/tiny.yaml" in STUDY
    (root / "experiments/studies/tiny_sweep.yaml").write_text(
        STUDY.replace("sweep: sweeps/tiny.yaml", "sweep: ../sweeps/tiny.yaml"))
    review_then_verify_elsewhere("tiny_sweep", tmp_path, monkeypatch, capsys, root)


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(p.stem for p in STUDIES.glob("*.yaml")))
def test_every_study_packet_verifies_from_another_directory(study, tmp_path,
                                                            monkeypatch, capsys):
    review_then_verify_elsewhere(study, tmp_path, monkeypatch, capsys)


def test_run_result_with_relative_inputs_verifies_from_another_directory(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out" / "r.json"
    out.parent.mkdir()
    assert main(["run", "--arch", "arch_configs/tpu_v1.yaml", "--workload",
                 "workloads/resnet50_b1.yaml", "--json", str(out)]) == 0
    recorded = json.loads(out.read_text())["manifest"]["inputs"]["platform"]["path"]
    assert (out.parent / recorded).resolve() == (ROOT / "arch_configs" / "tpu_v1.yaml").resolve()
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0, capsys.readouterr().out


def test_run_under_a_relative_tiling_plan_verifies_from_another_directory(
        tmp_path, monkeypatch, capsys):
    """The plan is named in the manifest's mapping line by its file name (its path and
    digest are in the inputs), so a rerun reading it by another path is identical."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--mapping", "workloads/mappings/bert_base_fuse_gelu.yaml",
                 "--json", str(out)]) == 0
    mode = json.loads(out.read_text())["manifest"]["mapping_mode"]
    assert "(bert_base_fuse_gelu.yaml)" in mode
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0, capsys.readouterr().out


def test_relative_path_is_not_read_from_the_working_directory(tmp_path, monkeypatch,
                                                              capsys):
    """A result moved away from its inputs names them as no longer readable, even when
    the working directory holds files of the same relative names."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "arch_configs/tpu_v1.yaml", "--workload",
                 "workloads/resnet50_b1.yaml", "--json", str(out)]) == 0
    moved = tmp_path / "deeper" / "r.json"
    moved.parent.mkdir()
    out.rename(moved)
    capsys.readouterr()
    assert main(["verify", str(moved)]) == 1
    assert "no longer readable" in capsys.readouterr().out


def forged_serve_result(requests: int) -> dict:
    spec = {"arch": "tpu_v5e_like", "model": "llama_3_1_8b", "rate": 1.0,
            "requests": requests, "prompt_tokens": 1024, "output_tokens": 256}
    return {"manifest": {"serving": {"spec": spec}, "inputs": {}, "model_version": 0},
            "requests": requests}


def test_forged_huge_serve_result_is_refused_fast(tmp_path, capsys):
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged_serve_result(1_000_000)))
    code, seconds = cpu_seconds(lambda: main(["verify", str(path)]))
    assert code == 1 and seconds < 1.0
    err = capsys.readouterr().err
    assert f"{MAX_VERIFY_WORK:,}" in err and "--allow-long" in err
    assert "manifest.serving.spec.requests" in err


def test_forged_huge_serving_result_in_a_packet_is_refused_fast(tmp_path, capsys):
    """The same bound on a packet's serving result file (all its loads counted)."""
    folder = tmp_path / "packet"
    (folder / "results").mkdir(parents=True)
    spec = forged_serve_result(400_000)["manifest"]["serving"]["spec"]
    served = {"serving": {"spec": spec, "rates_per_s": [0.1, 0.25]}, "points": []}
    data = json.dumps(served).encode()
    (folder / "results" / "s.json").write_bytes(data)
    study = tmp_path / "study.yaml"
    study.write_text("title: x\n")
    packet = {"packet": {"format": "accsim-review-packet", "version": 2},
              "study": {"path": "../study.yaml",
                        "sha256": hashlib.sha256(study.read_bytes()).hexdigest()},
              "options": {"fusion": None, "ignore_capacity": False},
              "results": [{"kind": "serving", "path": "results/s.json",
                           "sha256": hashlib.sha256(data).hexdigest()}],
              "sections": []}
    (folder / "packet.json").write_text(json.dumps(packet))
    code, seconds = cpu_seconds(lambda: main(["verify", str(folder / "packet.json")]))
    assert code == 1 and seconds < 1.0
    assert "--allow-long" in capsys.readouterr().err


def test_forged_review_cache_entry_is_recomputed(tmp_path, capsys):
    """A cache entry whose numbers were edited (its embedded inputs intact, so its key
    still matches) differs from the digest written beside it: it is recomputed and no
    forged number reaches the packet (issue 23 item 3)."""
    study = tmp_path / "small.yaml"
    study.write_text(SERVING_STUDY)
    cache = tmp_path / "cache"
    first = write_packet(study, tmp_path / "a", "--cache", str(cache))
    entries = sorted(cache.glob("*.json"))
    assert entries and all(Path(f"{p}.sha256").is_file() for p in entries)
    for entry in entries:
        text = entry.read_text()
        key = '"throughput_rps": ' if entry.name.startswith("serving-") else '"cycles": '
        at = text.index(key) + len(key)
        entry.write_text(text[:at] + "7" + text[at:])  # a forged figure, valid JSON
    capsys.readouterr()
    assert write_packet(study, tmp_path / "b", "--cache", str(cache)) == first
    assert "(0 reused" in capsys.readouterr().out
    for result in (tmp_path / "a" / "results").iterdir():
        assert result.read_bytes() == (tmp_path / "b" / "results" / result.name).read_bytes()
