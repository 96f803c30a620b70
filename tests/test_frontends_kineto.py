"""`accsim import kineto`: operators from a profiler trace's recorded shapes, each
counted once however deeply aten nests it, identical ones folded into repeat, the
measured times kept and shown beside the simulated ones, and bad traces ending in one
line naming the file and the event."""

from __future__ import annotations

import gzip
import json
import subprocess

import pytest

from kineto_traces import TraceWriter, conv_trace, transformer_trace
from simulator.cli import main
from simulator.errors import AccsimError
from simulator.frontends.kineto import import_kineto
from simulator.inputs.loader import locate, parse_model, shipped_names
from simulator.inputs.platform_file import load_platform
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload, is_attention, is_compute


def workload_macs(workload: Workload) -> int:
    return sum((op.gemm().macs if is_compute(op) else op.macs if is_attention(op) else 0)
               * op.repeat for op in workload.operators)


def written(tmp_path, trace: dict, name: str = "trace.json") -> str:
    path = tmp_path / name
    data = json.dumps(trace).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if name.endswith(".gz") else data)
    return str(path)


def run_cli(capsys, *args: str) -> subprocess.CompletedProcess:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_transformer_trace_macs_folding_and_measured_kernel_time(tmp_path):
    trace, macs = transformer_trace(layers=3)
    imported = import_kineto(written(tmp_path, trace))
    workload = imported.workload
    assert workload_macs(workload) == macs
    # Every linear counts once: the addmm each calls is not an operator of its own.
    assert {op.layer_type for op in workload.operators if op.kind == "gemm"} == {"linear"}
    by_name = {op.name: op for op in workload.operators}
    assert [op.name for op in workload.operators] == [
        "layer_norm_0", "linear_0", "scaled_dot_product_attention_0", "linear_1",
        "add_0", "linear_2", "gelu_0", "linear_3"]
    assert all(op.repeat == 3 for op in workload.operators if op.name != "add_0")
    assert by_name["add_0"].repeat == 6          # add and add_ of one shape
    attention = by_name["scaled_dot_product_attention_0"]
    assert (attention.kind, attention.heads, attention.q_len, attention.causal) == \
        ("attention", 4, 64, True)
    # Kernel time of the launches inside each op, summed over its repeats.
    assert by_name["linear_0"].measured_s == pytest.approx(3 * 20e-6)
    assert by_name["scaled_dot_product_attention_0"].measured_s == pytest.approx(90e-6)
    assert imported.notes[0].startswith("measured_s: device time of the kernels")
    assert "UNSUPPORTED, left out (1): 1 cumsum" in imported.notes
    assert "zero cost although they move data (accsim has no copy kind): 1 embedding" \
        in imported.notes


def test_conv_trace_reads_stride_padding_groups_from_concrete_inputs(tmp_path):
    trace, macs = conv_trace()
    imported = import_kineto(written(tmp_path, trace))
    assert workload_macs(imported.workload) == macs
    conv, grouped, pool, conv1d, softmax = imported.workload.operators
    assert (conv.ho, conv.wo, conv.stride, conv.padding) == (16, 15, 2, 1)
    assert (grouped.groups, grouped.ho, grouped.wo) == (4, 16, 15)    # padding "same"
    assert (pool.ho, pool.wo) == (8, 8)                                # ceil_mode
    assert (conv1d.ho, conv1d.wo) == (1, 32)
    assert (softmax.rows, softmax.cols) == (16, 32)
    assert imported.notes[0].startswith("measured_s: CPU time of each op")
    assert conv.measured_s == pytest.approx(4e-6)    # the conv2d event's own duration


def test_gzip_trace_reads_as_the_json(tmp_path):
    trace, _ = transformer_trace()
    plain = import_kineto(written(tmp_path, trace)).workload
    packed = import_kineto(written(tmp_path, trace, "trace.json.gz")).workload
    assert packed.operators == plain.operators and packed.name == "trace"


def test_ops_inside_unknown_wrappers_and_on_two_threads_count(tmp_path):
    forward = TraceWriter(tid=1)
    forward.leaf("aten::mm", [[8, 16], [16, 32]], kernel_us=1.0)
    backward = TraceWriter(tid=2)
    backward.now = 5000.0
    with backward.op("autograd::engine::evaluate_function: MmBackward0", []):
        with backward.op("MmBackward0", []):
            backward.leaf("aten::mm", [[8, 32], [32, 16]], kernel_us=1.0)
            backward.leaf("aten::mm", [[16, 8], [8, 32]], kernel_us=1.0)
    trace = {"traceEvents": forward.events + backward.events}
    imported = import_kineto(written(tmp_path, trace))
    assert workload_macs(imported.workload) == 3 * 8 * 16 * 32
    assert "3 events from 2 threads" in imported.notes[0]
    assert not any("UNSUPPORTED" in note for note in imported.notes)


def test_yaml_round_trip_check_and_run_on_every_platform(tmp_path, capsys):
    path = written(tmp_path, transformer_trace()[0])
    out = tmp_path / "w.yaml"
    done = run_cli(capsys, "import", "kineto", path, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "# UNSUPPORTED, left out (1): 1 cumsum\n" in out.read_text()
    check = run_cli(capsys, "check", str(out))
    assert check.returncode == 0 and "valid workload (8 operators)" in check.stdout
    workload = parse_model(out.read_text(), Workload, file=str(out))
    assert workload == import_kineto(path).workload   # measured_s included
    for name in shipped_names("platform"):
        platform = load_platform(locate(name, "platform"))[0]
        result = simulate(Inputs(platform, workload, Mapping()))
        assert result.total.model_flops == 2 * workload_macs(workload)


def test_run_kineto_shows_measured_beside_simulated(tmp_path, capsys):
    path = written(tmp_path, transformer_trace()[0])
    json_out = tmp_path / "r.json"
    done = run_cli(capsys, "run", "--kineto", path, "--arch", "tpu_v5e_like", "--json",
                   str(json_out))
    assert done.returncode == 0, done.stderr
    assert "Simulated vs measured" in done.stdout and "sim/meas" in done.stdout
    assert "measured 0.242 ms on the traced hardware for the 8 operators" in done.stdout
    manifest = json.loads(json_out.read_text())["manifest"]["inputs"]["workload"]
    assert manifest["path"] == path
    assert manifest["canonical"]["operators"][1]["measured_s"] == pytest.approx(40e-6)


def test_a_trace_without_shapes_names_the_file_and_event(tmp_path, capsys):
    trace, _ = transformer_trace(shapes=False)
    path = written(tmp_path, trace)
    done = run_cli(capsys, "import", "kineto", path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"accsim: error: {path}: event aten::layer_norm (pid 7, tid "
                           "11, ts 1005): no recorded shapes (args 'Input Dims'): profile "
                           "with torch.profiler.profile(record_shapes=True)\n")


def test_strict_fails_on_the_first_unsupported_event(tmp_path, capsys):
    path = written(tmp_path, transformer_trace()[0])
    done = run_cli(capsys, "import", "kineto", path, "--strict")
    assert done.returncode == 1
    assert done.stderr.startswith(f"accsim: error: {path}: event aten::cumsum (pid 7, "
                                  "tid 11, ts ")
    assert done.stderr.endswith("--strict: cumsum is not supported (unsupported in all: "
                                "1 cumsum)\n")


@pytest.mark.parametrize("content, message", [
    (b'{"traceEvents": [', "not JSON"),
    (b'{"schemaVersion": 1}', "expected a Chrome trace"),
    (b'{"traceEvents": []}', "no operator events"),
    (gzip.compress(b'{"traceEvents": []}', mtime=0)[:12], "corrupt or truncated gzip"),
])
def test_unreadable_traces_give_one_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(AccsimError, match=message) as caught:
        import_kineto(str(path))
    assert caught.value.file == str(path)


def test_shapes_that_do_not_fit_the_op_name_the_event(tmp_path):
    writer = TraceWriter()
    writer.leaf("aten::mm", [[8, 16], [17, 32]])
    with pytest.raises(AccsimError, match=r"event aten::mm .*recorded shapes do not fit "
                       r"mm \(inner dimensions differ"):
        import_kineto(written(tmp_path, writer.trace()))


def test_flash_attention_kernel_reads_batch_seq_heads_layout(tmp_path):
    writer = TraceWriter()
    q, kv = [2, 128, 32, 64], [2, 512, 8, 64]      # [batch, seq, heads, head_dim], GQA
    writer.leaf("aten::_flash_attention_forward", [q, kv, kv, [], [], [], [], [], [], []],
                ["", "", "", "", "", "128", "512", "0.0", "True", "False"], kernel_us=9.0)
    (op,) = import_kineto(written(tmp_path, writer.trace())).workload.operators
    assert (op.batch, op.heads, op.kv_heads, op.q_len, op.kv_len, op.head_dim,
            op.causal) == (2, 32, 8, 128, 512, 64, True)
    assert op.measured_s == pytest.approx(9e-6)


def test_traces_without_concrete_inputs_use_stated_defaults(tmp_path):
    """Before PyTorch 2.1 scalars were not recorded: a conv is taken as stride 1,
    padding 0 (and says so), a layer_norm normalises the weight's shape, a mean
    reduces everything."""
    writer = TraceWriter(kernels=False)
    writer.leaf("aten::conv2d", [[1, 4, 10, 10], [8, 4, 3, 3], [8], [], [], [], []])
    writer.leaf("aten::layer_norm", [[4, 16, 32], [], [32], [32], [], []])
    writer.leaf("aten::mean", [[4, 16, 32], [], []])
    imported = import_kineto(written(tmp_path, writer.trace()))
    conv, norm, mean = imported.workload.operators
    assert (conv.ho, conv.wo, conv.groups) == (8, 8, 1)
    assert (norm.rows, norm.cols) == (64, 32)
    assert (mean.rows, mean.cols) == (1, 4 * 16 * 32)
    assert "assumed where the file does not say: 1 conv stride 1, padding 0 (no " \
        "Concrete Inputs recorded)" in imported.notes
