"""Cost-based search over graph rewrites (TASO's backtracking search).

    result = search(graph, expand, cost_model, alpha=1.05, time_budget_s=10.0)
    result.graph, result.best_cost, result.stop_reason, result.applied

`expand(graph, near)` lists `Rewrite`s (given by the caller: the rule matcher);
`cost_model` implements `CostModel` (`taso.backends.graph_cost` has the measured and
analytical ones). See `taso.search.rewrite` for the incremental-expansion contract.
"""

from taso.report import StopReason
from taso.search.backtracking import (
    DEFAULT_MAX_GRAPHS,
    DEFAULT_MAX_QUEUE,
    InvalidRewriteError,
    Patience,
    Progress,
    SearchProgress,
    SearchResult,
    SearchStats,
    search,
)
from taso.search.cost import CostModel, FunctionCost, WholeGraphCost
from taso.search.rewrite import (
    Expand,
    Expansion,
    Rewrite,
    affected_nodes,
    apply_rewrite,
    dangling_values,
    structural_defects,
)

__all__ = [
    "DEFAULT_MAX_GRAPHS",
    "DEFAULT_MAX_QUEUE",
    "CostModel",
    "Expand",
    "Expansion",
    "FunctionCost",
    "InvalidRewriteError",
    "Patience",
    "Progress",
    "Rewrite",
    "SearchProgress",
    "SearchResult",
    "SearchStats",
    "StopReason",
    "WholeGraphCost",
    "affected_nodes",
    "apply_rewrite",
    "dangling_values",
    "search",
    "structural_defects",
]
