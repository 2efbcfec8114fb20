"""Sliding-window kernels (2-D convolution and pooling) written as sums of shifted slices.

Written with NumPy slicing and ``einsum`` only, so they run on float arrays
(the oracle) and on object arrays of Z3 reals (bounded symbolic evaluation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._arith import maximum, zeros
from taso.opspecs._types import Dim, ShapeError, dim_window

Pair = tuple[int, int]
Pads = tuple[int, int, int, int]  # ONNX order: top, left, bottom, right


def effective_kernel(kernel: int, dilation: int) -> int:
    return dilation * (kernel - 1) + 1


def resolve_pads(
    spatial: Sequence[Dim], kernel: Pair, strides: Pair, dilations: Pair, pads: Pads, auto_pad: str
) -> Pads:
    """Explicit pads for ONNX ``auto_pad`` (NOTSET keeps ``pads``; SAME_* needs concrete dims)."""
    if auto_pad in ("NOTSET", ""):
        return pads
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ShapeError(f"unknown auto_pad {auto_pad!r}")
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        if not isinstance(size, int):
            raise ShapeError("auto_pad SAME_* with a symbolic spatial dim")
        out = -(-size // s)
        total = max(0, (out - 1) * s + effective_kernel(k, d) - size)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return (begin[0], begin[1], end[0], end[1])


def window_shape(
    spatial: Sequence[Dim], kernel: Pair, strides: Pair, dilations: Pair, pads: Pads, *,
    ceil: bool = False,
) -> tuple[Dim, Dim]:
    """Output (H, W) of a 2-D sliding window."""
    out: list[Dim] = []
    for axis in range(2):
        size, k = spatial[axis], effective_kernel(kernel[axis], dilations[axis])
        total_pad = pads[axis] + pads[axis + 2]
        stride = strides[axis]
        if ceil and isinstance(size, int):
            out.append(-(-(size + total_pad - k) // stride) + 1)
        else:
            out.append(dim_window(size, total_pad, k, stride))
    if any(isinstance(d, int) and d <= 0 for d in out):
        raise ShapeError(f"window larger than padded input: output {tuple(out)}")
    return (out[0], out[1])


def pad_spatial(x: np.ndarray, pads: Pads, fill: object = 0) -> np.ndarray:
    """Pad the last two axes; works for object arrays (fill with a Python value)."""
    top, left, bottom, right = pads
    shape = (*x.shape[:-2], x.shape[-2] + top + bottom, x.shape[-1] + left + right)
    out = np.empty(shape, dtype=x.dtype)
    out[...] = fill
    out[..., top : top + x.shape[-2], left : left + x.shape[-1]] = x
    return out


def _patch(xp: np.ndarray, i: int, j: int, out_hw: Pair, strides: Pair) -> np.ndarray:
    (oh, ow), (sh, sw) = out_hw, strides
    return xp[..., i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]


def conv2d(
    x: np.ndarray, w: np.ndarray, strides: Pair, pads: Pads, dilations: Pair, group: int
) -> np.ndarray:
    """y[n,m,h,w] = sum_{c,i,j} x_pad[n, g*C/G + c, h*s + i*d, w*s + j*d] * w[m,c,i,j]."""
    n, channels = x.shape[0], x.shape[1]
    m, cg, kh, kw = w.shape
    oh, ow = window_shape(x.shape[2:], (kh, kw), strides, dilations, pads)
    xp = pad_spatial(x, pads).reshape(n, group, channels // group, *_padded_hw(x, pads))
    wg = w.reshape(group, m // group, cg, kh, kw)
    out = zeros((n, group, m // group, oh, ow), like=x)  # type: ignore[arg-type]
    for i in range(kh):
        for j in range(kw):
            patch = _patch(xp, i * dilations[0], j * dilations[1], (oh, ow), strides)  # type: ignore[arg-type]
            out = out + np.einsum("ngchw,gmc->ngmhw", patch, wg[..., i, j])
    return out.reshape(n, m, oh, ow)


def _padded_hw(x: np.ndarray, pads: Pads) -> tuple[int, int]:
    return (x.shape[-2] + pads[0] + pads[2], x.shape[-1] + pads[1] + pads[3])


def avg_pool(
    x: np.ndarray, kernel: Pair, strides: Pair, pads: Pads, *, count_include_pad: bool
) -> np.ndarray:
    """Mean over each window; the divisor counts padding only if ``count_include_pad``."""
    oh, ow = window_shape(x.shape[2:], kernel, strides, (1, 1), pads)
    xp = pad_spatial(x, pads)
    valid = pad_spatial(np.ones(x.shape[-2:], dtype=np.float64), pads)
    total = zeros((*x.shape[:2], oh, ow), like=x)  # type: ignore[arg-type]
    count = np.zeros((oh, ow))  # type: ignore[arg-type]
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            total = total + _patch(xp, i, j, (oh, ow), strides)  # type: ignore[arg-type]
            count = count + _patch(valid, i, j, (oh, ow), strides)  # type: ignore[arg-type]
    divisor = np.full((oh, ow), kernel[0] * kernel[1]) if count_include_pad else count  # type: ignore[arg-type]
    if x.dtype == object:
        return total * (1.0 / divisor)
    return total / divisor


def max_pool(x: np.ndarray, kernel: Pair, strides: Pair, pads: Pads, dilations: Pair) -> np.ndarray:
    """Maximum over each window, ignoring padded positions."""
    oh, ow = window_shape(x.shape[2:], kernel, strides, dilations, pads)
    xp = pad_spatial(x, pads)
    valid = pad_spatial(np.ones(x.shape[-2:], dtype=bool), pads, fill=False)
    best, seen = None, np.zeros((oh, ow), dtype=bool)  # type: ignore[arg-type]
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            di, dj = i * dilations[0], j * dilations[1]
            patch = _patch(xp, di, dj, (oh, ow), strides)  # type: ignore[arg-type]
            ok = _patch(valid, di, dj, (oh, ow), strides)  # type: ignore[arg-type]
            if best is None:
                best = patch
            else:
                merged = maximum(best, patch)
                best = np.where(ok & seen, merged, np.where(ok, patch, best))
            seen = seen | ok
    assert best is not None
    return best
