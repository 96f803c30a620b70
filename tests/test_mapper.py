"""The mapper (the mapping issue): its closed forms equal what the lowering emits, its
lower bounds never exceed a simulated candidate, the pruned search finds the exhaustive
search's best on small operators of every kind and dataflow for every objective, the
result does not depend on the worker count, the best plan reproduces its cycles, and the
mapping sheet. Also the compiled conv windows against a naive count."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

from platforms import make_platform
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.lowering import lower_compute
from simulator.lowering.tile_table import TileTables
from simulator.mapping.windows import window_elements, window_maxima, window_table
from simulator.search import operator as search_operator_module
from simulator.search.bounds import candidate_bounds
from simulator.search.operator import OBJECTIVES, Evaluation, evaluate as _evaluate
from simulator.search.workload_search import (BUILTIN_HEURISTICS, MapResult, _grid_size, map_workload, read_map_json)
from simulator.mapping.footprint import offchip_by_order
from simulator.model.loop_nest import array_busy_cycles
from simulator.mapping.plan import LOOP_ORDERS, Mapping, Tiling, TilingSpec
from simulator.program.tile_program import memory_params
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Conv2d, Elementwise, Gemm, Workload, is_compute

# A 4x4 array with small buffers, so the grid holds tilings that do not fit, tilings
# that spill, and every dataflow; a short latency, so the bound is not trivially loose.
SMALL = make_platform(systolic_array={"rows": 4, "cols": 4},
                      buffers={"ifmap_bytes": 256, "weight_bytes": 192,
                               "output_bytes": 512},
                      offchip={"latency_cycles": 6})
SMALL_OPS = Workload.model_validate({"name": "small", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 12, "n": 6, "k": 10},
    {"name": "c", "layer_type": "conv", "kind": "conv2d", "h": 5, "w": 5, "cin": 2,
     "cout": 6, "kh": 3, "kw": 3, "padding": 1},
    {"name": "b", "layer_type": "attn", "kind": "gemm", "batch": 2, "m": 8, "n": 9,
     "k": 4},
    {"name": "gelu", "layer_type": "act", "kind": "elementwise", "elements": 16,
     "op": "gelu"},
    {"name": "s", "layer_type": "sm", "kind": "softmax", "rows": 24, "cols": 6},
    {"name": "p", "layer_type": "pool", "kind": "pool", "h": 5, "w": 5, "channels": 2,
     "kh": 3, "kw": 3, "stride": 2, "padding": 1},
]})


def naive_window(conv: Conv2d, m0: int, m1: int, k0: int, k1: int) -> int:
    """Distinct input elements as a set: each channel's k positions widened to their
    bounding rectangle of kernel rows x cols (the rule windows.py documents)."""
    per_channel = conv.kh * conv.kw
    touched = set()
    for c in range(k0 // per_channel, (k1 - 1) // per_channel + 1):
        p0 = max(k0, c * per_channel) - c * per_channel
        p1 = min(k1, (c + 1) * per_channel) - 1 - c * per_channel
        r0, r1 = p0 // conv.kw, p1 // conv.kw
        s0, s1 = (p0 % conv.kw, p1 % conv.kw) if r0 == r1 else (0, conv.kw - 1)
        for m in range(m0, m1):
            image, rest = divmod(m, conv.ho * conv.wo)
            ho, wo = divmod(rest, conv.wo)
            for r in range(r0, r1 + 1):
                for s in range(s0, s1 + 1):
                    row = ho * conv.stride + r * conv.dilation - conv.padding
                    col = wo * conv.stride + s * conv.dilation - conv.padding
                    if 0 <= row < conv.h and 0 <= col < conv.w:
                        touched.add((image, row, col, c))
    return len(touched)


def test_compiled_windows_match_a_naive_count():
    rng = random.Random(7)
    checked = 0
    while checked < 60:
        kh, kw, dil = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 2)
        conv = Conv2d(name="c", layer_type="c", kind="conv2d", batch=rng.randint(1, 2),
                      h=rng.randint(kh * dil, 9), w=rng.randint(kw * dil, 9),
                      cin=rng.randint(1, 3), cout=2, kh=kh, kw=kw,
                      stride=rng.randint(1, 3), padding=rng.randint(0, 2), dilation=dil)
        g = conv.gemm()
        tm, tk = rng.randint(1, g.m), rng.randint(1, g.k)
        table = window_table(conv, tm, tk)
        for i, m0 in enumerate(range(0, g.m, tm)):
            for j, k0 in enumerate(range(0, g.k, tk)):
                expected = naive_window(conv, m0, min(g.m, m0 + tm), k0, min(g.k, k0 + tk))
                assert table[i, j] == expected
        assert window_elements(conv, 0, g.m, 0, g.k) == naive_window(conv, 0, g.m, 0, g.k)
        checked += 1


@pytest.mark.parametrize("count, fold_model", [(1, "scalesim"), (1, "pipelined"),
                                               (3, "scalesim"), (4, "pipelined")])
def test_closed_forms_equal_the_lowering(count, fold_model):
    # Busy array cycles exactly, for both fold models and several arrays; the
    # min_offchip traffic model exactly for GEMMs.
    rng = random.Random(3 + count)
    platform = make_platform(buffers={"ifmap_bytes": 400, "weight_bytes": 400,
                                      "output_bytes": 1600},
                             systolic_array={"count": count, "fold_model": fold_model})
    checked = 0
    while checked < 300:
        m, n, k = rng.randint(1, 30), rng.randint(1, 30), rng.randint(1, 30)
        op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k)
        tm, tn, tk = rng.randint(1, m), rng.randint(1, n), rng.randint(1, k)
        order = rng.randrange(len(LOOP_ORDERS))
        dataflow = rng.choice(["os", "ws", "is"])
        try:
            lowered = lower_compute(op, Tiling(tm, tn, tk, LOOP_ORDERS[order], dataflow, 1),
                                    platform)
        except Exception:
            continue
        assert int(array_busy_cycles(m, n, k, tm, tn, tk, order=order, dataflow=dataflow,
                                     rows=8, cols=8, count=count,
                                     fold_model=fold_model)) == \
            int(lowered.program.compute_cycles.sum())
        assert int(offchip_by_order(op, platform, tm, tn, tk)[order]) == \
            lowered.counters.offchip_bytes
        checked += 1


def _all_evaluations(op, following=None, fuse=None, platform=SMALL):
    """Every fitting grid candidate of an operator, simulated, its bounds checked."""
    memory = memory_params(platform)
    tilings, cycles_lb, energy_lb = candidate_bounds(op, platform, fuse=fuse,
                                                     following=following)
    tables = TileTables(op, platform)   # shared by its tilings, as in the search
    found = []
    for tiling, c_lb, e_lb in zip(tilings, cycles_lb, energy_lb):
        evaluation = _evaluate(op, tiling, platform, memory, following, tables=tables)
        assert c_lb <= evaluation.cycles, (tiling, c_lb, evaluation.cycles)
        assert e_lb <= evaluation.energy_pj, (tiling, e_lb, evaluation.energy_pj)
        found.append(evaluation)
    return found


def test_pruned_search_finds_the_exhaustive_best_on_small_operators():
    # Every fitting candidate is simulated once (checking its bounds on the way); for
    # each objective the mapper's pruned best must be the minimum of (objective, cycles,
    # energy, canonical order) over them and the heuristics' tilings.
    # Operator at a time: the exhaustive reference evaluates each operator alone.
    inputs = Inputs(SMALL, SMALL_OPS, Mapping(fusion="none"))
    results = {objective: map_workload(inputs, objective=objective, workers=1)
               for objective in OBJECTIVES}
    for op in SMALL_OPS.operators:
        everything = _all_evaluations(op)
        if is_compute(op):
            assert {e.tiling.dataflow for e in everything} == {"os", "ws", "is"}
        for objective, result in results.items():
            searched = result.operator(op.name)
            heuristics = [h for h in searched.heuristics.values()
                          if isinstance(h, Evaluation)]
            candidates = everything + [Evaluation(Tiling(**{**h.tiling.__dict__,
                                                            "heuristic": "mapper"}),
                                                  h.cycles, h.energy_pj)
                                       for h in heuristics]
            best = min(candidates, key=lambda e: e.key(objective))
            assert searched.best == best, (objective, op.name)
            assert searched.stats.simulated < len(everything)


def test_bounds_hold_on_chip_and_with_a_fused_epilogue():
    # Activations in an on-chip memory move no off-chip bytes; a fused GELU adds
    # vector cycles after each finished C tile. The search still finds the best.
    onchip = SMALL.model_copy(update={"activation_memory_bytes": 100_000})
    for op in SMALL_OPS.operators[2:]:
        _all_evaluations(op, platform=onchip)
    gemm = Gemm(name="up", layer_type="mlp", kind="gemm", m=8, n=6, k=8)
    gelu = Elementwise(name="act", layer_type="act", kind="elementwise", elements=48,
                       op="gelu")
    everything = _all_evaluations(gemm, following=gelu, fuse="act")
    inputs = Inputs(SMALL, Workload(name="fused", operators=[gemm, gelu]),
                    Mapping(operators={"up": TilingSpec(fuse="act")}))
    result = map_workload(inputs, workers=1)
    (searched,) = result.operators
    heuristics = [Evaluation(Tiling(**{**h.tiling.__dict__, "heuristic": "mapper"}),
                             h.cycles, h.energy_pj) for h in searched.heuristics.values()]
    assert searched.best == min(everything + heuristics, key=lambda e: e.key("cycles"))
    assert searched.best.tiling.fuse == "act"


def test_bounds_hold_with_pipelined_folds_several_arrays_and_overhead():
    # The cycle bound counts the dispatch overhead and the busy cycles of either fold
    # model on several arrays (the closed form), so it never exceeds a simulated
    # candidate; the pruned search still finds the exhaustive best.
    platform = make_platform(systolic_array={"rows": 4, "cols": 4, "count": 3,
                                             "fold_model": "pipelined"},
                             buffers={"ifmap_bytes": 256, "weight_bytes": 192,
                                      "output_bytes": 512},
                             offchip={"latency_cycles": 6, "efficiency": 0.8},
                             runtime={"op_overhead_cycles": 40})
    for op in (SMALL_OPS.operators[0], SMALL_OPS.operators[2]):   # the two GEMMs
        everything = _all_evaluations(op, platform=platform)
        result = map_workload(Inputs(platform, Workload(name="one", operators=[op]),
                                     Mapping()), workers=1)
        (searched,) = result.operators
        assert searched.best.cycles == min(e.cycles for e in everything + [
            h for h in searched.heuristics.values() if isinstance(h, Evaluation)])


def test_exhaustive_flag_agrees_and_prunes_nothing():
    inputs = Inputs(SMALL, Workload(name="one", operators=[SMALL_OPS.operators[2]]),
                    Mapping())
    pruned = map_workload(inputs, workers=1).operators[0]
    exhaustive = map_workload(inputs, workers=1, exhaustive=True).operators[0]
    assert pruned.best == exhaustive.best
    assert exhaustive.stats.bound_pruned == 0
    assert exhaustive.stats.simulated > 10 * pruned.stats.simulated
    assert pruned.stats.candidates == exhaustive.stats.candidates >= 1000


def test_walk_window_changes_nothing_and_counts_partition_the_candidates(monkeypatch):
    # The walk decides a window of candidates at a time between replays: a window of one
    # candidate (a Python step each) must give the same best, heuristics and counts, and
    # every enumerated candidate is counted once (unfit, duplicate, pruned, simulated or
    # invalid), a heuristic's failed tiling aside.
    # (Exhaustive: the vector operators alone, whose grids are short.)
    vector = Workload(name="vector", operators=SMALL_OPS.operators[3:5])
    for objective, exhaustive, workload in [
            *((objective, False, SMALL_OPS) for objective in OBJECTIVES),
            ("cycles", True, vector)]:
        inputs = Inputs(SMALL, workload, Mapping(fusion="none"))
        wide = map_workload(inputs, objective=objective, workers=1,
                            exhaustive=exhaustive)
        with monkeypatch.context() as patch:
            patch.setattr(search_operator_module, "WALK_WINDOW", 1)
            narrow = map_workload(inputs, objective=objective, workers=1,
                                  exhaustive=exhaustive)
        assert narrow.operators == wide.operators, (objective, exhaustive)
        for found in wide.operators:
            s = found.stats
            failed = sum(not isinstance(h, Evaluation)
                         for h in found.heuristics.values())
            assert s.candidates - failed == (s.unfit + s.duplicates + s.bound_pruned
                                             + s.simulated + s.invalid), found.name


def test_result_does_not_depend_on_worker_count():
    inputs = Inputs(SMALL, SMALL_OPS, Mapping())
    one = map_workload(inputs, workers=1, objective="edp")
    two = map_workload(inputs, workers=2, objective="edp")
    assert json.dumps(one.as_dict()) == json.dumps(two.as_dict())


def test_gaps_are_never_negative_and_identical_shapes_are_searched_once():
    # Operator at a time, so the residual adds are searched as operators of their own.
    inputs = load_inputs("whatif/tpu_v5e_all_dataflows", "bert_base_s128", None,
                         fusion="none")
    result = map_workload(inputs, workers=1)
    assert result.heuristics == list(BUILTIN_HEURISTICS)
    for op in result.operators:
        for name in result.heuristics:
            assert op.gap(name, "cycles") >= 0
    adds = [op for op in result.operators if op.layer_type == "residual_add"]
    assert adds[0].same_as is None and adds[1].same_as == adds[0].name
    assert adds[1].best == adds[0].best
    summary = {row["heuristic"]: row for row in result.summary()}
    best_cycles, _ = result.best_totals()
    aligned = summary["array_aligned"]
    assert aligned["cycles"] >= best_cycles
    assert aligned["cycles_gap_percent"] == pytest.approx(
        100 * (aligned["cycles"] / best_cycles - 1))


def test_best_plan_reproduces_the_best_cycles(tmp_path, capsys):
    out, plan = tmp_path / "map.json", tmp_path / "best.yaml"
    assert main(["map", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--mapping", "bert_base_fuse_gelu", "--workers", "1", "--json", str(out),
                 "--write-plan", str(plan)]) == 0
    printed = capsys.readouterr().out
    assert "Heuristics against the mapper's best by cycles" in printed
    assert "candidates/s" in printed
    result = read_map_json(str(out))
    assert result.operator("layer0_mlp_gelu") is None          # fused away
    assert result.operator("layer0_mlp_up").best.tiling.fuse == "layer0_mlp_gelu"
    run = simulate(load_inputs("tpu_v5e_like", "bert_base_s128", str(plan)))
    assert [op.totals.cycles for op in run.operators] == \
        [op.best.cycles for op in result.operators]
    assert MapResult.from_dict(json.loads(out.read_text())).as_dict() == result.as_dict()


def test_every_resnet50_operator_has_a_thousand_compute_candidates():
    inputs = load_inputs("tpu_v5e_like", "resnet50_b1", None)
    for op in inputs.workload.operators:
        if is_compute(op):
            assert _grid_size(op, inputs.platform) >= 1000, op.name


def test_unknown_objective_and_heuristic_are_errors(capsys):
    assert main(["map", "--workload", "bert_base_s128", "--heuristic", "nope"]) == 1
    assert "unknown heuristic 'nope' (known: array_aligned" in capsys.readouterr().err
    with pytest.raises(Exception, match="unknown objective"):
        map_workload(Inputs(SMALL, SMALL_OPS, Mapping()), objective="speed")


def test_sheet_markdown_with_a_computed_best(tmp_path, capsys):
    sheet = tmp_path / "sheet.md"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--mapping", "bert_base_fuse_gelu", "--sheet", str(sheet),
                 "--sheet-search", "--fusion", "none"]) == 0
    text = sheet.read_text()
    assert "computed for this run by the mapper" in text
    rows = [line for line in text.splitlines() if line.startswith("| layer0_")]
    assert len(rows) == 11                      # 12 operators, the GELU fused
    up = next(row for row in rows if row.startswith("| layer0_mlp_up "))
    cells = [cell.strip() for cell in up.strip("|").split("|")]
    assert cells[5] in ("normal", "transposed")  # orientation
    assert cells[10] == "layer0_mlp_gelu"        # fused
    assert float(cells[14]) >= 0                 # gap %
    assert "of 16.0 MiB" in cells[7]             # A occupancy
    assert ">=" in cells[17] or cells[16] == "balanced"   # evidence


def test_sheet_csv_from_a_mapper_file_and_its_checks(tmp_path, capsys):
    best, plan = tmp_path / "map.json", tmp_path / "best.yaml"
    assert main(["map", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--workers", "1", "--quiet", "--json", str(best), "--write-plan",
                 str(plan), "--fusion", "none"]) == 0   # the plan carries the mode
    sheet = tmp_path / "sheet.csv"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--mapping", str(plan), "--sheet", str(sheet), "--sheet-best",
                 str(best)]) == 0
    rows = list(csv.DictReader(sheet.open()))
    assert len(rows) == 12
    assert all(float(row["gap_percent"]) == 0.0 for row in rows)   # the best plan
    assert all(f"read from `{best}`" in row["gap_basis"] for row in rows)
    qk = next(row for row in rows if row["operator"] == "layer0_attn_qk")
    assert int(qk["A_resident_tiles"]) >= 1 and float(qk["B_occupancy"]) > 0
    assert qk["bottleneck"] and qk["evidence"]
    softmax = next(row for row in rows if row["operator"] == "layer0_attn_softmax")
    assert softmax["rows_per_tile"] and softmax["B_tile_bytes"] == ""
    capsys.readouterr()
    # Another platform's mapper result is refused; a sheet is .md or .csv.
    assert main(["run", "--arch", "tpu_v1", "--workload", "bert_base_s128", "--sheet",
                 str(sheet), "--sheet-best", str(best)]) == 1
    assert "mapper result is for bert_base_s128 on tpu_v5e_like" in capsys.readouterr().err
    assert main(["run", "--workload", "bert_base_s128", "--sheet",
                 str(tmp_path / "s.txt")]) == 1
    captured = capsys.readouterr()
    assert "s.txt: --sheet: must end in .md or .csv" in captured.err
    assert captured.out == ""  # refused before the run


def test_sheet_without_a_best_says_how_to_get_one(tmp_path):
    sheet = tmp_path / "sheet.md"
    assert main(["run", "--workload", "bert_base_s128", "--sheet", str(sheet)]) == 0
    text = sheet.read_text()
    assert "not computed: pass `--sheet-best MAP.json`" in text
    assert np.all([line.count("|") == 19 for line in text.splitlines()
                   if line.startswith("| layer0_")])


def test_window_maxima_equal_the_tables_largest_tile():
    conv = Conv2d(name="c", layer_type="c", kind="conv2d", batch=2, h=9, w=7, cin=3,
                  cout=4, kh=3, kw=2, stride=2, padding=1, dilation=1)
    g = conv.gemm()
    for tm in (1, 5, 16, g.m):
        tks = list(range(1, g.k + 1))
        assert list(window_maxima(conv, tm, tks)) == \
            [int(window_table(conv, tm, tk).max()) for tk in tks]


@pytest.mark.slow
def test_resnet50_every_operator_searched_with_a_thousand_candidates_on_two_workers():
    # The search target: at least 1,000 candidates for every operator, every
    # operator searched (identical shapes not shared). Its speed (under 60 s on 2
    # cores) is a wall-clock figure: experiments/bench_mapper.py prints it.
    inputs = load_inputs("tpu_v5e_like", "resnet50_b1", None)
    result = map_workload(inputs, workers=2, reuse_shapes=False)
    assert all(op.same_as is None and op.stats.candidates >= 1000
               for op in result.operators)
    # os_k_inner has no tiling on a ws-only chip; the heuristics that map every operator
    # all stay above the search's best.
    covering = [row["cycles"] for row in result.summary() if row["cycles"] is not None]
    assert len(covering) >= 2
    assert result.best_totals()[0] < min(covering)
