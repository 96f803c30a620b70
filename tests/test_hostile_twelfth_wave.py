"""Hostile input, twelfth wave: the Python API (simulator.api) and what the earlier
suites left open. A name longer than the system allows raised a raw OSError from the
API's readers and writers (the command line's last resort had hidden it there); a
result saved over one of the files it was computed from replaced that file (the
commands refuse such an output); `serve()` refused a Path for a file field, which
every other function takes; a sensitivity range whose end the platform's schema
refuses (vector_unit.lanes: [0, 8]) was reported against the field, whose value is
fine, not against the range; `serve()` named a flag (--power-cap-w) where it names a
field, and refused every `disaggregate` record of pools (the --disaggregate switch's
rule took only True or False, which the spec refuses); serve's --duration,
--max-wait-ms, --block-tokens and --micro-batches, regress's tolerances and sweep
report's --model-version and serve's --sweep-rate A:B:N read `1_0` and other
scripts' digits as numbers, and
--max-memory too (an empty one was no limit, silently); an HF config's logit soft-cap
past a float's range, or its vision tower's patch of 0 or image of 1e308, was a
traceback; a precision plan's outlier_scale past fp32, and an energy coefficient at
a double's limit, printed numpy's warnings above the error line; `sweep()` swallowed
Ctrl-C and returned the points stored so far as the whole sweep, and ran a serving
sweep spec as an operator sweep (writing its store, then calling it corrupt);
`serve(sweep_rate=...)` was a TypeError without a rate and, like find_max_rate, a single
run with one; `serve(ignore_capacity=True)` was an unknown field; compare() labelled
two platforms of one name alike where no file told them apart; load_platform and
load_workload refused the SCALE-Sim files --arch and --workload take.

API rows run in-process under the shared timed runner's bound (tests/timed_cli.py):
each raises the project's AccsimError naming the file or argument, within SECONDS
of CPU, and changes no file. Command rows are as tests/test_hostile_eleventh_wave.py:
a non-zero exit with one error line naming the option, field or file, no traceback,
no file changed.

API rows: (id, call(folder), {file name: content}, fragments the message holds).
Command rows: (id, argv, {file name: content}, fragments the error line holds).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from tiny_llama import TINY_LLAMA

import simulator.api as accsim
from platforms import BASE as PLATFORM
from simulator.errors import AccsimError
from simulator.frontends.hf.config import locate_config
from simulator.frontends.hf.vision import vision_params
from test_bad_inputs import WORKLOAD_FILE, dump
from test_hostile_eleventh_wave import baseline
from test_hostile_sweep import make, refused_in, snapshot
from timed_cli import cpu_bound, run_main

SECONDS = 20
MODEL = json.dumps(TINY_LLAMA)
SWEEP = str(Path(__file__).resolve().parent.parent / "experiments" / "sweeps"
            / "edge_32x32_array_and_dram.yaml")
BASE = {"p.yaml": dump(PLATFORM), "w.yaml": WORKLOAD_FILE, "config.json": MODEL,
        "t.csv": "arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.5,8,2\n"}
LONG = "n" * 300  # one name past the 255 bytes a Linux file system allows
API: list[tuple[str, object, dict, list[str]]] = []
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def api(name: str, call, files: dict | None = None, *fragments: str) -> None:
    API.append((name, call, {**BASE, **(files or {})}, list(fragments)))


def case(name: str, argv: list[str], files: dict | None = None, *fragments: str) -> None:
    CASES.append((name, argv, {**BASE, **(files or {})}, list(fragments)))


# --- a name longer than the system allows: pathlib's exists() and os.stat raise
# OSError (ENAMETOOLONG) where a reader looks for the file or a writer for what is
# there; the command line's last resort caught it, the API raised it ----------------
api("load_platform of a name too long", lambda f: accsim.load_platform(LONG), None,
    LONG, "File name too long")
api("load_workload of a path too long", lambda f: accsim.load_workload(f"{LONG}.yaml"),
    None, LONG, "File name too long")
api("simulate with a mapping path too long",
    lambda f: accsim.simulate("p.yaml", "w.yaml", f"{LONG}/m.yaml"), None, LONG,
    "File name too long")
api("compare with a platform name too long",
    lambda f: accsim.compare(["p.yaml", LONG], "w.yaml"), None, LONG,
    "File name too long")
api("from_hf of a config name too long",
    lambda f: accsim.from_hf(LONG, phase="decode", context=4), None, LONG,
    "File name too long")
api("serve with an arrival trace name too long",
    lambda f: accsim.serve(workload="w.yaml", arrival_trace=LONG), None, LONG,
    "File name too long")
api("sweep into a store name too long", lambda f: accsim.sweep(SWEEP, f"{LONG}.sqlite"),
    None, LONG, "File name too long")
api("save_json to a name too long",
    lambda f: accsim.simulate("p.yaml", "w.yaml").save_json(f"{LONG}.json"), None, LONG,
    "File name too long")


# --- a result saved over a file it was computed from: the input was replaced (the
# command refuses `run --json w.yaml --workload w.yaml`) -----------------------------
RULE = "computed from"
api("save_json over the workload",
    lambda f: accsim.simulate("p.yaml", "w.yaml").save_json("w.yaml"), None, "w.yaml",
    RULE)
api("save_json over the platform spelt ./",
    lambda f: accsim.simulate("p.yaml", "w.yaml").save_json("./p.yaml"), None,
    "./p.yaml", RULE)
api("save_json over the model config",
    lambda f: accsim.simulate("p.yaml", accsim.from_hf(
        "config.json", phase="decode", context=4), ignore_capacity=True).save_json(
        "config.json"), None, "config.json", RULE)
api("compare save_json over the second platform",
    lambda f: accsim.compare(["p.yaml", "q.yaml"], "w.yaml").save_json("q.yaml"),
    {"q.yaml": dump({**PLATFORM, "name": "q"})}, "q.yaml", RULE)
api("serve save_json over the arrival trace",
    lambda f: accsim.serve(arch="p.yaml", workload="w.yaml",
                           arrival_trace="t.csv").save_json("t.csv"), None, "t.csv",
    RULE)


# --- sweep() of a serving sweep spec (one `accsim sweep run` runs): it ran it as an
# operator sweep, wrote the store and called it "a forged or corrupt row" ---------------
SERVING_SWEEP = dump({"name": "tiny_serving", "platform": "tpu_v5e_like",
                      "serving": {"model": "config.json", "prompt_tokens": 64,
                                  "output_tokens": 8, "requests": 8,
                                  "sla": {"ttft_p99_ms": 0.5}},
                      "axes": {"serving.max_batch": [4, 16]},
                      "objectives": {"tokens_per_s_per_chip": "max"}})
api("sweep of a serving sweep spec", lambda f: accsim.sweep("ss.yaml", "s.sqlite"),
    {"ss.yaml": SERVING_SWEEP}, "ss.yaml", "serving", "accsim sweep run")


# --- sensitivity: a range end the platform's schema refuses was an error about the
# field (whose own value is fine), not about the range --------------------------------
def assumed(field: str, low, high) -> str:
    return dump({**PLATFORM, "provenance": {field: {"kind": "assumed",
                                                    "range": [low, high]}}})


for field, low, high in (("vector_unit.lanes", 0, 8), ("buffers.ifmap_bytes", 0, 4096),
                         ("energy.offchip_pj_per_byte", -5.0, 200.0)):
    case(f"sensitivity of a {field} range from {low}",
         ["sensitivity", "--arch", "a.yaml", "--workload", "w.yaml"],
         {"a.yaml": assumed(field, low, high)}, "a.yaml", f"provenance.{field}.range",
         f"at {field} = {low:g}")


# --- numbers in ASCII digits only (simulator.numbers), as the eleventh wave made the
# export's and sweep report's options: these flags were read by int() and float(),
# which take `1_0` and other scripts' digits; an empty --max-memory was no limit given
RUN = ["run", "--arch", "p.yaml", "--workload", "w.yaml"]
SERVE = ["serve", "--arch", "p.yaml", "--workload", "w.yaml", "--rate", "5",
         "--requests", "3"]
REGRESS = ["regress", *RUN[1:], "--baseline", "b.json"]
for argv, flag in (
        (RUN + ["--max-memory", "\uff18G"], "--max-memory"),
        (RUN + ["--max-memory", "1_000M"], "--max-memory"),
        (RUN + ["--max-memory", ""], "--max-memory"),
        (SERVE + ["--duration", "\u0663"], "--duration"),
        (SERVE + ["--duration", "1_0"], "--duration"),
        (SERVE + ["--batching", "static", "--max-wait-ms", "\u0663"], "--max-wait-ms"),
        (SERVE + ["--block-tokens", "1_6"], "--block-tokens"),
        (["serve", "--arch", "tpu_v5e_like", "--model", "config.json", "--rate", "5",
          "--requests", "3", "--pp", "2", "--micro-batches", "\uff12"], "--micro-batches"),
        (REGRESS + ["--tolerance", "\u0660.\u0661"], "--tolerance"),
        (REGRESS + ["--floor-cycles", "1_0"], "--floor-cycles"),
        (REGRESS + ["--floor-energy-pj", "\uff15"], "--floor-energy-pj"),
        (["sweep", "report", "s.sqlite", "--model-version", "\u0666"],
         "--model-version"),
        (SERVE + ["--sweep-rate", "1:\u0663:3"], "--sweep-rate"),
        (SERVE + ["--sweep-rate", "1:3:1_0"], "--sweep-rate")):
    case(f"{argv[0]} {flag} {argv[-1]!r}", argv, {"b.json": baseline}, flag)


# --- import hf: a logit soft-cap past a float's range was an OverflowError traceback
# (float() of the JSON integer) ----------------------------------------------------------
GEMMA2 = {**TINY_LLAMA, "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"],
          "sliding_window": 64}
for key in ("final_logit_softcapping", "attn_logit_softcapping"):
    case(f"import hf {key} of 10**400",
         ["import", "hf", "g.json", "--phase", "decode", "--context", "4", "-o", "g.yaml"],
         {"g.json": json.dumps({**GEMMA2, key: 10**400})}, "g.json", key,
         "positive number")


# --- a precision plan's synthetic outliers past fp32: numpy's RuntimeWarnings (four,
# each with a source line) on stderr before the error line ------------------------------
OUTLIERS = dump({"default": {"weight": ["int8"], "activation": ["int8"],
                             "guardrail": {"min_sqnr_db": 10}},
                 "samples": {"outlier_scale": 1e308}})
case("precision outlier_scale of 1e308",
     ["run", "--arch", "tpu_v1", "--workload", "w.yaml", "--precision", "pp.yaml"],
     {"pp.yaml": OUTLIERS}, "pp.yaml", "samples.outlier_scale", "fp32")


def npy(array: np.ndarray):
    def write(path: Path) -> None:
        np.save(path, array)
    return write


case("precision samples whose product passes fp32",
     ["run", "--arch", "tpu_v1", "--workload", "w.yaml", "--precision", "pp.yaml"],
     {"pp.yaml": dump({**yaml.safe_load(OUTLIERS), "samples": {}, "operators": {
         "g": {"tensors": {"a": "a.npy", "b": "b.npy"}}}}),
      "a.npy": npy(np.full((8, 64), 3e38, np.float32)),  # w.yaml's g: K = 64
      "b.npy": npy(np.ones((64, 64), np.float32))}, "pp.yaml", "operators.g.tensors",
     "overflows fp32")


# --- an energy coefficient (or a clock) near a double's limit: the search's energy
# bound overflowed, and numpy's warning printed above the run's own refusal ------------
def huge(field: str, value: float) -> str:
    """The 8x8 test platform with one field set (a valid file whose figures overflow)."""
    raw = json.loads(json.dumps(PLATFORM))
    node = raw
    *parents, leaf = field.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    return dump(raw)


case("run energy.offchip_pj_per_byte at the largest double",
     ["run", "--arch", "e.yaml", "--workload", "w.yaml"],
     {"e.yaml": huge("energy.offchip_pj_per_byte", 1.7976931348623157e308)}, "e.yaml",
     "energy")
case("sensitivity of an SRAM read energy range to 1e308",
     ["sensitivity", "--arch", "a.yaml", "--workload", "w.yaml", "--metric", "energy_j"],
     {"a.yaml": assumed("energy.sram_read_pj_per_byte", 0, 1e308)}, "a.yaml",
     "provenance.energy.sram_read_pj_per_byte.range")


def test_there_are_enough_cases():
    assert len(API) + len(CASES) >= 15
    names = [name for name, *_ in API + CASES]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name, call, files, fragments", API,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in API])
def test_api_refusal_is_the_projects_error(name, call, files, fragments, tmp_path,
                                           monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        make(tmp_path / file, content)
    before = snapshot(tmp_path)
    with pytest.raises(AccsimError) as caught, cpu_bound(SECONDS):
        call(tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message[:300]!r}"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as warned:  # stderr, outside pytest
        warnings.simplefilter("always")
        _, touched = refused_in(tmp_path, files, argv, capsys, SECONDS, fragments)
    assert touched == set()
    assert [str(w.message) for w in warned if w.category is RuntimeWarning] == []


def test_serve_takes_a_path_for_each_file_field(tmp_path, monkeypatch):
    """serve()'s file fields as Path objects, as simulate() and sweep() take them: the
    same document as the same names given as text."""
    monkeypatch.chdir(tmp_path)
    for name in ("p.yaml", "w.yaml", "t.csv"):
        make(tmp_path / name, BASE[name])
    fields = {"arch": "p.yaml", "workload": "w.yaml", "arrival_trace": "t.csv"}
    with cpu_bound(SECONDS):
        as_text = accsim.serve(**fields)
        as_paths = accsim.serve(**{k: Path(v) for k, v in fields.items()})
    assert as_paths.result == as_text.result


@pytest.mark.parametrize("fields, argument, flag", [
    ({"workload": "w.yaml", "rate": 5, "requests": 3, "power_cap_w": 3.0},
     "power_cap_w", "--power-cap-w"),
    ({"model": "config.json", "arch": "whatif/tpu_v5e_int4", "dtype": "int4", "rate": 5,
      "requests": 3}, "dtype", "--dtype"),
])
def test_serve_names_the_field_not_the_flag(fields, argument, flag, tmp_path,
                                            monkeypatch):
    """serve()'s errors name its keyword field, as every API function names its
    argument: a rule checked past the spec (the platform's DVFS table, the model's
    formats) named the command line's flag."""
    monkeypatch.chdir(tmp_path)
    for name in ("w.yaml", "config.json"):
        make(tmp_path / name, BASE[name])
    with pytest.raises(AccsimError) as caught, cpu_bound(SECONDS):
        accsim.serve(**fields)
    assert caught.value.field == argument, str(caught.value)
    assert flag not in str(caught.value).split(": ")[:-1]


def test_serve_takes_disaggregated_pools(tmp_path, monkeypatch):
    """The spec's `disaggregate` record (pools, KV link) through serve(): the
    --disaggregate switch's rule refused any record, and the spec any switch."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "config.json", MODEL)
    pools = {"prefill": {"replicas": 1}, "decode": {"replicas": 2}}
    with cpu_bound(SECONDS):
        served = accsim.serve(arch="tpu_v5e_like", model="config.json", rate=5,
                              requests=3, disaggregate=pools)
    assert served.result["disaggregated"]["decode"]["replicas"] == 2


@pytest.mark.parametrize("field, value", [("patch_size", 0), ("image_size", 1e308),
                                          ("hidden_size", 1152.5)])
def test_a_vision_tower_of_odd_sizes_counts_no_tower(field, value, tmp_path,
                                                     monkeypatch, capsys):
    """A multimodal config whose vision tower has a size that is no positive whole
    number: the tower counts 0, as its docstring says (a patch of 0 divided by zero,
    an image of 1e308 overflowed a float: tracebacks), and the language model imports."""
    monkeypatch.chdir(tmp_path)
    raw = json.loads(locate_config("gemma_3_27b").read_text())
    raw["vision_config"][field] = value
    assert vision_params(raw, 5376) == 0
    make(tmp_path / "g.json", json.dumps(raw))
    code, _, err, _ = run_main(["import", "hf", "g.json", "--phase", "decode",
                                "--context", "16", "-o", "g.yaml"], capsys, SECONDS)
    assert code == 0, err


SMALL_SWEEP = dump({"name": "small", "platform": "p.yaml", "workloads": ["w.yaml"],
                   "axes": {"offchip.bandwidth_gbps": [8.0, 16.0, 32.0]},
                   "sampling": {"method": "grid"}, "objectives": {"time_s": "min"}})


def test_an_interrupted_api_sweep_raises_and_keeps_what_it_stored(tmp_path,
                                                                 monkeypatch):
    """Ctrl-C in sweep() (a notebook's stop button): the coordinator stops and keeps
    what it stored; sweep() returned that partial store as the sweep's rows, the
    interrupt swallowed. It raises KeyboardInterrupt, and a rerun computes the rest."""
    monkeypatch.chdir(tmp_path)
    for name, content in (("p.yaml", BASE["p.yaml"]), ("w.yaml", BASE["w.yaml"]),
                          ("s.yaml", SMALL_SWEEP)):
        make(tmp_path / name, content)
    real = accsim.executor_for

    class StoppedAfterOne:
        """The serial executor, with Ctrl-C pressed once its first point is done."""

        def __init__(self, inner):
            self.inner, self.description = inner, inner.description

        def __enter__(self):
            self.inner.__enter__()
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def outcomes(self, jobs, task=None):
            for outcome in self.inner.outcomes(jobs, task):
                yield outcome
                raise KeyboardInterrupt

    monkeypatch.setattr(accsim, "executor_for",
                        lambda scheduler, workers: StoppedAfterOne(real(scheduler,
                                                                        workers)))
    with pytest.raises(KeyboardInterrupt), cpu_bound(SECONDS):
        accsim.sweep("s.yaml", "s.sqlite")
    monkeypatch.setattr(accsim, "executor_for", real)
    with cpu_bound(SECONDS):
        rows = accsim.sweep("s.yaml", "s.sqlite").rows
    assert len(rows) == 3 and {row["status"] for row in rows} == {"ok"}


@pytest.mark.parametrize("flags, fields", [
    (["--sweep-rate", "1:3:3"], {"sweep_rate": "1:3:3"}),
    (["--rate", "5", "--sweep-rate", "1:3:3"], {"rate": 5, "sweep_rate": "1:3:3"}),
    (["--rate", "5", "--find-max-rate", "--sla", "latency_p99_ms=0.01"],
     {"rate": 5, "find_max_rate": True, "sla": {"latency_p99_ms": 0.01}}),
])
def test_serve_runs_a_rate_curve_and_a_rate_search_as_the_command(flags, fields,
                                                                  tmp_path, monkeypatch,
                                                                  capsys):
    """serve(sweep_rate=...) and serve(find_max_rate=True) write the document `accsim
    serve` writes for them: without a rate the curve was a TypeError traceback
    (1.0 / None), and with one both were a single run at that rate, silently."""
    monkeypatch.chdir(tmp_path)
    for name in ("p.yaml", "w.yaml"):
        make(tmp_path / name, BASE[name])
    common = ["--arch", "p.yaml", "--workload", "w.yaml", "--requests", "20"]
    code, _, err, _ = run_main(["serve", *common, *flags, "--json", "cli.json"], capsys,
                               SECONDS)
    assert code == 0, err
    with cpu_bound(SECONDS):
        accsim.serve(arch="p.yaml", workload="w.yaml", requests=20,
                     **fields).save_json("api.json")
    assert Path("api.json").read_bytes() == Path("cli.json").read_bytes()


def test_serve_ignores_capacity_as_the_command(tmp_path, monkeypatch, capsys):
    """serve(ignore_capacity=True), as simulate() takes it and `accsim serve
    --ignore-capacity` does: it was "ignore_capacity: unknown field (misspelt?)", so a
    what-if past a chip's HBM was out of the API's reach."""
    monkeypatch.chdir(tmp_path)
    load = ["--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--rate", "1",
            "--requests", "2", "--prompt-tokens", "16", "--output-tokens", "2"]
    code, _, err, _ = run_main(["serve", *load, "--ignore-capacity", "--json", "cli.json"],
                               capsys, SECONDS)
    assert code == 0, err
    fields = dict(arch="tpu_v5e_like", model="llama_3_1_70b", rate=1, requests=2,
                  prompt_tokens=16, output_tokens=2)
    with cpu_bound(SECONDS):
        with pytest.raises(AccsimError, match="offchip.capacity_bytes"):
            accsim.serve(**fields)
        accsim.serve(**fields, ignore_capacity=True).save_json("api.json")
    assert Path("api.json").read_bytes() == Path("cli.json").read_bytes()


def test_compared_platforms_no_file_tells_apart_are_labelled_apart(tmp_path,
                                                                   monkeypatch, capsys):
    """A platform changed in code keeps its name (model_copy): compare() labelled it
    and the original both `edge_32x32 (edge_32x32)`, its rows and DataFrame telling
    them apart no more than the name did."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "w.yaml", BASE["w.yaml"])
    base = accsim.load_platform("edge_32x32")
    wider = base.model_copy(update={"systolic_array": base.systolic_array.model_copy(
        update={"rows": 64, "cols": 64})})
    with cpu_bound(SECONDS):
        compared = accsim.compare([base, wider], "w.yaml")
    labels = [row["platform"] for row in compared.rows()]
    assert labels == ["edge_32x32 (#1)", "edge_32x32 (#2)"]
    assert "labelled" in capsys.readouterr().err


SCALESIM_CONFIG = ("[general]\nrun_name = t\n[architecture_presets]\nArrayHeight: 8\n"
                   "ArrayWidth: 8\nIfmapSramSzkB: 64\nFilterSramSzkB: 64\n"
                   "OfmapSramSzkB: 64\nDataflow: ws\nBandwidth: 10\n")
SCALESIM_TOPOLOGY = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                     "Channels, Num Filter, Strides,\nConv1, 16, 16, 3, 3, 3, 8, 1,\n")


def test_load_platform_and_workload_read_scalesim_files_as_the_options(tmp_path,
                                                                       monkeypatch):
    """load_platform and load_workload mirror --arch and --workload, which take a
    SCALE-Sim .cfg and topology .csv (and simulate() did): they were "malformed YAML"
    and "expected a mapping of fields at the top"."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "c.cfg", SCALESIM_CONFIG)
    make(tmp_path / "t.csv", SCALESIM_TOPOLOGY)
    with cpu_bound(SECONDS):
        platform, workload = accsim.load_platform("c.cfg"), accsim.load_workload("t.csv")
        run = accsim.simulate("c.cfg", "t.csv").run
    assert platform == run.platform and workload == run.inputs.workload


def test_a_result_saved_beside_its_inputs_is_written(tmp_path, monkeypatch):
    """The refusal is of the input's own path only: a new name beside it is written,
    byte for byte the file `accsim run --json` writes."""
    monkeypatch.chdir(tmp_path)
    for name in ("p.yaml", "w.yaml"):
        make(tmp_path / name, BASE[name])
    with cpu_bound(SECONDS):
        accsim.simulate("p.yaml", "w.yaml").save_json("r.json")
    assert json.loads(Path("r.json").read_text())["manifest"]["inputs"]["workload"][
        "path"] == "w.yaml"
