"""Sample tensors an operator's emulation runs on (DESIGN.md section 17): the user's own
.npy files named per operator in the plan, or seeded synthetic ones of the stated
distribution. Each is cut to a small tile (rows x K x cols, K contiguous so MX blocks
stay whole) so emulating a whole model stays fast. Files are data: np.load never
unpickles, and a shape that does not fit the operator is one error naming the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import AccsimError
from simulator.inputs.loader import check_regular_file
from simulator.precision.precision_plan import Samples, Tensors
from simulator.inputs.workload import is_attention


# A sample tensor file is mapped, not read whole (only the sampled tile is touched):
# the bound is one a weight matrix of a large model keeps.
MAX_SAMPLE_BYTES = 2**34


@dataclass(frozen=True)
class GemmDims:
    """The product an operator's emulation samples: A (m x k) . B (k x n)."""

    m: int
    k: int
    n: int


def gemm_dims(op) -> GemmDims:
    """A GEMM or conv's lowered product; attention's Q . K^T of one head."""
    if is_attention(op):
        return GemmDims(op.q_len, op.head_dim, op.kv_len)
    g = op.gemm()
    return GemmDims(g.m, g.k, g.n)


def _spread(count: int, keep: int) -> np.ndarray:
    """`keep` evenly spaced indices of `count`."""
    return np.unique(np.linspace(0, count - 1, min(count, keep)).astype(np.int64))


def synthetic(dims: GemmDims, samples: Samples) -> tuple[np.ndarray, np.ndarray, str]:
    """Seeded A and B tiles of the sampled size, and their description; OverflowError
    where an outlier scale puts activations past fp32's range (numpy warned on stderr
    at every step that followed, then the product overflowed)."""
    rows, k, cols = (min(dims.m, samples.rows), min(dims.k, samples.k),
                     min(dims.n, samples.cols))
    rng = np.random.default_rng([samples.seed, rows, k, cols])
    if samples.activations == "normal":
        a = rng.standard_normal((rows, k))
        described = "normal"
    else:
        a = rng.standard_t(4, (rows, k))
        outliers = math.ceil(samples.outlier_fraction * k)
        with np.errstate(over="ignore"):
            a[:, rng.choice(k, outliers, replace=False)] *= samples.outlier_scale
            a = a.astype(np.float32)
        if not np.isfinite(a).all():
            raise OverflowError(f"outlier_scale {samples.outlier_scale:g} puts the "
                                "synthetic activations past fp32's range")
        described = (f"heavy_tailed (t4, {outliers} of {k} channels x"
                     f"{samples.outlier_scale:g})")
    b = rng.standard_normal((k, cols)) / math.sqrt(k)
    return (a.astype(np.float32), b.astype(np.float32),
            f"synthetic {described}, seed {samples.seed}, {rows}x{k}x{cols}")


def _load(path: Path, field: str) -> np.ndarray:
    if path.suffix != ".npy":
        raise AccsimError("sample tensors are .npy files (read with allow_pickle=False)",
                          file=str(path), field=field)
    try:
        size = check_regular_file(path).st_size  # a FIFO would block np.load
        if size > MAX_SAMPLE_BYTES:
            raise AccsimError(f"{size:,} bytes is larger than the {MAX_SAMPLE_BYTES:,} "
                              "bytes a sample tensor may have", file=str(path), field=field)
        array = np.load(path, allow_pickle=False, mmap_mode="r")
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=str(path), field=field) from None
    except FileNotFoundError:
        raise AccsimError("file not found", file=str(path), field=field) from None
    except (OSError, ValueError, EOFError) as exc:
        raise AccsimError(f"cannot read as .npy: {exc or type(exc).__name__}", file=str(path),
                          field=field) from None
    if array.ndim != 2 or array.dtype.kind not in "fiu":
        raise AccsimError(f"expected a 2-D array of real numbers, found {array.ndim}-D "
                          f"{array.dtype}", file=str(path), field=field)
    if array.size == 0:  # an emulation over no values would pass any guardrail
        raise AccsimError(f"shape {tuple(array.shape)} holds no values", file=str(path),
                          field=field)
    return array


def user_tiles(op, tensors: Tensors, base: Path, samples: Samples,
               synthetic_ab: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A and B tiles from the user's files where named (the synthetic ones elsewhere),
    each checked against the operator's shape."""
    dims = gemm_dims(op)
    k = min(dims.k, samples.k)
    a, b = synthetic_ab
    field = f"operators.{op.name}.tensors"
    if tensors.a is not None:
        array = _load(base / tensors.a, f"{field}.a")
        if array.shape[1] != dims.k:
            raise AccsimError(f"shape {tuple(array.shape)} does not fit {op.name}: its "
                              f"rows need {dims.k} columns (the reduction dim K)",
                              file=str(base / tensors.a), field=f"{field}.a")
        a = np.asarray(array[_spread(array.shape[0], samples.rows), :k], dtype=np.float32)
    if tensors.b is not None:
        array = _load(base / tensors.b, f"{field}.b")
        attention = is_attention(op)
        wanted = f"rows x {dims.k} (the K cache)" if attention else f"{dims.k} x {dims.n}"
        if (array.shape[1] != dims.k) if attention else (array.shape != (dims.k, dims.n)):
            raise AccsimError(f"shape {tuple(array.shape)} does not fit {op.name}: "
                              f"expected {wanted}", file=str(base / tensors.b),
                              field=f"{field}.b")
        if attention:
            array = array.T
        b = np.asarray(array[:k, _spread(array.shape[1], samples.cols)], dtype=np.float32)
    for name, tile in (("a", a), ("b", b)):
        if not np.all(np.isfinite(tile)):
            raise AccsimError("holds values that are not finite", field=f"{field}.{name}",
                              file=str(base / getattr(tensors, name)))
    return a, b
