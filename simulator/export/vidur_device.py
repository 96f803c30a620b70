"""Registering an exported chip (and a model Vidur does not list) with Vidur without
editing Vidur's files.

Vidur (microsoft/vidur at 7d47513) finds a device, a node and a model by searching
the subclasses of BaseDeviceSKUConfig, BaseNodeSKUConfig and BaseModelConfig
(vidur/config/base_fixed_config.py: create_from_type_string compares
str(get_type()) with --replica_config_device / --replica_config_network_device;
create_from_name compares get_name() with --replica_config_model_name). So the export
writes the chip's and the model's values as JSON beside the profiles, and a launcher,
`accsim_vidur.py`, that defines those subclasses from every such file under
./data/profiling and then runs `vidur.main`: run from the clone's root in place of
`python -m vidur.main`, with the same arguments.
"""

from __future__ import annotations

import json

from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile
from simulator.inputs.loader import parse_json
from simulator.system.parallelism import MAX_CHIPS

LAUNCHER = "accsim_vidur.py"
DEVICE_FILE = "accsim_device.json"
MODEL_FILE = "accsim_model.json"
# The launcher (the same for every export): data in, subclasses out, then Vidur's main.
LAUNCHER_TEXT = '''"""Written by `accsim export vidur`: registers the exported chips and models with
Vidur, then runs vidur.main with this command's arguments. Run it from the root of a
Vidur clone (microsoft/vidur, checked at commit 7d47513) in place of
`python -m vidur.main`. It reads the JSON files accsim wrote under ./data/profiling;
nothing in them is executed."""

import dataclasses
import glob
import json
import os
import sys

sys.path.insert(0, os.getcwd())

from vidur.config.device_sku_config import BaseDeviceSKUConfig  # noqa: E402
from vidur.config.model_config import BaseModelConfig  # noqa: E402
from vidur.config.node_sku_config import BaseNodeSKUConfig  # noqa: E402
from vidur.config.utils import get_all_subclasses  # noqa: E402
from vidur.types import ActivationType, NormType  # noqa: E402


REGISTERED = []  # Python finds subclasses through weak references: keep them


def _subclass(base, name, values, **static):
    fields = [(key, type(value), dataclasses.field(default=value))
              for key, value in values.items()]
    cls = dataclasses.make_dataclass(name, fields, bases=(base,))
    for method, result in static.items():
        setattr(cls, method, staticmethod(lambda result=result: result))
    REGISTERED.append(cls)


def register():
    for path in sorted(glob.glob("data/profiling/network/*/accsim_device.json")):
        with open(path) as source:
            chip = json.load(source)
        known = {str(c.get_type()) for c in get_all_subclasses(BaseDeviceSKUConfig)}
        if chip["device"] not in known:
            _subclass(BaseDeviceSKUConfig, "AccsimDevice", {
                "fp16_tflops": chip["fp16_tflops"],
                "total_memory_gb": chip["total_memory_gb"]}, get_type=chip["device"])
            _subclass(BaseNodeSKUConfig, "AccsimNode", {
                "num_devices_per_node": chip["num_devices_per_node"]},
                get_type=chip["device"])
    for path in sorted(glob.glob("data/profiling/compute/*/*/*/accsim_model.json")
                       + glob.glob("data/profiling/compute/*/*/accsim_model.json")):
        with open(path) as source:
            model = json.load(source)
        name = model.pop("name")
        if name in {c.get_name() for c in get_all_subclasses(BaseModelConfig)
                    if "get_name" in vars(c)}:
            continue  # Vidur lists it: its own values are used
        model["activation"] = ActivationType[model["activation"]]
        model["norm"] = NormType[model["norm"]]
        _subclass(BaseModelConfig, "AccsimModel", model, get_name=name)


if __name__ == "__main__":
    register()
    from vidur.main import main

    main()
'''


def device_json(profile: ModelProfile, device: str, devices_per_node: int) -> str:
    """The chip as Vidur's device and node configs hold it: fp16_tflops (its peak at
    the platform's first input dtype, whole TFLOP/s; Vidur uses it for MFU only),
    total_memory_gb (off-chip capacity in GiB, Vidur multiplies by 1024**3 for its
    memory planner) and the chips per node (the largest TP degree exported)."""
    platform = profile.platform
    capacity = platform.offchip.capacity_bytes
    if capacity is None:
        raise AccsimError("Vidur's memory planner needs the chip's memory: the platform "
                          "gives no offchip.capacity_bytes", field="--arch")
    peak = platform.peak_flops_for(platform.systolic_array.input_dtypes[0])
    return json.dumps({"device": device, "fp16_tflops": max(1, round(peak / 1e12)),
                       "total_memory_gb": max(1, capacity // 2**30),
                       "num_devices_per_node": devices_per_node}, indent=2) + "\n"


def model_json(profile: ModelProfile, model_id: str) -> str:
    """The model as Vidur's BaseModelConfig holds it (vidur/config/model_config.py);
    only used when Vidur does not list `model_id` itself."""
    cfg = profile.config
    gelu = not cfg.family.gated_mlp
    return json.dumps({
        "name": model_id, "num_layers": cfg.layers, "num_q_heads": cfg.heads,
        "num_kv_heads": cfg.kv_heads, "embedding_dim": cfg.hidden,
        "mlp_hidden_dim": cfg.intermediate,
        "max_position_embeddings": cfg.max_positions or 0,
        "use_gated_mlp": cfg.family.gated_mlp, "use_bias": cfg.family.dense_bias,
        "use_qkv_bias": cfg.family.qkv_bias, "activation": "GELU" if gelu else "SILU",
        "norm": "RMS_NORM" if cfg.family.norm == "rms" else "LAYER_NORM",
        "post_attn_norm": True, "vocab_size": cfg.vocab,
    }, indent=2) + "\n"


def devices_per_node(earlier: bytes | None, degrees: set[int], shown: str) -> int:
    """The chips per node: the largest TP degree of this and earlier exports of the
    device (Vidur's all_reduce filter asks devices_per_node == T); an earlier count
    that is no TP degree accsim exports (1 to MAX_CHIPS) is refused, naming the
    earlier file as `shown`."""
    largest = max(degrees)
    if earlier is not None:
        try:
            count = parse_json(earlier.decode("utf-8", errors="replace"),
                               file=shown)["num_devices_per_node"]
        except (AccsimError, KeyError, TypeError):
            count = None
        if not isinstance(count, int) or isinstance(count, bool) \
                or not 1 <= count <= MAX_CHIPS:
            raise AccsimError("an earlier export's device file is not accsim's",
                              file=shown, field="--output")
        largest = max(largest, count)
    return largest
