"""Requests answered without touching a cluster: icon, capabilities, plugin settings probes."""

from __future__ import annotations

import base64
from importlib import resources

from executors.base import RequestContext, Response


def get_icon(body: str, ctx: RequestContext) -> Response:
    svg = resources.files("elastic_agent").joinpath("static/icon.svg").read_bytes()
    return Response.json({"content_type": "image/svg+xml", "data": base64.b64encode(svg).decode()})


def get_capabilities(body: str, ctx: RequestContext) -> Response:
    return Response.json(
        {
            "supports_plugin_status_report": True,
            "supports_agent_status_report": True,
            "supports_cluster_status_report": True,
        }
    )


def plugin_settings_configuration(body: str, ctx: RequestContext) -> Response:
    # All settings live in cluster profiles and elastic agent profiles; there are no plugin settings.
    return Response.json({})


def plugin_settings_view(body: str, ctx: RequestContext) -> Response:
    return Response.text(
        "This plugin has no plugin settings: configure it through cluster profiles and elastic agent "
        "profiles.",
        404,
    )
