"""The simulated kubelet, in virtual time (step()) and on a background thread (start())."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_agent.clock import ManualClock, ScaledClock
from elastic_agent.simulation.agents import Console
from elastic_agent.simulation.fake_kube_store import FakeKubeStore
from elastic_agent.simulation.kubelet import PodFault, SimulatedKubelet
from tests.support.kube_fixtures import NS, pod_manifest, wait_for

AGENT_ENV = {"GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID": "agent-1", "GO_EA_SERVER_URL": "https://gocd/go",
             "GO_EA_AUTO_REGISTER_KEY": "key"}  # fmt: skip


class RecordingHost:
    def __init__(self) -> None:
        self.started: list[tuple[str, dict[str, str]]] = []
        self.stopped: list[str] = []

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        self.started.append((pod_name, dict(env)))

    def agent_stopped(self, pod_name: str) -> None:
        self.stopped.append(pod_name)


def setup(**options: Any) -> tuple[FakeKubeStore, ManualClock, RecordingHost, SimulatedKubelet]:
    clock = ManualClock()
    store = FakeKubeStore(clock=clock, default_grace_seconds=options.pop("grace", 0.0))
    host = RecordingHost()
    return store, clock, host, SimulatedKubelet(store, clock, host, **options)


def phase(store: FakeKubeStore, name: str) -> str:
    return str(store.get_pod(NS, name)["status"]["phase"])


def reasons(store: FakeKubeStore, name: str) -> list[str]:
    return [e["reason"] for e in store.list_events(NS, f"involvedObject.name={name}")[0]]


def test_pod_boots_after_the_delay_and_its_agent_starts() -> None:
    store, clock, host, kubelet = setup(boot_delay=10.0)
    store.create_pod(NS, pod_manifest("p", **AGENT_ENV))
    kubelet.step()
    pod = store.get_pod(NS, "p")
    assert pod["status"]["phase"] == "Pending" and pod["spec"]["nodeName"].startswith("fake-node")
    assert reasons(store, "p") == ["Scheduled", "Pulling"]
    clock.advance(9.9)
    kubelet.step()
    assert phase(store, "p") == "Pending" and host.started == []
    clock.advance(0.1)
    kubelet.step()
    assert phase(store, "p") == "Running"
    assert host.started == [("p", AGENT_ENV)]
    assert reasons(store, "p") == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    assert "Registering elastic agent agent-1" in store.get_log(NS, "p")
    assert kubelet.running_agents() == ["p"]
    store.delete_pod(NS, "p")
    kubelet.step()
    assert host.stopped == ["p"] and kubelet.running_agents() == []


def test_boot_delay_per_pod_and_pods_without_agent_variables() -> None:
    store, clock, host, kubelet = setup(
        boot_delay=lambda pod: 5.0 if pod["metadata"]["name"] == "slow" else 1.0
    )
    store.create_pod(NS, pod_manifest("slow", **AGENT_ENV))
    store.create_pod(NS, pod_manifest("fast", **AGENT_ENV))
    store.create_pod(NS, pod_manifest("plain"))
    kubelet.step()
    assert kubelet.next_due() == clock.now() + 1.0
    clock.advance(1)
    kubelet.step()
    assert [name for name, _ in host.started] == ["fast"]
    assert phase(store, "plain") == "Running"  # runs, but nothing registers
    clock.advance(4)
    kubelet.step()
    assert [name for name, _ in host.started] == ["fast", "slow"]


def test_failing_pods_and_never_registering_agents() -> None:
    def fate(pod: dict[str, Any]) -> PodFault | None:
        name = pod["metadata"]["name"]
        if name == "crash":
            return PodFault("fail", reason="Error", message="exit code 1", after=3.0)
        if name == "mute":
            return PodFault("no_register")
        if name == "pull":
            return PodFault("image_pull", message="manifest unknown")
        return None

    store, clock, host, kubelet = setup(boot_delay=1.0, faults=fate)
    for name in ("crash", "mute", "pull"):
        store.create_pod(NS, pod_manifest(name, **AGENT_ENV))
    kubelet.step()
    clock.advance(1)
    kubelet.step()
    assert phase(store, "crash") == "Running" and phase(store, "mute") == "Running"
    clock.advance(3)
    kubelet.step()
    crashed = store.get_pod(NS, "crash")["status"]
    assert (crashed["phase"], crashed["reason"], crashed["message"]) == ("Failed", "Error", "exit code 1")
    assert host.started == [] and host.stopped == []  # neither ever registered
    clock.advance(3600)
    kubelet.step()
    assert phase(store, "pull") == "Pending" and "Failed" in reasons(store, "pull")
    waiting = store.get_pod(NS, "pull")["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] in ("ErrImagePull", "ImagePullBackOff")  # by turns: the next test


def test_eviction_and_failure_on_demand_stop_the_agent() -> None:
    store, _, host, kubelet = setup(boot_delay=0.0)
    store.create_pod(NS, pod_manifest("e", **AGENT_ENV))
    store.create_pod(NS, pod_manifest("f", **AGENT_ENV))
    kubelet.step()
    kubelet.evict("e")
    kubelet.fail("f", reason="OOMKilled", message="out of memory")
    evicted = store.get_pod(NS, "e")["status"]
    assert (evicted["phase"], evicted["reason"]) == ("Failed", "Evicted")
    assert store.get_pod(NS, "f")["status"]["reason"] == "OOMKilled"
    assert sorted(host.stopped) == ["e", "f"]
    store.delete_pod(NS, "e")
    kubelet.step()
    assert sorted(host.stopped) == ["e", "f"]  # stopped once only


def test_graceful_deletion_stops_the_agent_at_once() -> None:
    store, clock, host, kubelet = setup(boot_delay=0.0, grace=30.0)
    store.create_pod(NS, pod_manifest("g", **AGENT_ENV))
    kubelet.step()
    store.delete_pod(NS, "g")
    kubelet.step()
    assert host.stopped == ["g"] and phase(store, "g") == "Running"
    clock.advance(30)
    kubelet.step()
    assert store.list_pods(NS)[0] == []


def test_background_thread_in_scaled_time() -> None:
    clock = ScaledClock(100.0)
    store = FakeKubeStore(clock=clock)
    host = RecordingHost()
    kubelet = SimulatedKubelet(store, clock, host, boot_delay=10.0)  # 0.1 s of real time
    kubelet.start()
    try:
        store.create_pod(NS, pod_manifest("bg", **AGENT_ENV))
        assert wait_for(lambda: host.started, timeout=5)
        assert phase(store, "bg") == "Running"
    finally:
        kubelet.stop()


def test_pods_created_before_the_kubelet_are_adopted() -> None:
    clock = ManualClock()
    store = FakeKubeStore(clock=clock)
    store.create_pod(NS, pod_manifest("early", **AGENT_ENV))
    host = RecordingHost()
    kubelet = SimulatedKubelet(store, clock, host, boot_delay=0.0)
    kubelet.step()
    assert phase(store, "early") == "Running" and [n for n, _ in host.started] == ["early"]


def waiting_of(store: FakeKubeStore, name: str) -> dict[str, Any]:
    status = store.get_pod(NS, name)["status"]["containerStatuses"][0]
    return dict(status["state"].get("waiting") or {})


def test_a_failing_pull_alternates_err_image_pull_and_back_off_as_the_kubelets_back_off_doubles() -> None:
    """image_manager.go: each failed pull starts a back-off (10 s doubling); syncs within it say
    ImagePullBackOff, the first sync after it pulls again; the pod worker syncs every 10 s."""
    store, clock, _, kubelet = setup(faults=lambda pod: PodFault("image_pull"))
    store.create_pod(NS, pod_manifest("pull", **AGENT_ENV))
    seen: dict[float, dict[str, Any]] = {}
    for _ in range(16):
        kubelet.step()
        seen[clock.now() - 1_700_000_000.0] = waiting_of(store, "pull")
        clock.advance(10)
    pulls = [at for at, waiting in seen.items() if waiting["reason"] == "ErrImagePull"]
    assert pulls[:5] == [0.0, 10.0, 30.0, 70.0, 150.0]  # back-offs of 10, 20, 40 and 80 s
    image = "gocd/gocd-agent-ubuntu-22.04:v24.1.0"
    assert seen[20.0] == {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
    assert "failed to pull and unpack image" in seen[0.0]["message"]
    assert phase(store, "pull") == "Pending" and "BackOff" in reasons(store, "pull")


def test_invalid_names_missing_configuration_and_no_node_stay_pending_with_their_reasons() -> None:
    kinds = {"bad": "invalid_image", "secret": "config_error", "big": "unschedulable"}
    def fault(pod: dict[str, Any]) -> PodFault:
        return PodFault(kinds[pod["metadata"]["name"]])  # type: ignore[arg-type]

    store, clock, host, kubelet = setup(faults=fault)
    for name in kinds:
        store.create_pod(NS, pod_manifest(name, **AGENT_ENV))
    kubelet.step()
    clock.advance(600)
    kubelet.step()
    assert waiting_of(store, "bad")["reason"] == "InvalidImageName"
    assert "couldn't parse image reference" in waiting_of(store, "bad")["message"]
    assert waiting_of(store, "secret") == {"reason": "CreateContainerConfigError",
                                           "message": 'secret "agent-settings" not found'}  # fmt: skip
    big = store.get_pod(NS, "big")
    assert not big["spec"].get("nodeName") and big["status"]["phase"] == "Pending"
    [scheduled] = big["status"]["conditions"]
    said = (scheduled["type"], scheduled["status"], scheduled["reason"])
    assert said == ("PodScheduled", "False", "Unschedulable")
    assert "FailedScheduling" in reasons(store, "big") and host.started == []


def test_a_crash_loop_restarts_at_once_then_backs_off_doubling() -> None:
    """kuberuntime_manager.go's doBackOff: the first exit restarts at once, later ones wait 10 s, 20 s..."""
    store, clock, host, kubelet = setup(boot_delay=0.0, faults=lambda pod: PodFault("crash_loop", after=1.0))
    store.create_pod(NS, pod_manifest("loop", **AGENT_ENV))
    kubelet.step()
    starts = []
    for _ in range(60):
        clock.advance(1)
        kubelet.step()
        status = store.get_pod(NS, "loop")["status"]["containerStatuses"][0]
        if "running" in status["state"] and (not starts or starts[-1][1] != status["restartCount"]):
            starts.append((clock.now() - 1_700_000_000.0, status["restartCount"]))
    assert starts == [(1.0, 1), (12.0, 2), (33.0, 3)]  # exits at 1, 2, 13, 34: back-offs 0, 10, 20
    waiting = waiting_of(store, "loop")
    assert waiting["reason"] == "CrashLoopBackOff"
    assert waiting["message"].startswith(f"back-off 40s restarting failed container=agent pod=loop_{NS}(")
    last = store.get_pod(NS, "loop")["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert (last["reason"], last["exitCode"]) == ("Error", 1)
    assert phase(store, "loop") == "Running" and host.started == []


def test_under_restart_policy_never_an_exiting_or_oom_killed_agent_fails_the_pod() -> None:
    store, clock, host, kubelet = setup(boot_delay=0.0, faults=lambda pod: PodFault("crash_loop", after=1.0)
                                        if pod["metadata"]["name"] == "exits" else None)  # fmt: skip
    for name in ("exits", "oom"):
        manifest = pod_manifest(name, **AGENT_ENV)
        manifest["spec"]["restartPolicy"] = "Never"
        store.create_pod(NS, manifest)
    kubelet.step()
    clock.advance(1)
    kubelet.step()
    kubelet.oom_kill("oom")
    for name, reason, code in (("exits", "Error", 1), ("oom", "OOMKilled", 137)):
        pod = store.get_pod(NS, name)
        ended = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (pod["status"]["phase"], ended["reason"], ended["exitCode"]) == ("Failed", reason, code)
    assert host.stopped == ["oom"]  # the one whose agent had registered
