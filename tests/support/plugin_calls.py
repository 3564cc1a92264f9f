"""Plugin requests sent to the served backend over real HTTP, with the headers the bridge jar sends.

The tests of the bridge contract and those of bad input send the same requests: one way of sending them,
so that a change to the contract's headers is made once."""

from __future__ import annotations

import requests

from elastic_agent.simulation.gocd_transport import create_agent_body, encode
from elastic_agent.simulation.stack import TOKEN, Stack


def post(stack: Stack, name: str, body: str, token: str | None = TOKEN) -> requests.Response:
    assert stack.service is not None
    headers = {"X-GoCD-Extension-Version": "5.0", "X-GoCD-Callback-URL": stack.callback_url}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return requests.post(f"{stack.service.url}/gocd/plugin/{name}", data=body, headers=headers, timeout=10)


def create_body(stack: Stack, elastic_profile: dict[str, str]) -> str:
    job = {
        "pipeline_name": "p",
        "pipeline_counter": 1,
        "pipeline_label": "1",
        "stage_name": "s",
        "stage_counter": "1",
        "job_name": "j",
        "job_id": 1,
    }
    return encode(create_agent_body("k", elastic_profile, stack.cluster_profile(), None, job))
