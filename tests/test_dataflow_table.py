"""The dataflow table (simulator.model.dataflow) against DESIGN.md section 3's wording:
(Sr, Sc, T) = (m, n, k) for os, (k, n, m) for ws, (k, m, n) for is; the stationary
operand is the one the streamed dim does not index; SCALE-Sim's fill; SCALE-Sim's
per-fold SRAM reads."""

import numpy as np
import pytest

from simulator.model import dataflow as df

DESIGN = {"os": ("m", "n", "k", "C", 1), "ws": ("k", "n", "m", "B", 2),
          "is": ("k", "m", "n", "A", 2)}


@pytest.mark.parametrize("name", ["os", "ws", "is"])
def test_fold_shape_is_the_design_table(name):
    rows, cols, streamed, stationary, fill = DESIGN[name]
    sizes = {"m": 3, "n": 5, "k": 7}
    code = df.DATAFLOW_CODES[name]
    assert df.fold_shape(3, 5, 7, code) == (sizes[rows], sizes[cols], sizes[streamed])
    assert df.fold_dims(code) == tuple("mnk".index(d) for d in (rows, cols, streamed))
    assert "ABC"[df.STATIONARY[code]] == stationary
    assert df.fill_rows(code) == fill


@pytest.mark.parametrize("name", ["os", "ws", "is"])
def test_the_stationary_operand_is_free_of_the_streamed_dim(name):
    code = df.DATAFLOW_CODES[name]
    assert df.free_dim(int(df.STATIONARY[code])) == df.TIME_DIM[code]


def test_sram_reads_follow_scalesims_counting():
    """os: A per column fold, B per row fold; ws: A per column fold, B once; is: A once,
    B per column fold (the counts lowering.steps has always kept)."""
    expected = {"os": (df.PER_COL_FOLD, df.PER_ROW_FOLD),
                "ws": (df.PER_COL_FOLD, df.ONCE), "is": (df.ONCE, df.PER_COL_FOLD)}
    for name, (a, b) in expected.items():
        code = df.DATAFLOW_CODES[name]
        assert (df.A_READS[code], df.B_READS[code]) == (a, b)
    assert [df.read_multiplier(r, 3, 5) for r in (df.ONCE, df.PER_ROW_FOLD,
                                                  df.PER_COL_FOLD)] == [1, 3, 5]


def test_stationary_keys_and_elements():
    mi, ni, ki, nn, nk = 2, 3, 4, 10, 20
    keys = {"os": mi * nn + ni, "ws": ki * nn + ni, "is": mi * nk + ki}
    elements = {"os": 0, "ws": 7 * 5, "is": 3 * 7}
    for name, code in df.DATAFLOW_CODES.items():
        assert df.stationary_key(code, mi, ni, ki, nn, nk) == keys[name]
        assert df.stationary_input_elements(3, 5, 7, code) == elements[name]
        sizes = np.array([3, 6])
        expected = [0, 0] if name == "os" else [9, 36]
        assert list(df.stationary_input_elements(sizes, sizes, sizes, code)) == expected




def test_platform_time_base():
    """cycles <-> seconds has one home: Platform.clock_hz, seconds, cycles_per_us."""
    from platforms import make_platform
    platform = make_platform(clock_ghz=0.7)
    assert platform.clock_hz == 0.7e9
    assert platform.seconds(1_400_000) == 1_400_000 / (0.7 * 1e9)
    assert platform.cycles_per_us == 700.0
    assert list(platform.seconds(np.array([0, 700]))) == [0.0, 700 / 0.7e9]
