"""The soak: the backend as its own process on a real kube-apiserver and etcd, under a simulated GoCD at
a steady rate, for `--minutes`; sampled every few seconds for growth.

    python -m benchmarks.soak --minutes 30            # the benchmark; writes benchmarks/results/soak.json
    python -m benchmarks.soak --minutes 2 --check     # scripts/test.sh: exit 1 unless growth is flat

What runs: tests/support/control_plane.py's kube-apiserver and etcd (built once, cached), a namespace with the
project's Role (tests/support/real_cluster.py), the simulated kubelet driving pods through the API, the
simulated GoCD (scheduler, polling agents, pings, callbacks) on a scaled clock, and `python -m elastic_agent
serve` (tests/support/backend_process.py) on real time. The backend is a separate process so that its resident
memory, open file descriptors and threads can be read from /proc/<pid>/ alone; its internal structures come
from its own /metrics (`gocd_elastic_agent_retained_entries`), as an operator would read them.

The load: jobs arrive as a Poisson stream (`--rate` per real second) over four profiles, three reusing
pods with different MaxJobsPerPod / IdleTimeout / MinIdlePods and one pod per job, in two environments
and a dozen pipelines; so pods are created, reused and retired (by job count, idle timeout and for the
one-job profile after each job) all the time. Should-assign-work latency is measured by the simulated
GoCD around each HTTP call (the client's view), p50 and p99 per sampling window.

The backend runs on jemalloc, as the image runs it (docker/Dockerfile preloads Debian's libjemalloc2;
`--allocator glibc` runs it on glibc's malloc instead, for comparison). The soak checks the allocator it
asked for is the one in the backend's memory map.

The verdict (benchmarks/soak_rules.py) is on the series after a warm-up: structures and fds by their
peaks, RSS by its slope on long runs. Latency is reported, not judged: the machine may be shared.
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import soak_rules
from elastic_agent.clock import ScaledClock
from elastic_agent.service.heap_trim import DEFAULT_EVERY_S
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, SimulatedGoCD
from elastic_agent.simulation.gocd_records import JobState
from elastic_agent.simulation.gocd_transport import HttpPluginTransport
from elastic_agent.simulation.kubelet import SimulatedKubelet
from elastic_agent.simulation.stack import SwitchableTransport
from tests.support.backend_process import BackendProcess
from tests.support.control_plane import ControlPlane, build
from tests.support.real_cluster import RealCluster

RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"
TOKEN = "soak-bridge-token"
JEMALLOC = "libjemalloc.so.2"  # the soname docker/Dockerfile preloads
IMAGE = "gocd/gocd-agent-alpine-3.19:v24.1.0"
# name -> (weight, elastic profile properties). IdleTimeout is on the backend's clock: real seconds.
PROFILES: dict[str, tuple[float, dict[str, str]]] = {
    "java": (0.35, {"Image": IMAGE, "PodSpecType": "properties", "Reuse": "true", "MaxJobsPerPod": "8",
                    "IdleTimeout": "30s", "MaxMemory": "2Gi"}),
    "node": (0.25, {"Image": IMAGE, "PodSpecType": "properties", "Reuse": "true", "MaxJobsPerPod": "3",
                    "IdleTimeout": "20s", "MaxMemory": "1Gi"}),
    "go": (0.15, {"Image": IMAGE, "PodSpecType": "properties", "Reuse": "true", "IdleTimeout": "15s",
                  "MinIdlePods": "1", "MaxMemory": "512Mi"}),
    "one-per-job": (0.25, {"Image": IMAGE, "PodSpecType": "properties", "Reuse": "false"}),
}  # fmt: skip
ENVIRONMENTS = (None, "build")
PIPELINES = 12
JOB_S = (20.0, 100.0)  # simulated seconds, uniform
BOOT_S = 10.0  # simulated seconds from scheduling to the agent registering


class Load:
    """Schedules jobs as a Poisson stream until stopped."""

    def __init__(self, gocd: SimulatedGoCD, cluster_profile: dict[str, str], rate: float, seed: int) -> None:
        self.gocd, self.cluster_profile, self.rate = gocd, cluster_profile, rate
        self.rng = random.Random(seed)
        self.scheduled = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        names = list(PROFILES)
        weights = [PROFILES[name][0] for name in names]
        while not self._stop.wait(self.rng.expovariate(self.rate)):
            profile = self.rng.choices(names, weights)[0]
            pipeline = f"pipeline-{self.rng.randrange(PIPELINES)}"
            self.gocd.schedule_job(
                pipeline, "build", profile, PROFILES[profile][1], self.cluster_profile,
                self.rng.choice(ENVIRONMENTS), self.rng.uniform(*JOB_S),
            )  # fmt: skip
            self.scheduled += 1


class SoakError(Exception):
    """The soak cannot run as asked; the message says why, in a sentence."""


def allocator_environment(allocator: str) -> dict[str, str]:
    """What the backend's environment needs for `allocator`: jemalloc is preloaded by its soname, as the
    image does, so that the dynamic loader finds it wherever the distribution put it."""
    if allocator == "glibc":
        return {"LD_PRELOAD": ""}
    if ctypes.util.find_library("jemalloc") is None:
        raise SoakError("jemalloc is not installed (Debian: apt-get install libjemalloc2); "
                        "or run with --allocator glibc")  # fmt: skip
    return {"LD_PRELOAD": JEMALLOC}


def allocator_in_use(pid: int) -> str:
    """The malloc a running process uses: jemalloc when its library is mapped, else glibc's."""
    return "jemalloc" if "libjemalloc" in Path(f"/proc/{pid}/maps").read_text() else "glibc"


def read_proc(pid: int) -> dict[str, float]:
    """RSS (KiB), threads, open fds and CPU seconds of a process, from /proc alone."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    # /proc/<pid>/stat: fields 14 and 15 are utime and stime in clock ticks; the name (field 2) may hold
    # spaces, so count from the closing parenthesis.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "rss_kib": float(status["VmRSS"].split()[0]),
        "threads": float(status["Threads"]),
        "fds": float(len(os.listdir(f"/proc/{pid}/fd"))),
        "cpu_s": (int(fields[11]) + int(fields[12])) / ticks,
    }


def _own_cpu_s() -> float:
    """CPU seconds of this process (the simulated GoCD, kubelet and callbacks), to say how busy it is."""
    times = os.times()
    return times.user + times.system


def read_metrics(url: str) -> dict[str, dict[str, int]]:
    """From the backend's /metrics: retained entries by structure ("structures"), the capacities of
    those that have one ("limits") and pods by state ("pods")."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    wanted = {
        "gocd_elastic_agent_retained_entries": ("structures", "structure"),
        "gocd_elastic_agent_retained_entries_limit": ("limits", "structure"),
        "gocd_elastic_agent_pods": ("pods", "state"),
    }
    read: dict[str, dict[str, int]] = {"structures": {}, "limits": {}, "pods": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                into, label = wanted[sample.name]
                read[into][sample.labels[label]] = int(sample.value)
    return read


def latency_window(latencies: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "p50_ms": soak_rules.percentile(ordered, 0.50) * 1000,
        "p99_ms": soak_rules.percentile(ordered, 0.99) * 1000,
    }


def soak(
    minutes: float,
    rate: float,
    speed: float,
    interval_s: float,
    seed: int,
    heap_trim_every_s: float = DEFAULT_EVERY_S,
    allocator: str = "jemalloc",
) -> dict[str, Any]:
    preload = allocator_environment(allocator)
    binaries = build()
    run_s = minutes * 60
    with tempfile.TemporaryDirectory(prefix="soak-") as work, ControlPlane.start(binaries, Path(work)) as plane:  # noqa: E501
        # The backend's ServiceAccount token must outlive the run: a bound token's default hour ended the
        # first 65-minute run in 401s.
        cluster = RealCluster(plane, token_duration_s=int(run_s) + 3600)
        clock = ScaledClock(speed)
        transport = SwitchableTransport()
        # Registration keys expire on GoCD's (scaled) clock, the backend banks them on real time for 25
        # minutes: give keys a real half hour, as in production, or the scaling alone would refuse them.
        gocd = SimulatedGoCD(clock, transport, GoCDConfig(key_ttl_s=30 * 60.0 * speed, seed=seed))
        callbacks = CallbackServer(gocd, TOKEN)
        callback_url = callbacks.start()
        created: set[str] = set()
        cluster.pod_host.add_listener(lambda kind, pod: created.add(pod["metadata"]["name"]))
        kubelet = SimulatedKubelet(cluster.pod_host, clock, gocd, boot_delay=BOOT_S)
        kubelet.start()
        backend = BackendProcess(
            args=["--heap-trim-every", str(heap_trim_every_s)],
            env={"GOCD_ELASTIC_AGENT_TOKEN": TOKEN, "GOCD_ELASTIC_AGENT_CALLBACK_URL": callback_url,
                 **preload},
        )  # fmt: skip
        transport.switch(HttpPluginTransport(backend.url, TOKEN, callback_url))
        cluster_profile = {
            "go_server_url": "https://gocd.example.test/go", **cluster.profile_properties(),
            "namespace": cluster.namespace, "pending_pods_count": "20", "auto_register_timeout": "10m",
        }  # fmt: skip
        load = Load(gocd, cluster_profile, rate, seed)
        samples: list[dict[str, Any]] = []
        windows: list[dict[str, Any]] = []
        pid = backend.process.pid
        try:
            if allocator_in_use(pid) != allocator:
                raise SoakError(f"the backend does not run on {allocator} (read from /proc/PID/maps)")
            gocd.start()
            load.start()
            started = time.monotonic()
            seen, last_cpu, last_own = 0, read_proc(pid)["cpu_s"], _own_cpu_s()
            while (elapsed := time.monotonic() - started) < run_s:
                time.sleep(min(interval_s, max(0.0, run_s - elapsed)))
                t = time.monotonic() - started
                proc = read_proc(pid)
                metrics = read_metrics(backend.url)
                latencies = gocd.stats.should_assign_latencies_s
                count = len(latencies)
                window = {"t": round(t, 2), **latency_window(latencies[seen:count])}
                seen = count
                windows.append(window)
                samples.append({
                    "t": round(t, 2), **proc, **metrics,
                    "jobs_scheduled": load.scheduled, "jobs_completed": gocd.stats.job_completions_sent,
                    "pods_created": len(created), "should_assign_asked": gocd.stats.should_assign_asked,
                    "backend_cpu_percent": round((proc["cpu_s"] - last_cpu) / interval_s * 100, 1),
                    "harness_cpu_percent": round((_own_cpu_s() - last_own) / interval_s * 100, 1),
                    "load_average_1m": os.getloadavg()[0],
                })  # fmt: skip
                last_cpu, last_own = proc["cpu_s"], _own_cpu_s()
                print(_progress(samples[-1], window), flush=True)
            load.stop()
            jobs = gocd.jobs()
            unfinished = [j for j in jobs if j.state in (JobState.SCHEDULED, JobState.BUILDING)]
            all_latencies = sorted(gocd.stats.should_assign_latencies_s)
            result = {
                "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
                "minutes": minutes, "rate_jobs_per_s": rate, "speed": speed, "interval_s": interval_s,
                "seed": seed, "allocator": allocator, "heap_trim_every_s": heap_trim_every_s,
                "warmup_s": soak_rules.warmup_s(run_s),
                "jobs_scheduled": load.scheduled, "jobs_completed": gocd.stats.job_completions_sent,
                "jobs_unfinished_at_end": len(unfinished), "pods_created": len(created),
                "assignments": gocd.stats.assignments, "should_assign_asked": gocd.stats.should_assign_asked,
                "should_assign_p50_ms": soak_rules.percentile(all_latencies, 0.5) * 1000,
                "should_assign_p99_ms": soak_rules.percentile(all_latencies, 0.99) * 1000,
                "non_200_answers": len(gocd.stats.non_200_answers),
                "registrations_refused": gocd.stats.registrations_refused,
                "invariant_violations": gocd.invariant_violations(),
                "protocol_errors": gocd.stats.protocol_errors[:20],
                "backend_warnings": [line.rstrip() for line in backend.stderr[-20:]],
                "backend_log_lines": len(backend.stderr),
                "samples": samples, "latency_windows": windows,
            }  # fmt: skip
        finally:
            load.stop()
            gocd.stop()
            backend.kill()
            transport.switch(None)
            kubelet.stop()
            callbacks.stop()
            cluster.stop()
    judged = soak_rules.verdicts(samples, run_s)
    result["verdicts"] = [v.to_json() for v in judged]
    result["latency_slopes"] = soak_rules.latency_slopes(windows, soak_rules.warmup_s(run_s))
    # A backend that answers GoCD with errors is not a steady state, however flat its memory.
    result["flat"] = (
        all(v.flat for v in judged) and not result["invariant_violations"] and not result["non_200_answers"]
    )
    return result


def _progress(sample: dict[str, Any], window: dict[str, Any]) -> str:
    s = sample["structures"]
    return (
        f"t={sample['t']:7.1f}s rss={sample['rss_kib'] / 1024:6.1f}MiB fds={sample['fds']:.0f} "
        f"threads={sample['threads']:.0f} cpu={sample['backend_cpu_percent']:5.1f}% "
        f"jobs={sample['jobs_completed']}/{sample['jobs_scheduled']} pods+={sample['pods_created']} "
        f"records={s.get('records', 0)} waiting={s.get('waiting_jobs', 0)} "
        f"saw={window['count']} p50={window['p50_ms']:.1f}ms p99={window['p99_ms']:.1f}ms"
    )


def table(result: dict[str, Any]) -> str:
    lines = [
        f"soak: {result['minutes']:g} min at {result['rate_jobs_per_s']:g} jobs/s "
        f"(speed {result['speed']:g}, {result.get('allocator', 'glibc')}), "
        f"warm-up {result['warmup_s']:.0f} s; {result['jobs_completed']}/{result['jobs_scheduled']} jobs "
        f"completed, {result['pods_created']} pods created, {result['should_assign_asked']:,} "
        f"should-assign-work (p50 {result['should_assign_p50_ms']:.2f} ms, p99 "
        f"{result['should_assign_p99_ms']:.2f} ms), {result['non_200_answers']} non-200 answers, "
        f"{result.get('registrations_refused', 0)} registrations refused, "
        f"{len(result['invariant_violations'])} invariant violations",
        "",
        "| series | unit | after warm-up | end | peak 1st third | peak / median last third | slope /h "
        "| rule | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for v in result["verdicts"]:
        lines.append(
            f"| {v['name']} | {v['unit']} | {v['start']:g} | {v['end']:g} | {v['peak_first_third']:g} "
            f"| {v['peak_last_third']:g} / {v['median_last_third']:g} | {v['slope_per_hour']:+.1f} "
            f"| {v['rule']} "
            f"| {'flat' if v['flat'] else 'GROWING'} |"
        )
    slopes = result["latency_slopes"]
    kept = [w for w in result["latency_windows"] if w["count"]]
    if kept:
        first, last = kept[0], kept[-1]
        lines += [
            "",
            f"should-assign-work per window: first p50 {first['p50_ms']:.2f} / p99 {first['p99_ms']:.2f} ms, "
            f"last p50 {last['p50_ms']:.2f} / p99 {last['p99_ms']:.2f} ms; slopes after warm-up "
            f"p50 {slopes['p50_ms_per_hour']:+.2f} ms/h, p99 {slopes['p99_ms_per_hour']:+.2f} ms/h "
            "(reported only)",
        ]
    lines.append(f"verdict: {'flat' if result['flat'] else 'NOT FLAT'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run (default 30)")
    parser.add_argument("--rate", type=float, default=4.0, help="jobs per real second (default 4)")
    parser.add_argument("--speed", type=float, default=20.0, help="GoCD's simulated seconds per real second")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"JSON written here (default {RESULTS})")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every series is flat")
    parser.add_argument(
        "--heap-trim-every", type=float, default=DEFAULT_EVERY_S, metavar="SECONDS",
        help=f"the backend's --heap-trim-every (default {DEFAULT_EVERY_S:g}; 0 shows the growth without it)",
    )  # fmt: skip
    parser.add_argument(
        "--allocator", choices=("jemalloc", "glibc"), default="jemalloc",
        help="the backend's malloc (default jemalloc, as the image runs it)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        result = soak(args.minutes, args.rate, args.speed, args.interval, args.seed,
                      args.heap_trim_every, args.allocator)  # fmt: skip
    except SoakError as error:
        print(f"soak: {error}", file=sys.stderr)
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(f"written: {args.output}")
    if args.check and not result["flat"]:
        growing = [v["name"] for v in result["verdicts"] if not v["flat"]]
        if result["invariant_violations"]:
            growing.append("invariant violations")
        if result["non_200_answers"]:
            growing.append(f"{result['non_200_answers']} non-200 answers")
        print(f"not a steady state: {', '.join(growing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
