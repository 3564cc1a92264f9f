"""Service benchmarks over real HTTP against the production server (waitress, `python -m elastic_agent
serve` in its own process), with 5,000 pods in the cluster and 5,000 agents in GoCD.

    python -m benchmarks.service_bench [--pods 5000] [--requests 3000] [--seconds 10]

The fake Kubernetes API server (over HTTP, the real `kubernetes` client talks to it) and a fixed GoCD
callback endpoint run in this process; the backend runs alone in a child process, so its RSS is its own.
Kubernetes API calls are counted where they arrive: at the fake API server.

should-assign-work latency and throughput are measured by benchmarks/load_client.py in a process of its
own (the same requests, over keep-alive connections); the figures of the previous client, Python's
http.client in this process, follow for comparison. Everything shares the machine's cores. First, the
same server with an app that answers without doing anything (benchmarks/server_floor.py) is timed the
same ways, and each should-assign-work figure is printed against it: the floor on this machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import server_floor
from benchmarks.load_client import only_answer, run_apart
from benchmarks.service_fixture import (
    NAMESPACE,
    Fixture,
    bridge_headers,
    gocd_callbacks,
    job_fields,
    populate,
    rss_mb,
    start_backend,
    summary,
)
from elastic_agent.simulation.fake_kube import FakeKubeServer


class Client:
    """One keep-alive HTTP connection speaking the bridge contract (Python's http.client, in this
    process: the set-up requests, the should-assign-work that answer true, and create-agent)."""

    def __init__(self, port: int, callback_url: str) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self._headers = bridge_headers(callback_url)

    def send(self, name: str, body: dict[str, Any]) -> tuple[int, str, float]:
        payload = json.dumps(body)
        started = time.perf_counter()
        self._connection.request("POST", f"/gocd/plugin/cd.go.elastic-agent.{name}", payload, self._headers)
        response = self._connection.getresponse()
        text = response.read().decode()
        return response.status, text, time.perf_counter() - started


def throughput(port: int, callback_url: str, body: dict[str, Any], seconds: float, threads: int) -> float:
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def work(slot: int) -> None:
        client = Client(port, callback_url)
        while time.monotonic() < stop:
            client.send("should-assign-work", body)
            counts[slot] += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / seconds


def settle(requests_log: Sequence[object], quiet: float = 0.5, limit: float = 30.0) -> float:
    """Waits until the fake Kubernetes API server has had no request for `quiet` seconds."""
    started = time.monotonic()
    seen, last_change = len(requests_log), started
    while (now := time.monotonic()) - last_change < quiet and now - started < limit:
        time.sleep(0.05)
        if len(requests_log) != seen:
            seen, last_change = len(requests_log), time.monotonic()
    return time.monotonic() - started


LOAD_CLIENT = (
    "a separate client process (benchmarks/load_client.py: raw HTTP/1.1 over keep-alive TCP connections, "
    "one thread with a selector), sharing the machine's cores with the backend and this process"
)


def load_client(
    mode: str,
    port: int,
    callback_url: str,
    name: str,
    body: dict[str, Any] | list[dict[str, Any]],
    *options: str,
) -> Any:
    """Runs benchmarks/load_client.py in its own process with the request the `Client` would send (or,
    given a list, with those requests one after the other)."""
    request: dict[str, Any] = {
        "path": f"/gocd/plugin/cd.go.elastic-agent.{name}",
        "headers": bridge_headers(callback_url),
    }
    if isinstance(body, list):
        request["bodies"] = [json.dumps(item) for item in body]
    else:
        request["body"] = json.dumps(body)
    return run_apart(mode, port, request, *options)


def create_agent_body(fixture: Fixture, index: int) -> dict[str, Any]:
    return {
        "auto_register_key": f"bench-key-{index}",
        "elastic_agent_profile_properties": dict(fixture.elastic, Image="registry.example.test/x:1"),
        "cluster_profile_properties": fixture.cluster,
        "job_identifier": job_fields(30_000_000 + index),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=3000, help="should-assign-work requests timed")
    parser.add_argument("--creates", type=int, default=300, help="create-agent requests timed")
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput run length")
    parser.add_argument("--threads", type=int, default=4, help="concurrent clients for throughput")
    args = parser.parse_args(argv)
    kube = FakeKubeServer()
    kube.start()
    fixture = populate(kube, args.pods)
    agents = [
        {"agent_id": name, "agent_state": state, "build_state": state, "config_state": "Enabled"}
        for names, state in ((fixture.idle, "Idle"), (fixture.busy, "Building"))
        for name in names
    ]
    callback_url, stop_callbacks = gocd_callbacks(agents)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    # should-assign-work that answers false (a busy pod asked about a waiting job): state unchanged.
    ask = {
        "agent": {"agent_id": fixture.busy[0], "agent_state": "Idle", "build_state": "Idle",
                  "config_state": "Enabled"},
        "elastic_agent_profile_properties": fixture.elastic,
        "cluster_profile_properties": fixture.cluster,
        "job_identifier": job_fields(10_000_000),
    }  # fmt: skip
    # The same server with an app that does nothing, before the backend starts: the floor under the
    # figures below on this machine, measured in this run with requests of the same size.
    floor = server_floor.measure(args.requests, headers=bridge_headers(callback_url), body=json.dumps(ask))
    process, port = start_backend(callback_url)
    lines = [f"machine: {os.cpu_count()} cores, load average {load} before the benchmark's servers started",
             f"pods in the cluster and agents in GoCD: {args.pods} ({len(fixture.idle)} idle, "
             f"{len(fixture.busy)} busy)"]  # fmt: skip
    try:
        client = Client(port, callback_url)
        ping = {"all_cluster_profile_properties": [fixture.cluster]}
        started = time.perf_counter()
        client.send("server-ping", ping)  # connects the pool and lists the pods
        lines.append(
            f"first server-ping (connect, list {args.pods} pods): {time.perf_counter() - started:.2f} s"
        )
        requests_log = kube.api.requests
        ping_times, ping_calls = [], []
        for _ in range(5):
            before = len(requests_log)
            _, _, elapsed = client.send("server-ping", ping)
            ping_times.append(elapsed)
            ping_calls.append(len(requests_log) - before)
        lines.append(f"server-ping, nothing changed: {summary(ping_times)}; Kubernetes API calls per ping: "
                     f"{ping_calls}")  # fmt: skip
        lines.append(f"load client: {LOAD_CLIENT}")
        result = load_client("latency", port, callback_url, "should-assign-work", ask,
                             "--requests", str(args.requests), "--warmup", "200")  # fmt: skip
        only_answer(result, "false", "the backend")
        # (what, latencies, paced): each is printed against the empty answer timed the same way
        compared = [("should-assign-work (false), back to back", result["latencies"], False)]
        lines.append(f"should-assign-work (false), one client: {summary(result['latencies'])}")
        # The same request at the pace used for `true` answers below: on an idle machine every request
        # first wakes the server's threads, so a paced request costs more than one of a busy stream.
        result = load_client("latency", port, callback_url, "should-assign-work", ask,
                             "--requests", "250", "--warmup", "0", "--gap-ms", "20")  # fmt: skip
        only_answer(result, "false", "the backend")
        compared.append(("should-assign-work (false), 50 per second", result["latencies"], True))
        lines.append(f"should-assign-work (false), one client, 50 per second: {summary(result['latencies'])}")
        for _ in range(200):
            client.send("should-assign-work", ask)
        latencies = [client.send("should-assign-work", ask)[2] for _ in range(args.requests)]
        lines.append(f"  the same through http.client in this process (the previous client): "
                     f"{summary(latencies)}")  # fmt: skip
        # should-assign-work that answers true: each idle pod once (it becomes busy). Each `true` leaves
        # work for background threads (the pod's annotations written to the cluster, the watch event it
        # brings back, a console line to GoCD), so back to back the answers queue behind that work; GoCD
        # assigns far fewer jobs per second than this, so the pods are also asked at 50 per second. The
        # load client times a quarter of the idle pods each way; the earlier in-process client the rest.
        answers: list[str] = []
        quarters = [fixture.idle[index::4] for index in range(4)]
        for label, names, gap_s in (("back to back", quarters[0], 0.0), ("50 per second", quarters[1], 0.02)):
            bodies: list[dict[str, Any]] = []
            for name in names:
                job = job_fields(20_000_000 + len(answers) + len(bodies))
                bodies.append(dict(ask, agent=dict(ask["agent"], agent_id=name), job_identifier=job))
            result = load_client("latency", port, callback_url, "should-assign-work", bodies,
                                 "--requests", str(len(bodies)), "--warmup", "0",
                                 "--gap-ms", str(gap_s * 1000))  # fmt: skip
            answers += [a["body"] for a in result["answers"] for _ in range(a["count"])]
            compared.append((f"should-assign-work (true), {label}", result["latencies"], bool(gap_s)))
            lines.append(f"should-assign-work (true), one client, {label}: {summary(result['latencies'])}")
            settle(requests_log)
        for label, names, gap_s in (("back to back", quarters[2], 0.0), ("50 per second", quarters[3], 0.02)):
            latencies = []
            for name in names:
                job = job_fields(20_000_000 + len(answers))
                body = dict(ask, agent=dict(ask["agent"], agent_id=name), job_identifier=job)
                _, text, elapsed = client.send("should-assign-work", body)
                answers.append(text)
                latencies.append(elapsed)
                time.sleep(gap_s)
            lines.append(f"  the same through http.client in this process, {label}: {summary(latencies)}")
            settle(requests_log)
        lines.append(f"  true answers {answers.count('true')}/{len(answers)}")
        # The pods just made busy are being written to the cluster in the background: let that finish so
        # that the throughput counts should-assign-work alone.
        lines.append(f"background writes settled after {settle(requests_log):.1f} s")
        result = load_client("throughput", port, callback_url, "should-assign-work", ask,
                             "--seconds", str(args.seconds), "--connections", str(args.threads))  # fmt: skip
        only_answer(result, "false", "the backend")
        rate = result["answered"] / result["seconds"]
        lines.append(f"should-assign-work throughput, {args.threads} concurrent connections: "
                     f"{rate:.0f} req/s")  # fmt: skip
        rate = throughput(port, callback_url, ask, args.seconds, args.threads)
        lines.append(f"  the same with {args.threads} http.client threads in this process "
                     f"(the previous client): {rate:.0f} req/s")  # fmt: skip
        # Each create-agent is for a new job of a profile no idle pod has: every one creates a pod.
        creates = [create_agent_body(fixture, index) for index in range(args.creates)]
        result = load_client("latency", port, callback_url, "create-agent", creates,
                             "--requests", str(len(creates)), "--warmup", "0")  # fmt: skip
        only_answer(result, "", "the backend")
        lines.append(f"create-agent (creates a pod), one client: {summary(result['latencies'])}")
        time.sleep(1.0)  # let the annotation writer and the watch settle
        before = len(requests_log)
        _, _, elapsed = client.send("server-ping", ping)
        lines.append(f"server-ping after the above: {elapsed * 1000:.0f} ms, "
                     f"{len(requests_log) - before} Kubernetes API calls")  # fmt: skip
        lines.append(f"backend RSS: {rss_mb(process.pid):.0f} MB")
        # Last, because it adds pods: create-agent throughput, every request creating a pod.
        pods_before = len(kube.store.list_pods(NAMESPACE)[0])
        window = args.seconds / 2
        # More distinct jobs than the backend can create pods for in the window and its warm-up.
        count = int(400 * (window + 2))
        creates = [create_agent_body(fixture, args.creates + index) for index in range(count)]
        result = load_client("throughput", port, callback_url, "create-agent", creates,
                             "--seconds", str(window), "--connections", str(args.threads))  # fmt: skip
        only_answer(result, "", "the backend")
        rate = result["answered"] / result["seconds"]
        settle(requests_log)
        created = len(kube.store.list_pods(NAMESPACE)[0]) - pods_before
        lines.append(f"create-agent throughput, {args.threads} concurrent connections: {rate:.0f} req/s "
                     f"({created} pods created in all, with the warm-up)")  # fmt: skip
    finally:
        process.terminate()
        process.wait(10)
        stop_callbacks()
        kube.stop()
    lines += floor.lines()
    for name, latencies, paced in compared:
        base = floor.paced if paced else floor.back_to_back
        lines.append("  " + server_floor.beside(name, latencies, base))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
