"""The compiled loop's finished and dropped requests as RequestRows
(simulator.serving.request_rows): RequestTimes read from its arrays equals RequestTimes
read from the SimPy loop's records, value and dtype, without building a record (its
columns read once); the records are built on the first read of one, once."""

from __future__ import annotations

import numpy as np
import pytest
from test_serving_compiled_loop import _arrivals, _cost, _serve, _spec

from simulator.serving import loop_state as k
from simulator.serving.metrics import RequestTimes
from simulator.serving.request_rows import RequestRows


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(11)
    n = 150
    outputs = rng.integers(2, 300, n)
    outputs[::10] = 1  # a request of one output token has no TPOT
    arrivals = _arrivals(rng.exponential(0.002, n), rng.integers(50, 400, n), outputs)
    spec = _spec(32, 256, 16, 0, 2)
    cost = _cost(4)
    return (_serve(spec, arrivals, cost, 40, compiled=False),
            _serve(spec, arrivals, cost, 40, compiled=True))


def _same(left: RequestTimes, right: RequestTimes) -> bool:
    names = ("latency_s", "ttft_s", "tpot_s", "tpot_index", "output_tokens")
    return all(getattr(left, n).dtype == getattr(right, n).dtype
               and np.array_equal(getattr(left, n), getattr(right, n)) for n in names)


@pytest.mark.parametrize("tokens", [True, False])
def test_times_from_rows_are_the_simpy_records_times_without_records(runs, tokens):
    reference, compiled = runs
    rows = compiled.finished
    assert isinstance(rows, RequestRows) and len(rows) == len(reference.finished)
    times = RequestTimes.of(rows, tokens=tokens)
    assert rows._records is None  # no record built
    assert _same(times, RequestTimes.of(reference.finished, tokens=tokens))
    again = rows.columns(tokens=tokens)  # read once, kept (a search reads them twice)
    assert again is rows.columns(tokens=tokens) and again is not rows.columns(
        tokens=not tokens)
    assert _same(RequestTimes.of(rows, tokens=tokens), times)
    if tokens:  # requests of one output token have no TPOT
        assert 0 < len(times.tpot_s) < len(times.latency_s)


def test_records_are_built_once_on_first_read(runs):
    reference, compiled = runs
    rows = compiled.finished
    first = rows[0]
    assert rows[0] is first and list(rows)[0] is first
    assert list(rows) == reference.finished
    assert compiled.finished + compiled.dropped == reference.finished + reference.dropped


def test_an_unset_time_reads_the_records_as_before():
    """A row whose first token is unset (NaN) gives the records' None, as a list does."""
    ri = np.zeros((2, k.REQUEST_INTS), dtype=np.int64)
    ri[:, k.R_OUTPUT] = (3, 1)
    rf = np.zeros((2, k.REQUEST_FLOATS))
    rf[:, k.Q_FINISH] = (2.0, 1.5)
    rf[:, k.Q_FIRST] = (1.0, np.nan)
    rows = RequestRows(np.array([1, 0]), ri, rf, np.array([0.5, 0.25]))
    assert rows.columns(tokens=True) is None
    assert rows.columns(tokens=False) is not None
    records = list(rows)
    assert records[0].id == 1 and records[0].first_token_s is None
    assert records[1].arrival_s == 0.5
    assert _same(RequestTimes.of(rows, tokens=False),
                 RequestTimes.of(records, tokens=False))
    for read in (rows, records):  # None - a float: the records path's error, both
        with pytest.raises(TypeError):
            RequestTimes.of(read, tokens=True)
