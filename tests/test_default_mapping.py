"""The default mapping is the mapper's search (DESIGN.md section 2; issue 10): what
`accsim run` does without a plan is what `simulate(Inputs(..., Mapping()))` does for any
upper layer; it is deterministic, memoised per distinct operator, keeps what a plan
fixes, and the result and summary say which mapping was used."""

from __future__ import annotations

import json

import pytest

from simulator.search.default import SearchCache
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.search.workload_search import map_workload
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload
from timed_cli import cpu_seconds

TWO_GEMMS = Workload.model_validate({"name": "two", "operators": [
    {"name": "a", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 512, "k": 384},
    {"name": "b", "layer_type": "other", "kind": "gemm", "m": 64, "n": 512, "k": 384}]})


def test_default_is_the_search_and_never_worse_than_the_heuristics():
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    searched = simulate(inputs)
    assert all(op.lowered.tiling.heuristic in ("search", "plan")
               for op in searched.operators)
    for name in ("array_aligned", "min_offchip"):
        chosen = simulate(Inputs(inputs.platform, inputs.workload,
                                 Mapping(default=TilingSpec(heuristic=name))))
        for mine, theirs in zip(searched.operators, chosen.operators):
            assert mine.totals.cycles <= theirs.totals.cycles, mine.lowered.name


def test_cli_default_equals_simulate_with_an_empty_mapping(tmp_path):
    path = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--json", str(path)]) == 0
    recorded = json.loads(path.read_text())
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    direct = simulate(Inputs(inputs.platform, inputs.workload, Mapping()))
    assert recorded["workload"]["cycles"] == direct.total.cycles
    assert [op["tiling"] for op in recorded["operators"]] == \
        [json.loads(json.dumps(op.lowered.tiling.record())) for op in direct.operators]
    assert recorded["manifest"]["mapping_mode"].startswith("searched default")


def test_search_is_memoised_per_distinct_operator():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    searches = SearchCache()  # the caller's: a second run reuses it
    first = simulate(Inputs(platform, TWO_GEMMS, Mapping()), searches=searches)
    # The two operators differ only in name and layer_type: one search, one hit.
    assert searches.misses == 1 and searches.hits >= 1
    again = simulate(Inputs(platform, TWO_GEMMS, Mapping()), searches=searches)
    assert searches.misses == 1
    assert [op.lowered.tiling for op in first.operators] == \
        [op.lowered.tiling for op in again.operators]
    assert first.operators[0].lowered.tiling == first.operators[1].lowered.tiling
    # Without one, each run searches afresh (no state kept between calls): the same.
    alone = simulate(Inputs(platform, TWO_GEMMS, Mapping()))
    assert [op.lowered.tiling for op in alone.operators] == \
        [op.lowered.tiling for op in first.operators]
    assert alone.total.cycles == first.total.cycles


def test_a_search_cache_drops_the_least_recently_used_beyond_its_limit():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    a, b = TWO_GEMMS.operators[0], TWO_GEMMS.operators[0].model_copy(update={"k": 512})
    searches, spec = SearchCache(limit=1), TilingSpec()
    first = searches.searched_tiling(a, spec, platform)
    searches.searched_tiling(b, spec, platform)  # a dropped
    assert searches.searched_tiling(a, spec, platform) == first
    assert (searches.hits, searches.misses) == (0, 3)


def test_search_matches_the_mapper_best_on_a_small_operator():
    # With the whole grid reachable the bounded search finds the mapper's best cycles.
    inputs = load_inputs("tpu_v5e_like", "gemm_4096", None)
    small = Workload.model_validate({"name": "s", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 256, "n": 256, "k": 256}]})
    best = map_workload(Inputs(inputs.platform, small, Mapping()), workers=1)
    searched = simulate(Inputs(inputs.platform, small, Mapping()))
    assert searched.total.cycles == best.best_totals()[0]


def test_fields_a_plan_fixes_are_kept_and_the_rest_searched():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    plan = Mapping(operators={"a": TilingSpec(tm=32, depth=1)})
    result = simulate(Inputs(platform, TWO_GEMMS, plan))
    a, b = result.operators
    assert (a.lowered.tiling.tm, a.lowered.tiling.depth) == (32, 1)
    assert a.lowered.tiling.heuristic == "search"
    assert b.lowered.tiling.heuristic == "search"
    assert "plan default" in result.mapping_mode and "searched default" in \
        result.mapping_mode


def test_heuristic_flag_and_summary_say_which_mapping(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["run", "--workload", "tpu_v1_mlp_b200", "--heuristic", "array_aligned",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mapping: heuristic array_aligned" in out
    data = json.loads(path.read_text())
    assert data["manifest"]["mapping_mode"] == "heuristic array_aligned"
    assert {op["tiling"]["heuristic"] for op in data["operators"]} == {"array_aligned"}
    assert main(["run", "--workload", "tpu_v1_mlp_b200"]) == 0
    assert "mapping: searched default" in capsys.readouterr().out
    assert main(["run", "--heuristic", "nope"]) == 1
    assert "unknown heuristic 'nope'" in capsys.readouterr().err


def test_compare_uses_the_same_mapping_mode_for_every_platform(capsys):
    assert main(["compare", "--arch", "tpu_v1", "--arch", "tpu_v5e_like", "--workload",
                 "tpu_v1_mlp_b200"]) == 0
    assert "mapping (every platform): searched default" in capsys.readouterr().out


@pytest.mark.slow
def test_warm_resnet50_run_on_tpu_v5e_like_is_under_5_cpu_seconds():
    inputs = load_inputs("tpu_v5e_like", "resnet50_b1", None)
    _, seconds = cpu_seconds(lambda: simulate(inputs))
    assert seconds < 5.0  # CPU seconds: a loaded machine does not inflate them
