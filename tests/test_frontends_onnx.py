"""`accsim import onnx`: MACs equal to the graph's own count, attention found, windows
fitted exactly, weights not needed, round trips through YAML, and bad files ending in
one line naming the file and the node."""

from __future__ import annotations

import subprocess
import sys

import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed "
                           "(pip install '.[onnx]')")

import onnx_models as models  # noqa: E402  (needs onnx)

from simulator.cli import main  # noqa: E402
from simulator.errors import AccsimError  # noqa: E402
from simulator.frontends.onnx import import_onnx  # noqa: E402
from simulator.inputs.loader import locate, parse_model, shipped_names  # noqa: E402
from simulator.inputs.platform_file import load_platform  # noqa: E402
from simulator.mapping.plan import Mapping  # noqa: E402
from simulator.simulate import Inputs, simulate  # noqa: E402
from simulator.inputs.workload import Workload, is_attention, is_compute  # noqa: E402

RESNET18_GMACS = 1.814  # torchvision resnet18 at 224x224, batch 1 (1.81 GMACs)


def workload_macs(workload: Workload) -> int:
    return sum((op.gemm().macs if is_compute(op) else op.macs if is_attention(op) else 0)
               * op.repeat for op in workload.operators)


def saved(tmp_path, model, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return str(path)


def run_cli(capsys, *args: str) -> subprocess.CompletedProcess:
    """The accsim command run in this process (main() is what the entry point runs)."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.parametrize("build, options, reference", [
    (models.resnet18, {}, models.resnet18),
    (models.conv_net, {"batch": 3}, lambda: models.conv_net(batch=3)),
    (models.mlp, {}, models.mlp),
    (models.transformer_block, {}, models.transformer_block),
])
def test_imported_macs_equal_the_graphs_own_count(tmp_path, build, options, reference):
    imported = import_onnx(saved(tmp_path, build()), **options)
    assert workload_macs(imported.workload) == models.graph_macs(reference())


def test_resnet18_is_1_814_gmacs_at_224_batch_1(tmp_path):
    workload = import_onnx(saved(tmp_path, models.resnet18())).workload
    assert workload_macs(workload) / 1e9 == pytest.approx(RESNET18_GMACS, rel=0.005)
    kinds = [op.kind for op in workload.operators]
    assert kinds.count("conv2d") == 20 and kinds.count("gemm") == 1
    assert kinds.count("pool") == 2 and kinds.count("elementwise") == 45  # bn relu add


def test_every_window_keeps_the_graphs_output_size(tmp_path):
    """Asymmetric pads, per-axis pads, unequal strides, dilation, ceil_mode, SAME
    padding and a 1-D conv: each operator's output is the node's inferred output."""
    path = saved(tmp_path, models.conv_net(batch=2))
    inferred = onnx.shape_inference.infer_shapes(onnx.load(path))
    outputs = {node.name: node.output[0] for node in inferred.graph.node}
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in inferred.graph.value_info}
    imported = import_onnx(path)
    windows = [op for op in imported.workload.operators if op.kind in ("conv2d", "pool")]
    assert len(windows) == 8
    for op in windows:
        out = dims[outputs[op.name]]
        assert (op.ho, op.wo) == ((1, out[2]) if len(out) == 3 else tuple(out[2:])), op
    by_name = {op.name: op for op in windows}
    assert by_name["conv_5"].layer_type == "conv.depthwise"   # groups 16 of 16
    assert by_name["conv_7"].layer_type == "conv.grouped" and by_name["conv_7"].dilation == 2
    assert by_name["conv_2"].padding == 1 and by_name["conv_2"].h == 33  # symmetric: exact
    fitted = next(n for n in imported.notes if "windows with asymmetric pads" in n)
    assert "conv_5" in fitted and "conv_2" not in fitted


def test_attention_chain_becomes_one_attention_operator(tmp_path):
    imported = import_onnx(saved(tmp_path, models.transformer_block(batch=2, seq=16,
                                                                    hidden=64, heads=4)))
    (attention,) = [op for op in imported.workload.operators if is_attention(op)]
    assert (attention.batch, attention.heads, attention.kv_heads, attention.q_len,
            attention.kv_len, attention.head_dim, attention.causal) == \
        (2, 4, 4, 16, 16, 16, False)
    assert not any(op.kind == "softmax" for op in imported.workload.operators)
    assert "absorbed into attention operators (scale and mask not costed): 2 MatMul, 1 Add, 1 Div, 1 Softmax" in \
        imported.notes
    assert [op.kind for op in imported.workload.operators].count("gemm") == 6


def test_attention_op_is_read_with_its_kv_heads_and_causal_flag(tmp_path):
    imported = import_onnx(saved(tmp_path, models.attention_op(
        batch=2, seq=32, heads=8, kv_heads=2, dh=16, causal=True)))
    (op,) = imported.workload.operators
    assert (op.kind, op.heads, op.kv_heads, op.causal) == ("attention", 8, 2, True)
    assert workload_macs(imported.workload) == 2 * 2 * 8 * (32 * 33 // 2) * 16


def test_weights_are_not_needed(tmp_path):
    """Real weights, weights as shape-only graph inputs, and initializers whose
    external data file is missing import to the same workload."""
    found = [import_onnx(saved(tmp_path, models.mlp(weights=kind), f"{kind}.onnx"))
             .workload for kind in ("data", "inputs", "external")]
    assert found[0].operators == found[1].operators == found[2].operators


def test_batch_and_input_shape_set_the_inputs(tmp_path):
    path = saved(tmp_path, models.conv_net())
    two = workload_macs(import_onnx(path, batch=2).workload)
    assert workload_macs(import_onnx(path, batch=4).workload) == 2 * two
    given = import_onnx(path, input_shapes={"x": (2, 8, 33, 31)}).workload
    assert workload_macs(given) == two
    with pytest.raises(AccsimError, match=r"input 'x' has unknown dimensions \[N, 8, "
                       r"33, 31\]: give --batch B or --input-shape x=1x8x33x31"):
        import_onnx(path)
    with pytest.raises(AccsimError, match="--input-shape: the model has no input 'y'"):
        import_onnx(path, input_shapes={"y": (1, 2)})
    with pytest.raises(AccsimError, match="--batch: no input has a symbolic first"):
        import_onnx(saved(tmp_path, models.mlp(), "fixed.onnx"), batch=2)


def test_yaml_round_trip_check_and_run_on_every_platform(tmp_path, capsys):
    paths = {name: saved(tmp_path, build(), f"{name}.onnx") for name, build in
             (("conv_net", models.conv_net), ("mlp", models.mlp),
              ("transformer_block", models.transformer_block),
              ("resnet18", models.resnet18))}
    platforms = [load_platform(locate(name, "platform"))[0]
                 for name in shipped_names("platform")]
    for name, path in paths.items():
        out = tmp_path / f"{name}.yaml"
        options = ["--batch", "2"] if name == "conv_net" else []
        done = run_cli(capsys, "import", "onnx", path, *options, "-o", str(out))
        assert done.returncode == 0, done.stderr
        check = run_cli(capsys, "check", str(out))
        assert check.returncode == 0 and "valid workload" in check.stdout, check.stderr
        workload = parse_model(out.read_text(), Workload, file=str(out))
        assert workload == import_onnx(path, batch=2 if options else None).workload
        for platform in platforms:
            result = simulate(Inputs(platform, workload, Mapping()))
            assert result.total.cycles > 0
            assert result.total.model_flops == 2 * workload_macs(workload)


def test_zero_cost_and_unsupported_ops_are_named_in_the_yaml(tmp_path, capsys):
    model = models.transformer_block()
    model.graph.node.append(onnx.helper.make_node("TopK", [model.graph.output[0].name,
                                                           "k"], ["v", "i"], name="topk"))
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        __import__("numpy").array([3], dtype="int64"), "k"))
    path = saved(tmp_path, model)
    out = tmp_path / "w.yaml"
    done = run_cli(capsys, "import", "onnx", path, "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "# UNSUPPORTED, left out (1): 1 TopK\n" in text
    assert "# folded as zero cost (shape only): 4 Reshape\n" in text
    assert "# zero cost although they move data (accsim has no copy kind): 4 Transpose" \
        in text
    assert "import: UNSUPPORTED, left out (1): 1 TopK" in done.stdout
    strict = run_cli(capsys, "import", "onnx", path, "--strict")
    assert strict.returncode == 1 and strict.stdout == ""
    assert strict.stderr == (f"accsim: error: {path}: node topk (TopK): --strict: TopK "
                             "is not supported (unsupported in all: 1 TopK)\n")


def _one_line_error(capsys, path: str, *options: str) -> str:
    done = run_cli(capsys, "import", "onnx", path, *options)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"accsim: error: {path}: ")
    return done.stderr


def test_corrupt_and_truncated_files_give_one_line(tmp_path, capsys):
    data = models.mlp().SerializeToString()
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\xff\xff\xff not a model")
    assert "the file is corrupt or truncated" in _one_line_error(capsys, str(garbage))
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[:len(data) // 2])
    assert "corrupt or truncated" in _one_line_error(capsys, str(cut))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert "no opset_import" in _one_line_error(capsys, str(empty))
    broken = models.mlp()
    del broken.graph.node[2]        # the next node reads a tensor nothing makes
    holed = saved(tmp_path, broken, "holed.onnx")
    assert "node add_8 (Add): reads tensor 'matmul_6', which no earlier node" in \
        _one_line_error(capsys, holed)


def test_shapes_that_do_not_agree_name_the_node(tmp_path, capsys):
    model = models.mlp()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 65  # K 65 vs 64
    error = _one_line_error(capsys, saved(tmp_path, model))
    assert "onnx shape inference failed" in error and "gemm_3" in error


def test_without_onnx_the_message_says_how_to_install(tmp_path, monkeypatch):
    path = saved(tmp_path, models.mlp())
    for module in [m for m in sys.modules if m == "onnx" or m.startswith("onnx.")
                   or m.startswith("simulator.frontends.onnx.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "onnx", None)   # import onnx now fails
    with pytest.raises(AccsimError, match=r"install with pip install 'accsim\[onnx\]'"):
        import_onnx(path)


def test_ops_of_other_domains_and_what_follows_them_are_counted(tmp_path):
    """An onnxruntime contrib op has no shape inference here: it and the ops whose
    shapes it leaves unknown are listed, nothing after it is costed blind."""
    b = models.Builder("contrib", weights="inputs")
    x = b.input("x", [4, 64])
    b.nodes.append(onnx.helper.make_node("FastGelu", [x], ["g"], domain="com.microsoft",
                                         name="fast_gelu"))
    y = b.op("MatMul", ["g", b.weight([64, 32])], name="after")
    z = b.op("Relu", [b.op("MatMul", [x, b.weight([64, 8])], name="independent")])
    model = b.model(z)
    model.graph.output.append(onnx.helper.make_tensor_value_info(y, 1, None))
    model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    imported = import_onnx(saved(tmp_path, model))
    assert [op.name for op in imported.workload.operators] == ["independent",
                                                               b.nodes[-1].name]
    assert "UNSUPPORTED, left out (2): 1 MatMul (shape unknown), 1 " \
        "com.microsoft.FastGelu" in imported.notes
    with pytest.raises(AccsimError, match="node fast_gelu \\(FastGelu\\): --strict: "
                       "com.microsoft.FastGelu is not supported"):
        import_onnx(saved(tmp_path, model), strict=True)


def test_run_onnx_imports_and_runs_in_one_step(tmp_path, capsys):
    path = saved(tmp_path, models.mlp(), "mlp.onnx")
    done = run_cli(capsys, "run", "--onnx", path, "--arch", "edge_32x32")
    assert done.returncode == 0, done.stderr
    assert "mlp on edge_32x32" in done.stdout and "import: costed as the nearest" in \
        done.stdout
    clash = run_cli(capsys, "run", "--onnx", path, "--workload", "gemm_4096")
    assert clash.returncode == 1
    assert clash.stderr == f"accsim: error: {path}: --onnx: --onnx is the workload: " \
        "drop --workload\n"


def test_the_same_model_imports_to_the_same_bytes(tmp_path, capsys):
    path = saved(tmp_path, models.transformer_block())
    texts = []
    for name in ("a.yaml", "b.yaml"):
        assert run_cli(capsys, "import", "onnx", path, "-o", str(tmp_path / name)) \
            .returncode == 0
        texts.append((tmp_path / name).read_bytes())
    assert texts[0] == texts[1]


def test_node_names_reach_the_terminal_as_written(tmp_path, capsys):
    """Graph names are data: rich markup in them is printed, not interpreted."""
    model = models.mlp()
    model.graph.node[0].name = "/layers[0]/fc[/]"
    path = saved(tmp_path, model, "[bold]net.onnx")
    done = run_cli(capsys, "run", "--onnx", path, "--arch", "tpu_v1")
    assert done.returncode == 0, done.stderr
    assert "/layers[0]/fc[/]" in done.stdout and "[bold]net on tpu_v1" in done.stdout
