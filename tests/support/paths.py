"""Where the repository's files are, for the tests and their helpers at any depth of tests/.

The tests read the repository's own files (the manifests, the docs, the Dockerfile, the recorded GoCD
answers) by path; one root computed here, from this module's known place, means that a test moved to
another folder reads the same files.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Recorded answers of real servers, read by path (tests/data/).
TEST_DATA = ROOT / "tests" / "data"
