"""`target_opset` (CLI `--target-opset N`): the model upgraded with onnx's version converter
before the search, only when the user asks; never by default.

Converters write old opsets (paddle2onnx: 9-11), where some target forms do not exist
(HardSwish is opset 14; below it the rules write ``x * HardSigmoid(x)``). Asked for, the
search runs on the upgraded graph and the upgrade counts as one applied rewrite
(``UPGRADE_PREFIX/<from>-to-<to>``), so it is checked and measured like any other: the
optimized model is compared with the user's original on ONNX Runtime, and returned only if
measured faster; otherwise the original, at its own opset, comes back.

The converter is a third-party pass whose failures take many forms (an op it has no
adapter for, a model it cannot re-infer): any failure leaves the model at its own opset
with a note, never an error, since the input itself is valid. A downgrade is never made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import onnx
from onnx import version_converter

from taso._onnx_import import import_model
from taso.errors import UsageError
from taso.ir import Graph

UPGRADE_PREFIX = "canonical/opset-upgrade"
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class Upgrade:
    """The graph the search starts from, and the upgrade as an applied rewrite (if made)."""

    graph: Graph
    applied: dict[str, int] = field(default_factory=dict)


def check_target_opset(target_opset: int | None) -> None:
    """Refuse, before any work, an opset onnx does not know."""
    if target_opset is None:
        return
    newest = onnx.defs.onnx_opset_version()
    if isinstance(target_opset, bool) or not isinstance(target_opset, int) or not 1 <= target_opset <= newest:
        raise UsageError(f"target opset must be a whole number from 1 to {newest} (onnx {onnx.__version__}), "
                         f"got {target_opset!r}")


def model_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset (None: it imports none)."""
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    return max(versions) if versions else None


def upgraded(model: onnx.ModelProto, graph: Graph, target_opset: int | None, base_dir: str,
             note: Callable[[str], None]) -> Upgrade:
    """`graph` (the imported `model`), or the model converted to `target_opset` and imported."""
    if target_opset is None:
        return Upgrade(graph)
    current = model_opset(model)
    if current is None:
        note(f"not upgraded to opset {target_opset}: the model imports no default-domain opset")
        return Upgrade(graph)
    if target_opset <= current:
        note(f"not upgraded: the model is at opset {current} already (--target-opset only upgrades)")
        return Upgrade(graph)
    try:
        converted = version_converter.convert_version(model, target_opset)
        result = Upgrade(import_model(converted, base_dir=base_dir), {f"{UPGRADE_PREFIX}/{current}-to-{target_opset}": 1})
    except Exception as exc:  # noqa: BLE001 - the converter fails in many ways; the input stays valid
        note(f"not upgraded to opset {target_opset}: onnx's version converter failed: "
             f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return Upgrade(graph)
    return result
