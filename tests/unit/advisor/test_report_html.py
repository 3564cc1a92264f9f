"""The advisor's HTML report (elastic_agent/advisor/report_html.py) from a document built by hand: user text
escaped, the same page for the same document, every figure in its tables, one frontier and one hourly plot
per profile, and nothing in the page that would make a browser fetch anything.

In tests/scenarios/test_advisor_report.py, the page is opened in headless Chromium and made by the command.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from elastic_agent.advisor.report_html import POLICY, ReportNotWritten, render_html, save_html
from tests.support.advisor_document import document, plots, sections

HOSTILE = '<script>alert("owned")</script> & co'


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(document(("java", HOSTILE)))


def test_a_profile_name_with_a_script_tag_is_shown_escaped_and_never_as_markup(page: str) -> None:
    assert "<script" not in page.lower()
    assert "<h2>Profile &lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; &amp; co</h2>" in page
    assert 'data-profile="&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; &amp; co"' in page


def test_setting_values_and_labels_from_the_document_are_escaped_too() -> None:
    hostile = document(("java",))
    row = hostile["profiles"]["java"]["candidates"][1]
    row["label"] = "IdleTimeout=<b>2m</b>"
    hostile["profiles"]["java"]["recommended"]["settings"] = {"Image": "<img src=x onerror=alert(1)>"}
    hostile["trace"]["path"] = "</title><script>x</script>"
    text = render_html(hostile)
    assert "<b>" not in text and "<img" not in text and "<script" not in text
    assert "IdleTimeout=&lt;b&gt;2m&lt;/b&gt;" in text
    assert "Image=&lt;img src=x onerror=alert(1)&gt;" in text


def test_the_same_document_gives_the_same_page_byte_for_byte_in_another_process(page: str) -> None:
    assert render_html(document(("java", HOSTILE))) == page
    # Another interpreter, another hash seed, another clock second: matplotlib's ids and metadata must
    # not depend on any of them.
    script = (
        "import sys; from elastic_agent.advisor.report_html import render_html; "
        "from tests.support.advisor_document import document; "
        f"sys.stdout.write(render_html(document(('java', {HOSTILE!r}))))"
    )
    other = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=Path(__file__).resolve().parents[3],
    )
    assert other.stdout == page


def test_each_profile_has_one_frontier_and_one_hourly_plot_as_inline_svg(page: str) -> None:
    found = sections(page)
    assert [name for name, _ in found] == [
        "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; &amp; co",
        "java",
    ]
    for _, body in found:
        assert plots(body) == ["frontier", "hourly"]
        for panel in ("mean", "p95"):
            assert re.search(rf'<g id="p\d-frontier-{panel}-current">', body)
            assert re.search(rf'<g id="p\d-frontier-{panel}-recommended">', body)
        assert re.search(r'<g id="p\d-hourly-current">', body)
        assert re.search(r'<g id="p\d-hourly-recommended">', body)


def test_every_element_id_in_the_page_is_unique_though_every_plot_is_drawn_alike(page: str) -> None:
    counts = Counter(re.findall(r'\bid="([^"]+)"', page))
    assert counts and max(counts.values()) == 1, [name for name, n in counts.items() if n > 1][:5]
    references = set(re.findall(r'(?:url\(#|href="#)([^")]+)', page))
    assert references and references <= set(counts), "a reference to an id the page does not have"


def test_every_candidate_is_a_row_of_the_table_with_its_figures_and_marks() -> None:
    doc = document(("java",))
    text = render_html(doc)
    table = text.split('<table class="candidates">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr( class=\"recommended\")? data-kind=\"(\w+)\">(.*?)</tr>", table)
    candidates = doc["profiles"]["java"]["candidates"]
    assert len(rows) == len(candidates)
    for (recommended, kind, cells), row in zip(rows, candidates, strict=True):
        values = re.findall(r"<td[^>]*>(.*?)</td>", cells)
        assert kind == row["kind"] and values[1] == row["label"]
        assert values[3:8] == [
            f"{row['wait_mean_s']:,.1f}",
            f"{row['wait_p95_s']:,.1f}",
            f"{row['idle_pod_seconds_per_job']:,.1f}",
            f"{row['boot_pod_seconds_per_job']:,.1f}",
            f"{row['idle_pod_hours_per_day']:,.2f}",
        ]
        assert values[8:] == ["yes" if row["on_frontier"] else "", "yes" if row["recommended"] else ""]
        assert bool(recommended) == row["recommended"]


def test_a_figure_the_document_does_not_have_is_a_dash_not_a_zero() -> None:
    doc = document(("java",))
    doc["profiles"]["java"]["measured"] |= {"wait_mean_s": None, "wait_p95_s": None}
    figures = render_html(doc).split('<table class="figures">', 1)[1].split("</table>", 1)[0]
    measured = figures.split("<th>measured</th>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="n">(.*?)</td>', measured) == ["\u2014"] * 3


def test_the_page_names_no_address_outside_itself_and_forbids_every_request(page: str) -> None:
    assert f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">' in page
    assert "default-src 'none'" in POLICY
    assert not re.search(r"https?:|//|\bsrc\s*=|@import", page, re.IGNORECASE)
    assert not re.search(r"url\(\s*(?!['\"]?#)", page), "a url() that is not a reference inside the page"
    assert not re.search(r"\bhref\s*=\s*(?![\"']?#)", page), "a link that is not an anchor in the page"


def test_a_report_that_cannot_be_written_is_a_sentence_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "gone" / "report.html"
    sentence = rf"cannot write the HTML report to {re.escape(str(target))}: "
    with pytest.raises(ReportNotWritten, match=sentence):
        save_html(str(target), document(("java",)))


def test_the_page_says_the_targets_and_the_recommendation_rule_in_words(page: str) -> None:
    assert (
        "Targets: a mean wait at most 20% of one pod per job&#x27;s, a p95 wait at most 10 s, no job waiting "
        "past the re-send period (120 s).</p>"
    ) in page
    assert "When no candidate meets the targets, the recommendation is the cheapest point" in page
    assert "{" not in re.sub(r"<style>.*?</style>|<svg.*?</svg>", "", page, flags=re.DOTALL), "no dict shown"
