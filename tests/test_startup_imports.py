"""Start-up stays light: `accsim --help`, `accsim schema` and `accsim check` never import
Numba, and nothing imports matplotlib, Jinja2, ONNX or Dask's distributed before a
command needs it (issue 26). Each case runs in a fresh interpreter, since this test
process has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from timed_cli import HANG_S

HEAVY = ("numba", "matplotlib", "jinja2", "onnx", "distributed")

# What each case runs after `import simulator.cli` (stdout is discarded).
CASES = {
    "import": "pass",
    "help": "cli.build_parser([]).format_help()",
    "main --help": "cli.main(['--help'])",
    "main --version": "cli.main(['--version'])",
    "schema": "cli.main(['schema', 'platform'])",
    "check": "cli.main(['check', 'tpu_v1'])",
    "check workload": "cli.main(['check', 'resnet50_b1'])",
}

_PROBE = """
import contextlib, io, json, sys
import simulator.cli as cli
with contextlib.redirect_stdout(io.StringIO()):
    try:
        {call}
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def loaded_after(call: str, env: dict | None = None) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=HANG_S, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_light_commands_import_no_heavy_library(case: str) -> None:
    assert loaded_after(CASES[case]) == []


def test_the_probe_sees_a_heavy_import() -> None:
    # The kernels load Numba on first use (the JIT's: the kernel library would serve
    # this call without it): the probe must notice it.
    assert "numba" in loaded_after("__import__('simulator.model.timing').model.timing.ceil_div(7, 2)",
                                   {**os.environ, "ACCSIM_KERNEL_LIBRARY": "0"})


def test_help_lists_every_verb_without_importing_their_modules() -> None:
    call = ("print(cli.build_parser([]).format_help(), file=sys.stderr); "
            "print(sorted(m for m in sys.modules if m.startswith('simulator.commands.')), "
            "file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", _PROBE.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    from simulator.cli import VERBS
    for verb, (_, help_text) in VERBS.items():
        assert verb in done.stderr and help_text.split()[0] in done.stderr
    assert "[]" in done.stderr.splitlines()[-1]


def test_simpy_loads_only_for_its_engine() -> None:
    """The engine runner imports an engine's module when that engine runs
    (engines.runner.RUNNERS), so a fast-engine run leaves SimPy unloaded."""
    probe = ("cli.main(['run', '--workload', 'gemm_4096', '--engine', '{engine}']); "
             "print(json.dumps('simpy' in sys.modules), file=sys.stderr)")
    for engine, loaded in (("fast", "false"), ("simpy", "true")):
        done = subprocess.run([sys.executable, "-c", _PROBE.format(
            call=probe.format(engine=engine), heavy=HEAVY)], capture_output=True,
            text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] == loaded


def _hf_modules_after(verb: str) -> list[str]:
    call = (f"cli.build_parser([{verb!r}]); print(json.dumps(sorted(m for m in "
            "sys.modules if m.startswith('simulator.frontends.hf'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", _PROBE.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.splitlines()[-1])


def test_declaring_the_llm_options_imports_no_hf_reader() -> None:
    """The options catalog takes the LLM step's choices from simulator.frontends.
    llm_choices, so a verb that declares them without building a step (`check`) leaves
    the Hugging Face readers unloaded; `import`, whose hf format builds one, loads them
    (the probe sees them)."""
    assert _hf_modules_after("check") == []
    assert "simulator.frontends.hf.step" in _hf_modules_after("import")
