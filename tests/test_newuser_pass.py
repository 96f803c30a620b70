"""What a newcomer met following the docs: a plan's layer_types entry that selects no
operator was taken silently (a misspelt layer_type left its operators on the default
mapping without a word); `compare` given one platform file twice printed two equal
columns; an export merging into an earlier one named the file it could not merge by
its path inside the folder, not the path a user can open."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from platforms import BASE as PLATFORM
import simulator.api as api
from simulator.cli import build_parser, main
from simulator.errors import AccsimError
from simulator.inputs.loader import locate
from simulator.output import progress
from test_bad_inputs import WORKLOAD_FILE, dump
from test_hostile_sweep import make, refused_in
from timed_cli import run_main

SECONDS = 20
TYPO_PLAN = dump({"name": "typo", "layer_types": {"fc": {"depth": 1},
                                                  "fcc": {"depth": 2}}})
FILES = {"p.yaml": dump(PLATFORM), "w.yaml": WORKLOAD_FILE, "plan.yaml": TYPO_PLAN}


@pytest.mark.parametrize("argv", [
    ["run", "--arch", "p.yaml"],
    ["compare", "--arch", "p.yaml", "--arch", "tpu_v1"],
    ["map", "--arch", "p.yaml"],
    ["serve", "--arch", "p.yaml", "--rate", "5", "--duration", "2"]],
    ids=lambda argv: argv[0])
def test_a_layer_type_no_operator_has_is_named(argv, tmp_path, monkeypatch, capsys):
    """A warning (a plan may serve several workloads of a model family, as `accsim
    check PLAN --workload` says too) naming the plan file, the entry and the workload,
    once; the entry that matches is not named."""
    monkeypatch.chdir(tmp_path)
    for name, content in FILES.items():
        make(tmp_path / name, content)
    code, out, err, _ = run_main([*argv, "--workload", "w.yaml", "--mapping",
                                  "plan.yaml"], capsys, SECONDS)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == ["accsim: warning: plan.yaml: layer_types.fcc: no operator of "
                        "layer_type 'fcc' in workload 'w' (its layer_types: fc)"]


@pytest.mark.parametrize("argv", [
    ["run", "--arch", "p.yaml"],
    ["serve", "--arch", "p.yaml", "--rate", "5", "--duration", "2"]],
    ids=lambda argv: argv[0])
def test_a_precision_plan_s_unmatched_layer_type_is_named(argv, tmp_path, monkeypatch,
                                                          capsys):
    """A precision plan selects by layer_type too, and was as silent (serve's until
    it warned as run does)."""
    monkeypatch.chdir(tmp_path)
    plan = dump({"name": "p", "layer_types": {"fc": {"weight": ["int8"]},
                                              "fcc": {"weight": ["int8"]}}})
    for name, content in {**FILES, "prec.yaml": plan}.items():
        make(tmp_path / name, content)
    code, _, err, _ = run_main([*argv, "--workload", "w.yaml", "--precision",
                                "prec.yaml"], capsys, SECONDS)
    assert code == 0, err
    assert [line for line in err.splitlines() if "warning" in line] == [
        "accsim: warning: prec.yaml: layer_types.fcc: no operator of layer_type 'fcc' "
        "in workload 'w' (its layer_types: fc)"]


def test_a_plan_whose_layer_types_all_match_warns_of_nothing(tmp_path, monkeypatch,
                                                             capsys):
    monkeypatch.chdir(tmp_path)
    for name, content in {**FILES, "plan.yaml": dump({"layer_types": {
            "fc": {"depth": 1}}})}.items():
        make(tmp_path / name, content)
    code, _, err, _ = run_main(["run", "--arch", "p.yaml", "--workload", "w.yaml",
                                "--mapping", "plan.yaml"], capsys, SECONDS)
    assert code == 0, err
    assert "warning" not in err


SHIPPED_V1 = str(locate("tpu_v1", "platform"))


@pytest.mark.parametrize("first, second", [
    ("p.yaml", "p.yaml"), ("p.yaml", "./p.yaml"), ("p.yaml", "sub/../p.yaml"),
    ("p.yaml", "link.yaml"), ("tpu_v1", SHIPPED_V1)],
    ids=["twice", "dot", "dotdot", "link", "shipped name and path"])
def test_compare_refuses_one_platform_file_twice(first, second, tmp_path, monkeypatch,
                                                 capsys):
    """Each --arch is one column: one file named twice is refused before any work,
    naming both; a copy of a file (two files) stays a comparison."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.yaml").symlink_to("p.yaml")
    argv = ["compare", "--arch", first, "--arch", second, "--workload", "w.yaml"]
    files = {"p.yaml": FILES["p.yaml"], "w.yaml": WORKLOAD_FILE}
    err, touched = refused_in(tmp_path, files, argv, capsys, SECONDS,
                              ["--arch", second, f"same platform file as {first!r}"])
    assert touched == set()


def test_the_api_refuses_one_platform_file_twice():
    """simulator.api.compare does what `accsim compare` does."""
    with pytest.raises(AccsimError) as refused:
        api.compare(["tpu_v1", SHIPPED_V1], "gemm_4096")
    assert refused.value.field == "platforms" and refused.value.file == SHIPPED_V1
    assert "same platform file as 'tpu_v1'" in refused.value.rule


def test_compare_takes_a_copy_of_a_platform(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, content in {**FILES, "q.yaml": FILES["p.yaml"]}.items():
        make(tmp_path / name, content)
    code, _, err, _ = run_main(["compare", "--arch", "p.yaml", "--arch", "q.yaml",
                                "--workload", "w.yaml"], capsys, SECONDS)
    assert code == 0, err


MARKER = ".accsim-export"
MLP = "data/profiling/compute/tpu_v5e_like/org/tiny/mlp.csv"
DEVICE = "data/profiling/network/tpu_v5e_like/accsim_device.json"
META = "profiler/perf/tpu_v5e_like/org/tiny/bf16/meta.yaml"
VIDUR = ["export", "vidur", "--model", "config.json", "--model-id", "org/tiny", "-o",
         "out/ex", "--max-tokens", "16", "--max-batch", "2", "--bits", "1",
         "--attention-bits", "1"]


@pytest.mark.parametrize("fmt, relative, content", [
    ("vidur", MLP, "other,columns\n1,2\n"),
    ("vidur", DEVICE, '{"num_devices_per_node": "many"}'),
    ("llmservingsim", META, "tp_degrees: 4\n")], ids=["table", "device", "meta"])
def test_an_export_names_the_earlier_file_as_a_user_opens_it(fmt, relative, content,
                                                             tmp_path, monkeypatch,
                                                             capsys):
    """The error names out/ex/RELATIVE (the folder as given, joined): the path alone
    inside the folder, or the device file's bare name, is no file a user can open."""
    monkeypatch.chdir(tmp_path)
    files = {"config.json": json.dumps(TINY_LLAMA),
             f"out/ex/{MARKER}": f"a folder accsim writes; the files it wrote here:\n"
                                 f"{relative}\n",
             f"out/ex/{relative}": content}
    argv = ["export", fmt, *VIDUR[2:]]
    err, _ = refused_in(tmp_path, files, argv, capsys, SECONDS, ["--output"])
    assert f"accsim: error: out/ex/{relative}: --output: " in err


@pytest.mark.parametrize("argv, line", [
    (["run", "--archh", "tpu_v1"], "accsim run: error: unrecognized arguments: --archh "
     "tpu_v1; did you mean --arch? (accsim run --help lists the options)"),
    (["import", "onnx", "m.onnx", "--batchh", "2"], "accsim import onnx: error: "
     "unrecognized arguments: --batchh 2; did you mean --batch? (accsim import onnx "
     "--help lists the options)"),
    (["compare", "--arch", "tpu_v1", "--robustt"], "accsim compare: error: unrecognized "
     "arguments: --robustt; did you mean --robust? (accsim compare --help lists the "
     "options)"),
    (["run", "--wide", "tpu_v1"], "accsim run: error: unrecognized arguments: tpu_v1 "
     "(accsim run --help lists the options)"),
    (["sweep"], "accsim sweep: error: the following arguments are required: "
     "{run,report} (accsim sweep --help lists the options)")],
    ids=["run", "import onnx", "compare", "a word", "sweep alone"])
def test_an_option_the_verb_lacks_is_named_by_the_verb(argv, line, capsys):
    """A misspelt option was `accsim: error: ... (accsim --help lists the options)`, and
    accsim --help lists no verb's options: the verb's parser refuses it, naming the
    nearest option it takes."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize("argv, kind, flag", [
    (["check", "p.yaml", "--workload", "w.yaml"], "platform", "--workload"),
    (["check", "tpu_v1", "--workload", "w.yaml"], "platform", "--workload"),
    (["check", "w.yaml", "--arch", "p.yaml"], "workload", "--arch"),
    (["check", "p.yaml", "--kind", "platform", "--arch", "p.yaml"], "platform", "--arch")],
    ids=["platform file", "shipped platform", "workload file", "--kind platform"])
def test_check_with_arch_or_workload_names_a_platform_as_such(argv, kind, flag, tmp_path,
                                                              monkeypatch, capsys):
    """`check FILE --workload W` checks a plan: a platform there was read as one and
    refused for 'description: unknown field (misspelt?)' (or as no shipped mapping)."""
    monkeypatch.chdir(tmp_path)
    refused_in(tmp_path, {"p.yaml": FILES["p.yaml"], "w.yaml": WORKLOAD_FILE}, argv,
               capsys, SECONDS, [f"{argv[1]}: {flag}: is a {kind} file, not a tiling plan",
                                 f"drop {flag} to validate the {kind} file"])


class _Bar:
    """progress.Bar's stand-in: what it was told."""

    made: list[_Bar] = []

    def __init__(self, description: str, **_options) -> None:
        self.description, self.advanced = description, 0
        _Bar.made.append(self)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        self.advanced += steps


def test_an_export_shows_its_progress(tmp_path, monkeypatch, capsys):
    """An export simulates hundreds of iteration shapes (a minute for an 8B model's
    vidur defaults) and said nothing until it wrote: it counts them on progress's bar
    (drawn on a terminal only)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress, "Bar", _Bar)
    _Bar.made.clear()
    make(tmp_path / "config.json", json.dumps(TINY_LLAMA))
    code, _, err, _ = run_main(["export", "vidur", *VIDUR[2:]], capsys, SECONDS)
    assert code == 0, err
    (bar,) = _Bar.made
    assert bar.description.startswith("export vidur") and bar.advanced > 10


@pytest.mark.parametrize("argv, file, hint", [
    (["run", "--arch", "tpu_v1.yaml"], "tpu_v1.yaml",
     "the shipped platform of that name is given without the suffix: tpu_v1"),
    (["run", "--workload", "gemm_4096.yml"], "gemm_4096.yml",
     "the shipped workload of that name is given without the suffix: gemm_4096"),
    (["compare", "--arch", "whatif/tpu_v5e_256x256.yaml"], "whatif/tpu_v5e_256x256.yaml",
     "the shipped platform of that name is given without the suffix: "
     "whatif/tpu_v5e_256x256"),
    (["run", "--arch", "sub/p"], "sub/p", "sub/p.yaml is there")],
    ids=["shipped platform", "shipped workload", "what-if", "path without suffix"])
def test_a_name_one_step_from_a_file_says_which(argv, file, hint, tmp_path, monkeypatch,
                                                capsys):
    """'tpu_v1.yaml: file not found' left a newcomer to guess that shipped names go
    without the suffix (and a path without it, that the file is there)."""
    monkeypatch.chdir(tmp_path)
    refused_in(tmp_path, {"sub/p.yaml": FILES["p.yaml"]}, argv, capsys, SECONDS,
               [f"{file}: file not found; {hint}"])


@pytest.mark.parametrize("argv, kind", [
    (["--arch", "tpu_v1", "--workload", "w.yaml"], "platform"),
    (["--arch", "p.yaml", "--workload", "gemm_4096"], "workload")])
def test_regress_refuses_another_run_s_baseline_before_simulating(argv, kind, tmp_path,
                                                                   monkeypatch, capsys):
    """`accsim regress --baseline b.json` without the baseline's --arch ran the default
    platform's simulation, then refused the baseline as another platform's."""
    monkeypatch.chdir(tmp_path)
    for name in ("p.yaml", "w.yaml"):
        make(tmp_path / name, FILES[name])
    assert run_main(["run", "--arch", "p.yaml", "--workload", "w.yaml", "--json",
                     "b.json"], capsys, SECONDS)[0] == 0
    simulated = []
    monkeypatch.setattr("simulator.commands.regress.simulate_shown",
                        lambda *args, **kwargs: simulated.append(args))
    code, _, err, _ = run_main(["regress", "--baseline", "b.json", *argv], capsys,
                               SECONDS)
    assert code == 2 and simulated == []
    assert err.startswith(f"accsim: error: b.json: manifest.inputs.{kind}: baseline is "
                          f"for {kind} ")


def test_review_takes_o_for_its_folder_as_export_import_and_calibrate_do():
    """`accsim review STUDY -o DIR` was refused (review took only --out) where the
    other verbs writing a folder or file take -o."""
    args = build_parser().parse_args(["review", "study.yaml", "-o", "packet"])
    assert args.out == "packet"
