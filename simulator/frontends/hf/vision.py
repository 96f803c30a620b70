"""Parameters of a multimodal config's vision tower (its `vision_config`), so that a
model card's total, which counts the tower, can be checked (DESIGN.md section 21).
accsim simulates the language model only; the tower's count is reported beside it.

Per vision model_type, from the transformers modules that build it: a ViT of
num_hidden_layers layers (q, k, v, o with biases; fc1 and fc2 with biases; two
LayerNorms), a patch embedding, position embeddings, and the projector into the
language model's hidden size. A vision model_type not listed counts 0 and says so.
"""

from __future__ import annotations


def _size(v: dict, key: str, default: int | None = None) -> int:
    """A size the tower's count reads: a positive whole number (KeyError otherwise, so
    the tower counts 0; 0 or a float there divided by zero or overflowed a float)."""
    value = v.get(key, default)
    if type(value) is not int or value <= 0:
        raise KeyError(key)
    return value


def _vit_layers(v: dict) -> int:
    h, i, n = (_size(v, key) for key in ("hidden_size", "intermediate_size",
                                          "num_hidden_layers"))
    return n * (4 * (h * h + h) + 2 * h * i + i + h + 4 * h)


def _patches(v: dict) -> int:
    return (_size(v, "image_size") // _size(v, "patch_size")) ** 2


def _siglip(v: dict, hidden: int) -> int:
    """SigLIP (Gemma 3): conv patch embedding with bias, a position per patch, the
    post-LayerNorm; Gemma 3's projector: a hidden x text-hidden matrix and an RMSNorm."""
    h, p = _size(v, "hidden_size"), _size(v, "patch_size")
    channels = _size(v, "num_channels", 3)
    return (channels * p * p * h + h + _patches(v) * h + _vit_layers(v) + 2 * h
            + h * hidden + h)


def _llama4(v: dict, hidden: int) -> int:
    """Llama 4: unfold patch embedding (no bias), a class embedding, a position per
    patch and the class token, pre and post LayerNorms; the pixel-shuffle adapter
    (intermediate_size -> projector_input_dim -> projector_output_dim, no biases) and
    the projector vision_output_dim -> text hidden (no bias)."""
    h, p = _size(v, "hidden_size"), _size(v, "patch_size")
    channels = _size(v, "num_channels", 3)
    adapter = _size(v, "intermediate_size") * _size(v, "projector_input_dim") \
        + _size(v, "projector_output_dim") ** 2
    return (channels * p * p * h + h + (_patches(v) + 1) * h + 4 * h + _vit_layers(v)
            + adapter + _size(v, "vision_output_dim") * hidden)


TOWERS = {"siglip_vision_model": _siglip, "llama4_vision_model": _llama4}


def vision_params(raw: dict, hidden: int) -> int:
    """The vision tower's parameters (0 without a vision_config, or for a tower
    whose form is not listed in TOWERS or whose sizes are not positive whole
    numbers)."""
    v = raw.get("vision_config")
    if not isinstance(v, dict) or v.get("model_type") not in TOWERS:
        return 0
    try:
        return TOWERS[v["model_type"]](v, hidden)
    except (KeyError, TypeError):
        return 0
