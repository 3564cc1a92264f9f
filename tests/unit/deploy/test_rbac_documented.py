"""docs/profiles.md's RBAC line says exactly what docker/kubernetes/rbac/role.yaml grants."""

from __future__ import annotations

import yaml

from tests.support.paths import ROOT


def rbac_line(role: dict[str, object]) -> str:
    """`pods create/list/watch/patch/delete, pods/log get, ...`, from the Role's rules."""
    rules = role["rules"]
    assert isinstance(rules, list)
    return ", ".join(
        f"{resource} {'/'.join(rule['verbs'])}" for rule in rules for resource in rule["resources"]
    )


def test_the_profile_keys_page_names_every_rule_of_the_role_and_no_other() -> None:
    role = yaml.safe_load((ROOT / "docker" / "kubernetes" / "rbac" / "role.yaml").read_text())
    assert role["kind"] == "Role", "namespaced: the backend needs nothing at cluster scope"
    line = rbac_line(role)
    assert line == (
        "pods create/list/watch/patch/delete, pods/log get, events list, configmaps get/create/update"
    )
    page = (ROOT / "docs" / "profiles.md").read_text()
    assert f"`docker/kubernetes/rbac/role.yaml`: {line})" in page
