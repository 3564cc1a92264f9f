"""The fault matrix on a real kube-apiserver and etcd, short versions (benchmarks/fault_matrix.py runs the
long ones and reports the figures).

Each case is one churn (tests/support/fault_churn.py: a reuse profile and a one-pod-per-job profile mixed, two
environments) with one fault held in its middle (tests/support/fault_cases.py), and ends with: every job run
and Passed, GoCD's invariants held (no job assigned twice, no agent running two jobs, none deleted while
building), reuse resumed (a job after recovery runs on a pod that was idle), and no pod and no agent
left after the idle timeout. Each fault also proves it happened (a quota that refused nothing, a cut
that found no connection, a re-watch that got no 410 would make the case worthless).

The faults act on real processes, so they get a control plane of their own (the session's `real_kube`
is shared with the other tests); the 410 case runs on the compacting one. Their hold times are short
real seconds (the freeze 4 s, not 20 s); the rest runs on a scaled clock (45 simulated seconds a
second)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from elastic_agent.simulation.gocd_records import HealthMessage
from elastic_agent.simulation.stack import Stack
from tests.support.control_plane import Binaries, ControlPlane
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.fault_cases import CASES, WatchGone
from tests.support.fault_churn import CaseResult, Churn, run_case
from tests.support.real_kube_fixtures import compacting_kube, real_kube_binaries
from tests.support.reuse_helpers import completed
from tests.support.stack_helpers import schedule
from tests.support.tcp_proxy import CuttableProxy

__all__ = ["compacting_kube", "real_kube_binaries"]  # fixtures, used by name

SHORT = Churn(bursts=3, jobs_per_burst=6, gap_s=30.0, fault_after=1, hold_s=3.0, idle_timeout="2m",
              speed=45.0)  # fmt: skip
HOLD_S = {"apiserver-frozen": 4.0, "watch-410": 4.0, "watch-cut": 0.5}


@pytest.fixture(scope="module")
def fault_kube(real_kube_binaries: Binaries,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:  # fmt: skip
    with ControlPlane.start(real_kube_binaries, tmp_path_factory.mktemp("fault-kube")) as plane:
        yield plane


def _outcome(result: CaseResult) -> str:
    return (f"{result.case}: {result.failure or 'all done'}, {result.passed}/{result.jobs} passed, "
            f"{result.rescheduled} rescheduled, "
            f"violations {result.violations}, evidence {result.evidence}, reused {result.reused_pod}, "
            f"left {result.leftovers}, health {result.health_during}, warnings {result.warning_summary}")


@pytest.mark.parametrize("case", list(CASES))
def test_a_churn_through_the_fault_runs_every_job_keeps_the_invariants_reuses_again_and_leaves_nothing(
    case: str, request: pytest.FixtureRequest
) -> None:
    fault = CASES[case]()
    plane = request.getfixturevalue("compacting_kube" if isinstance(fault, WatchGone) else "fault_kube")
    churn = dataclasses.replace(SHORT, hold_s=HOLD_S.get(case, SHORT.hold_s))
    result = run_case(plane, fault, churn)
    assert result.failure is None, _outcome(result)
    assert not result.evidence, _outcome(result)
    assert result.jobs == SHORT.bursts * SHORT.jobs_per_burst, _outcome(result)
    assert result.passed == result.jobs, _outcome(result)
    assert not result.violations, _outcome(result)
    assert result.reused_pod is not None, _outcome(result)
    assert not result.leftovers, _outcome(result)
    assert not result.health_after, _outcome(result)


# --- the harness's own faults: each does what the matrix relies on ----------------------------------------


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP server that sends back what it receives, for the proxy's tests."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=lambda c=conn: _echo(c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield ("127.0.0.1", int(server.getsockname()[1]))
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):
        while data := conn.recv(1024):
            conn.sendall(data)


def test_a_cut_resets_the_open_connections_and_new_ones_work(echo: tuple[str, int]) -> None:
    with CuttableProxy(echo) as proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        conn.sendall(b"ping")
        assert conn.recv(4) == b"ping"
        assert proxy.cut() == 1
        with pytest.raises(ConnectionResetError):
            conn.sendall(b"again")
            conn.recv(5)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as fresh:
            fresh.sendall(b"fresh")
            assert fresh.recv(5) == b"fresh"


def test_a_stall_holds_the_bytes_until_resumed_with_the_connection_open(echo: tuple[str, int]) -> None:
    with CuttableProxy(echo) as proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        proxy.stall()
        conn.sendall(b"held")
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):
            conn.recv(4)
        proxy.resume()
        conn.settimeout(5)
        assert conn.recv(4) == b"held"


def test_a_frozen_apiserver_answers_nothing_until_thawed_and_etcd_restarts_with_its_data(
    fault_kube: ControlPlane,
) -> None:
    fault_kube.create_namespace("kept-across-etcd-restart")
    fault_kube.freeze_apiserver()
    try:
        with pytest.raises(OSError):  # urllib's timeout: the kernel accepted, nobody answered
            urllib.request.urlopen(fault_kube.url + "/readyz", timeout=1,
                                   context=ssl.create_default_context(cadata=fault_kube.ca_pem))  # fmt: skip
    finally:
        fault_kube.thaw_apiserver()
    fault_kube.restart_etcd(down_s=0.5)
    status, _ = fault_kube.request("GET", "/api/v1/namespaces/kept-across-etcd-restart")
    assert status == 200


# --- defects the matrix found ------------------------------------------------------------------------------

QUOTA_MESSAGE = ('pods "{name}" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=3, '
                 "limited: pods=0")  # fmt: skip




def test_pods_refused_for_minutes_are_a_few_log_lines_and_one_unchanging_health_message(
    make_stack: Callable[..., Stack], caplog: pytest.LogCaptureFixture
) -> None:
    """The quota case in small, on the fake API server: 5 jobs whose pods are refused for 10 simulated
    minutes (GoCD re-sends create-agent for each waiting job all along), then allowed. The real server's
    case is benchmarks/fault_matrix.py's quota case (benchmarks/RESULTS.md section 7)."""
    stack = make_stack()
    seen: list[str] = []
    replace = stack.gocd.replace_health_messages

    def record(messages: list[HealthMessage]) -> None:
        seen.extend(m.message for m in messages)
        replace(messages)

    stack.gocd.replace_health_messages = record  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING)
    # As the real server's refusals, each names the pod it refused.
    refusals = [faults_of(stack.kube).add("POST", r"/pods$", status=403, times=1,
                                      message=QUOTA_MESSAGE.format(name=f"k8s-ea-{n:04d}"))
                for n in range(1000)]  # fmt: skip
    jobs = [schedule(stack, stack.elastic_profile(), name=f"refused-{n}") for n in range(5)]
    stack.clock.sleep(600)
    faults_of(stack.kube).clear()
    for job in jobs:
        completed(stack, job, timeout_s=60)
    assert sum(r.hits for r in refusals) >= 20, "GoCD kept asking for pods all along"
    refused_lines = [r for r in caplog.records if "forbidden" in r.getMessage()]
    assert len(refused_lines) <= 3, f"{len(refused_lines)} lines for one refusal"
    assert len(set(seen)) == 1, f"health messages shown: {sorted(set(seen))}"
