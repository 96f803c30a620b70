"""Every figure is finite or the input is refused (issue 47, acceptance 2): platforms
drawn from each numeric field's range, the last wave's fields included (the host link,
the invocation overhead, the cost table, provenance ranges), anywhere from a subnormal
to the largest double, are run through `accsim run`, `serve`, `plan-deployment` and
`sensitivity`. Each either exits 0 with every number it prints or writes finite (and
>= 0 where it is a count, a time, an energy or a rate), or exits 1 with one error line
and no traceback. Few examples and tiny workloads keep it to a minute or so."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llama import TINY_LLAMA
from timed_cli import cpu_bound

from simulator.calibrate.sensitivity import with_values
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import validate_model

SECONDS = 120  # one example's CPU bound: a hang is a failure, not a stuck suite
WORKLOAD = {"name": "w", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 8, "n": 16, "k": 8},
    {"name": "s", "layer_type": "softmax", "kind": "softmax", "rows": 8, "cols": 16}]}
SERVE = ["--model", "config.json", "--prompt-tokens", "16", "--output-tokens", "4",
         "--requests", "8"]
# Fields a figure may hold below 0 (a signed error, an elasticity).
SIGNED = ("total_time_error", "elasticity", "time_error")
SIGNED_PRINTED = re.compile(r"summed time -?[\d.]+%")  # serve's bucketing error
NEGATIVE_NUMBER = re.compile(r"(?<![\w.\-])-\d")
NOT_FINITE = re.compile(r"\b(?:inf|nan|infinity)\b", re.IGNORECASE)


def base_platform() -> dict:
    """The v5e-like platform with the last wave's optional fields set: a host link,
    an invocation overhead and a cost table (each marked assumed, with a range)."""
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    raw = with_values(platform, {})
    raw["name"] = "drawn"
    raw["runtime"] = {**raw.get("runtime", {}), "invocation_overhead_us": 5.0,
                      "host_link": {"bandwidth_gbps": 32.0, "latency_us": 2.0}}
    raw["cost"] = {"price_per_chip_hour": 1.2}
    raw["provenance"]["cost.price_per_chip_hour"] = {"kind": "assumed",
                                                     "range": [0.5, 2.0]}
    raw["provenance"]["runtime.host_link.bandwidth_gbps"] = {"kind": "assumed",
                                                             "range": [8.0, 64.0]}
    return raw


BASE = base_platform()
FIELDS = sorted(validate_model(BASE, Platform, file="base").numeric_fields())
# The serving verbs simulate every iteration shape: an array or buffer a few elements
# wide makes that minutes of valid work, so they draw the other fields (the run and
# sensitivity examples draw these too).
GEOMETRY = ("systolic_array.rows", "systolic_array.cols", "systolic_array.count",
            "buffers.", "vector_unit.lanes", "offchip.capacity_bytes")
SERVING_FIELDS = [field for field in FIELDS if not field.startswith(GEOMETRY)]


def numbers(scale: float, whole: bool):
    """A field's values: its own, small multiples of it, and the edges of a double
    (or of int64) that no platform means but a file may hold."""
    if whole:
        near = st.integers(max(0, int(scale) // 4), int(scale) * 4 + 1)
        edges = st.sampled_from([0, 1, 2, 2**31, 2**48, 2**62, 2**63 - 1])
    else:
        near = st.floats(scale * 0.1, scale * 10 + 1e-3, allow_nan=False)
        edges = st.sampled_from([0.0, 5e-324, 2.2e-308, 1e-300, 1e-12, 1e12, 1e300,
                                 1.7e308])
    return st.one_of(near, near, edges)  # two draws in three near the field's value


@st.composite
def platforms(draw, fields: list[str]) -> dict:
    """The base with 1 to 3 numeric fields drawn, and sometimes one assumed range
    drawn too (its ends anywhere, ordered)."""
    raw = json.loads(json.dumps(BASE))
    values = validate_model(BASE, Platform, file="base").numeric_fields()
    chosen = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True))
    changed = {field: draw(numbers(float(values[field]), isinstance(values[field], int)))
               for field in chosen}
    raw = with_values(validate_model(raw, Platform, file="base"), changed) | {
        "name": "drawn"}
    for field, value in changed.items():  # an assumed range keeps holding the value
        entry = raw["provenance"].get(field)
        if entry and "range" in entry:
            entry["range"] = [min(entry["range"][0], value), max(entry["range"][1], value)]
    if draw(st.booleans()):
        field = draw(st.sampled_from(sorted(raw["provenance"])))
        if raw["provenance"][field].get("kind") == "assumed":
            whole = isinstance(values.get(field), int)
            ends = sorted(draw(st.lists(numbers(float(values.get(field) or 1), whole),
                                        min_size=2, max_size=2)))
            raw["provenance"][field]["range"] = ends
    return raw


def leaves(data, path: str = ""):
    """(path, number) of every number in a JSON document."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, f"{path}.{key}")
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from leaves(value, f"{path}[{index}]")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield path, data


def check_figures(printed: str, written: Path | None, *, signed_print: bool = False):
    assert not NOT_FINITE.search(printed), printed[-2000:]
    printed = SIGNED_PRINTED.sub("", printed)
    if not signed_print:
        assert not NEGATIVE_NUMBER.search(printed), printed[-2000:]
    if written is None or not written.exists():
        return
    for path, value in leaves(json.loads(written.read_text(),
                                         parse_constant=lambda c: math.nan)):
        assert math.isfinite(value), f"{path} = {value}"
        assert abs(value) < 2**63 or isinstance(value, float), f"{path} = {value}"
        if not path.rsplit(".", 1)[-1].startswith(SIGNED):
            assert value >= 0, f"{path} = {value}"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`accsim ARGV` in-process under SECONDS of CPU (timed_cli.cpu_bound)."""
    out, err = io.StringIO(), io.StringIO()
    with cpu_bound(SECONDS, f"no answer to {argv}"), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        path = Path(name)
        (path / "config.json").write_text(json.dumps(TINY_LLAMA))
        (path / "w.yaml").write_text(yaml.safe_dump(WORKLOAD, sort_keys=False))
        yield path


VERBS = {
    "run": lambda: ["run", "--arch", "p.yaml", "--workload", "w.yaml", "--json", "o.json"],
    "serve": lambda: ["serve", "--arch", "p.yaml", *SERVE, "--rate", "50", "--json",
                      "o.json"],
    "plan-deployment": lambda: ["plan-deployment", "--arch", "p.yaml", *SERVE, "--sla",
                                "ttft_p99_ms=50", "--budget-chips", "1", "--max-batch",
                                "4", "--objective", "cost_per_mtok", "--scheduler",
                                "serial", "--json", "o.json"],
    "sensitivity": lambda: ["sensitivity", "--arch", "p.yaml", "--workload", "w.yaml",
                            "--metric", "edp_js", "--json", "o.json"],
}


@pytest.mark.parametrize("verb", list(VERBS))
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_every_figure_is_finite_or_the_platform_refused(verb, data, folder):
    raw = data.draw(platforms(FIELDS if verb in ("run", "sensitivity")
                              else SERVING_FIELDS), label="platform")
    here = os.getcwd()
    os.chdir(folder)
    try:
        (folder / "o.json").unlink(missing_ok=True)
        try:
            validate_model(raw, Platform, file="p.yaml")
        except AccsimError:
            return  # refused as a file would be; the CLI refuses it in one line too
        (folder / "p.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        code, out, err = run_cli(VERBS[verb]())
    finally:
        os.chdir(here)
    assert "Traceback" not in out + err
    if code != 0:
        assert code == 1, err
        assert err.count("error:") == 1 and err.strip().startswith("accsim: error:"), err
        return
    check_figures(out, folder / "o.json", signed_print=verb == "sensitivity")
