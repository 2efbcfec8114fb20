"""Operators of the user's own: TASO_EXTRA_SPECS adds spec modules (and their axioms), and
the generator enumerates operators no built-in universe has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from taso.substitutions.generate._universes import select

EXAMPLES = Path(__file__).parent.parent / "examples"


def _python(code: str, extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TASO_EXTRA_SPECS": extra, "PYTHONPATH": str(EXAMPLES)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_an_extra_module_adds_its_spec_and_axioms() -> None:
    code = ("from taso.opspecs import get_spec, all_specs; from taso.opspecs.axioms import axioms_for;"
            "print(get_spec('Neg').name, all_specs()[-1].name, sorted(a.name for a in axioms_for('Neg')))")
    proc = _python(code, "neg_op")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Neg", "Neg", "['neg_as_mul',", "'neg_neg']"]


def test_a_module_that_cannot_be_imported_is_a_usage_error() -> None:
    code = "from taso.opspecs import all_specs; all_specs()"
    proc = _python(code, "no_such_module_here")
    assert proc.returncode != 0 and "UsageError: TASO_EXTRA_SPECS: cannot import 'no_such_module_here'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "taso.substitutions.generate.cli", "ops"], capture_output=True, text=True,
                          env={**os.environ, "TASO_EXTRA_SPECS": "os"}, timeout=120)
    assert proc.returncode == 2 and "has no SPEC" in proc.stderr and "Traceback" not in proc.stderr


def test_operators_no_universe_has_get_an_elementwise_one() -> None:
    names = {u.name: u.ops for u in select(("Sub", "Add", "Conv"))}
    assert names["elementwise"] == ("Sub", "Add")
    assert "elementwise" not in {u.name for u in select(("Add", "Relu"))}  # all covered by TASO's universes
