"""Property: on small random layers and arrays, accsim's validate mode equals SCALE-Sim's
own compute modules (demand rows D, ifmap and filter SRAM read counts), every dataflow,
conv and GEMM rows.

Needs SCALE-Sim, which is not in accsim's own test environment (it needs numpy<2.4):
skipped there. Run it from the validate extra's environment:

    bash experiments/scalesim_env.sh
    .venv-scalesim/bin/python -m pytest -p no:cacheprovider tests/test_scalesim_property.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("scalesim.compute.systolic_compute_os")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from simulator.frontends.scalesim import (load_config, scalesim_rows, validate_mapping,  # noqa: E402
                                validate_platform)
from simulator.frontends.scalesim.parse import parse_topology  # noqa: E402
from simulator.simulate import Inputs, simulate  # noqa: E402

ROOT = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location(
    "validate_scalesim", ROOT / "experiments" / "validate_scalesim.py")
experiment = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(experiment)
BASE, _, _ = load_config(str(ROOT / "tests" / "data" / "scalesim" / "scale.cfg"))


@st.composite
def conv_rows(draw):
    h, w = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    fh, fw = draw(st.integers(1, h)), draw(st.integers(1, w))
    return [draw(st.sampled_from(["L", "LDP"])), h, w, fh, fw, draw(st.integers(1, 4)),
            draw(st.integers(1, 20)), draw(st.integers(1, 4))]


gemm_rows = st.tuples(st.just("G"), st.integers(1, 70), st.integers(1, 70),
                      st.integers(1, 70)).map(list)


@settings(max_examples=60, deadline=None)
@given(row=st.one_of(conv_rows(), gemm_rows), rows=st.integers(1, 12),
       cols=st.integers(1, 12), dataflow=st.sampled_from(["os", "ws", "is"]))
def test_validate_mode_equals_scalesim_compute_module(tmp_path_factory, row, rows, cols,
                                                      dataflow):
    gemm = len(row) == 4
    header = "Layer, M, N, K," if gemm else (
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,")
    text = f"{header}\n{','.join(map(str, row))},\n"
    path = tmp_path_factory.mktemp("topo") / "t.csv"
    path.write_text(text)
    parsed = parse_topology(text, "gemm" if gemm else "conv", file=str(path))
    workload = parsed.workload("t")
    platform = experiment.with_array(BASE, rows, cols, dataflow)
    vp = validate_platform(platform, workload)
    (ours,) = scalesim_rows(simulate(Inputs(vp, workload,
                                            validate_mapping(workload, vp, dataflow))))
    topo = experiment.scalesim_topology(path, gemm)
    config = experiment.scalesim_config(rows, cols, dataflow)
    for layer_id in range(topo.get_num_layers()):  # a DP row: one layer per channel
        theirs = experiment.compute_module(config, topo, layer_id, unmodified=True)
        assert ours["compute_cycles"] == theirs["D"]
        assert ours["ifmap_sram_reads"] == theirs["ifmap_reads"]
        assert ours["filter_sram_reads"] == theirs["filter_reads"]
        shaped = experiment.compute_module(config, topo, layer_id)
        assert {k: v for k, v in shaped.items() if k != "seconds"} == \
            {k: v for k, v in theirs.items() if k != "seconds"}
