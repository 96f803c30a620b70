"""Tiling plans and heuristics (the mapping issue): `accsim check PLAN --arch --workload`
reports every buffer's fit with the numbers, spills and unknown operator names; the
heuristic registry takes built-ins and the names `--plugin` files register (nothing
named in a file is imported), and errors with the known names; the built-in heuristics do what their names say."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from platforms import make_platform
from simulator.mapping import heuristics as mapping_module
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.lowering import lower_compute
from simulator.present.plan_check import check_plan
from simulator.mapping.heuristics import dim_candidates, heuristic
from simulator.mapping.plan import LOOP_ORDERS, Mapping, Tiling, TilingSpec
from simulator.search.resolve import resolve_tiling
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Gemm, Workload

# The README's overflowing plan: res5a_branch2b's B tile of 4608 x 256 int8 bytes on
# TPU v1's 256 KiB weight buffer.
OVERFLOW = ("B tiles (tk 4608 x tn 256) of 1179648 bytes: the weight buffer of 262144 "
            "bytes holds 0, the plan needs 2 (depth 2); overflow 2097152 bytes")


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_overflowing_plan_is_rejected_with_the_numbers(tmp_path, capsys):
    plan = write(tmp_path, "plan.yaml", """\
        operators:
          res5a_branch2b: {tm: 49, tn: 256, tk: 4608, orientation: normal}
        """)
    assert main(["check", str(plan), "--arch", "tpu_v1", "--workload", "resnet50_b1"]) == 1
    captured = capsys.readouterr()
    assert f"accsim: error: {plan}: operators.res5a_branch2b: {OVERFLOW}" in captured.err
    assert "REJECTED" in captured.err
    # The table shows bytes needed against available, with slots, for every operator.
    row = next(line for line in captured.out.splitlines()
               if line.startswith("res5a_branch2b"))
    assert "2.2 MiB / 256.0 KiB, 0 slots OVERFLOW" in row
    # The same plan never runs: the lowering raises with the same numbers.
    with pytest.raises(AccsimError, match=r"overflow 2097152 bytes"):
        simulate(load_inputs("tpu_v1", "resnet50_b1", str(plan)))


def test_check_reports_needs_slots_and_spills_per_operator():
    # 8x8 int8 array with a 1 KiB output buffer: C tiles of 8x8 int32 are 256 bytes,
    # 4 slots. Loop kmn keeps nm * nn = 4 * 2 = 8 C tiles live: they spill.
    platform = make_platform(buffers={"output_bytes": 1024})
    workload = Workload(name="w", operators=[
        Gemm(name="spilling", layer_type="fc", kind="gemm", m=32, n=16, k=64),
        Gemm(name="fine", layer_type="fc", kind="gemm", m=32, n=16, k=64)])
    plan = Mapping(default=TilingSpec(heuristic="array_aligned"), operators={
        "spilling": TilingSpec(tm=8, tn=8, tk=16, loop_order="kmn", dataflow="os"),
        "fine": TilingSpec(tm=8, tn=8, tk=16, loop_order="mnk", dataflow="os")})
    report = check_plan(Inputs(platform, workload, plan))
    assert report.ok
    spilling, fine = report.operators
    assert spilling.spills and spilling.live_c_tiles == 8
    assert spilling.partial_sums() == "SPILL (8 live C > 4 slots)"
    assert not fine.spills and fine.partial_sums() == "none (1 live C tile)"
    c = spilling.fits[2]
    assert (c.operand, c.tile_bytes, c.capacity, c.slots, c.needed) == \
        ("C", 256, 1024, 4, 512)
    a = spilling.fits[0]
    assert (a.operand, a.tile_bytes, a.slots, a.tiles) == ("A", 128, 32, 16)


def test_unknown_operator_name_is_an_error_naming_it(tmp_path, capsys):
    plan = write(tmp_path, "plan.yaml", """\
        operators:
          res9z_branch2a: {tm: 8}
          conv1: {depth: 3}
        layer_types:
          no_such_type: {depth: 3}
        """)
    assert main(["check", str(plan), "--arch", "tpu_v1", "--workload", "resnet50_b1"]) == 1
    err = capsys.readouterr().err
    assert (f"{plan}: operators.res9z_branch2a: no operator named 'res9z_branch2a' in "
            "workload 'resnet50_b1'") in err
    assert "warning" in err and "layer_types.no_such_type" in err
    # run refuses it too.
    assert main(["run", "--mapping", str(plan)]) == 1
    assert "no operator named 'res9z_branch2a'" in capsys.readouterr().err


def test_check_lists_every_error_not_only_the_first(tmp_path, capsys):
    plan = write(tmp_path, "plan.yaml", """\
        operators:
          res5a_branch2b: {tm: 49, tn: 256, tk: 4608, orientation: normal}
          fc1000: {tm: 2}
          pool1: {tm: 4}
        """)
    assert main(["check", str(plan), "--arch", "tpu_v1", "--workload", "resnet50_b1"]) == 1
    err = capsys.readouterr().err
    assert "operators.res5a_branch2b: B tiles" in err
    assert "operators.fc1000: tm 2 is larger than the operator's M 1" in err
    assert "operators.pool1: tm do not apply to a pool operator" in err


def test_a_fitting_plan_passes_and_plain_check_still_validates(tmp_path, capsys):
    # Operator at a time (`fusion: none`), so every one of the 12 operators is placed.
    plan = write(tmp_path, "plan.yaml", "default: {depth: 3}\nfusion: none\n")
    assert main(["check", str(plan), "--arch", "tpu_v5e_like", "--workload",
                 "bert_base_s128"]) == 0
    assert "plan fits bert_base_s128 on tpu_v5e_like (12 operators)" in \
        capsys.readouterr().out
    assert main(["check", str(plan)]) == 0
    assert "valid mapping" in capsys.readouterr().out


USER_HEURISTIC = """\
from simulator.mapping import Tiling, array_aligned, register

@register("{prefix}_tile")
def tile(op, platform, depth, dataflow):
    base = array_aligned(op, platform, depth, dataflow)
    if op.kind in ("gemm", "conv2d"):
        return Tiling(min(base.tm, 8), base.tn, base.tk, "nmk", dataflow, depth)
    return base

@register("{prefix}_broken")
def broken(op, platform, depth, dataflow):
    return (8, 8, 8)
"""


@pytest.fixture()
def user_plugin(tmp_path):
    """A plugin file registering `<prefix>_tile` and `<prefix>_broken`, loaded; the
    registry is restored afterwards."""
    prefix = f"t{abs(hash(str(tmp_path))) % 10**8}"
    path = tmp_path / "my_tiler.py"
    path.write_text(USER_HEURISTIC.format(prefix=prefix))
    added = mapping_module.load_plugin(path)
    assert added == [f"{prefix}_broken", f"{prefix}_tile"]
    yield prefix
    for name in added:
        del mapping_module._HEURISTICS[name]


def test_plugin_heuristic_is_used(user_plugin):
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    plan = Mapping(default=TilingSpec(heuristic=f"{user_plugin}_tile"))
    result = simulate(Inputs(inputs.platform, inputs.workload, plan))
    gemms = [op.lowered for op in result.operators if op.lowered.unit == "array"]
    assert gemms and all(op.tiling.heuristic == f"{user_plugin}_tile" for op in gemms)
    assert all(op.tiling.tm <= 8 and op.tiling.loop_order == "nmk" for op in gemms)


def test_plugin_heuristic_from_the_command_line_and_verify(tmp_path):
    (tmp_path / "cli_tiler.py").write_text(USER_HEURISTIC.format(prefix="cli"))
    (tmp_path / "plan.yaml").write_text("default: {heuristic: cli_tile}\n")
    # One fresh process (its registry starts with the built-ins only), four commands in
    # order: without the flag the name is unknown (nothing in a plan loads code); with
    # it the run uses it; verify reruns with the registry only until the plugin is named
    # again (then it is executed once, already loaded).
    script = textwrap.dedent("""\
        from simulator.cli import main
        run = ["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
               "--mapping", "plan.yaml", "--json", "r.json"]
        print("codes", main(run), main(run + ["--plugin", "cli_tiler.py"]),
              main(["verify", "r.json"]),
              main(["verify", "r.json", "--plugin", "cli_tiler.py"]))
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert "codes 1 0 0 0" in done.stdout, done.stdout + done.stderr
    assert done.stderr.count("unknown heuristic 'cli_tile'") == 1
    assert '"heuristic": "cli_tile"' in (tmp_path / "r.json").read_text()


def test_names_that_look_like_code_are_never_imported(tmp_path, monkeypatch):
    # A plan (or a result) naming module:function or a file is not executed, even when
    # the module or file is right there in the working directory.
    (tmp_path / "evil.py").write_text("import pathlib; pathlib.Path('ran').touch()\n"
                                      "def tile(*a): pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=64, n=64, k=64)
    for name in ("evil:tile", "evil.py:tile", f"{tmp_path}/evil.py:tile", "os:system"):
        with pytest.raises(AccsimError, match="unknown heuristic"):
            resolve_tiling(op, TilingSpec(heuristic=name), make_platform())
    assert not (tmp_path / "ran").exists() and "evil" not in sys.modules


def test_plugin_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(AccsimError, match=r"bad.py: --plugin: plugin failed to load "
                       r"\(RuntimeError: boom\)"):
        mapping_module.load_plugin(bad)
    clash = tmp_path / "clash.py"
    clash.write_text("from simulator.mapping import register\n"
                     "@register('array_aligned')\ndef f(*a): pass\n")
    with pytest.raises(AccsimError, match="already registered"):
        mapping_module.load_plugin(clash)
    with pytest.raises(AccsimError, match="a plugin is a Python file"):
        mapping_module.load_plugin(tmp_path / "missing.py")


def test_unknown_heuristic_lists_the_known_names(user_plugin):
    with pytest.raises(AccsimError) as info:
        heuristic("fastest_ever")
    message = info.value.message()
    for name in ("array_aligned", "min_offchip", "os_k_inner", f"{user_plugin}_tile",
                 "--plugin"):
        assert name in message
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=64, n=64, k=64)
    with pytest.raises(AccsimError, match="returned tuple, not a simulator.mapping.Tiling"):
        resolve_tiling(op, TilingSpec(heuristic=f"{user_plugin}_broken"), make_platform())


@pytest.mark.parametrize("arch", ["tpu_v1", "tpu_v5e_like", "edge_32x32",
                                  "whatif/tpu_v1_all_dataflows",
                                  "whatif/tpu_v5e_all_dataflows"])
@pytest.mark.parametrize("name", ["array_aligned", "min_offchip", "os_k_inner"])
def test_builtin_heuristics_fit_every_shipped_platform(arch, name):
    inputs = load_inputs(arch, "resnet50_b1", None)
    plan = Mapping(default=TilingSpec(heuristic=name))
    if name == "os_k_inner" and "os" not in inputs.platform.systolic_array.dataflows:
        # The real chips are weight stationary only: the heuristic says why it cannot.
        with pytest.raises(AccsimError, match="os_k_inner needs the os dataflow"):
            simulate(Inputs(inputs.platform, inputs.workload, plan))
        return
    result = simulate(Inputs(inputs.platform, inputs.workload, plan))
    assert all(op.lowered.tiling.heuristic == name for op in result.operators)


def test_os_k_inner_is_output_stationary_with_k_innermost():
    inputs = load_inputs("whatif/tpu_v5e_all_dataflows", "bert_base_s512", None)
    plan = Mapping(default=TilingSpec(heuristic="os_k_inner"))
    for op in simulate(Inputs(inputs.platform, inputs.workload, plan)).operators:
        if op.lowered.unit == "array":
            tiling = op.lowered.tiling
            assert tiling.dataflow == "os" and tiling.loop_order.endswith("k")
            assert not op.lowered.counters.spills


def test_min_offchip_moves_the_fewest_bytes_of_its_candidates():
    # On a small platform every operand must be tiled; min_offchip's off-chip bytes
    # equal the least over every fitting candidate at its dataflow and depth.
    platform = make_platform(buffers={"ifmap_bytes": 512, "weight_bytes": 512,
                                      "output_bytes": 2048})
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=48, n=24, k=40)
    chosen = resolve_tiling(op, TilingSpec(heuristic="min_offchip"), platform)
    moved = lower_compute(op, chosen, platform).counters.offchip_bytes
    least = None
    for tm in dim_candidates(48, (8,)):
        for tn in dim_candidates(24, (8,)):
            for tk in dim_candidates(40, (8,)):
                for order in LOOP_ORDERS:
                    tiling = Tiling(tm, tn, tk, order, chosen.dataflow, chosen.depth)
                    try:
                        lowered = lower_compute(op, tiling, platform)
                    except AccsimError:
                        continue
                    bytes_ = lowered.counters.offchip_bytes
                    least = bytes_ if least is None else min(least, bytes_)
    assert moved == least


def test_tiling_canonical_order_is_total_and_ignores_the_heuristic_name():
    a = Tiling(8, 8, 16, "mnk", "os", 2, heuristic="x")
    b = Tiling(8, 8, 16, "mnk", "os", 2, heuristic="y")
    c = Tiling(8, 8, 16, "kmn", "os", 2)
    assert a.sort_key() == b.sort_key()
    assert sorted([a, c], key=Tiling.sort_key) == [c, a]
    assert a.spec().tm == 8 and a.describe() == "8x8x16 mnk os d2"


def test_dim_candidates_are_divisors_and_array_multiples():
    assert dim_candidates(12, (8,)) == [1, 2, 3, 4, 6, 8, 12]
    assert dim_candidates(20, (8, 16)) == [1, 2, 4, 5, 8, 10, 16, 20]
    assert np.all(np.diff(dim_candidates(12544, (256,))) > 0)
