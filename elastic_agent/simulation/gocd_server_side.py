"""The simulated GoCD server's answers to the plugin's calls that are not about agents (those are the
registry's, gocd_agents.py): the server's identity, the plugin's health messages, and the console log of
a job (answered for gocd_callbacks.ServerApi). The plugin's health messages replace the last ones;
console text for a job the server does not know is kept aside, for tests to see."""

from __future__ import annotations

from elastic_agent.simulation.gocd_jobs import ConsoleKey, JobBook
from elastic_agent.simulation.gocd_records import HealthMessage, ServerCore


class ServerSide:
    def __init__(self, core: ServerCore, book: JobBook) -> None:
        self._lock = core.lock
        self._config = core.config
        self._book = book
        self.health_messages: list[HealthMessage] = []
        self.orphan_console: dict[ConsoleKey, list[str]] = {}

    def server_info(self) -> dict[str, str]:
        config = self._config
        return {
            "server_id": config.server_id,
            "site_url": config.site_url,
            "secure_site_url": config.secure_site_url,
        }

    def replace_health_messages(self, messages: list[HealthMessage]) -> None:
        with self._lock:
            self.health_messages = list(messages)

    def append_console(self, key: ConsoleKey, text: str) -> bool:
        """Append to the console of the latest run of the job named by (pipeline, pipeline counter, stage,
        stage counter, job). Unknown jobs are kept aside and reported as False."""
        with self._lock:
            job = self._book.latest_run(key)
            if job is None:
                self.orphan_console.setdefault(key, []).append(text)
                return False
            job.console.append(text)
            return True
