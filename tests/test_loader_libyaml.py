"""parse_yaml reads with libyaml's parser where PyYAML has it, and with the pure-Python
one otherwise: both must give the same data for every text, and the same error for a
text either finds at fault (simulator.inputs.loader)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.inputs import loader
from simulator.errors import AccsimError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(path for folder in ("arch_configs", "workloads", "experiments")
                 for path in (ROOT / folder).rglob("*.yaml"))

# Texts whose reading touches each rule and the scanner's corners.
SNIPPETS = [
    "a: 1\nb: 1.5\nc: -2e3\nd: .inf\ne: -.inf\nf: .nan\ng: 0x1F\nh: 0o17\n",
    "yes: no\non: off\ny: n\nt: true\nf: FALSE\nnull_value: null\ntilde: ~\n",
    "a: 0100\n",                              # leading zero: refused
    "a: 1_000\nb: 1:20\nc: 2001-12-14\n",     # YAML 1.1 forms read as text
    "a: &x 1\nb: *x\n",                       # alias: refused
    "a: 1\na: 2\n",                           # duplicate key: refused
    "- [1, 2, {a: b}]\n- {c: [d, e]}\n- 'single ''q'''\n- \"double \\u00e9 \\t\"\n",
    "text: |\n  line one\n  line two\nfolded: >-\n  one\n  two\n\nkeep: |+\n  x\n\n",
    "? complex key\n: value\n",
    "# only a comment\n",
    "",
    "a: b: c\n",                              # malformed
    "a:\n\t- b\n",                            # a tab in indentation
    "[1, 2\n",                                # unterminated flow
    "a: \"unterminated\n",
    "\ufeffa: 1\n",                           # byte order mark
    "a: caf\u00e9 \U0001F600\n",
    "a: \x07\n",                              # a control character
    "--- 1\n--- 2\n",                         # two documents
    "a: !!str 5\nb: !!int '7'\nc: !!float 3\n",
    "a: !custom 1\n",                         # an unknown tag
    "[" * 120 + "]" * 120,                    # nested past MAX_NESTING
    "a: " + "9" * 5000 + "\n",                # an int past Python's digit limit
]


def _read(text: str, reader):
    """The data a loader reads, or the type and message of what it raises."""
    try:
        return "data", repr(yaml.load(text, Loader=reader))  # noqa: S506 (SafeLoaders)
    except Exception as exc:  # noqa: BLE001 (the comparison is the test)
        return "error", type(exc).__name__


def _parsed(text: str):
    try:
        return "data", repr(loader.parse_yaml(text, file="f.yaml"))
    except AccsimError as exc:
        return "error", exc.message()


needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__,
                                   reason="PyYAML built without libyaml")


@needs_libyaml
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_files_read_alike(path):
    text = path.read_text(encoding="utf-8")
    fast = _read(text, loader._StrictEventLoader)
    assert fast[0] == "data"
    assert fast == _read(text, loader._StrictLoader)


@needs_libyaml
@pytest.mark.parametrize("text", SNIPPETS)
def test_snippets_read_alike(text):
    fast, reference = _read(text, loader._StrictEventLoader), \
        _read(text, loader._StrictLoader)
    if reference[0] == "data":
        assert fast == reference
    else:   # parse_yaml then reads it again with the reference, for its message
        assert fast[0] == "error"


@needs_libyaml
@pytest.mark.parametrize("text", SNIPPETS)
def test_errors_are_the_references(monkeypatch, text):
    """parse_yaml gives what the pure-Python loader alone gives, data or message."""
    both = _parsed(text)
    monkeypatch.setattr(loader, "_StrictEventLoader", loader._StrictLoader)
    assert both == _parsed(text)


def test_shipped_corpus_is_found():
    assert len(SHIPPED) >= 20
