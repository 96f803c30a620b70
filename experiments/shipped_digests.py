"""Digests of every shipped platform x workload result, and of every shipped Hugging Face
model's prefill and decode step on every shipped platform: a regression net that says
whether a change of code (a refactor) leaves every simulated figure byte-identical.

Each pair runs on the fast engine under the default mapping, as `accsim run` does.
Its result (report.result_dict) loses only what differs between checkouts of the same
code: the accsim version, the git commit, the library versions, and each input's file
path and file sha256 (the canonical inputs stay). The rest is written as canonical JSON
(sorted keys, no spaces) and hashed per top-level key, so a mismatch names the parts
of the result that moved. A pair that raises AccsimError is recorded as its message,
with the shipped folders' absolute paths replaced by placeholders.

Run: `python experiments/shipped_digests.py` writes tests/data/shipped_digests.json;
`--check` recomputes every pair and exits 1 listing those that differ from the file
(tests/test_shipped_identical.py checks the same, pair by pair).

`--fusion MODE` builds every pair's mapping under that fusion mode (as `accsim run
--fusion MODE` does) and uses its own file, tests/data/shipped_digests_fusion_MODE.json.
Such a net pins one mode's figures across changes of the default timing model, so its
manifest also loses `model_version` (which counts those changes): `--fusion none` must
keep reproducing the operator-at-a-time figures of MODEL_VERSION 3 exactly
(tests/test_fusion_none_identical.py), with every GEMM run normal (orientation came
later).

`--orientation MODE` builds every pair's mapping under that operand orientation mode (as
`accsim run --orientation MODE` does) against tests/data/shipped_digests_orientation_MODE
.json, a net of one fixed mode as `--fusion` writes. `--orientation normal` must keep
reproducing the figures of MODEL_VERSION 5, before orientation existed, exactly
(tests/test_orientation_normal_identical.py). The manifest of a fixed mode's net also
loses what orientation added to the inputs (the mapping's `orientation`, the platform's
`systolic_array.transpose` and its assumed value), which no figure of a normal run
reads.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from simulator.inputs.named_inputs import DEFAULT_WORKLOAD, load_inputs
from simulator.errors import AccsimError
from simulator.frontends.hf import llm_command as hf_command
from simulator.frontends.hf.config import shipped_configs
from simulator.mapping.plan import FUSION_MODES, ORIENTATION_MODES
from simulator.inputs.loader import dump_json, read_source, shipped_folder, shipped_names
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs, simulate

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
DIGESTS = DATA / "shipped_digests.json"
# The sizes of the LLM steps (`accsim run --model NAME --phase ...`): 2048 tokens, or
# the most the model's positions allow (prefill seq, decode context + the new token);
# batch and dtypes are the CLI's defaults (1, the platform's).
PHASES = {"prefill": "--seq", "decode": "--context"}
LENGTH = 2048


def phase_options(model: str, phase: str) -> list[str]:
    """The step's size options: LENGTH, capped one below the model's position count."""
    config = json.loads((Path(shipped_folder("workload")) / "hf" / f"{model}.json")
                        .read_text())
    positions = config.get("max_position_embeddings") or config.get("n_positions")
    length = min(LENGTH, positions - 1) if positions else LENGTH
    return [PHASES[phase], str(length)]
# Manifest fields, and fields of each embedded input, that are no simulated figure and
# no canonical input: they change with the checkout, not with the model.
CHECKOUT_FIELDS = ("accsim_version", "git_commit", "environment")
SOURCE_FIELDS = ("path", "sha256")
ERROR = "error: "


def digests_file(fusion: str | None, orientation: str | None = None) -> Path:
    """The stored digests of the default run, or of the run under one fusion mode, or
    under one orientation mode."""
    if orientation is not None:
        return DATA / f"shipped_digests_orientation_{orientation}.json"
    return DIGESTS if fusion is None else DATA / f"shipped_digests_fusion_{fusion}.json"


def hf_inputs(arch: str, model: str, phase: str, fusion: str | None = None,
              orientation: str | None = None) -> Inputs:
    """The inputs `accsim run ARCH --model MODEL --phase PHASE [--fusion MODE]
    [--orientation MODE]` builds (default mapping)."""
    parser = argparse.ArgumentParser()
    hf_command.add_arguments(parser)
    step = hf_command.llm_step(parser.parse_args(["--phase", phase,
                                                  *phase_options(model, phase)]), model)
    base = load_inputs(arch, DEFAULT_WORKLOAD, None, fusion=fusion,
                       orientation=orientation)
    return Inputs(base.platform, step.workload(), base.mapping, base.platform_source,
                  read_source(step.config.source), base.mapping_source)


def shipped_pairs(fusion: str | None = None,
                  orientation: str | None = None) -> dict[str, Callable[[], Inputs]]:
    """Every pair's name and how to load its inputs (under `fusion` or `orientation`:
    that mode's mapping), in a stable order."""
    platforms = shipped_names("platform")
    pairs: dict[str, Callable[[], Inputs]] = {}
    for arch, workload in itertools.product(platforms, shipped_names("workload")):
        pairs[f"{arch} x {workload}"] = \
            lambda arch=arch, workload=workload: load_inputs(arch, workload, None,
                                                            fusion=fusion,
                                                            orientation=orientation)
    for arch, model, phase in itertools.product(platforms, shipped_configs(), PHASES):
        pairs[f"{arch} x hf/{model} {phase} {' '.join(phase_options(model, phase))}"] = \
            lambda arch=arch, model=model, phase=phase: hf_inputs(arch, model, phase,
                                                                 fusion, orientation)
    return pairs


def stable_result(inputs: Inputs, *, fixed_mode: bool = False) -> dict:
    """The fast engine's result dict without the fields that vary between checkouts
    (`fixed_mode`: nor the model version and the inputs orientation added, for the net
    of one fixed mode)."""
    data = result_dict(simulate(inputs, engine="fast"))
    manifest = data["manifest"]
    for field in CHECKOUT_FIELDS + (("model_version",) if fixed_mode else ()):
        del manifest[field]
    for embedded in manifest["inputs"].values():
        for field in SOURCE_FIELDS:
            del embedded[field]
    if fixed_mode:   # what orientation added: the mode, the platform's transposes
        canonical = manifest["inputs"]
        canonical["mapping"]["canonical"].pop("orientation", None)
        canonical["platform"]["canonical"]["systolic_array"].pop("transpose", None)
        for path in [p for p in manifest.get("assumptions", {})
                     if p.startswith("systolic_array.transpose.")]:
            del manifest["assumptions"][path]
    return data


def without_checkout_paths(text: str) -> str:
    """`text` with the shipped folders' absolute paths as placeholders."""
    for kind in ("platform", "workload"):
        text = text.replace(str(shipped_folder(kind)), f"<shipped {kind}s>")
    return text


def digest(data: dict) -> str:
    """One short sha256 per top-level key of the canonical JSON, as "key=hex" words."""
    def part(value) -> str:
        text = without_checkout_paths(dump_json(value, sort_keys=True,
                                                separators=(",", ":")))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    return " ".join(f"{key}={part(data[key])}" for key in sorted(data))


def pair_digest(load: Callable[[], Inputs], *, fixed_mode: bool = False) -> str:
    """The digest of a pair's result, or "error: MESSAGE" when it raises AccsimError."""
    try:
        return digest(stable_result(load(), fixed_mode=fixed_mode))
    except AccsimError as exc:
        return ERROR + without_checkout_paths(str(exc))


def difference(stored: str | None, now: str | None) -> str:
    """Why a pair's stored digest and its digest now differ, in a few words."""
    if stored is None:
        return "not in the stored file (newly shipped?)"
    if now is None:
        return "in the stored file, no longer shipped"
    if stored.startswith(ERROR) or now.startswith(ERROR):
        return f"was {stored!r}, now {now!r}"
    before = dict(word.split("=") for word in stored.split())
    after = dict(word.split("=") for word in now.split())
    moved = sorted(key for key in before.keys() | after.keys()
                   if before.get(key) != after.get(key))
    return f"differs in {', '.join(moved)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the stored file instead of writing it")
    parser.add_argument("--fusion", choices=FUSION_MODES,
                        help="run every pair under this fusion mode, against "
                        "shipped_digests_fusion_MODE.json (default: the default mode, "
                        f"against {DIGESTS.name})")
    parser.add_argument("--orientation", choices=ORIENTATION_MODES,
                        help="run every pair under this orientation mode, against "
                        "shipped_digests_orientation_MODE.json")
    args = parser.parse_args(argv)
    if args.fusion is not None and args.orientation is not None:
        parser.error("give --fusion or --orientation, not both")
    path = digests_file(args.fusion, args.orientation)
    fixed = args.fusion is not None or args.orientation is not None
    orientation = "normal" if args.fusion is not None else args.orientation
    started = time.perf_counter()
    digests = {name: pair_digest(load, fixed_mode=fixed)
               for name, load in shipped_pairs(args.fusion, orientation).items()}
    elapsed = time.perf_counter() - started
    if not args.check:
        path.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        print(f"{len(digests)} pairs in {elapsed:.1f} s, written to {path}")
        return 0
    stored = json.loads(path.read_text())
    differing = sorted(name for name in stored.keys() | digests.keys()
                       if stored.get(name) != digests.get(name))
    for name in differing:
        print(f"{name}: {difference(stored.get(name), digests.get(name))}")
    print(f"{len(digests)} pairs in {elapsed:.1f} s: {len(differing)} differ from "
          f"{path}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
