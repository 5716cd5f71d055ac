"""The manual builds as a site with no broken link (issue 43, item 5): ``mkdocs build --strict`` (marker ``docs``,
``python -m pytest -q -m docs``; .ci/run runs it). mkdocs.yml turns every link, anchor and navigation check into a
warning, and --strict makes a warning fail the build: a link to a page or heading that does not exist, a page left
out of the navigation, README's layer table missing from developers.md all fail here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.docs


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material", reason="the Material theme: pip install mkdocs-material (the docs extra)")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path):
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    developers = (tmp_path / "site" / "developers" / "index.html").read_text(encoding="utf-8")
    assert "<th>layer</th>" in developers and "front ends" in developers      # README's table, by the snippet
    assert (tmp_path / "site" / "zh" / "index.html").is_file()
    assert (tmp_path / "site" / "images" / "dashboard.png").is_file()


def test_a_broken_link_fails_the_build(tmp_path):
    """The same configuration on a copy of docs/ with one link to a heading that does not exist."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "index.md").write_text((docs / "index.md").read_text(encoding="utf-8")
                                   + "\n[gone](pages.md#no-such-heading)\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("docs_dir: docs", f"docs_dir: {docs}"),
                      encoding="utf-8")
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stderr, done.stderr[-3000:]
