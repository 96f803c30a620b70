"""The reference pages are generated from the code (issue 29): the Python API page by
mkdocstrings from simulator.api's docstrings, the CLI page by docs/hooks/cli_reference.py
from accsim's own argparse parser. mkdocstrings leaves out members without a
docstring, so every public name of the API must carry one; the CLI page must hold every
verb and every option the parser knows."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
from pathlib import Path

import yaml

import simulator.api as accsim
from simulator.cli import VERBS, build_parser

ROOT = Path(__file__).resolve().parent.parent


def hook():
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_members(cls) -> list[str]:
    return [name for name, member in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(member)
                                             or isinstance(member, property))]


def test_every_public_name_of_the_api_has_a_docstring():
    missing = []
    for name in accsim.__all__:
        value = getattr(accsim, name)
        if not inspect.getdoc(value):
            missing.append(name)
        if inspect.isclass(value):
            missing += [f"{name}.{member}" for member in public_members(value)
                        if not inspect.getdoc(getattr(value, member))]
    assert missing == []
    assert len(accsim.__all__) >= 12


def test_the_api_page_is_rendered_from_the_module():
    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    assert "::: simulator.api" in page
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    plugins = [next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]]
    assert "mkdocstrings" in plugins


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings
            if option.startswith("--")]


def test_the_cli_page_holds_every_verb_and_option():
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert hook().MARKER in page
    rendered = hook().cli_reference()
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(verbs.choices) == set(VERBS)
    for verb, verb_parser in verbs.choices.items():
        section = rendered.split(f"## accsim {verb}\n", 1)
        assert len(section) == 2, verb
        text = section[1]
        missing = [o for o in _options(verb_parser) if o not in text]
        assert missing == [], (verb, missing)
