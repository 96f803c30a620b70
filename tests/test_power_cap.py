"""A chip under a power cap (DESIGN.md section 20): the clock falls to the highest DVFS
point whose modelled power at the run's utilisation fits, and every figure of the capped
run equals a plain run of a platform written at that clock directly (its energy table
scaled as simulator.inputs.dvfs documents: dynamic energy by (V/V0)^2, on-chip static
power by V/V0). A DVFS table alone, or a cap the nominal clock fits, changes nothing.
Bad tables are one clear error naming the file, the field and the rule."""

from __future__ import annotations

import json

import pytest
import yaml
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.loader import locate, validate_model
from simulator.inputs.platform import Platform
from simulator.inputs.platform_file import load_platform
from simulator.metrics.power_cap import platform_at

CAPPED = "whatif/tpu_v5e_capped"
NOMINAL_V = 0.75   # the what-if's last point, at tpu_v5e_like's 1.5 GHz
DYNAMIC = ("sram_read_pj_per_byte", "sram_write_pj_per_byte", "vector_op_pj")
STATIC = ("array_w", "sram_w", "vector_w", "other_w")   # on-chip: scaled by V/V0
SERVE = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "48",
         "--rate", "2000", "--no-cost-cache"]


def direct_platform(folder, clock_mhz: float, voltage_v: float) -> str:
    """tpu_v5e_like written at a clock and voltage directly, its energy table scaled by
    hand from the documented model (no DVFS table, no cap)."""
    base, _ = load_platform(locate("tpu_v5e_like", "platform"))
    energy = base.energy
    ratio = voltage_v / NOMINAL_V
    path = folder / f"direct_{clock_mhz:g}.yaml"
    path.write_text(yaml.safe_dump({
        "base": "tpu_v5e_like", "name": "direct", "clock_ghz": clock_mhz / 1e3,
        "energy": {"mac_pj": {dtype: pj * (ratio * ratio)
                              for dtype, pj in energy.mac_pj.items()},
                   **{name: getattr(energy, name) * (ratio * ratio) for name in DYNAMIC},
                   "static_power": {name: getattr(energy.static_power, name) * ratio
                                    for name in STATIC}}}))
    return str(path)


def voltage_at(clock_mhz: float) -> float:
    table = load_platform(locate(CAPPED, "platform"))[0].dvfs.points
    return next(point.voltage_v for point in table if point.clock_mhz == clock_mhz)


def run_json(folder, name: str, *args) -> dict:
    out = folder / f"{name}.json"
    assert main(["run", *args, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def figures(result: dict) -> dict:
    """A result's simulated figures: all but its manifest and the cap's record."""
    return {key: value for key, value in result.items()
            if key not in ("manifest", "power_cap", "capacity")}


def test_a_capped_run_equals_a_plain_run_at_the_capped_clock(tmp_path, capsys):
    capped = run_json(tmp_path, "capped", "--arch", CAPPED, "--workload", "gemm_4096")
    shown = capsys.readouterr().out
    cap = capped["power_cap"]
    assert cap["cap_w"] == 105.0 and cap["clock_mhz"] < cap["nominal_clock_mhz"] == 1500
    assert f"power cap 105 W: clock {cap['clock_mhz']:,.0f} MHz" in shown
    # The highest point that fits: every point above it draws more than the cap.
    tried = cap["tried"]
    assert [t["clock_mhz"] for t in tried] == sorted((t["clock_mhz"] for t in tried),
                                                    reverse=True)
    assert all(t["power_w"] > 105.0 for t in tried[:-1]) and tried[-1]["power_w"] <= 105.0
    assert capped["workload"]["average_power_w"] == pytest.approx(cap["power_w"], rel=1e-12)
    plain = run_json(tmp_path, "plain", "--arch", direct_platform(
        tmp_path, cap["clock_mhz"], voltage_at(cap["clock_mhz"])), "--workload", "gemm_4096")
    assert figures(capped) == figures(plain)
    # and the cap moved them: the nominal run is faster and draws more than the cap
    nominal = run_json(tmp_path, "nominal", "--arch", "tpu_v5e_like", "--workload",
                       "gemm_4096")
    capsys.readouterr()
    assert nominal["workload"]["time_s"] < capped["workload"]["time_s"]
    assert nominal["workload"]["average_power_w"] > 105.0


def test_a_capped_serving_run_equals_one_at_the_capped_clock(tmp_path, capsys):
    model = tmp_path / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))

    def serve(arch: str, name: str, *extra) -> dict:
        out = tmp_path / f"{name}.json"
        assert main(["serve", "--arch", arch, "--model", str(model), *SERVE,
                     "--json", str(out), *extra]) == 0
        return json.loads(out.read_text())

    capped = serve(CAPPED, "capped", "--power-cap-w", "60")
    cap = capped["power_cap"]
    assert cap["cap_w"] == 60.0 and cap["clock_mhz"] < 1500 and cap["power_w"] <= 60
    plain = serve(direct_platform(tmp_path, cap["clock_mhz"], voltage_at(cap["clock_mhz"])),
                  "plain")
    nominal = serve("tpu_v5e_like", "nominal")
    assert "power cap 60 W: clock" in capsys.readouterr().out
    assert figures(capped) == figures(plain)
    assert figures(capped) != figures(nominal)
    assert capped["ttft_ms"]["p50"] > nominal["ttft_ms"]["p50"]


def test_a_table_alone_or_a_cap_the_nominal_clock_fits_changes_nothing(tmp_path, capsys):
    nominal = run_json(tmp_path, "nominal", "--arch", "tpu_v5e_like", "--workload",
                       "gemm_4096")
    fits = run_json(tmp_path, "fits", "--arch", CAPPED, "--workload", "gemm_4096",
                    "--power-cap-w", "500")
    capsys.readouterr()
    assert fits["power_cap"]["clock_mhz"] == 1500 and len(fits["power_cap"]["tried"]) == 1
    assert figures(fits) == figures(nominal)
    # the what-if's table with its cap dropped: the base's figures exactly
    platform, _ = load_platform(locate(CAPPED, "platform"))
    assert platform_at(platform, 4, file=None).model_dump(exclude={"name", "description",
                                                                   "dvfs"}) == \
        load_platform(locate("tpu_v5e_like", "platform"))[0].model_dump(
            exclude={"name", "description"})


def test_a_point_given_by_its_full_load_power_scales_energy_by_power_per_clock():
    platform, _ = load_platform(locate("tpu_v5e_like", "platform"))
    raw = platform.model_dump(mode="json")
    static = 45.0  # tpu_v5e_like's static power, W
    raw["dvfs"] = {"points": [{"clock_mhz": 1000, "power_w": 85.0},
                              {"clock_mhz": 1500, "power_w": 150.0}]}
    raw["provenance"] = {f"dvfs.points.{i}.{name}": {"kind": "assumed", "range": [0, 2000]}
                         for i in (0, 1) for name in ("clock_mhz", "power_w")}
    at = platform_at(validate_model(raw, Platform, file="t.yaml"), 0, file="t.yaml")
    scale = ((85.0 - static) / 1000) / ((150.0 - static) / 1500)
    assert at.clock_ghz == 1.0
    assert at.energy.mac_pj["bf16"] == pytest.approx(platform.energy.mac_pj["bf16"] * scale)
    assert at.energy.static_power == platform.energy.static_power
    assert at.energy.offchip_pj_per_byte == platform.energy.offchip_pj_per_byte


POINTS = [{"clock_mhz": 900, "voltage_v": 0.6}, {"clock_mhz": 1500, "voltage_v": 0.75}]


@pytest.mark.parametrize("dvfs, field, rule", [
    ({"points": []}, "dvfs.points", "at least 1 item"),
    ({"points": [POINTS[1], POINTS[0]]}, "dvfs.points[1].clock_mhz",
     "points are in strictly ascending clock order: 900 MHz follows 1500 MHz"),
    ({"points": [{"clock_mhz": 900, "voltage_v": 0.8}, POINTS[1]]},
     "dvfs.points[1].voltage_v", "voltage_v falls as the clock rises"),
    ({"points": [{"clock_mhz": 900, "voltage_v": -0.6}, POINTS[1]]},
     "dvfs.points[0].voltage_v", "greater than 0"),
    ({"points": [{"clock_mhz": -900, "voltage_v": 0.6}, POINTS[1]]},
     "dvfs.points[0].clock_mhz", "greater than 0"),
    ({"points": [POINTS[0], {"clock_mhz": 1400, "voltage_v": 0.75}]},
     "dvfs.points[1].clock_mhz", "the last (highest) point is the platform's clock_ghz, "
     "1500 MHz"),
    ({"points": [{"clock_mhz": 900}, POINTS[1]]}, "dvfs.points[0]",
     "a DVFS point gives voltage_v or power_w (one of them)"),
    ({"points": [{"clock_mhz": 900, "power_w": 40}, {"clock_mhz": 1500, "power_w": 150}]},
     "dvfs.points[0].power_w", "40 W is not above the platform's static power, 45 W"),
    ({"points": [{"clock_mhz": 900, "power_w": 90}, POINTS[1]]}, "dvfs.points[1]",
     "every point gives the same figure"),
    ({"points": POINTS, "power_cap_w": 0}, "dvfs.power_cap_w", "greater than 0"),
])
def test_a_bad_dvfs_table_is_one_clear_error(tmp_path, capsys, dvfs, field, rule):
    path = tmp_path / "bad.yaml"
    cited = {f"dvfs.points.{i}.{name}": {"kind": "assumed", "range": [-2000, 2000]}
             for i in range(len(dvfs["points"])) for name in ("clock_mhz", "voltage_v",
                                                              "power_w")
             if name in dvfs["points"][i]}
    path.write_text(yaml.safe_dump({"base": "tpu_v5e_like", "name": "bad", "dvfs": dvfs,
                                    "provenance": cited}))
    assert main(["run", "--arch", str(path), "--workload", "gemm_4096"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{path}: {field}: " in err and rule in err, err


def test_an_uncited_dvfs_value_is_refused(tmp_path, capsys):
    path = tmp_path / "uncited.yaml"
    path.write_text(yaml.safe_dump({"base": "tpu_v5e_like", "name": "uncited",
                                    "dvfs": {"points": POINTS}}))
    assert main(["run", "--arch", str(path), "--workload", "gemm_4096"]) == 1
    err = capsys.readouterr().err
    assert f"{path}: dvfs.points[0].clock_mhz: a DVFS value or cap must be cited or " \
        "marked assumed: add a provenance entry dvfs.points.0.clock_mhz" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("arch, cap, message", [
    (CAPPED, "5", f"{CAPPED}.yaml: --power-cap-w: no DVFS point fits the power cap of "
     "5 W: the lowest, 900 MHz, draws"),
    ("tpu_v5e_like", "100", "tpu_v5e_like.yaml: --power-cap-w: a power cap needs the "
     "platform's DVFS table (dvfs.points) to choose a clock from"),
    (CAPPED, "-1", "--power-cap-w: -1 is outside (0, 1,000,000] watts"),
])
def test_a_cap_nothing_fits_is_one_clear_error(capsys, arch, cap, message):
    assert main(["run", "--arch", arch, "--workload", "gemm_4096", "--power-cap-w",
                 cap]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_capped_deployment_search_equals_one_at_the_capped_clock(tmp_path, capsys):
    model = tmp_path / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))

    def search(arch: str, name: str, *extra) -> dict:
        out = tmp_path / f"{name}.json"
        assert main(["plan-deployment", "--arch", arch, "--model", str(model),
                     *SERVE[:6], "--sla", "ttft_p99_ms=0.5,tpot_p99_ms=0.2",
                     "--budget-chips", "1", "--max-batch", "16", "--scheduler", "serial",
                     "--json", str(out), *extra]) == 0
        return json.loads(out.read_text())

    capped = search(CAPPED, "capped", "--power-cap-w", "60")
    (point,) = capped["points"]
    clock = point["power_cap"]["clock_mhz"]
    assert clock < 1500
    plain = search(direct_platform(tmp_path, clock, voltage_at(clock)), "plain")
    capsys.readouterr()
    (same,) = plain["points"]

    def unnamed(row: dict) -> dict:
        return {k: v for k, v in row.items() if k not in ("arch", "key", "power_cap")}
    assert unnamed(point) == unnamed(same)
    best, direct = capped["best"][CAPPED], plain["best"][same["arch"]]
    assert best["binding"] == direct["binding"]
