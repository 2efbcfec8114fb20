"""Containment: a failing cost model or judge skips a candidate, never the whole call.

The optimize path prices and judges candidates with code that compiles and runs models
(ONNX Runtime sessions, kernel-shape inference, profiling). Any exception inside it is
a fault of that candidate or of the tool, never of the user's input, so:

* `GuardedCost` prices with its primary model; if that fails before it has priced
  anything, it falls back to the fallback model for good (costs stay comparable: one
  model prices every graph); if it fails later, that one candidate costs `inf` (never
  chosen). Each distinct failure is reported once through `on_failure`.
* `guarded_judge` turns a failing judgement into "not faster".

KeyboardInterrupt and other BaseExceptions pass through untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from taso.errors import first_line
from taso.ir import Graph
from taso.search.cost import CostModel
from taso.search.rewrite import Rewrite
from taso.search.sweep import Judge, Judgement

Report = Callable[[str], None]


def describe(error: Exception) -> str:
    """`Type: first line of the message`, for a report line."""
    name, text = type(error).__name__, first_line(error)
    return name if text == name else f"{name}: {text}"


class GuardedCost:
    """A cost model that never raises (see the module docstring)."""

    def __init__(self, primary: CostModel, fallback: CostModel | None, *, on_failure: Report, name: str) -> None:
        self._active = primary
        self._fallback = fallback
        self._on_failure = on_failure
        self._name = name
        self._priced = False
        self._seen: set[str] = set()

    @property
    def active(self) -> CostModel:
        return self._active

    def cost(self, graph: Graph) -> float:
        return self._guarded(lambda model: model.cost(graph))

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        return self._guarded(lambda model: model.cost_after(parent, parent_cost, rewrite))

    def _guarded(self, price: Callable[[CostModel], float]) -> float:
        try:
            value = float(price(self._active))
        except Exception as error:  # noqa: BLE001  (containment is the point)
            return self._failed(error, price)
        self._priced = True
        return value

    def _failed(self, error: Exception, price: Callable[[CostModel], float]) -> float:
        if not self._priced and self._fallback is not None and self._active is not self._fallback:
            self._report(f"{self._name} failed ({describe(error)}); priced by the analytical model instead")
            self._active = self._fallback
            return self._guarded(price)
        self._report(f"{self._name} failed on a candidate, which was skipped ({describe(error)})")
        return math.inf

    def _report(self, message: str) -> None:
        if message not in self._seen:
            self._seen.add(message)
            self._on_failure(message)


def guarded_judge(judge: Judge, *, on_failure: Report) -> Judge:
    """`judge`, except that a judgement that raises counts as "not faster"."""
    seen: set[str] = set()

    def judged(current: Graph, candidate: Graph, deadline: float, *, look: int = 0,
               confirm: Judgement | None = None) -> Judgement:
        try:
            if confirm is not None:  # only ever asked of a judge that pools
                return judge(current, candidate, deadline, look=look, confirm=confirm)
            return judge(current, candidate, deadline, look=look)
        except Exception as error:  # noqa: BLE001
            message = f"the measured judge failed on a sweep, which was not kept ({describe(error)})"
            if message not in seen:
                seen.add(message)
                on_failure(message)
            return Judgement(speedup=1.0, faster=False)

    return judged
