"""Real traces hold events whose recorded shapes fit no rule (DESIGN.md section 13): an
aten::sum over a zero-size dimension, an out= variant such as
aten::pow.Tensor_Scalar_out with its output recorded as an input, a pow whose out
tensor does not broadcast. The import keeps the ops that fit, counts these as left out
with the reason, and goes on; only --strict refuses, naming the first and why."""

from __future__ import annotations

import json

from kineto_traces import HTA_LINEARS, TraceWriter, hta_sampled_trace, unmodelled_trace
from simulator.cli import main
from simulator.frontends.kineto import import_kineto


def written(tmp_path, trace: dict) -> str:
    path = tmp_path / "real.json"
    path.write_text(json.dumps(trace))
    return str(path)


def test_zero_size_and_out_variants_are_counted_with_their_reason(tmp_path):
    imported = import_kineto(written(tmp_path, unmodelled_trace()))
    linear, mul = imported.workload.operators
    assert (linear.kind, linear.m, linear.n, linear.k) == ("gemm", 8, 32, 64)
    assert (mul.kind, mul.elements) == ("elementwise", 64 * 128)  # scalar broadcast
    assert ("UNSUPPORTED, left out (4): 2 sum (zero-size dimension), 1 pow (inputs do "
            "not broadcast: an output or extra tensor among them), 1 pow (out= variant: "
            "its output among the inputs)") in imported.notes
    assert ("left out by reason: 2 zero-size dimension, 1 inputs do not broadcast: an "
            "output or extra tensor among them, 1 out= variant: its output among the "
            "inputs") in imported.notes
    assert not any("pow as mul" in note for note in imported.notes)  # not costed


def test_the_import_summary_lists_the_counts_and_writes_the_modelled_ops(tmp_path,
                                                                         capsys):
    out = tmp_path / "w.yaml"
    assert main(["import", "kineto", written(tmp_path, unmodelled_trace()), "-o",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    assert "import: left out by reason: 2 zero-size dimension" in printed
    assert f"wrote {out}: 2 operators" in printed
    assert "# UNSUPPORTED, left out (4): 2 sum (zero-size dimension)" in out.read_text()


def test_strict_refuses_naming_the_first_unmodelled_event_and_its_reason(tmp_path,
                                                                         capsys):
    path = written(tmp_path, unmodelled_trace())
    assert main(["import", "kineto", path, "--strict"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"accsim: error: {path}: event aten::sum (pid 7, tid 11, ts ")
    assert "--strict: sum (zero-size dimension; Input Dims [[0, 128], [], [], []]) is " \
        "not supported (unsupported in all: 2 sum (zero-size dimension)" in err
    assert err.count("\n") == 1


def test_each_pattern_alone_imports_with_strict_refusing_it(tmp_path, capsys):
    for name, dims, reason in (
            ("aten::sum", [[0, 128], [], [], []], "zero-size dimension"),
            ("aten::pow.Tensor_Scalar_out", [[64, 128], [], [64, 128]],
             "out= variant: its output among the inputs"),
            ("aten::softmax", [[], [], []], "a 0-d tensor where the op needs dimensions"),
            ("aten::addmm", [[32], [8, 16]],
             "fewer recorded inputs or dimensions than the op's schema")):
        writer = TraceWriter(kernels=False)
        writer.leaf("aten::mm", [[4, 8], [8, 2]])
        writer.leaf(name, dims)
        path = written(tmp_path, writer.trace())
        imported = import_kineto(path)
        assert len(imported.workload.operators) == 1
        op = name.removeprefix("aten::").partition(".")[0]
        assert f"UNSUPPORTED, left out (1): 1 {op} ({reason})" in imported.notes, name
        assert main(["import", "kineto", path, "--strict"]) == 1
        assert f"--strict: {op} ({reason}; Input Dims " in capsys.readouterr().err


def test_an_overload_that_is_not_out_is_converted_as_its_op(tmp_path):
    writer = TraceWriter(kernels=False)
    writer.leaf("aten::add.Tensor", [[4, 8], [4, 8], []])
    (op,) = import_kineto(written(tmp_path, writer.trace())).workload.operators
    assert (op.kind, op.elements, op.op, op.layer_type) == ("elementwise", 32, "add",
                                                            "add")


def test_linears_whose_recorded_shapes_misfit_are_counted_not_fatal(tmp_path):
    """A sampled trace in the form of Holistic Trace Analysis's (issue 42): every
    linear that fits is imported with its MACs; those whose recorded shapes contradict
    the signature are counted as left out with the reason."""
    trace, macs = hta_sampled_trace()
    imported = import_kineto(written(tmp_path, trace))
    gemms = [op for op in imported.workload.operators if op.kind == "gemm"]
    assert sum(op.m * op.n * op.k * op.repeat for op in gemms) == macs
    assert len(gemms) == len(HTA_LINEARS)
    assert ("UNSUPPORTED, left out (2): 2 linear (recorded shapes do not fit linear)"
            in imported.notes)
    assert "left out by reason: 2 recorded shapes do not fit linear" in imported.notes


def test_strict_refuses_a_linear_whose_shapes_misfit(tmp_path, capsys):
    path = written(tmp_path, hta_sampled_trace()[0])
    assert main(["import", "kineto", path, "--strict"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "--strict: linear (recorded shapes do not fit linear; input [512, 2112] and " \
        "weight [512] disagree on K; Input Dims [[512, 2112]" in err


def test_a_trace_of_only_misfits_is_one_clear_error(tmp_path, capsys):
    path = written(tmp_path, hta_sampled_trace(fits=False)[0])
    assert main(["import", "kineto", path]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"accsim: error: {path}: event aten::linear (pid 7, tid 4037, ts "
                          "1000): recorded shapes do not fit linear (input [512, 2112] "
                          "and weight [512] disagree on K)")
    assert "no event of the trace could be costed (UNSUPPORTED, left out (2): 2 linear " \
        "(recorded shapes do not fit linear)" in err
