"""What a newcomer met following the docs: an export merging into an earlier one named
the file it could not merge by its path inside the folder, not the path a user can
open."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from test_hostile_sweep import refused_in

SECONDS = 20


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
