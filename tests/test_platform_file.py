"""Platforms as a base plus overrides (issue 40 item 5, simulator.inputs.platform_file): the
merge rule, the provenance that follows the values, cycles and bad bases refused with
the file and field named, the chain's sha256, and the shipped what-ifs as short files
over the chip they vary."""

from __future__ import annotations

import json

import pytest
import yaml

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.inputs.loader import locate, shipped_folder, shipped_names
from simulator.inputs.platform_file import as_file, load_platform, overridden, overrides_of
from tests.platforms import BASE

WHATIFS = [name for name in shipped_names("platform") if name.startswith("whatif/")]


def _write(path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


@pytest.fixture
def base_file(tmp_path):
    provenance = {"clock_ghz": {"kind": "published", "source": "datasheet"},
                  "dma.setup_cycles": {"kind": "assumed", "range": [0, 4]},
                  "offchip.latency_cycles": {"kind": "assumed", "range": [5, 20]}}
    return _write(tmp_path / "chip.yaml", {**BASE, "provenance": provenance})


def test_mappings_merge_lists_replace_and_null_drops(tmp_path, base_file):
    over = _write(tmp_path / "over.yaml", {
        "base": "chip.yaml", "name": "chip_fast",
        "offchip": {"bandwidth_gbps": 64.0},                 # merged into offchip
        "systolic_array": {"dataflows": ["ws"]},             # a list: replaced whole
        "energy": {"static_power": {"array_w": 0.5}}})
    platform, _ = load_platform(over)
    base, _ = load_platform(base_file)
    assert platform.offchip.bandwidth_gbps == 64.0
    assert platform.offchip.latency_cycles == base.offchip.latency_cycles == 10
    assert platform.systolic_array.dataflows == ["ws"]
    assert platform.systolic_array.rows == 8
    assert platform.energy.static_power.array_w == 0.5
    assert platform.energy.static_power.sram_w == 0.1
    assert platform.name == "chip_fast"
    merged = overridden({"a": {"b": 1, "c": [1, 2]}, "t": {"x": 1}},
                        {"a": {"c": [3]}, "t": None})
    assert merged == {"a": {"b": 1, "c": [3]}, "t": None}


def test_provenance_follows_the_values(tmp_path, base_file):
    over = _write(tmp_path / "over.yaml", {
        "base": "chip.yaml", "name": "chip_slow_dma", "dma": {"setup_cycles": 9},
        "provenance": {"dma.setup_cycles": {"kind": "assumed", "range": [8, 10]}}})
    platform, _ = load_platform(over)
    assert platform.provenance["dma.setup_cycles"].range == [8, 10]  # the file's entry
    assert platform.provenance["clock_ghz"].source == "datasheet"  # the base's, kept
    bare = _write(tmp_path / "bare.yaml", {"base": "chip.yaml", "name": "chip_x",
                                           "offchip": {"latency_cycles": 50}})
    # the base's entry (range 5..20) is dropped with its value: 50 is not refused
    assert "offchip.latency_cycles" not in load_platform(bare)[0].provenance


def test_a_relative_base_resolves_against_the_files_folder(tmp_path, base_file,
                                                           monkeypatch):
    (tmp_path / "sub").mkdir()
    over = _write(tmp_path / "sub" / "over.yaml", {"base": "../chip.yaml", "name": "v",
                                                   "clock_ghz": 2.0})
    monkeypatch.chdir(tmp_path / "sub")
    assert load_platform("over.yaml")[0].clock_ghz == 2.0
    monkeypatch.chdir("/")
    assert load_platform(over)[0].clock_ghz == 2.0


@pytest.mark.parametrize("files, at, field, fragment", [
    ({"a.yaml": {"base": "b.yaml", "name": "a"}, "b.yaml": {"base": "a.yaml", "name": "b"}},
     "b.yaml", "base", "cycle"),
    ({"a.yaml": {"base": "a.yaml", "name": "a"}}, "a.yaml", "base", "cycle"),
    ({"a.yaml": {"base": "nowhere.yaml", "name": "a"}}, "a.yaml", "base",
     "no such platform file"),
    ({"a.yaml": {"base": 3, "name": "a"}}, "a.yaml", "base", "must name"),
    ({"a.yaml": {"base": "chip.yaml", "offchip": {"bandwidth_gbps": 1.0}}}, "a.yaml",
     "name", "names itself"),
    ({"a.yaml": {"base": "chip.yaml", "name": "a", "offchip": {"bandwith_gbps": 1.0}}},
     "a.yaml", "offchip.bandwith_gbps", "unknown field"),
    ({"a.yaml": {"base": "chip.yaml", "name": "a", "clock_ghz": -1.0}}, "a.yaml",
     "clock_ghz", ""),
    ({"a.yaml": {"base": "chip.yaml", "name": "a", "dma": {"setup_cycles": 99},
                 "provenance": {"dma.setup_cycles": {"kind": "assumed", "range": [0, 4]}}}},
     "a.yaml", "provenance.dma.setup_cycles", "range"),
])
def test_bad_bases_and_overrides_name_the_file_and_field(tmp_path, base_file, files, at,
                                                         field, fragment):
    for name, data in files.items():
        _write(tmp_path / name, data)
    with pytest.raises(AccsimError) as caught:
        load_platform(tmp_path / "a.yaml")
    assert caught.value.file == str(tmp_path / at)
    assert caught.value.field == field
    assert fragment in caught.value.rule


def test_a_fault_in_the_base_names_the_base(tmp_path):
    _write(tmp_path / "chip.yaml", {**BASE, "clock_ghz": "fast"})
    over = _write(tmp_path / "over.yaml", {"base": "chip.yaml", "name": "v"})
    with pytest.raises(AccsimError) as caught:
        load_platform(over)
    assert (caught.value.file, caught.value.field) == (str(tmp_path / "chip.yaml"),
                                                       "clock_ghz")


def test_the_chain_sha256_moves_with_the_base_and_verify_names_it(tmp_path, base_file,
                                                                   capsys):
    over = _write(tmp_path / "over.yaml", {"base": "chip.yaml", "name": "v"})
    _, whole = load_platform(base_file)
    _, source = load_platform(over)
    assert whole.sha256 == __import__("hashlib").sha256(
        (tmp_path / "chip.yaml").read_bytes()).hexdigest()  # a whole file: its own
    result = tmp_path / "r.json"
    gemm = _write(tmp_path / "w.yaml", {"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 64, "k": 64}]})
    assert main(["run", "--arch", over, "--workload", gemm, "--json", str(result)]) == 0
    recorded = json.loads(result.read_text())["manifest"]["inputs"]["platform"]
    assert recorded["sha256"] == source.sha256 != whole.sha256
    assert recorded["canonical"]["name"] == "v"   # the resolved platform is embedded
    capsys.readouterr()
    assert main(["verify", str(result)]) == 0
    text = (tmp_path / "chip.yaml").read_text()
    (tmp_path / "chip.yaml").write_text(text.replace("setup_cycles: 2",
                                                     "setup_cycles: 3"))
    assert load_platform(over)[1].sha256 != source.sha256
    assert main(["verify", str(result)]) == 1
    assert f"platform: {over} (sha256 changed since the run)" in capsys.readouterr().out


@pytest.mark.parametrize("name", WHATIFS)
def test_each_shipped_whatif_is_its_base_with_what_it_overrides(name):
    path = locate(name, "platform")
    base_path, fields = overrides_of(path)
    assert base_path is not None, f"{name} is a whole copy, not a file over a base"
    assert len(path.read_text().splitlines()) < 60
    platform, _ = load_platform(path)
    base, _ = load_platform(base_path)
    assert platform.name == name
    raw, base_raw = as_file(platform), as_file(base)
    overridden_paths = {field for field, _, _ in fields}
    for field, was, now in fields:
        *parents, last = field.split(".")
        node = raw
        for part in parents:
            node = node[part]
        if now is None:  # a null override drops the base's optional field
            assert last not in node, (name, field)
        else:
            assert node[last] == now
    # every other field is the base's, the interconnect table included
    assert platform.interconnect == base.interconnect or \
        any(p.startswith("interconnect") for p in overridden_paths)
    for key in raw:
        if key not in {"name", "description", "provenance"} and \
                not any(p == key or p.startswith(key + ".") for p in overridden_paths):
            assert raw[key] == base_raw.get(key), (name, key)
    # an overridden number cites the file's own source
    for field in overridden_paths:
        if field in platform.numeric_fields():
            assert field in platform.provenance, (name, field)


def test_the_256x256_whatif_builds_multi_chip_deployments_as_its_chip_does(capsys):
    """Its copy had lost the interconnect table of tpu_v5e_like (issue 40), so every
    multi-chip deployment of it was refused as one that cannot be built."""
    platform, _ = load_platform(locate("whatif/tpu_v5e_256x256", "platform"))
    assert platform.interconnect is not None
    assert platform.systolic_array.macs_per_cycle == {"bf16": 1, "int8": 2}
    assert main(["run", "--arch", "whatif/tpu_v5e_256x256", "--model", "llama_3_1_8b",
                 "--phase", "decode", "--context", "512", "--tp", "2"]) == 0


def test_check_lists_what_a_file_overrides(capsys):
    assert main(["check", "whatif/tpu_v5e_switch"]) == 0
    out = capsys.readouterr().out
    # topology, ports, link bandwidth, and the base's wired axes dropped (a switch)
    assert f"base: {shipped_folder('platform') / 'tpu_v5e_like.yaml'}; this file " \
        "overrides 4 fields:" in out
    assert "  interconnect.ports_per_chip: 18  (base: 4; published)" in out
    assert "  interconnect.topology: \"switch\"  (base: \"torus2d\")" in out
    assert main(["check", "tpu_v5e_like"]) == 0
    assert "overrides" not in capsys.readouterr().out


def test_a_shipped_whatif_runs_by_name_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--arch", "whatif/tpu_v5e_256x256", "--workload",
                 "gemm_4096"]) == 0
    assert "256x256" in capsys.readouterr().out
