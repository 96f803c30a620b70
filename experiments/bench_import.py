"""How long importing a 100-layer model takes, against the importers' issue target of
2 s: the file read, onnx's shape inference (or the trace's JSON and event trees), the
conversion to a validated Workload, and the YAML text, as `accsim import` does them.

Models (the test suite's builders, tests/onnx_models.py and tests/kineto_traces.py, so
the graphs timed are the ones the tests check):
- ONNX, 100 encoder blocks at BERT-base width (hidden 768, 12 heads, FFN 3072, sequence
  128): 24 nodes per block, weights as missing external data (the graph alone);
- ONNX, 100 Conv-BatchNormalization-Relu layers, 64 channels at 56 x 56;
- Kineto, 100 decoder layers' forward events at the same width, with kernels.

"in-process": the best of REPEATS calls (read, convert, write the YAML text) in this
process, on one core. "CLI wall": one `accsim import FORMAT FILE -o out.yaml` in a fresh
interpreter, its start and imports included (about 1 s of it: numba, onnx); "CLI
cpu" is that process's user + system time, the figure held to the target, since on a
shared machine the wall time also counts other jobs' turns.
Run: `python experiments/bench_import.py` (a few seconds).
"""

from __future__ import annotations

import atexit
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import onnx_models  # noqa: E402
from kineto_traces import transformer_trace  # noqa: E402

from simulator.frontends.kineto import import_kineto  # noqa: E402
from simulator.frontends.onnx import import_onnx  # noqa: E402
from simulator.frontends.writer import workload_to_yaml  # noqa: E402

LAYERS = 100
HIDDEN, HEADS, FFN, SEQ = 768, 12, 3072, 128
TARGET_S = 2.0
REPEATS = 3


def best_of(call) -> tuple[float, object]:
    """The fastest of REPEATS calls, seconds, and the last call's value."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        value = call()
        times.append(time.perf_counter() - started)
    return min(times), value


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the files it made
    encoder = folder / "encoder_100.onnx"
    onnx.save(onnx_models.transformer_block(layers=LAYERS, batch=1, seq=SEQ,
                                            hidden=HIDDEN, heads=HEADS, ffn=FFN), encoder)
    convs = folder / "conv_100.onnx"
    onnx.save(onnx_models.conv_stack(layers=LAYERS), convs)
    trace = folder / "decoder_100.json"
    trace.write_text(json.dumps(transformer_trace(layers=LAYERS, batch=1, seq=SEQ,
                                                  hidden=HIDDEN, heads=HEADS,
                                                  ffn=FFN)[0]))
    cases = [("onnx", encoder, lambda: import_onnx(str(encoder))),
             ("onnx", convs, lambda: import_onnx(str(convs))),
             ("kineto", trace, lambda: import_kineto(str(trace)))]
    print(f"{'format':7} {'file':18} {'KiB':>6} {'operators':>9} {'in-process s':>12} "
          f"{'CLI cpu s':>9} {'CLI wall s':>10} {'target 2 s':>10}")
    for fmt, path, read in cases:
        seconds, imported = best_of(lambda: (
            (i := read()), workload_to_yaml(i.workload, made_by="bench", notes=i.notes)
        )[0])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simulator.cli", "import", fmt, str(path),
                        "-o", str(folder / "out.yaml")], check=True, capture_output=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        verdict = "ok" if cpu < TARGET_S else "MISSED"
        print(f"{fmt:7} {path.name:18} {path.stat().st_size / 1024:6.0f} "
              f"{len(imported.workload.operators):9} {seconds:12.3f} {cpu:9.3f} "
              f"{wall:10.3f} {verdict:>10}")

if __name__ == "__main__":
    main()
