"""Concrete configs drawn near a listed one: more shapes and parameters to check on.

A hand-written config is often degenerate: 1x1 matrices commute, a stride-2 window never
reads the one padded row that is off by one, a rank-2 tensor cannot tell axis 1 from axis
-1. So a check that trusts only the listed configs accepts wrong identities. `shape_draws`
rewrites a config's dims (one `Draw` strategy per candidate: every dim >= 2, batch > 1,
non-square, an extra leading dim); `param_draws` resamples its parameters (strides, pads,
dilations, kernels, axes, permutations, groups, and the values the other listed configs
use). Nothing here knows whether a draw is valid: callers keep the draws that satisfy
their side conditions and whose two sides pass the specs' shape inference.

Every draw is deterministic in its `numpy.random.Generator`: callers seed it from a name.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from taso.opspecs._types import Shape

MAX_DIM = 6  # drawn dims stay small: a draw is evaluated on random tensors
MAX_ELEMENTS = 4096  # per tensor; larger draws are not proposed


class Draw(enum.Enum):
    """How a candidate's dims are derived from the listed config's."""

    SPREAD = "spread"  # each distinct dim value -> a distinct value >= 2 (equal dims stay equal)
    GROW = "grow"  # each dim value v >= 2 -> v + 1; 1s (broadcast dims) stay
    BATCH = "batch"  # the leading 1 of every tensor of rank >= 3 -> 2
    PREPEND = "prepend"  # a leading dim of 2 on every tensor of the highest rank
    REMAP = "remap"  # each distinct dim value -> a random value in 1..MAX_DIM
    SPLIT = "split"  # a dim value shared by several dims: some of them (not all) change
    SCRAMBLE = "scramble"  # each dim of each tensor on its own: squares become non-square


Shapes = dict[str, Shape]


def seed_of(*parts: object) -> int:
    """A 64-bit seed from names and indices: reproducible, different for each part."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _value_map(shapes: Mapping[str, Shape], new: Mapping[int, int]) -> Shapes:
    return {k: tuple(new.get(int(d), int(d)) for d in s) for k, s in shapes.items()}


def _values(shapes: Mapping[str, Shape]) -> list[int]:
    return sorted({int(d) for s in shapes.values() for d in s})


def _spread(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    new, last = {}, 1
    for value in _values(shapes):
        last = new[value] = max(value, last + 1, 2)
    return _value_map(shapes, new)


def _grow(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    return _value_map(shapes, {v: v + 1 for v in _values(shapes) if v >= 2})


def _batch(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    return {k: (2, *s[1:]) if len(s) >= 3 and s[0] == 1 else tuple(s) for k, s in shapes.items()}


def _prepend(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    top = max((len(s) for s in shapes.values()), default=0)
    return {k: (2, *s) if len(s) == top and top else tuple(s) for k, s in shapes.items()}


def _remap(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    return _value_map(shapes, {v: int(rng.integers(1, MAX_DIM + 1)) for v in _values(shapes)})


def _split(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    positions = [(k, i) for k, s in shapes.items() for i in range(len(s))]
    counts: dict[int, int] = {}
    for k, i in positions:
        counts[int(shapes[k][i])] = counts.get(int(shapes[k][i]), 0) + 1
    shared = sorted(v for v, n in counts.items() if n > 1)
    if not shared:
        return dict(shapes)
    weights = np.array([counts[v] for v in shared], dtype=float)
    chosen = int(rng.choice(shared, p=weights / weights.sum()))  # larger classes more often
    at = [p for p in positions if int(shapes[p[0]][p[1]]) == chosen]
    moved = {at[int(j)] for j in rng.choice(len(at), int(rng.integers(1, len(at))), replace=False)}
    other = chosen + 1 if chosen < MAX_DIM else chosen - 1
    return {k: tuple(other if (k, i) in moved else int(d) for i, d in enumerate(s))
            for k, s in shapes.items()}


def _scramble(shapes: Mapping[str, Shape], rng: np.random.Generator) -> Shapes:
    def dim(d: int) -> int:
        return int(d) if rng.random() < 0.3 else int(rng.integers(2, MAX_DIM))
    return {k: tuple(dim(d) for d in s) for k, s in shapes.items()}


_DRAWS: dict[Draw, Callable[[Mapping[str, Shape], np.random.Generator], Shapes]] = {
    Draw.SPREAD: _spread, Draw.GROW: _grow, Draw.BATCH: _batch, Draw.PREPEND: _prepend,
    Draw.REMAP: _remap, Draw.SPLIT: _split, Draw.SCRAMBLE: _scramble,
}
FIXED = (Draw.SPREAD, Draw.PREPEND, Draw.BATCH, Draw.GROW)
_RANDOM = (Draw.SPLIT, Draw.SCRAMBLE, Draw.REMAP)


def _small(shapes: Mapping[str, Shape]) -> bool:
    return all(int(np.prod(s, dtype=np.int64)) <= MAX_ELEMENTS for s in shapes.values())


def shape_draws(shapes: Mapping[str, Shape], rng: np.random.Generator,
                tries: int) -> Iterator[tuple[Draw, Shapes]]:
    """Up to `tries` candidate shape dicts, new and small, in the order of `_order`; a
    candidate equal to the listed shapes or to an earlier one is dropped."""
    seen = {_key(shapes)}
    for index in range(tries):
        draw = _order(index)
        candidate = _DRAWS[draw](shapes, rng)
        if _key(candidate) not in seen and _small(candidate):
            seen.add(_key(candidate))
            yield draw, candidate


def _order(index: int) -> Draw:
    """Fixed (non-degenerate) and random draws in turn; once the fixed ones are spent,
    only random ones (a caller keeping the first few admissible draws gets both kinds)."""
    fixed, odd = divmod(index, 2)
    if not odd and fixed < len(FIXED):
        return FIXED[fixed]
    return _RANDOM[index % len(_RANDOM)]


def _key(shapes: Mapping[str, Shape]) -> tuple:
    return tuple(sorted((k, tuple(int(d) for d in s)) for k, s in shapes.items()))


def pattern(shapes: Mapping[str, Shape]) -> tuple:
    """What a numeric check can tell apart in a config's dims: the ranks, which dims are
    equal to which, which are 1, and each dim's parity (window ops see it). Configs of one
    pattern tend to agree or fail together; a draw with a new pattern tests something new."""
    classes: dict[int, int] = {}
    out = []
    for name in sorted(shapes):
        for d in (int(d) for d in shapes[name]):
            out.append((name, classes.setdefault(d, len(classes)), d == 1, d % 2))
        out.append((name, len(shapes[name])))
    return tuple(out)


# -- parameters --------------------------------------------------------------------


def _ints(choices: Sequence[int]) -> Callable[[object, int, np.random.Generator], object]:
    """Same length as the listed tuple, each entry from `choices`."""
    def draw(value: object, rank: int, rng: np.random.Generator) -> object:
        return tuple(int(rng.choice(choices)) for _ in value)  # type: ignore[attr-defined]
    return draw


def _axis(value: object, rank: int, rng: np.random.Generator) -> object:
    return int(rng.integers(-rank, rank)) if rank else value


def _group(value: object, rank: int, rng: np.random.Generator) -> object:
    return int(rng.choice((1, 2, 3, 4)))


_PARAM_DRAWS: dict[str, Callable[[object, int, np.random.Generator], object]] = {
    "strides": _ints((1, 2, 3)),
    "dilations": _ints((1, 2)),
    "pads": _ints((0, 1, 2)),
    "kernel_shape": _ints((1, 2, 3)),
    "axis": _axis,
    "group": _group,
}


def _is_permutation(value: object) -> bool:
    return (isinstance(value, tuple) and len(value) > 1
            and sorted(value) == list(range(len(value))))  # type: ignore[type-var]


def param_draws(params: Mapping[str, object], listed: Sequence[Mapping[str, object]],
                rank: int, rng: np.random.Generator) -> dict[str, object]:
    """`params` with each entry, at random, kept or replaced: by a value another listed
    config uses, a random permutation of a permutation, or (for the spec parameters named
    in `_PARAM_DRAWS`) a fresh value of the same form; `rank` bounds drawn axes."""
    out = dict(params)
    for key in sorted({k for c in listed for k in c} - set(params)):  # set elsewhere only
        choices = [c[key] for c in listed if key in c]
        if rng.random() < 0.5:
            out[key] = choices[int(rng.integers(len(choices)))]
    for key, value in params.items():
        if rng.random() < 0.5:
            continue
        others = [c[key] for c in listed if key in c and c[key] != value]
        fresh: list[object] = []
        if _is_permutation(value):
            fresh.append(tuple(int(i) for i in rng.permutation(len(value))))  # type: ignore[arg-type]
        if key in _PARAM_DRAWS and not isinstance(value, dict):
            fresh.append(_PARAM_DRAWS[key](value, rank, rng))
        pool = others + fresh
        if pool:
            out[key] = pool[int(rng.integers(len(pool)))]
    return out
