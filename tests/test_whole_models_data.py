"""experiments/whole_models/measurements.yaml keeps the rules its header states: every
measurement's platform loads and its source names a reference the header declares;
every Neuron decode step (TPOT) attends transformers-neuronx's token-generation bucket
of its median output token (powers of 2 from 128, capped at the row's Sequence
Length: `--context` is the bucket - 1) and runs on the per-core platform at the row's
TP Degree."""

from __future__ import annotations

import re
from pathlib import Path

from simulator.calibrate.measured_runs import read_runs
from simulator.inputs.platform_file import load_platform

FOLDER = Path(__file__).resolve().parent.parent / "experiments" / "whole_models"


def _bucket(position: int, sequence: int) -> int:
    bucket = 128
    while bucket < position:
        bucket *= 2
    return min(bucket, sequence)


def _runs():
    return read_runs(str(FOLDER / "measurements.yaml")).measurements


def test_every_platform_loads_and_every_case_cites_a_declared_source():
    runs = _runs()
    assert len(runs) >= 20
    header = (FOLDER / "measurements.yaml").read_text().split("measurements:")[0]
    declared = set(re.findall(r"^#   (\[[\w-]+\])", header, re.MULTILINE))
    for case in runs:
        tag = re.match(r"\[[\w-]+\]", case.source)
        assert tag and tag.group(0) in declared, case.name
        for arch in set(re.findall(r"--arch (\S+)", " ".join(
                part.run for part in case.parts))):
            load_platform(FOLDER / arch)


def test_decode_steps_attend_the_median_tokens_bucket_on_one_rank_per_core():
    steps = [case for case in _runs() if case.name.endswith("_tpot")]
    assert len(steps) >= 10
    for case in steps:
        fields = {key: int(value) for key, value in re.findall(
            r"(Sequence Length|Input|Output|TP Degree|batch) (\d+)", case.source)}
        (part,) = case.parts
        context = int(re.search(r"--context (\d+)", part.run).group(1))
        tp = int(re.search(r"--tp (\d+)", part.run).group(1))
        batch = int(re.search(r"--batch (\d+)", part.run).group(1))
        position = fields["Input"] + fields["Output"] // 2
        assert context + 1 == _bucket(position, fields["Sequence Length"]), case.name
        assert (tp, batch) == (fields["TP Degree"], fields["batch"]), case.name
        assert re.search(r"--arch (inferentia2|trainium)_core\.yaml", part.run), case.name
