"""The names an export's folders are made of: the model's Hugging Face id (Vidur and
LLMServingSim find a model's files under `<org>/<name>/`), the device or hardware
folder (from the platform's own name, so a what-if platform such as
`whatif/tpu_v5e_fp8` exports too), each checked before anything is simulated."""

from __future__ import annotations

import re

from simulator.errors import AccsimError
from simulator.inputs.loader import parse_json, read_source

# The Hugging Face ids of the shipped model configs, from the source column of
# workloads/hf/README.md (each file is that repository's config.json); a config of the
# user's names itself by `_name_or_path`, or the export is given --model-id.
SHIPPED_HUB_IDS = {
    "llama_3_1_8b": "meta-llama/Llama-3.1-8B",
    "llama_3_1_70b": "meta-llama/Llama-3.1-70B",
    "mixtral_8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "qwen3_30b_a3b": "Qwen/Qwen3-30B-A3B",
    "gpt2": "openai-community/gpt2",
}
# One part of a hub id: what the Hub allows in an organisation or model name.
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def folder_name(text: str, field: str) -> str:
    """One plain folder name (no '/', not '.' or '..'): refused before any simulation."""
    if text in ("", ".", "..") or "/" in text or "\\" in text or "\x00" in text:
        raise AccsimError(f"{text!r} cannot name a folder of the export (one plain "
                          "folder name, no '/' and not '.' or '..')", field=field)
    return text


def device_name(platform_name: str) -> str:
    """The device folder of a platform: its name with each '/' (a what-if platform's
    `whatif/NAME`) written '_', so every platform that loads can be exported."""
    return folder_name(platform_name.replace("/", "_"), "--arch")


def hub_id(text: str, field: str) -> str:
    """A Hugging Face id, `org/name` (or a bare `name`): parts the Hub allows, so it
    is a safe relative path of two folders."""
    parts = text.split("/")
    if not 1 <= len(parts) <= 2 or not all(_PART.fullmatch(p) and ".." not in p
                                           for p in parts):
        raise AccsimError(f"{text!r} is not a Hugging Face model id (org/name, letters, "
                          "digits, '.', '_' and '-')", field=field)
    return text


def model_id(explicit: str | None, config_file: str | None, model_arg: str) -> str:
    """The model's hub id: --model-id, else the config's `_name_or_path` when it is an
    org/name id, else the shipped config's id; otherwise the export asks for
    --model-id (the tools find the model's files by that id)."""
    if explicit is not None:
        return hub_id(explicit, "--model-id")
    declared = None
    if config_file is not None:
        raw = parse_json(read_source(config_file).text, file=config_file)
        declared = raw.get("_name_or_path") if isinstance(raw, dict) else None
    if isinstance(declared, str) and declared.count("/") == 1:
        try:
            return hub_id(declared, "_name_or_path")
        except AccsimError:
            pass  # a local path, not an id: fall through
    if model_arg in SHIPPED_HUB_IDS:
        return SHIPPED_HUB_IDS[model_arg]
    raise AccsimError(f"{model_arg!r} names no Hugging Face id (no org/name "
                      "`_name_or_path` in its config): give --model-id ORG/NAME, the id "
                      "the tool knows the model by", field="--model-id")
