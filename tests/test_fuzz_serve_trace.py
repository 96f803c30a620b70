"""Fuzzing the serve trace reader (simulator.serving.arrival_trace) and the trace arrival
process behind it, 1,000 examples each: random bytes, and valid traces mutated (hostile
field values, any line ending, a byte-order mark, duplicated or dropped columns,
bytes spliced in or cut out). Every input either raises AccsimError or is accepted; an
accepted trace keeps the reader's bounds (times finite, >= 0, non-decreasing, distinct
ones at least MIN_GAP_S apart; token counts in [1, MAX_TOKENS]), and its arrivals,
scaled to a rate and tiled to a request count, stay sorted and within MAX_HORIZON_S.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simulator.errors import AccsimError
from simulator.serving.arrivals import arrivals
from simulator.serving.spec import MAX_HORIZON_S, MAX_TOKENS, ServeSpec
from simulator.serving.arrival_trace import MIN_GAP_S, load_trace

FUZZ = settings(max_examples=1000, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

COLUMN = st.sampled_from(["arrived_at", "arrival_s", "num_prefill_tokens",
                          "prompt_tokens", "num_decode_tokens", "output_tokens", "note",
                          "", "\ufeffarrived_at", "\x1b[2J"])
FIELD = st.one_of(
    st.sampled_from(["0", "0.5", "1", "16", "-1", "-0.0", "nan", "inf", "-inf", "1e300",
                     "5e-324", "1e-310", "2e9", "1e9", "0x10", "1_0", "1e3", "", " ",
                     str(2**70), str(MAX_TOKENS), str(MAX_TOKENS + 1), "7" * 100,
                     '"', '""', '"1,2"', "\x00", "\x1b[2J", "\u0661\u0662"]),
    st.floats(min_value=0, max_value=1e4).map(repr),
    st.integers(-5, 5000).map(str), st.text(max_size=8))
ENDING = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def traces(draw) -> bytes:
    """A trace's bytes: a header, rows of (mostly) plausible fields, then mutations."""
    header = draw(st.sampled_from([["arrived_at", "num_prefill_tokens",
                                    "num_decode_tokens"], ["arrival_s"]])) \
        if draw(st.booleans()) else draw(st.lists(COLUMN, max_size=5))
    times = sorted(draw(st.lists(st.floats(0, 1e3), min_size=0, max_size=12)))
    rows = []
    for at in times:
        row = [repr(at), str(draw(st.integers(1, 64))), str(draw(st.integers(1, 64)))]
        row = (row + ["x"] * len(header))[:len(header)]
        if row and draw(st.integers(0, 5)) == 0:  # a hostile field in the row
            row[draw(st.integers(0, len(row) - 1))] = draw(FIELD)
        rows.append(row)
    ending = draw(ENDING)
    text = ending.join(",".join(r) for r in [header] + rows) + \
        draw(st.sampled_from(["", ending, ending * 3]))
    if draw(st.booleans()):
        text = "\ufeff" + text
    data = text.encode("utf-8")
    for _ in range(draw(st.sampled_from([0, 0, 1, 3]))):  # splice bytes in or cut out
        at = draw(st.integers(0, len(data)))
        if draw(st.booleans()):
            data = data[:at] + draw(st.binary(max_size=6)) + data[at:]
        else:
            data = data[:at] + data[at + draw(st.integers(1, 4)):]
    return data


INPUTS = st.one_of(st.binary(max_size=300), traces())


def _check_accepted(trace, need_tokens: bool) -> None:
    times = trace.times_s
    assert len(times) >= 1 and np.all(np.isfinite(times))
    assert times[0] == 0 and times[-1] <= MAX_HORIZON_S
    gaps = np.diff(times)
    assert np.all((gaps == 0) | (gaps >= MIN_GAP_S))
    for tokens in (trace.prompt_tokens, trace.output_tokens):
        if need_tokens:
            assert tokens is not None and len(tokens) == len(times)
        if tokens is not None:
            assert np.all((tokens >= 1) & (tokens <= MAX_TOKENS))


@FUZZ
@given(data=INPUTS, need_tokens=st.booleans())
def test_trace_reader_raises_only_accsim_errors(data, need_tokens):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.csv"
        path.write_bytes(data)
        try:
            trace = load_trace(str(path), need_tokens=need_tokens)
        except AccsimError as exc:
            assert str(path) in exc.message()
            event("refused")
            return
    event("accepted")
    _check_accepted(trace, need_tokens)


@FUZZ
@given(data=traces(), rate=st.one_of(st.none(), st.sampled_from(
           [1e-9, 1e-3, 1.0, 37.5, 1e6, 1e9]), st.floats(1e-6, 1e9)),
       requests=st.one_of(st.none(), st.integers(1, 5000)),
       duration=st.one_of(st.none(), st.floats(1e-6, 1e4)))
def test_trace_arrivals_raise_only_accsim_errors(data, rate, requests, duration):
    spec = ServeSpec(arrival="trace", arrival_trace="t.csv", rate=rate, requests=requests,
                     duration_s=duration)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.csv"
        path.write_bytes(data)
        try:
            trace = load_trace(str(path), need_tokens=False)
            came = arrivals(spec, need_tokens=False, read=trace)
        except AccsimError:
            event("refused")
            return
    event("accepted")
    times = came.times_s
    assert 1 <= len(came) <= (requests or len(trace.times_s))
    assert np.all(np.isfinite(times)) and np.all(np.diff(times) >= 0)
    assert times[-1] <= MAX_HORIZON_S
    assert len(came.prompt_tokens) == len(came.output_tokens) == len(came)
