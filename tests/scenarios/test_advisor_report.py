"""The advisor's HTML report as a user gets it: written by `advise TRACE --html FILE` on a generated
installation, agreeing with the printed report, and opened in Debian's headless Chromium, where every plot
is drawn at a real size with its current and recommended marks, and the page asks for nothing outside
itself.

The browser test renders a document built by hand (tests/support/advisor_document.py), with a profile
name that is markup, so that it depends on the page alone and not on a simulation. A probe put before the
page's own Content-Security-Policy (which forbids scripts, the probe included, once it is read) measures
the plots when the page has loaded and records every request the policy blocked; it makes one such request
itself, so a probe that could not see them would fail the test.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.advisor.report_html import render_html
from elastic_agent.cli import main
from tests.support import browser
from tests.support.advisor_document import document, plots, recommended_labels, sections

HOSTILE = "<script>document.title='owned'</script>"
CONTROL = "https://advisor-report.invalid/probe.png"
PROBE = (
    "<script>const seen = {blocked: []};"
    'document.addEventListener("securitypolicyviolation", e => seen.blocked.push(e.blockedURI));'
    'const img = document.createElement("img");'
    'window.addEventListener("DOMContentLoaded", () => { img.src = "' + CONTROL + '"; });'
    'window.addEventListener("load", () => {'
    "  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };"
    '  seen.plots = [...document.querySelectorAll("figure[data-plot]")].map(f => ({'
    '    profile: f.closest("section").dataset.profile, plot: f.dataset.plot,'
    '    box: box(f.querySelector("svg")),'
    '    marks: Object.fromEntries([...f.querySelectorAll("g[id]")].map(g => [g.id, box(g)]))}));'
    '  seen.resources = performance.getEntriesByType("resource").map(e => e.name);'
    "  seen.title = document.title;"
    '  document.body.setAttribute("data-probe", JSON.stringify(seen));'
    "});</script>"
)
WHITE = b"\xff\xff\xff"


def _probed(page: str) -> str:
    head = '<head><meta charset="utf-8">'
    assert head in page
    return page.replace(head, head + PROBE, 1)


def _probe(dom: str) -> dict[str, Any]:
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, "the probe did not run: the page did not load"
    result: dict[str, Any] = json.loads(unescape(found.group(1)))
    return result


def _inside(mark: list[float], frame: list[float]) -> bool:
    left, top, width, height = mark
    return (
        width > 0
        and height > 0
        and left >= frame[0] - 1
        and top >= frame[1] - 1
        and left + width <= frame[0] + frame[2] + 1
        and top + height <= frame[1] + frame[3] + 1
    )


@pytest.mark.browser
def test_every_profiles_plots_render_in_chromium_with_their_marks_and_no_request_leaves_the_page(
    tmp_path: Path,
) -> None:
    names = ("java", HOSTILE)
    page = render_html(document(names))
    rendered = browser.render_all({"report": _probed(page)}, tmp_path, size=(1280, 1400))["report"]
    probe = _probe(rendered.dom)

    assert probe["blocked"] == [CONTROL], "the page's policy blocked a request of its own, or none at all"
    assert [url for url in probe["resources"] if url != CONTROL] == [], "the page loaded something"
    assert probe["title"] == "Reuse advice for week.jsonl", "the profile name ran as a script"
    plots = {(p["profile"], p["plot"]): p for p in probe["plots"]}
    assert len(plots) == len(probe["plots"]) == 4, "one frontier and one hourly plot per profile"
    assert {profile for profile, _ in plots} == set(names)
    for (profile, kind), plot in plots.items():
        width, height = plot["box"][2:]
        assert width > 600 and height > 200, f"{profile} {kind}: drawn at {width} x {height}"
        marks = {re.sub(r"^p\d-", "", name): box for name, box in plot["marks"].items()}
        wanted = (
            ["frontier-mean-current", "frontier-mean-recommended", "frontier-p95-current",
             "frontier-p95-recommended", "frontier-mean-frontier", "frontier-p95-frontier"]
            if kind == "frontier"
            else ["hourly-current", "hourly-recommended"]
        )  # fmt: skip
        for name in wanted:
            assert name in marks, f"{profile} {kind}: no {name}"
            assert _inside(marks[name], plot["box"]), f"{profile} {kind}: {name} not drawn inside the plot"
        if kind == "frontier":
            candidates = [m for m in marks if "-candidate-" in m]
            assert len(candidates) == 2 * len(document(names)["profiles"]["java"]["candidates"])
            assert all(_inside(marks[m], plot["box"]) for m in candidates)

    image = browser.read_png(rendered.screenshot, max_rows=900)
    assert image.pixel(0, 0)[:3] == WHITE
    assert len(image.colours()) > 20, "the screenshot is (nearly) one colour"
    assert image.rows_with_ink(image.pixel(0, 0)) > 400, "almost nothing was drawn"


def _recommended_in_text(report: str) -> dict[str, str]:
    """Per profile, the line of the printed report that gives the recommendation."""
    found: dict[str, str] = {}
    profile = ""
    for line in report.splitlines():
        if heading := re.match(r"## profile (\S+) \(", line):
            profile = heading.group(1)
        elif line.startswith("Recommended: ") and profile:
            found[profile] = line
            profile = ""
    return found


@pytest.mark.slow
def test_advise_writes_a_page_per_profile_that_recommends_what_the_printed_report_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, report = tmp_path / "installation.jsonl", tmp_path / "advice.html"
    generated = ["generate", str(trace), "--pipelines", "2", "--days", "1", "--commits-per-hour", "3"]
    assert main(generated) == 0
    capsys.readouterr()
    options = ["--idle-timeouts", "2m,10m", "--no-tuned", "--workers", "1", "--quiet"]
    assert main(["advise", str(trace), *options, "--html", str(report)]) == 0
    printed = capsys.readouterr().out

    recommended = _recommended_in_text(printed)
    assert len(recommended) == 4, printed[:2000]
    page = report.read_text(encoding="utf-8")
    found = dict(sections(page))
    assert sorted(found) == sorted(recommended)
    for profile, body in found.items():
        assert plots(body) == ["frontier", "hourly"]
        [chosen] = recommended_labels(body)
        assert recommended[profile].startswith(f"Recommended: {unescape(chosen)} ("), profile
