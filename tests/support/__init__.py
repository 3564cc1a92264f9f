"""What the tests share and are not tests themselves: the doubles (GoCD's admin API, the official
plugin), the builders of real things (the control plane, the node, the images), fixtures and scenes.

Tests and benchmarks import from here, never from a test module (pyproject.toml, [tool.importlinter]);
several of these modules run as commands too (`python -m tests.support.control_plane build`).
"""
