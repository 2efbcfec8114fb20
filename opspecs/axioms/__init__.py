"""Operator axioms: identities between specs that rule proofs are built from.

Each axiom is a frozen ``Axiom`` (see ``_core``) with one-line math, side
conditions and at least three concrete configurations on which
``taso.opspecs.axioms.validate`` checks it numerically and symbolically.
"""

from __future__ import annotations

import functools
import importlib

from taso.opspecs._registry import extra_spec_modules
from taso.opspecs.axioms._core import (
    Algebra,
    ArrayAlgebra,
    Axiom,
    AxiomConfig,
    Term,
    TermAlgebra,
    Var,
    Z3TermAlgebra,
    cfg,
)

AXIOM_MODULES = ("elementwise", "activation", "conv", "matmul", "layout", "pool", "normalization",
                 "converter", "gating", "softmax")

__all__ = [
    "Algebra",
    "ArrayAlgebra",
    "Axiom",
    "AxiomConfig",
    "Term",
    "TermAlgebra",
    "Var",
    "Z3TermAlgebra",
    "all_axioms",
    "axioms_for",
    "cfg",
    "find_axiom",
]


@functools.cache
def all_axioms() -> tuple[Axiom, ...]:
    """Every axiom, grouped by module in a stable order."""
    axioms: list[Axiom] = []
    for name in AXIOM_MODULES:
        axioms.extend(importlib.import_module(f"taso.opspecs.axioms.{name}").AXIOMS)
    for module in extra_spec_modules():  # the axioms of the user's own operators
        axioms.extend(getattr(module, "AXIOMS", ()))
    names = [a.name for a in axioms]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate axiom names: {sorted(duplicates)}")
    return tuple(axioms)


@functools.cache
def axioms_for(spec_name: str) -> tuple[Axiom, ...]:
    """Axioms that mention the spec (by spec name, e.g. ``"Conv"``)."""
    return tuple(a for a in all_axioms() if spec_name in a.ops())


def find_axiom(name: str) -> Axiom:
    """An axiom, or a deliberately wrong one from ``mutants``, by name."""
    from taso.opspecs.axioms.mutants import MUTANTS

    for axiom in (*all_axioms(), *MUTANTS):
        if axiom.name == name:
            return axiom
    raise KeyError(f"no axiom named {name!r}")
