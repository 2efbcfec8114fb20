"""Matching and applying rules on the IR: the small public face of the engine.

    matches = find_matches(graph, rule)            # every occurrence, deterministic order
    matches = find_matches(graph, rule, near=ids)  # only those touching these node ids
    variant = apply(graph, rule, matches[0])       # a new Graph, or None if invalid here

A rule that is not bit-exact matches only where its exactness guards hold (finite,
normal constants; no decision reading a rewritten value): see `_matcher`.

`node_view(graph, node)` shows how the matcher sees a node (spec, parameters, tensor
inputs), or None for opaque nodes. The engine lives in the private `_matcher`,
`_apply`, `_bridge` and `_emit` modules.
"""

from taso.substitutions._apply import NotApplied, Unapplicable, apply, apply_or_reason
from taso.substitutions._bridge import NodeView, is_constant, node_view
from taso.substitutions._matcher import Match, find_matches

__all__ = ["Match", "NodeView", "NotApplied", "Unapplicable", "apply", "apply_or_reason", "find_matches", "is_constant", "node_view"]
