"""Registry of operator specs: lookup by ONNX op type or spec name."""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Mapping, Sequence
from types import ModuleType

import numpy as np

from taso.errors import UsageError
from taso.opspecs._spec import OpSpec

# One module per operator; order is the listing order of ``taso-gen ops``.
SPEC_MODULES = (
    "add", "sub", "mul", "div",
    "relu", "sigmoid", "tanh", "erf", "sqrt", "identity",
    "clip", "hard_sigmoid", "hard_swish", "silu", "gelu",
    "conv", "matmul", "gemm",
    "concat", "split", "transpose", "reshape", "flatten", "squeeze", "unsqueeze", "pad",
    "avg_pool", "max_pool", "global_avg_pool", "reduce_mean", "resize", "batch_norm", "softmax",
    "enlarge", "regroup", "filter_sum", "scalar_mul",
    "const_ones", "const_fill", "const_identity_matrix", "const_identity_conv",
    "const_pool_kernel",
)  # fmt: skip

ONNX_DOMAINS = ("", "ai.onnx")

EXTRA_SPECS_ENV = "TASO_EXTRA_SPECS"
"""Comma-separated importable modules, each with a ``SPEC`` like the built-in spec modules
and optionally ``AXIOMS``: operators of the user's own, listed after the built-in ones
(see ``examples/add_an_operator.py``). Read once per process; generator workers inherit it."""


@functools.cache
def extra_spec_modules() -> tuple[ModuleType, ...]:
    """The modules named by `EXTRA_SPECS_ENV`; a module that cannot be imported is a usage error."""
    names = [name.strip() for name in os.environ.get(EXTRA_SPECS_ENV, "").split(",") if name.strip()]
    modules = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise UsageError(f"{EXTRA_SPECS_ENV}: cannot import {name!r}: {exc}") from None
        if not isinstance(getattr(module, "SPEC", None), OpSpec):
            raise UsageError(f"{EXTRA_SPECS_ENV}: module {name!r} has no SPEC (an OpSpec)")
        modules.append(module)
    return tuple(modules)


@functools.cache
def all_specs() -> tuple[OpSpec, ...]:
    """Every registered spec, in a stable order."""
    specs = tuple(
        importlib.import_module(f"taso.opspecs.{name}").SPEC for name in SPEC_MODULES
    ) + tuple(module.SPEC for module in extra_spec_modules())
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise RuntimeError(f"duplicate spec names in {names}")
    return specs


@functools.cache
def _by_onnx_op() -> dict[tuple[str, str], OpSpec]:
    table: dict[tuple[str, str], OpSpec] = {}
    for spec in all_specs():
        for op_type in spec.onnx_ops:
            table[(spec.domain, op_type)] = spec
    return table


def get_spec(op_type: str, domain: str = "") -> OpSpec | None:
    """Spec of an ONNX op (``None``: unknown op, treated as opaque by the IR)."""
    dom = "" if domain in ONNX_DOMAINS else domain
    return _by_onnx_op().get((dom, op_type))


def spec_by_name(name: str) -> OpSpec:
    """Spec by its taso name, internal specs included (``KeyError`` if unknown)."""
    for spec in all_specs():
        if spec.name == name:
            return spec
    raise KeyError(f"no operator spec named {name!r}")


def evaluate_op(name: str, inputs: Sequence[np.ndarray], params: Mapping[str, object]) -> list[np.ndarray]:
    """The NumPy semantics of the spec named `name` (what folding evaluates weight transforms with)."""
    return spec_by_name(name).evaluate(inputs, params)
