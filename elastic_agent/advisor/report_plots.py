"""The advisor's HTML report's figures, as SVG text to inline in the page: per profile, the frontier
(mean and p95 wait against idle pod-hours per day, every candidate, the current setting and the
recommendation marked) and the mean wait by hour of day under the current setting and the recommended one.

Drawn with matplotlib, not by hand: axes, ticks and legends are what it does well. It is imported inside
the functions that draw, never at the top, because the command line builds the `advise` parser for every
command, `serve` included, and the serving path must not load a plotting library. Figures are made with
`matplotlib.figure.Figure` directly rather than through pyplot, so no global backend or figure registry is
touched and drawing needs no display.

The SVG is made to be inlined in one HTML page and to be byte-for-byte the same for the same input: the
date and the other metadata are left out, ids are hashed with a salt unique to the figure (two inline
SVGs share the page's ids, so equal salts could make one figure's clip path another's), and the XML
prolog and namespace declarations (URLs a reader might take for requests) are dropped, since the HTML
parser puts inline `<svg>` in the SVG namespace by itself. Text stays text (`svg.fonttype` none), so the
browser draws it with its own fonts and it can be searched and selected. No text of the trace goes into
a figure (profile names are written by the page, escaped): matplotlib would read a `$` as mathematics.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Each kind of candidate: its marker, colour and name in the legend. Predict and warm pools must be told
# apart at a glance, so they differ in both shape and colour.
KINDS: dict[str, tuple[str, str, str]] = {
    "baseline": ("s", "#7f7f7f", "one pod per job"),
    "flat": ("o", "#1f77b4", "IdleTimeout, no warm pool"),
    "warm_pool": ("^", "#2ca02c", "warm pool (MinIdlePods)"),
    "schedule": ("D", "#9467bd", "ReuseSchedule"),
    "predict": ("P", "#d62728", "Predict"),
}
CURRENT_STYLE: dict[str, Any] = {"marker": "X", "color": "#000000", "s": 150, "zorder": 5}
RECOMMENDED_STYLE: dict[str, Any] = {
    "marker": "*",
    "color": "#ffbf00",
    "edgecolors": "#000000",
    "s": 320,
    "zorder": 6,
}
FRONTIER_COLOUR = "#555555"
HOURS = 24


def frontier_svg(profile: Mapping[str, Any], salt: str) -> str:
    """Both waits against idle pod-hours per day, side by side; the element ids start with `salt`."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    figure = Figure(figsize=(10.0, 4.2))
    mean_axes, p95_axes = figure.subplots(1, 2)
    candidates: Sequence[Mapping[str, Any]] = profile["candidates"]
    for axes, key, title in (
        (mean_axes, "wait_mean_s", "mean wait"),
        (p95_axes, "wait_p95_s", "p95 wait"),
    ):
        _frontier_panel(axes, profile, candidates, key, f"{salt}-{key.split('_')[1]}")
        axes.set_title(f"{title} against idle pods")
        axes.set_xlabel("idle pod-hours per day")
        axes.set_ylabel(f"{title} (s)")
        axes.grid(True, alpha=0.3)
    shown = sorted({row["kind"] for row in candidates}, key=list(KINDS).index)
    handles = [
        Line2D([], [], linestyle="", marker=KINDS[kind][0], color=KINDS[kind][1], label=KINDS[kind][2])
        for kind in shown
    ]
    handles += [
        Line2D([], [], linestyle="--", marker="o", markerfacecolor="none", color=FRONTIER_COLOUR,
               label="on the frontier"),
        Line2D([], [], linestyle="", marker="X", color="#000000", markersize=10, label="current"),
        Line2D([], [], linestyle="", marker="*", markerfacecolor="#ffbf00", markeredgecolor="#000000",
               markersize=15, label="recommended"),
    ]  # fmt: skip
    figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), frameon=False)
    figure.subplots_adjust(left=0.07, right=0.98, top=0.92, bottom=0.3, wspace=0.22)
    return _svg(figure, salt)


def _frontier_panel(
    axes: Axes,
    profile: Mapping[str, Any],
    candidates: Sequence[Mapping[str, Any]],
    key: str,
    gid: str,
) -> None:
    for number, row in enumerate(candidates, start=1):
        marker, colour, _ = KINDS[row["kind"]]
        x, y = row["idle_pod_hours_per_day"], row[key]
        if y is None:
            continue
        axes.scatter([x], [y], marker=marker, color=colour, s=45, zorder=3, gid=f"{gid}-candidate-{number}")
        # The candidate's number in the page's table: the labels themselves would cover the plot.
        axes.annotate(str(number), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8,
                      color="#444444")  # fmt: skip
    front = sorted(
        (row for row in candidates if row["on_frontier"] and row[key] is not None),
        key=lambda row: row["idle_pod_hours_per_day"],
    )
    if front:
        axes.plot(
            [row["idle_pod_hours_per_day"] for row in front],
            [row[key] for row in front],
            linestyle="--", marker="o", markersize=11, markerfacecolor="none", color=FRONTIER_COLOUR,
            linewidth=1, zorder=2, gid=f"{gid}-frontier",
        )  # fmt: skip
    xs, ys = [1.0], [1.0]  # so that an empty panel still has axes
    for row in candidates:
        xs.append(row["idle_pod_hours_per_day"])
        ys.append(row[key] or 0.0)
    for name, style in (("current", CURRENT_STYLE), ("recommended", RECOMMENDED_STYLE)):
        point = profile[name]
        if point.get(key) is not None and point.get("idle_pod_hours_per_day") is not None:
            axes.scatter([point["idle_pod_hours_per_day"]], [point[key]], gid=f"{gid}-{name}", **style)
            xs.append(point["idle_pod_hours_per_day"])
            ys.append(point[key])
    # Set by hand: costs and waits start at 0, and the big markers at 0 must not be cut by the frame.
    axes.set_xlim(-0.05 * max(xs), 1.08 * max(xs))
    axes.set_ylim(0, 1.1 * max(ys))


def hourly_svg(profile: Mapping[str, Any], salt: str, timezone: str | None = None) -> str:
    """The mean wait in each hour of the day, current and recommended; the element ids start with `salt`."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10.0, 3.2))
    axes = figure.subplots()
    hours = list(range(HOURS))
    for name, colour, marker in (("current", "#000000", "X"), ("recommended", "#e69500", "*")):
        waits = _gaps(profile["hourly"][name])
        axes.plot(hours, waits, color=colour, marker=marker, markersize=7, linewidth=1.5, label=name,
                  gid=f"{salt}-{name}")  # fmt: skip
    axes.set_xticks(hours)
    axes.set_xlim(-0.5, HOURS - 0.5)
    axes.set_ylim(bottom=0)
    axes.set_xlabel(f"hour of day ({timezone})" if timezone else "hour of day")
    axes.set_ylabel("mean wait (s)")
    axes.set_title("mean wait by hour of day")
    axes.grid(True, alpha=0.3)
    axes.legend(frameon=False)
    figure.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.17)
    return _svg(figure, salt)


def _gaps(values: Sequence[float | None]) -> list[float]:
    """An hour without jobs is a gap in the line, not a wait of 0."""
    return [math.nan if value is None else float(value) for value in values]


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_NAMESPACES = re.compile(r'\s+xmlns(?::xlink)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')
_ID_OR_REFERENCE = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')


def _svg(figure: Figure, salt: str) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "svg.id": salt}):
        figure.savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    text = _PROLOG.sub("", buffer.getvalue(), count=1)
    head, rest = text.split(">", 1)
    return _own_ids(_NAMESPACES.sub("", head) + ">" + rest, salt)


def _own_ids(svg: str, salt: str) -> str:
    """Every id prefixed with the figure's salt, and every reference to it: matplotlib numbers its groups
    (`axes_1`, `ytick_5`) the same in every figure, and ids must be unique in the page."""
    ids = {found for found in _ID.findall(svg) if found != salt and not found.startswith(f"{salt}-")}

    def prefixed(match: re.Match[str]) -> str:
        start, name = match.groups()
        return f"{start}{salt}-{name}" if name in ids else match.group(0)

    return _ID_OR_REFERENCE.sub(prefixed, svg)
