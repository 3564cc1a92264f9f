"""docs/bridge-openapi.yaml, the bridge contract as OpenAPI: a valid OpenAPI document that names every
request of the dispatch table and nothing else, every server call the backend makes, and the routes the
service really has, so that what the bridge's users read and what schemathesis fuzzes is what runs."""

from __future__ import annotations

from typing import Any

import schemathesis
import yaml

from elastic_agent.gocd.server import API_VERSIONS
from elastic_agent.service.app import MAX_BODY_BYTES, PLUGIN_PATH, create_app
from executors.dispatch import EXECUTORS
from tests.support.paths import ROOT
from tests.support.virtual_helpers import virtual_stack

DOCUMENT = ROOT / "docs" / "bridge-openapi.yaml"


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOCUMENT.read_text())
    return loaded


def test_the_bridge_contract_is_a_valid_openapi_document() -> None:
    schema = schemathesis.openapi.from_path(DOCUMENT)
    schema.validate()  # against the OpenAPI 3.1 meta-schema; raises with the first problem
    assert document()["openapi"].startswith("3.1")


def test_it_names_every_request_of_the_dispatch_table_and_nothing_else() -> None:
    plugin_paths = {path for path in document()["paths"] if path.startswith(PLUGIN_PATH)}
    assert {path.removeprefix(PLUGIN_PATH) for path in plugin_paths} == set(EXECUTORS)
    for path in plugin_paths:
        operations = document()["paths"][path]
        assert set(operations) == {"post"}, f"{path}: plugin requests are POST only"
        assert "401" in operations["post"]["responses"] and "413" in operations["post"]["responses"]


def test_it_names_every_server_call_the_backend_makes() -> None:
    assert set(document()["webhooks"]) == set(API_VERSIONS)


def test_its_other_paths_are_the_routes_the_service_serves() -> None:
    app = create_app(virtual_stack().backend, "token")
    routes = {rule.rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"}
    others = {path for path in document()["paths"] if not path.startswith(PLUGIN_PATH)}
    assert others == routes


def test_it_states_the_body_limit_the_service_applies() -> None:
    assert f"({MAX_BODY_BYTES} bytes)" in document()["info"]["description"]
