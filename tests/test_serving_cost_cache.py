"""The on-disk cache of LLM grid costs: same results cold, warm and without it; an
entry is untrusted input (corrupt, foreign or of another key: recomputed, no
traceback)."""

import json
import shutil
from pathlib import Path

import fake_hf
import pytest

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.serving.cost_cache import CostCache, cache_key, parse_entry, user_folder
from simulator.serving.llm_cost import LlmCost
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec

SPEC = ServeSpec(arch="tpu_v5e_like", model="llama_3_1_8b", rate=4.0, requests=60,
                 prompt_tokens=200, output_tokens=40)


def served(cache: CostCache) -> dict:
    return serve(prepare(SPEC, cost_cache=cache), SPEC)[0]


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> tuple[dict, Path]:
    """A run with a cache in a new folder: its figures and the folder (the module's one
    cold run; a test that changes the folder copies it)."""
    folder = tmp_path_factory.mktemp("cold")
    return served(CostCache(folder)), folder


def test_cold_warm_and_uncached_runs_are_identical(cold_run):
    uncached = served(CostCache(None))
    cold, folder = cold_run
    entries = list(folder.glob("*.json"))
    assert len(entries) == 1
    warm = served(CostCache(folder))
    assert json.dumps(cold) == json.dumps(uncached) == json.dumps(warm)


def test_a_warm_cost_model_simulates_no_grid_point(tmp_path):
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    first = LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=3, hf=fake_hf,
                    cache=CostCache(tmp_path))
    expected = first.iteration([(100, 37)], [300, 1000])
    first.save()
    second = LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=3, hf=fake_hf,
                     cache=CostCache(tmp_path))
    assert second.iteration([(100, 37)], [300, 1000]) == expected
    assert second.costs.distinct_operators == 0


@pytest.mark.parametrize("text", ["", "{", "[]", "\xff", '{"format": 1}',
                                  '{"format": 1, "key": "KEY", "dense": [[1, -2.0, 1.0]],'
                                  ' "prefill": [], "decode": []}',
                                  '{"format": 1, "key": "KEY", "dense": [["1", 2.0, 1.0]],'
                                  ' "prefill": [], "decode": []}',
                                  '{"format": 1, "key": "other", "dense": [],'
                                  ' "prefill": [], "decode": []}'])
def test_a_malformed_entry_is_refused(text):
    assert parse_entry(text.replace("KEY", "k").encode("utf-8", "surrogateescape"),
                       "k") is None


def test_a_corrupt_entry_is_recomputed_and_rewritten(tmp_path, cold_run):
    cold, folder = cold_run
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    (entry,) = tmp_path.glob("*.json")
    entry.write_text('{"format": 1, "key": "' + entry.stem + '", "dense": [[1, "x"]]}')
    assert json.dumps(served(CostCache(tmp_path))) == json.dumps(cold)
    assert parse_entry(entry.read_bytes(), entry.stem) is not None


def test_a_linked_cost_cache_folder_is_refused_on_the_command_line(tmp_path, capsys):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    code = main(["serve", "--model", "llama_3_1_8b", "--requests", "5", "--rate", "1", "--arch", "tpu_v5e_like",
                 "--cost-cache", str(tmp_path / "link")])
    assert code == 1
    assert "link" in capsys.readouterr().err


def test_the_key_and_the_folder(monkeypatch, tmp_path):
    assert cache_key({"a": 1, "b": 2}, "c") == cache_key({"b": 2, "a": 1}, "c") \
        != cache_key({"a": 2}, "c")
    assert cache_key({"a": 1}, "c") != cache_key({"a": 1}, "other code")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_folder() == tmp_path / "accsim" / "serving-costs"


def test_a_cache_storing_again_keeps_its_own_points_and_another_writers(tmp_path):
    """A cache that finds its entry as it wrote it merges without parsing it again; an
    entry another writer changed meanwhile is read back, its points kept too."""
    ours, theirs = CostCache(tmp_path), CostCache(tmp_path)
    ours.store("k", {"dense": {1: (1.0, 2.0)}, "prefill": {(3, 4): (0.5, 0.25)}})
    (entry,) = tmp_path.glob("*.json")
    written = entry.read_bytes()
    ours.store("k", {"dense": {2: (3.0, 4.0)}})
    assert entry.read_bytes() != written
    theirs.store("k", {"decode": {7: (0.125, 1.5)}})
    ours.store("k", {"decode_pair": {9: (2.0, 0.0)}})
    expected = {"dense": {1: (1.0, 2.0), 2: (3.0, 4.0)}, "prefill": {(3, 4): (0.5, 0.25)},
                "decode": {7: (0.125, 1.5)}, "decode_pair": {9: (2.0, 0.0)}, "exact": {}}
    assert parse_entry(entry.read_bytes(), "k") == expected
    assert ours.load("k") == CostCache(tmp_path).load("k") == expected
