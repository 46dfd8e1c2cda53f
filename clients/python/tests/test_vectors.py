"""Every conformance vector of testdata/classify.jsonl through classify()."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from retrybroker import Action, BrokerClient, Reason

from .conftest import VECTORS


def load_vectors() -> list[dict[str, Any]]:
    with VECTORS.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


ALL = load_vectors()


def test_vectors_file_is_not_empty() -> None:
    assert len(ALL) >= 60
    assert len({v["name"] for v in ALL}) == len(ALL), "vector names must be unique"


def _ms(seconds: float | None) -> float:
    assert seconds is not None
    return seconds * 1000.0


@pytest.mark.parametrize("v", ALL, ids=[v["name"] for v in ALL])
def test_vector(client: BrokerClient, v: dict[str, Any]) -> None:
    d = client.classify(
        status=v.get("status"),
        transport_error=v.get("transport_error"),
        headers=[(h[0], h[1]) for h in v.get("headers", [])],
        method=v.get("method", "GET"),
        attempt=v.get("attempt", 1),
        provider=v.get("provider"),
        now=datetime.fromisoformat(v["now"].replace("Z", "+00:00")) if "now" in v else None,
        body=v.get("body"),
    )
    exp = v["expect"]
    assert d.action == Action(exp["action"]), d
    if "reason" in exp:
        assert d.reason == Reason(exp["reason"]), d
        assert d.reason == exp["reason"]  # str enum compares to the proto name
    if "hint_source" in exp:
        assert d.hint_source == exp["hint_source"], d
    if "delay_ms" in exp:
        want = exp["delay_ms"]
        tolerance = 1.0 if want % 1000 else 0.0  # fractional-seconds hints: +-1 ms
        assert abs(_ms(d.delay) - want) <= tolerance + 1e-6, d
    if "delay_max_ms" in exp:
        assert 0.0 <= _ms(d.delay) <= exp["delay_max_ms"], d
    if "hint_ms" in exp:
        assert abs(_ms(d.hint) - exp["hint_ms"]) <= 1.0, d
    if d.action is Action.DO_NOT_RETRY:
        assert d.delay is None
