"""`advise TRACE --html FILE` refuses a FILE it could not write with one sentence and exit status 2, before
any simulation runs (not hours later, and never with a traceback), and leaves the trace alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from elastic_agent.cli import main

TRACE = '{"at": 0, "profile": "java", "environment": "", "pipeline": "p", "duration": 60}\n'


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text(TRACE)
    return path


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["advise", *args, "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == "", "nothing simulated, no report begun"
    assert "Traceback" not in err
    [line] = err.splitlines()
    return line


def test_a_file_in_a_folder_that_does_not_exist_is_refused_with_a_sentence(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no-such-folder" / "report.html"
    line = _refused(capsys, str(trace), "--html", str(target))
    assert line == f"error: --html: cannot write {target}: the folder {target.parent} does not exist"
    assert not target.parent.exists()


def test_a_folder_given_as_the_file_is_refused_with_a_sentence(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(capsys, str(trace), "--html", str(tmp_path))
    wanted = f"error: --html: {tmp_path} is a folder; give the name of a file to write (e.g. report.html)"
    assert line == wanted


def test_the_trace_itself_is_not_overwritten_by_the_report(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(capsys, str(trace), "--html", str(trace))
    assert line == f"error: --html: {trace} is the trace itself; give another file"
    assert trace.read_text() == TRACE


def test_without_matplotlib_the_report_is_refused_with_how_to_install_it(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in the image, which installs the package without its `sim` extra: the import fails.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    line = _refused(capsys, str(trace), "--html", str(tmp_path / "report.html"))
    assert "--html draws its plots with matplotlib, which is not installed here" in line
    assert "pip install '.[sim]'" in line
    assert not (tmp_path / "report.html").exists()
