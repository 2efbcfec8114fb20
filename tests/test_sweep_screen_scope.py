"""The sweep screen prices kernels it profiled in this call, never times kept in the user cache.

A kernel's time depends on its neighbours and on the machine's load when it ran; times kept
from other models and other days moved the screen's predictions by 5-10%, enough to leave a
real 1.05x sweep unjudged (`taso.pipeline.api.SCREEN_CACHE`).
"""

from __future__ import annotations

import pytest

from taso._onnx_import import import_model
from taso.backends._session import RunTiming
from taso.backends.compare import ReferenceRun
from taso.backends.cost_cache import CostCache, CostKey
from taso.backends.kernel_cost import BACKEND_NAME
from taso.pipeline import api
from taso.pipeline.budget import Budget
from tests.helpers.models import wide_model

STALE_MS = 1_000.0


def _stale_kernels(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> list[CostKey]:
    """Every kernel time the user cache is asked for comes back as `STALE_MS`."""
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))
    asked: list[CostKey] = []
    real_get = CostCache.get

    def get(self: CostCache, key: CostKey) -> float | None:
        if key.backend == BACKEND_NAME:
            asked.append(key)
            return STALE_MS
        return real_get(self, key)

    monkeypatch.setattr(CostCache, "get", get)
    return asked


@pytest.mark.ort
def test_the_screen_prices_kernels_profiled_in_this_call(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    asked = _stale_kernels(monkeypatch, tmp_path)
    graph = import_model(wide_model())
    target = api._validate_options(backend="ort-cpu", time_budget_s=None, alpha=1.05)
    call = Budget.default(lambda: 100.0).resolved(run_ms=1.0, nodes=len(graph.nodes))
    sweeping = api._sweeping(graph, target=target, profile=None, say=lambda _: None,
                             reference=ReferenceRun(timing=RunTiming(session_s=0.1, run_ms=1.0)),
                             note=lambda _: None, budget=call.search(expected_after_s=1.0))
    assert sweeping is not None and sweeping.screen is not None
    cost = sweeping.screen.cost(graph)
    assert 0.0 < cost < STALE_MS  # a few milliseconds at most: the kernels' own times
    assert not asked
