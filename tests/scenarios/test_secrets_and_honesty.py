"""No secret is kept as a cache key or shown in a console line, and the log says only what was done."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable
from typing import Any

import pytest

from elastic_agent.backend import Backend
from elastic_agent.clock import ManualClock
from elastic_agent.gocd.messages import Agent
from elastic_agent.gocd.server import GoCDError, ServerInfo
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.simulation.gocd_transport import (
    REQUEST_PREFIX,
    create_agent_body,
    encode,
    server_ping_body,
    should_assign_work_body,
)
from elastic_agent.simulation.inprocess import OneGoCDServer
from executors.base import RequestContext
from executors.server_ping import server_ping
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import schedule
from tests.support.virtual_helpers import completed

TOKEN = "sa-token-4b1d7e0c9f"
RESOLVED = "resolved-secret-77aa13"


def holds(key: object, secret: str) -> bool:
    if isinstance(key, str):
        return secret in key
    if isinstance(key, bytes):
        return secret.encode() in key
    if isinstance(key, tuple | list | frozenset):
        return any(holds(part, secret) for part in key)
    return False


def keys_holding(secret: str, besides: Iterable[object] = ()) -> list[object]:
    """Keys of every dict in the process that hold `secret`, but for the dicts `besides`."""
    skip = {id(obj) for obj in besides}
    dicts = [obj for obj in gc.get_objects() if isinstance(obj, dict) and id(obj) not in skip]
    return [key for obj in dicts for key in obj if holds(key, secret)]


def test_no_cache_keeps_a_security_token_or_a_resolved_secret_as_a_key() -> None:
    stack = VirtualStack(boot_delay=5)
    cluster = stack.cluster_profile(security_token=TOKEN)
    profile = stack.elastic_profile(Reuse="true", Environment=f"API_TOKEN={RESOLVED}")
    job = completed(stack, schedule(stack, profile, cluster=cluster))
    agent = {
        "agent_id": job.agent_id,
        "agent_state": "Idle",
        "build_state": "Idle",
        "config_state": "Enabled",
    }
    for job_id in range(5):  # should-assign-work bodies, each a new one to cache
        identifier = {**job.identifier(), "job_id": 1000 + job_id}
        stack.send(
            REQUEST_PREFIX + "should-assign-work",
            encode(should_assign_work_body(agent, None, profile, cluster, identifier)),
        )
        stack.send(
            REQUEST_PREFIX + "create-agent",
            encode(create_agent_body("key", profile, cluster, None, identifier)),
        )

    gocd_state = vars(stack.gocd).values()  # GoCD's own memory of its profiles is not the plugin's
    assert keys_holding(TOKEN, gocd_state) == []
    assert keys_holding(RESOLVED, gocd_state) == []


def test_an_unexpected_failure_of_create_agent_shows_an_incident_id_in_the_console_not_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = VirtualStack(boot_delay=5)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"could not parse 'password={RESOLVED}'")

    monkeypatch.setattr(Backend, "spec", broken)
    job = schedule(stack, stack.elastic_profile())
    stack.run_until(lambda: stack.gocd.job(job.job_id).console, 60, "a line in the job's console")
    [line] = stack.gocd.job(job.job_id).console
    assert RESOLVED not in line and "incident" in line
    incident = line.split("incident ")[1].split()[0]
    answers = [f.answer_excerpt for f in stack.gocd.stats.non_200_answers if f.status == 500]
    assert answers and all(RESOLVED not in text for text in answers)
    assert incident in answers[0], "the answer and the console name the same incident"


class ListedAgents:
    """GoCD whose agents have no pod and have not been heard from (LostContact, so the ping removes them:
    pool/agents_without_pods.py): one idle, one still building. `refuse_delete`: the delete fails."""

    def __init__(self, refuse_delete: bool) -> None:
        self.refuse_delete = refuse_delete
        self.deleted: list[str] = []

    def list_agents(self) -> list[Agent]:
        return [
            Agent("idle-one", "LostContact", "Idle", "Enabled"),
            Agent("building-one", "LostContact", "Building", "Enabled"),
        ]

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        list(agent_ids)

    def delete_agents(self, agent_ids: Iterable[str]) -> None:
        if self.refuse_delete:
            raise GoCDError("GoCD answered 500 to delete-agents")
        self.deleted += agent_ids

    def server_info(self) -> ServerInfo:
        return ServerInfo("server", None, None)

    def set_health_messages(self, messages: list[dict[str, str]]) -> None: ...

    def console_log(self, job: dict[str, Any], text: str) -> None: ...


@pytest.mark.parametrize("refuse_delete", [False, True])
def test_a_ping_logs_removed_agents_only_for_agents_it_deleted(
    refuse_delete: bool, caplog: pytest.LogCaptureFixture
) -> None:
    gocd = ListedAgents(refuse_delete)
    clock = ManualClock()
    backend = Backend(clock, OneGoCDServer(gocd), lambda *args: None, RemoteFileFetcher(clock))  # type: ignore[arg-type,return-value]
    caplog.set_level(logging.INFO)
    server_ping(encode(server_ping_body([])), RequestContext(backend, None))
    removed = [r.getMessage() for r in caplog.records if "removed agent" in r.getMessage()]
    if refuse_delete:
        assert removed == []
    else:
        assert gocd.deleted == ["idle-one"] and removed == ["removed agent idle-one: its pod is gone"]
    assert not any("removed agent building-one" in r.getMessage() for r in caplog.records)
