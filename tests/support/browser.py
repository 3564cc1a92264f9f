"""Headless Chromium for tests: render an HTML file, get its DOM and a screenshot, and read the PNG back.

Debian's `chromium` package is the browser. Tests marked `browser` must run in CI: a missing browser is a
failure with a clear message, unless SKIP_BROWSER_TESTS=1 says to skip them on purpose.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest

CANDIDATES = ("chromium", "chromium-browser", "/usr/bin/chromium")
TIMEOUT_S = 60.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium_path() -> str:
    """The browser to use (CHROMIUM overrides); fails the test, or skips it with SKIP_BROWSER_TESTS=1."""
    for candidate in (os.environ.get("CHROMIUM"), *CANDIDATES):
        if candidate and (found := shutil.which(candidate)):
            return found
    message = (
        "Chromium is needed for the tests marked 'browser' and was not found (looked for "
        f"{', '.join(CANDIDATES)}, and $CHROMIUM). Install it with `apt-get install -y chromium`, "
        "or set SKIP_BROWSER_TESTS=1 to skip these tests on purpose."
    )
    if os.environ.get("SKIP_BROWSER_TESTS") == "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


def html_page(title: str, fragment: str) -> str:
    """A minimal page around a status-report fragment, the way GoCD embeds it in its own page."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        "<style>body { margin: 0; padding: 16px 24px; background: #fff; }</style>"
        f"</head>\n<body>\n{fragment}\n</body></html>\n"
    )


@dataclass(frozen=True)
class Rendered:
    dom: str
    screenshot: Path


class Launch:
    """One headless Chromium run, started at once (several may run side by side)."""

    def __init__(self, browser: str, html_file: Path, png_file: Path, size: tuple[int, int]) -> None:
        self.html_file = html_file
        self.png_file = png_file
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        command = [
            browser,
            *FLAGS,
            f"--user-data-dir={self._profile.name}",
            f"--window-size={size[0]},{size[1]}",
            f"--screenshot={png_file}",
            "--dump-dom",
            html_file.resolve().as_uri(),
        ]
        # A closed stdin and no D-Bus session: nothing to wait for on a CI machine.
        env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": "disabled:"}
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def result(self) -> Rendered:
        try:
            out, err = self._process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            pytest.fail(f"chromium did not finish rendering {self.html_file} within {TIMEOUT_S:.0f}s")
        finally:
            self._profile.cleanup()
        if self._process.returncode != 0 or not self.png_file.exists():
            tail = "\n".join(err.strip().splitlines()[-15:])
            pytest.fail(
                f"chromium failed on {self.html_file} (exit {self._process.returncode}):\n{tail}",
                pytrace=False,
            )
        return Rendered(dom=out, screenshot=self.png_file)


def render_all(
    pages: dict[str, str],
    workdir: Path,
    size: tuple[int, int] = (1280, 900),
    sizes: dict[str, tuple[int, int]] | None = None,
) -> dict[str, Rendered]:
    """Render whole HTML documents by name, in parallel; DOM and screenshot of each, in a window of
    `sizes[name]`, else `size`."""
    browser = chromium_path()
    launches = {}
    for name, document in pages.items():
        html_file = workdir / f"{name}.html"
        html_file.write_text(document, encoding="utf-8")
        launches[name] = Launch(browser, html_file, workdir / f"{name}.png", (sizes or {}).get(name, size))
    return {name: launch.result() for name, launch in launches.items()}


# ----- reading a PNG back (no image library needed) ----------------------------------------------


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]  # unfiltered scanlines, from the top (all of them unless fewer were asked for)

    def pixel(self, x: int, y: int) -> bytes:
        start = x * self.channels
        return self.rows[y][start : start + self.channels]

    def colours(self, step: int = 3) -> set[bytes]:
        """Distinct colours on a grid of every `step`-th pixel."""
        found: set[bytes] = set()
        for row in self.rows[::step]:
            for start in range(0, len(row), self.channels * step):
                found.add(row[start : start + self.channels])
        return found

    def rows_with_ink(self, background: bytes) -> int:
        """How many scanlines hold something other than the background colour."""
        blank = background * self.width
        return sum(1 for row in self.rows if row != blank)


_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def read_png(path: Path, max_rows: int | None = None) -> Image:
    """Decode an 8-bit, non-interlaced PNG (what Chromium writes) into scanlines; with `max_rows`, only
    the top rows are unfiltered (the whole image data is still checked for its size)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    position, header, compressed = 8, None, []
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path} has no IHDR chunk")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or interlace or colour_type not in _CHANNELS:
        raise ValueError(f"{path}: only 8-bit non-interlaced grey/RGB/RGBA PNGs are read here")
    channels = _CHANNELS[colour_type]
    raw = zlib.decompress(b"".join(compressed))
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise ValueError(f"{path}: image data has {len(raw)} bytes, expected {height * (stride + 1)}")
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height if max_rows is None else min(height, max_rows)):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        rows.append(bytes(line))
        previous = line
    return Image(width, height, channels, rows)


def _unfilter(kind: int, line: bytearray, prior: bytearray, bpp: int) -> None:
    n = len(line)
    if kind == 0:
        return
    if kind == 1:  # Sub
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:  # Up
        line[:] = bytes((a + b) & 0xFF for a, b in zip(line, prior, strict=True))
    elif kind == 3:  # Average
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prior[i]) >> 1)) & 0xFF
    elif kind == 4:  # Paeth
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = prior[i]
            c = prior[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + predictor) & 0xFF
    else:
        raise ValueError(f"unknown PNG filter type {kind}")
