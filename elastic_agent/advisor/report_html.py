"""`advise --html FILE`: the advice as one HTML page an administrator can open anywhere, rendered from the
report document (the shape `--json` writes: version, trace, targets, knee_rule, and per profile the
measured, current and recommended figures, the waits by hour and every candidate).

It takes the document as a plain mapping, not the advisor's objects, so the page shows exactly what the
JSON says and can be made again from a saved JSON file. Per profile: the figures side by side, the
frontier and the waits by hour of day as inline SVG (report_plots.py), then every candidate in a table
whose numbers the plots' labels refer to.

Self-contained, because a report is mailed, attached to tickets and opened offline: no script, no
stylesheet, font or image fetched, and a Content-Security-Policy that forbids any request, so that a
mistake here could not make the page fetch anything. Every text that comes from the trace or the
document (profile names are the user's, setting values too) is escaped; the plots carry none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from elastic_agent.advisor.report_plots import KINDS, frontier_svg, hourly_svg

POLICY = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """
body { font-family: system-ui, sans-serif; color: #222; margin: 24px auto; max-width: 1100px;
       padding: 0 16px; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; } th { background: #f4f4f4; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.recommended { background: #fff4cc; } tr.current { background: #eeeeee; }
figure { margin: 8px 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #555; } .settings { font-family: ui-monospace, monospace; font-size: 0.9em; }
"""
NONE = "\u2014"  # shown where the document has no figure (null)


class ReportNotWritten(ValueError):
    """The page could not be written: a sentence naming the file and why."""


def save_html(path: str, document: Mapping[str, Any]) -> None:
    """Render the page and write it to `path`."""
    page = render_html(document)
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError as error:
        raise ReportNotWritten(f"cannot write the HTML report to {path}: {error.strerror or error}") from None


def render_html(document: Mapping[str, Any]) -> str:
    """The whole page, deterministic: the same document gives the same bytes."""
    trace = document["trace"]
    title = f"Reuse advice for {trace['path']}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _overview(document),
    ]
    profiles: Mapping[str, Mapping[str, Any]] = document["profiles"]
    for index, (name, profile) in enumerate(sorted(profiles.items()), start=1):
        parts.append(_profile(name, profile, index, trace.get("timezone")))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _overview(document: Mapping[str, Any]) -> str:
    trace, targets = document["trace"], document.get("targets") or {}
    names = sorted(document["profiles"])
    rows = "".join(
        f'<li><a href="#{_anchor(index)}">{escape(name)}</a></li>' for index, name in enumerate(names, 1)
    )
    rule = (document.get("knee_rule") or {}).get("text")
    return (
        f"<p>{_count(trace['jobs'])} jobs over {_number(trace['days'], 1)} days. "
        f"Targets: {_targets(targets)}.</p>"
        f"<p>{escape(rule or NONE)}</p>"
        f"<p>Profiles:</p><ul>{rows}</ul>"
        '<p class="note">Idle pod-hours per day: hours pods spent running no job, per day of the trace. '
        "Wait: from a job's scheduling to its assignment to an agent.</p>"
    )


def _targets(targets: Mapping[str, Any]) -> str:
    """The targets in words, as the printed report says them."""
    said = []
    if targets.get("mean_share_of_current") is not None:
        said.append(f"a mean wait at most {targets['mean_share_of_current']:.0%} of one pod per job's")
    if targets.get("p95_s") is not None:
        said.append(f"a p95 wait at most {_value(float(targets['p95_s']))} s")
    if targets.get("resend_s") is not None:
        said.append(f"no job waiting past the re-send period ({_value(float(targets['resend_s']))} s)")
    return escape(", ".join(said)) if said else NONE


def _anchor(index: int) -> str:
    return f"profile-p{index}"


def _profile(name: str, profile: Mapping[str, Any], index: int, timezone: str | None) -> str:
    salt = f"p{index}"
    follows = (
        "Its jobs follow another stage of their pipeline, so Predict can start their pods ahead."
        if profile.get("follows_another_stage")
        else "Its jobs start their pipelines (they follow no other stage): Predict cannot start their pods "
        "ahead."
    )
    label = escape(name)
    return "\n".join(
        [
            f'<section id="{_anchor(index)}" data-profile="{label}">',
            f"<h2>Profile {label}</h2>",
            f"<p>{_count(profile['measured']['jobs'])} jobs. {follows}</p>",
            _figures(profile),
            f'<figure data-plot="frontier">{frontier_svg(profile, f"{salt}-frontier")}'
            "<figcaption>Each candidate against the idle pod-hours it costs per day; the numbers are the "
            "rows of the table below. The frontier (dashed) joins the candidates that no other beats on "
            "both mean wait and cost.</figcaption></figure>",
            f'<figure data-plot="hourly">{hourly_svg(profile, f"{salt}-hourly", timezone)}'
            "<figcaption>Mean wait of the jobs scheduled in each hour of the day (no point: no job in "
            "that hour).</figcaption></figure>",
            _candidates(profile["candidates"]),
            "</section>",
        ]
    )


def _figures(profile: Mapping[str, Any]) -> str:
    measured, current, recommended = profile["measured"], profile["current"], profile["recommended"]
    rows = [
        ("measured", "in the trace", measured, ""),
        ("current", f"simulated: {escape(str(current.get('policy') or 'one pod per job'))}", current, ""),
        ("recommended", _settings(recommended.get("settings") or {}), recommended, "recommended"),
    ]
    body = "".join(
        f'<tr class="{css}"><th>{what}</th><td class="settings">{settings}</td>'
        f'<td class="n">{_number(row.get("wait_mean_s"), 1)}</td>'
        f'<td class="n">{_number(row.get("wait_p95_s"), 1)}</td>'
        f'<td class="n">{_number(row.get("idle_pod_hours_per_day"), 2)}</td></tr>'
        for what, settings, row, css in rows
    )
    return (
        '<table class="figures"><tr><th></th><th>settings</th><th>mean wait (s)</th><th>p95 wait (s)</th>'
        f"<th>idle pod-hours/day</th></tr>{body}</table>"
    )


def _candidates(rows: Sequence[Mapping[str, Any]]) -> str:
    head = (
        "<tr><th>#</th><th>candidate</th><th>kind</th><th>mean wait (s)</th><th>p95 wait (s)</th>"
        "<th>idle pod-s/job</th><th>boot pod-s/job</th><th>idle pod-hours/day</th><th>frontier</th>"
        "<th>recommended</th></tr>"
    )
    body = []
    for number, row in enumerate(rows, start=1):
        kind = str(row["kind"])
        css = ' class="recommended"' if row["recommended"] else ""
        body.append(
            f'<tr{css} data-kind="{escape(kind)}"><td class="n">{number}</td>'
            f'<td class="settings">{escape(str(row["label"]))}</td>'
            f"<td>{escape(KINDS[kind][2] if kind in KINDS else kind)}</td>"
            f'<td class="n">{_number(row["wait_mean_s"], 1)}</td>'
            f'<td class="n">{_number(row["wait_p95_s"], 1)}</td>'
            f'<td class="n">{_number(row["idle_pod_seconds_per_job"], 1)}</td>'
            f'<td class="n">{_number(row["boot_pod_seconds_per_job"], 1)}</td>'
            f'<td class="n">{_number(row["idle_pod_hours_per_day"], 2)}</td>'
            f"<td>{'yes' if row['on_frontier'] else ''}</td>"
            f"<td>{'yes' if row['recommended'] else ''}</td></tr>"
        )
    return f'<table class="candidates">{head}{"".join(body)}</table>'


def _settings(settings: Mapping[str, Any]) -> str:
    return escape(" ".join(f"{key}={value}" for key, value in sorted(settings.items())) or NONE)


def _number(value: float | None, digits: int) -> str:
    return NONE if value is None else f"{value:,.{digits}f}"


def _count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return escape(NONE if value is None else str(value))
