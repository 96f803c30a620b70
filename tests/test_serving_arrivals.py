"""Arrival processes and trace files, including the shipped splitwise_conv trace and
one clear error per kind of bad trace."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.errors import AccsimError
from simulator.serving.arrivals import arrivals
from simulator.serving.arrival_trace import load_trace, shipped_traces
from simulator.serving.spec import ServeSpec


def test_shipped_trace_is_usable_by_name_with_its_licence_beside_it():
    assert "splitwise_conv" in shipped_traces()
    trace = load_trace("splitwise_conv", need_tokens=True)
    assert len(trace.times_s) == 19_366
    assert trace.times_s[-1] == pytest.approx(3502, abs=1)  # SOURCE.md: over 3,502 s
    assert trace.prompt_tokens.mean() == pytest.approx(1155, abs=1)
    assert trace.output_tokens.mean() == pytest.approx(211, abs=1)
    from pathlib import Path
    folder = Path(trace.source.path).parent
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "splitwise_conv.csv" in (folder / "SOURCE.md").read_text()


def test_trace_scaled_to_a_rate_and_repeated_to_the_requests_asked_for():
    spec = ServeSpec(model="m", arrival="trace", arrival_trace="splitwise_conv",
                     rate=20.0, requests=2 * 19_366)
    came = arrivals(spec, need_tokens=True)
    assert len(came) == 2 * 19_366
    assert np.all(np.diff(came.times_s) >= 0)
    assert (len(came) - 1) / came.times_s[-1] == pytest.approx(20.0, rel=1e-9)
    assert came.prompt_tokens[19_366] == came.prompt_tokens[0]


@pytest.mark.parametrize("process, cv", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 2.0)])
def test_renewal_arrivals_have_the_rate_and_cv_asked_for(process, cv):
    spec = ServeSpec(arrival=process, rate=250.0, cv=cv, requests=100_000, seed=9)
    gaps = np.diff(arrivals(spec, need_tokens=False).times_s)
    assert 1 / gaps.mean() == pytest.approx(250.0, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.03)


def test_duration_stops_arrivals():
    spec = ServeSpec(rate=100.0, duration_s=10.0, seed=2)
    came = arrivals(spec, need_tokens=False)
    assert came.times_s[-1] <= 10.0 and len(came) == pytest.approx(1000, rel=0.1)


def test_same_seed_same_arrivals_other_seed_other():
    a, b, c = (arrivals(ServeSpec(rate=5.0, requests=100, seed=s), need_tokens=False)
               for s in (1, 1, 2))
    assert a.times_s.tolist() == b.times_s.tolist() != c.times_s.tolist()


@pytest.mark.parametrize("text, need_tokens, fragments", [
    ("time,prompt\n0,1\n", False, ["missing column", "arrived_at", "arrival"]),
    ("arrival_s,prompt_tokens\n0,3\n", True, ["missing column", "output"]),
    ("arrival_s\n0\n2\n1\n", False, ["must not decrease", "line 4"]),
    ("arrival_s\n-1\n", False, ["finite and >= 0", "line 2"]),
    ("arrival_s\nnan\n", False, ["finite and >= 0"]),
    ("arrival_s\nsoon\n", False, ["not a number", "line 2"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,0,3\n", True, [">= 1", "prompt_tokens"]),
    ("arrival_s\n", False, ["no requests"]),
    ("", False, ["empty trace"]),
])
def test_bad_traces_give_one_clear_error(tmp_path, text, need_tokens, fragments):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(AccsimError) as caught:
        load_trace(str(path), need_tokens=need_tokens)
    message = caught.value.message()
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_unknown_trace_name_lists_the_shipped_ones():
    with pytest.raises(AccsimError, match="shipped: splitwise_conv"):
        load_trace("no_such_trace", need_tokens=False)
