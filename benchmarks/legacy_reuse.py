"""A benchmark baseline ONLY: the decision rules of the earlier reuse attempt for GoCD's Kubernetes plugin
(kubernetes-elastic-agents PR 355), as docs/architecture.md ("What the earlier attempt got wrong")
describes them, written from that description so the simulator can run it on the same trace as this
project. It is deliberately defective; nothing in the product uses it.

Modelled (numbered as the items of that section):
1. No reservation: create-agent creates nothing while any tracked idle pod has the job's profile hash,
   however many jobs wait; otherwise one pod per job id (re-sends of a job with a pod are skipped).
2. Idle expiry from pod creation: at each ping, a pod that is not building and is older than
   `auto_register_timeout` (10m) is killed, however recently its last job ended.
4. A `false` from should-assign-work drops the pod from tracking; the ping's refresh finds it again
   (as idle), so the damage lasts until the next ping.
5. job-completion for an agent it does not track answers 500.
6. The hash is the elastic profile's properties only: no environment, so an idle pod of environment A
   suppresses creation for a job of environment B that it can never run.
7. `pending_pods_count` caps all pods of the cluster, busy ones included.
Not modelled (cannot happen in one simulated process): 3 (state lost on restart), 8 (labels, cosmetic),
9 (the ping/assignment race).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX as PREFIX
from elastic_agent.simulation.inprocess_cluster import InProcessCluster
from elastic_agent.simulation.plugins import PluginWorld
from elastic_agent.simulation.virtual_time import Policy
from profiles.quantities import parse_duration

IDENTITY = {"app": "legacy-reuse-baseline"}


@dataclass
class _Pod:
    name: str
    profile_hash: str
    created_for: int
    created_at: float
    busy: bool = False
    registered: bool = False


class LegacyReusePlugin:
    def __init__(self, world: PluginWorld) -> None:
        self._clock = world.clock
        self._api = world.api
        self._port = InProcessCluster(world.store, world.settings.namespace, IDENTITY, name_prefix="legacy")
        self._port.start()
        self._tracked: dict[str, _Pod] = {}  # what the plugin believes (in memory only)
        self._known: dict[str, _Pod] = {}  # every pod it created and has not deleted

    def settle(self) -> None:
        pass

    def timings(self) -> tuple[dict[str, int], dict[str, float]]:
        return {}, {}  # a baseline: its speed is not what is measured

    def next_due(self) -> float | None:
        return None  # it has no schedules

    def wake(self) -> None:
        pass

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        name = request_name.removeprefix(PREFIX)
        request = json.loads(body) if body else {}
        if name == "create-agent":
            self._create_agent(request)
        elif name == "should-assign-work":
            return 200, "true" if self._should_assign(request) else "false"
        elif name == "job-completion":
            agent = request.get("elastic_agent_id", "")
            pod = self._tracked.get(agent)
            if pod is None:
                return 500, f"agent {agent} is not known"  # item 5
            pod.busy = False
        elif name == "server-ping":
            self._ping(request)
        return 200, ""

    @staticmethod
    def _hash(request: dict[str, Any]) -> str:
        # item 6: the profile only (the original's key order problem does not matter in one run).
        properties = request.get("elastic_agent_profile_properties") or {}
        return hashlib.sha256(json.dumps(properties, sort_keys=True).encode()).hexdigest()

    def _create_agent(self, request: dict[str, Any]) -> None:
        profile_hash = self._hash(request)
        job_id = int(request["job_identifier"]["job_id"])
        idle = (p for p in self._tracked.values() if p.profile_hash == profile_hash and not p.busy)
        if any(p.registered for p in idle):
            return  # item 1: an idle pod "will take it", for every waiting job alike
        if any(p.created_for == job_id for p in self._known.values()):
            return  # a re-send of a job that already has its pod
        cap = int((request.get("cluster_profile_properties") or {}).get("pending_pods_count") or 10)
        if len(self._known) >= cap:
            return  # item 7: the pending-pods limit caps every pod
        view = self._port.create_pod(self._manifest(request))
        pod = _Pod(view.name, profile_hash, job_id, self._clock.now())
        self._tracked[view.name] = self._known[view.name] = pod

    def _manifest(self, request: dict[str, Any]) -> dict[str, Any]:
        cluster = request.get("cluster_profile_properties") or {}
        env = {
            "GO_EA_SERVER_URL": cluster.get("go_server_url", ""),
            "GO_EA_AUTO_REGISTER_KEY": request["auto_register_key"],
            "GO_EA_AUTO_REGISTER_ENVIRONMENT": request.get("environment") or "",
            "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID": "legacy-pending",
            "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID": PLUGIN_ID,
        }
        image = (request.get("elastic_agent_profile_properties") or {}).get("Image", "gocd/gocd-agent")
        return {
            "metadata": {"name": "legacy-pending", "labels": dict(IDENTITY)},
            "spec": {
                "containers": [
                    {
                        "name": "agent",
                        "image": image,
                        "env": [{"name": k, "value": v} for k, v in env.items()],
                    }
                ]
            },
        }

    def _should_assign(self, request: dict[str, Any]) -> bool:
        agent = str((request.get("agent") or {}).get("agent_id", ""))
        pod = self._tracked.get(agent)
        if pod is None:
            return False
        pod.registered = True
        if not pod.busy and pod.profile_hash == self._hash(request):
            pod.busy = True
            return True
        del self._tracked[agent]  # item 4: a false loses the pod until the next refresh
        return False

    def _ping(self, request: dict[str, Any]) -> None:
        status, text = self._api.submit("go.processor.elastic-agents.list-agents", "1.0", "")
        agents = {a["agent_id"]: a for a in json.loads(text)} if status == 200 else {}
        now = self._clock.now()
        for name, pod in self._known.items():  # the refresh: every pod of the cluster is tracked again
            self._tracked.setdefault(name, pod)
        profiles = request.get("all_cluster_profile_properties") or [{}]
        timeout = parse_duration(profiles[0].get("auto_register_timeout") or "10m")
        doomed = []
        for name, pod in list(self._known.items()):
            agent = agents.get(name)
            building = agent is not None and agent.get("agent_state") == "Building"
            pod.busy = building
            pod.registered = pod.registered or agent is not None
            if not building and now - pod.created_at > timeout:  # item 2: age, not idle time
                doomed.append(name)
        if doomed:
            body = json.dumps([{"agent_id": name} for name in doomed])
            self._api.submit("go.processor.elastic-agents.disable-agents", "1.0", body)
            for name in doomed:
                self._port.delete_pod(name)
                self._tracked.pop(name, None)
                self._known.pop(name, None)
            self._api.submit("go.processor.elastic-agents.delete-agents", "1.0", body)


def legacy_policy() -> Policy:
    return Policy("earlier reuse attempt (PR 355 rules)", plugin=LegacyReusePlugin)
