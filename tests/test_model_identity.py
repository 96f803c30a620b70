"""Keys by content, not path (DESIGN.md section 18): one model config read from two
files (another checkout, a renamed copy) gives the same serving cost-cache key and the
same deployment-search identity; a changed field gives another."""

from __future__ import annotations

import json

import pytest

from simulator.frontends.hf.config import load_model_config, locate_config
from simulator.inputs.named_inputs import load_inputs
from simulator.serving.cost_cache import CostCache, model_identity
from simulator.serving.llm_cost import LlmCost
from simulator.serving.spec import ServeSpec
from simulator.sweep.deploy_identity import search_identity

MODEL = "llama_3_1_8b"


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """The shipped config, a copy elsewhere under the same model name (as another
    checkout reads it: a shipped config is named after its file, a copy by
    `_name_or_path`), and a copy with one field moved."""
    folder = tmp_path_factory.mktemp("models")
    raw = {**json.loads(locate_config(MODEL).read_text()), "_name_or_path": MODEL}
    (folder / "copy.json").write_text(json.dumps(raw))
    (folder / "edited.json").write_text(json.dumps(
        {**raw, "intermediate_size": raw["intermediate_size"] + 128}))
    return {"shipped": load_model_config(MODEL),
            "copy": load_model_config(folder / "copy.json"),
            "edited": load_model_config(folder / "edited.json")}


@pytest.fixture(scope="module")
def platform():
    return load_inputs("tpu_v5e_like", "gemm_4096", None).platform


def test_the_copy_is_read_from_another_file(configs):
    assert configs["copy"].source != configs["shipped"].source
    assert model_identity(configs["copy"]) == model_identity(configs["shipped"])
    assert model_identity(configs["edited"]) != model_identity(configs["shipped"])


def test_the_cost_cache_key_ignores_where_the_model_was_read(configs, platform):
    keys = {name: LlmCost(platform, config, dtype=None, bits=3, cache=CostCache(None)).key
            for name, config in configs.items()}
    assert keys["copy"] == keys["shipped"]
    assert keys["edited"] != keys["shipped"]


def test_the_search_identity_ignores_where_the_model_was_read(configs, platform):
    spec = ServeSpec(arch="tpu_v5e_like", model=MODEL, rate=1.0)
    identity = {name: search_identity(spec, platform, config, None, prune=True)
                for name, config in configs.items()}
    assert identity["copy"] == identity["shipped"]
    assert identity["edited"] != identity["shipped"]
