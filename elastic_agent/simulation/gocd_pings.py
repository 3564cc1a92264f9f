"""The simulated GoCD server's server-ping: every `ping_interval_s` it tells the plugin its cluster
profiles (gocd/gocd's `ElasticAgentPluginService.heartbeat`, which sends the plugin's cluster profiles as
they are then, an empty list when none is left).

The profiles pinged are the configured ones (`GoCDConfig.cluster_profiles`) or, by default, those the
server has seen: every profile a job was scheduled with, and those an admin created or edited since,
without those deleted. A job keeps the profiles it was scheduled with whatever happens to them later
(`edit_profile`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_messages import PluginMessenger
from elastic_agent.simulation.gocd_records import ServerCore
from elastic_agent.simulation.gocd_timing import is_due

ProfileKey = tuple[tuple[str, str], ...]


def profile_key(properties: Mapping[str, str]) -> ProfileKey:
    return tuple(sorted(properties.items()))


class ServerPings:
    def __init__(
        self,
        core: ServerCore,
        messenger: PluginMessenger,
        start: float,
        profiles_seen: dict[ProfileKey, dict[str, str]],
    ) -> None:
        """`start`: when the server started (its first ping is an interval later); `profiles_seen`: where
        the cluster profiles seen are kept, by their sorted items (empty at first)."""
        self._clock = core.clock
        self._lock = core.lock
        self._config = core.config
        self._stats = core.stats
        self._messenger = messenger
        self._profiles_seen = profiles_seen
        self.next_at = start + core.config.ping_interval_s

    def note_profile(self, properties: dict[str, str]) -> None:
        """A job was scheduled with these cluster profile properties: pinged from now on (unless deleted)."""
        self._profiles_seen.setdefault(profile_key(properties), properties)

    def edit_profile(self, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        """An admin edits a cluster profile: server-pings carry the new properties from now on, and so do
        the jobs scheduled from now on. A job already scheduled keeps the profiles it was scheduled with,
        waiting or running, in every request about it: gocd/gocd stores them with the job
        (`JobInstanceSqlMapDao.save` writes a `JobAgentMetadata`; `loadJobPlanAssociatedEntities` reads
        it back into the plan) and `ElasticAgentPluginService.createAgentsFor`, `shouldAssignWork`
        (from `BuildAssignmentService`) and `jobCompleted` send the plan's copies. So for a while the
        plugin hears both: old credentials for old jobs, new ones in the pings."""
        self._profiles_seen.pop(profile_key(old), None)
        self._profiles_seen[profile_key(new)] = dict(new)

    def create_profile(self, properties: Mapping[str, str]) -> None:
        """An admin creates a cluster profile: server-pings carry it from now on, whether or not a job
        used it yet (`ElasticAgentPluginService.heartbeat` sends the configured profiles)."""
        self._profiles_seen.setdefault(profile_key(properties), dict(properties))

    def delete_profile(
        self, properties: Mapping[str, str], waiting_jobs: Callable[[ProfileKey], list[int]]
    ) -> None:
        """An admin deletes a cluster profile: the next server-pings no longer carry it (gocd/gocd's
        `ElasticAgentPluginService.heartbeat` sends the plugin's cluster profiles as they are then, an
        empty list when none is left). Jobs already assigned keep the properties their plan was
        scheduled with, which job-completion sends (`ElasticAgentPluginService.jobCompleted` reads
        `job.getPlan().getClusterProfile()`). GoCD refuses to delete a cluster profile that elastic
        profiles use (`DeleteClusterProfileCommand.isValid`), and an elastic profile that pipelines use;
        a job still waiting for an agent of a deleted profile needs its pipeline edited after it was
        scheduled (it keeps its stored profiles). That case is not modelled: refused here
        (`waiting_jobs(profile key)`: the ids of the jobs waiting with that cluster profile)."""
        key = profile_key(properties)
        waiting = waiting_jobs(key)
        if waiting:
            raise ValueError(f"the cluster profile is still used by waiting jobs {waiting}")
        self._profiles_seen.pop(key, None)

    def run(self) -> None:
        """Send the server-ping if it is due (one for any number of intervals passed)."""
        with self._lock:
            now = self._clock.now()
            if not is_due(self.next_at, now):
                return
            while is_due(self.next_at, now):
                self.next_at += self._config.ping_interval_s
            profiles = self._config.cluster_profiles
            if profiles is None:
                profiles = list(self._profiles_seen.values())
            body = wire.server_ping_body(profiles)
        self._stats.pings_sent += 1
        self._messenger.call("server-ping", body)

    def skip(self) -> None:
        """The next server-ping is not sent: only its time moves on, as `run` moves it (quiet_pings.py)."""
        with self._lock:
            self.next_at += self._config.ping_interval_s
            self._stats.pings_skipped += 1
