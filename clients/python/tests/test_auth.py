"""API keys: a broker started with the two-tenant config."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from retrybroker import Action, AuthenticationError, BrokerClient, UnknownPolicyError

from .conftest import TWO_TENANTS, BrokerProcess


@pytest.fixture(scope="module")
def auth_broker() -> Iterator[BrokerProcess]:
    assert TWO_TENANTS.exists(), f"{TWO_TENANTS} is missing"
    b = BrokerProcess(["--config", str(TWO_TENANTS)])
    yield b
    b.stop()


def test_missing_key_is_unauthenticated(auth_broker: BrokerProcess) -> None:
    with (
        BrokerClient(auth_broker.target, timeout=5) as c,
        pytest.raises(AuthenticationError) as ei,
    ):
        c.classify(status=503)
    assert ei.value.code is grpc.StatusCode.UNAUTHENTICATED


def test_wrong_key_is_unauthenticated(auth_broker: BrokerProcess) -> None:
    with (
        BrokerClient(auth_broker.target, api_key="not-a-real-key", timeout=5) as c,
        pytest.raises(AuthenticationError),
    ):
        c.classify(status=503)


def test_team_a_key_works(auth_broker: BrokerProcess) -> None:
    with BrokerClient(auth_broker.target, api_key="team-a-secret-key", timeout=5) as c:
        d = c.classify(status=429, headers=[("Retry-After", "3")])
    assert d.action is Action.RETRY
    assert d.delay == 3.0
    assert d.hint_source == "retry-after"


def test_team_b_key_works(auth_broker: BrokerProcess) -> None:
    with BrokerClient(auth_broker.target, api_key="team-b-secret-key", timeout=5) as c:
        d = c.classify(status=200)
    assert d.action is Action.DO_NOT_RETRY


def test_policies_are_per_tenant(auth_broker: BrokerProcess) -> None:
    # team-a has a "reports" policy; team-b does not, and cannot see team-a's.
    with BrokerClient(auth_broker.target, api_key="team-a-secret-key", timeout=5) as c:
        d = c.classify(status=503, method="POST", policy="reports")
    assert d.action is Action.RETRY  # reports retries unsafe methods
    with (
        BrokerClient(auth_broker.target, api_key="team-b-secret-key", timeout=5) as c,
        pytest.raises(UnknownPolicyError),
    ):
        c.classify(status=503, policy="reports")
