"""The faults of the fault matrix (tests/real/test_fault_matrix.py, benchmarks/fault_matrix.py), each on real
processes and sockets: kube-apiserver killed or frozen, etcd restarted, the backend's connections cut or
stalled (a 410 Gone on the re-watch after), pod creation refused by a ResourceQuota.

Each fault's `check` returns what shows it really happened (a fault that silently did nothing would let
any backend pass): empty when the evidence is there."""

from __future__ import annotations

import time

from kubernetes import client

from tests.support.fault_churn import Fault, World

NO_PODS_QUOTA = "fault-matrix-no-pods"


class ApiserverKilled(Fault):
    """SIGKILL kube-apiserver (etcd keeps running), start it again after the hold."""

    name = "apiserver-killed"

    def inject(self, world: World) -> None:
        world.plane.kill_apiserver()

    def clear(self, world: World) -> None:
        world.plane.restart_apiserver()


class ApiserverFrozen(Fault):
    """SIGSTOP kube-apiserver for the hold, then SIGCONT: connections open, nothing answered."""

    name = "apiserver-frozen"

    def inject(self, world: World) -> None:
        world.plane.freeze_apiserver()

    def clear(self, world: World) -> None:
        world.plane.thaw_apiserver()


class EtcdRestarted(Fault):
    """etcd stopped for the hold and started again with its data; kube-apiserver keeps running."""

    name = "etcd-restarted"

    def inject(self, world: World) -> None:
        world.plane.stop_etcd()

    def clear(self, world: World) -> None:
        world.plane.start_etcd()


class _SinceInjected(Fault):
    def inject(self, world: World) -> None:
        self.injected_at = time.monotonic()

    def lists_since(self, world: World) -> int:
        return sum(1 for t in world.factory.successes("list") if t >= self.injected_at)


class WatchCut(_SinceInjected):
    """Every connection of the backend reset mid-stream (the watch among them), as a load balancer or a
    NAT dropping them does; new connections work at once."""

    name = "watch-cut"
    needs_proxy = True

    def inject(self, world: World) -> None:
        super().inject(world)
        assert world.proxy is not None
        self.cut = world.proxy.cut()

    def check(self, world: World) -> list[str]:
        problems = [] if self.cut else ["no connection was open to cut"]
        if not self.lists_since(world):
            problems.append("the backend never listed its pods again after the cut")
        return problems


class WatchGone(_SinceInjected):
    """Every byte between the backend and the API server held for the hold, connections open. The
    backend's watch times out on the server meanwhile (its timeout shortened to `watch_timeout`, a
    scaled 120 s) and, on a control plane that compacts etcd every second, the revision it will re-watch
    from is compacted before the bytes flow again: the re-watch gets 410 Gone. Needs the compacting
    control plane (tests/support/real_kube_fixtures.py `compacting_kube`). The hold must stay below the
    watch's read timeout (watch timeout + cluster_request_timeout), or the client gives up instead."""

    name = "watch-410"
    needs_proxy = True
    watch_timeout = 2

    def inject(self, world: World) -> None:
        super().inject(world)
        assert world.proxy is not None
        world.proxy.stall()
        self.revision = 0  # a revision written after the stalled watch's server-side end

    def during(self, world: World) -> None:
        # Revisions after the backend's, so that the compactor (which compacts to the revision it saw at
        # its previous run) passes it; a ConfigMap is written as the admin, straight to the server.
        status, body = world.plane.request(
            "POST", f"/api/v1/namespaces/{world.cluster.namespace}/configmaps",
            body={"metadata": {"generateName": "tick-"}})  # fmt: skip
        if status == 201 and time.monotonic() > self.injected_at + self.watch_timeout + 0.5:
            self.revision = self.revision or int(body["metadata"]["resourceVersion"])

    def clear(self, world: World) -> None:
        deadline = time.monotonic() + 20
        while self.revision and time.monotonic() < deadline and not self._compacted(world):
            self.during(world)
            time.sleep(0.25)
        assert world.proxy is not None
        world.proxy.resume()

    def _compacted(self, world: World) -> bool:
        path = (f"/api/v1/namespaces/{world.cluster.namespace}/pods?resourceVersion={self.revision}"
                "&resourceVersionMatch=Exact")  # fmt: skip
        return world.plane.request("GET", path)[0] == 410

    def check(self, world: World) -> list[str]:
        problems = [] if any(c.gone for c in world.factory.clusters) else ["no re-watch got 410 Gone"]
        if not self.lists_since(world):
            problems.append("the backend never listed its pods again after the 410")
        return problems


class PodsRefusedByQuota(_SinceInjected):
    """A ResourceQuota of `pods: 0` in the namespace (the admin's), deleted after the hold. No
    controller-manager runs, so its status (hard and used, which admission checks against) is written
    here, as the quota controller would."""

    name = "quota-refuses-pods"

    def inject(self, world: World) -> None:
        super().inject(world)
        core = client.CoreV1Api(world.plane.admin_api_client())
        namespace = world.cluster.namespace
        quota = {"metadata": {"name": NO_PODS_QUOTA}, "spec": {"hard": {"pods": "0"}}}
        core.create_namespaced_resource_quota(namespace, quota)
        used = str(len(world.stack.pods()))
        status = {"metadata": {"name": NO_PODS_QUOTA},
                  "status": {"hard": {"pods": "0"}, "used": {"pods": used}}}  # fmt: skip
        core.patch_namespaced_resource_quota_status(NO_PODS_QUOTA, namespace, status)

    def clear(self, world: World) -> None:
        core = client.CoreV1Api(world.plane.admin_api_client())
        core.delete_namespaced_resource_quota(NO_PODS_QUOTA, world.cluster.namespace)

    def check(self, world: World) -> list[str]:
        refused = [f for f in world.factory.failures("create") if f[0] >= self.injected_at and f[2] == 403]
        return [] if refused else ["no pod creation was refused by the quota"]


CASES: dict[str, type[Fault]] = {
    case.name: case
    for case in (ApiserverKilled, ApiserverFrozen, EtcdRestarted, WatchCut, WatchGone, PodsRefusedByQuota)
}
