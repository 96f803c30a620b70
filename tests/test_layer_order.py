"""The package's layer order (experiments/layer_order.py, DESIGN.md section 1): no import
runs back up, every module is in a layer, no two modules share a name, and the root keeps
at most 15 modules."""

import runpy
from pathlib import Path

LAYERS = runpy.run_path(str(Path(__file__).parents[1] / "experiments" / "layer_order.py"))


def test_no_import_runs_back_up():
    assert LAYERS["back_up_imports"]() == []


def test_a_back_up_import_is_found(tmp_path, monkeypatch):
    """The check can fail: a model module importing the simulate layer is named."""
    package = tmp_path / "simulator"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "simulate.py").write_text("")
    (package / "model" / "__init__.py").write_text("")
    (package / "model" / "timing.py").write_text("from simulator.simulate import x\n")
    check = runpy.run_path(str(Path(__file__).parents[1] / "experiments" / "layer_order.py"),
                           init_globals={})
    check["back_up_imports"].__globals__["PACKAGE"] = package
    found = check["back_up_imports"]()
    assert found == ["back-up import: simulator.model.timing:1 -> simulator.simulate "
                     "(model -> simulate)"]


def test_the_root_holds_at_most_15_modules():
    root = Path(__file__).parents[1] / "simulator"
    assert len(list(root.glob("*.py"))) <= 15


def test_no_two_modules_share_a_name():
    assert LAYERS["repeated_names"]() == []


def test_a_repeated_name_is_found(tmp_path):
    """The check can fail: two `plan` modules in two wings are named with both homes."""
    package = tmp_path / "simulator"
    for wing in ("lowering", "mapping"):
        (package / wing).mkdir(parents=True)
        (package / wing / "__init__.py").write_text("")
        (package / wing / "plan.py").write_text("")
    (package / "__init__.py").write_text("")
    check = runpy.run_path(str(Path(__file__).parents[1] / "experiments" / "layer_order.py"),
                           init_globals={})
    check["repeated_names"].__globals__["PACKAGE"] = package
    assert check["repeated_names"]() == [
        "repeated name: plan (simulator.lowering.plan, simulator.mapping.plan)"]
