"""A Prometheus whose name does not resolve is unavailable, said as a DNS failure, within the deadline.

`.invalid` never resolves (RFC 2606), so no test here reaches the internet; the lookup is
local and takes milliseconds here (the deadline bounds it where a resolver is slow).
"""

from __future__ import annotations

import socket
import time

import pytest

from signals.prometheus import PrometheusSource, PrometheusUnavailable
from triage.cli.common import EXIT_UNAVAILABLE
from triage.cli.main import main

UNRESOLVABLE = "http://prometheus.invalid:9090"


@pytest.fixture(autouse=True, scope="module")
def resolver_answers_at_once() -> None:
    """These tests need a resolver that says "no such name" quickly (measured: 3 ms here).

    Without one (no DNS server at all), the lookup ends in the deadline, a timeout, which
    other tests cover; then these are skipped, loudly.
    """
    started = time.monotonic()
    try:
        socket.getaddrinfo("prometheus.invalid", 9090)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME or time.monotonic() - started > 1.0:
            pytest.skip(
                f"!!! the resolver did not answer 'no such name' at once ({exc}): DNS tests NOT RUN !!!"
            )
        return
    pytest.skip("!!! prometheus.invalid resolved (a resolver that answers every name): DNS tests NOT RUN !!!")


def test_an_unresolvable_name_is_unreachable_by_dns_not_refused() -> None:
    started = time.monotonic()
    with (
        PrometheusSource(UNRESOLVABLE, timeout=3.0) as source,
        pytest.raises(PrometheusUnavailable) as caught,
    ):
        source.check()
    assert time.monotonic() - started < 3.5
    assert caught.value.kind == "unreachable"
    assert str(caught.value).startswith("unreachable: DNS: ")
    assert "refused" not in str(caught.value) and "prometheus.invalid" in str(caught.value)


def test_a_query_round_names_the_dns_failure_per_query() -> None:
    with PrometheusSource(UNRESOLVABLE, timeout=2.0) as source:
        result = source.range_queries({"q": "up"}, 1_760_000_000.0, 1_760_000_060.0, 15.0)["q"]
    assert result.error_kind == "unreachable" and "DNS: name not resolved" in (result.error or "")


def test_diagnose_against_an_unresolvable_name_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--prometheus", UNRESOLVABLE, "--timeout", "2"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "DNS: name not resolved" in err and "Traceback" not in err
