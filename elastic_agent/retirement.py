"""Retiring pods, in order: mark retiring (should-assign-work says no from then on), disable the agent,
delete the pod once the agent is not building, delete the agent."""

from __future__ import annotations

import logging

from elastic_agent.gocd import GoCDError, GoCDServer
from elastic_agent.kube.port import ClusterError
from elastic_agent.pool_state import PoolState
from elastic_agent.records import PodState

log = logging.getLogger(__name__)


class Retirement(PoolState):
    def claim_for_retirement(self, name: str, reason: str, even_if_busy: bool = False) -> bool:
        """Mark a pod retiring unless it is busy: taken under the lock that should-assign-work takes, so a
        pod is either given a job or retired, never both. `even_if_busy` is for pods that failed: their
        job died with them."""
        with self.lock:
            record = self.record(name)
            if record is None or name in self._deleted:
                return False
            if record.state == PodState.BUSY and not even_if_busy:
                return False
            if record.state != PodState.RETIRING:
                self._mark_retiring(name, reason)
            return True

    def retire(
        self, pods: list[tuple[str, str]], why: str, gocd: GoCDServer, agents_idle: bool = False
    ) -> list[str]:
        """Disable the agents, delete the pods whose agent is not building, then delete those agents.
        Pods must already be marked retiring. `agents_idle`: the caller knows the agents are not building
        (job-completion); otherwise GoCD is asked after disabling. Returns the pods deleted."""
        with self.lock:
            names = [name for name, _ in pods if name not in self._retiring_now and name not in self._deleted]
            self._retiring_now.update(names)
        deleted: list[str] = []
        try:
            if not names:
                return []
            for name in names:
                self.writer.flush(name)
            gocd.disable_agents(names)
            building: set[str] = set()
            if not agents_idle:
                building = {a.agent_id for a in gocd.list_agents() if a.agent_id in names and a.building}
            reasons = dict(pods)
            for name in names:
                record = self.record(name)
                if name in building and record is not None and not record.failed:
                    continue  # never delete a pod whose agent builds; its job-completion or a ping goes on
                self.port.delete_pod(name)
                with self.lock:
                    self._deleted.add(name)
                deleted.append(name)
                self.narrator.decision(f"retired pod {name}: {reasons.get(name, why)}")
            # GoCD deletes only agents that are not building; the agent of a failed pod goes at a later ping.
            gocd.delete_agents([name for name in deleted if name not in building])
        except (GoCDError, ClusterError) as error:
            log.warning("retiring %s must wait for the next ping: %s", ", ".join(names), error)
        finally:
            with self.lock:
                self._retiring_now.difference_update(names)
        return deleted
