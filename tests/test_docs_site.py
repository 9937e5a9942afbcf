"""The documentation site builds with warnings as errors, its internal links and anchors all
resolve, it loads nothing from the network, and the pages cover what they promise."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from anywave.compiler.language import INTRINSICS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (attribute, value)
        self.ids: set[str] = set()
        self.remote: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for key in ("href", "src"):
            v = a.get(key)
            if v is None:
                continue
            if v.startswith(("http://", "https://", "//")):
                # a link to the web is fine; loading a script, style, font or image from it is not
                if key == "src" or (tag == "link" and a.get("rel") in ("stylesheet", "preload", "icon")):
                    self.remote.append(f"<{tag} {key}={v}>")
                continue
            if v.startswith(("mailto:", "data:", "javascript:")):
                continue
            self.links.append((key, v))


def readme_docs_build_command() -> list[str]:
    """The build command of the README's "Documentation" section, as written there (its
    ``mkdocs build ...`` line, comment removed), split into words."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    lines = [ln.split("#", 1)[0].strip() for ln in section.splitlines() if ln.strip().startswith("mkdocs build")]
    assert len(lines) == 1, f"README's Documentation section: expected one 'mkdocs build' line, found {lines}"
    return shlex.split(lines[0])


def test_the_readme_build_command_is_parsed():
    cmd = readme_docs_build_command()
    assert cmd[:2] == ["mkdocs", "build"] and "--strict" in cmd
    assert not {"-q", "--quiet"} & set(cmd), "a quiet build hides the warnings strict mode counts"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by the README's command, exactly as written, in a copy of the tree (the
    command writes ./site); fails on a non-zero exit and on any WARNING line, counted by strict
    mode or not."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install 'anywave[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install 'anywave[docs]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install 'anywave[docs]')")
    tree = tmp_path_factory.mktemp("tree")
    shutil.copy2(ROOT / "mkdocs.yml", tree / "mkdocs.yml")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("docs", "src"):
        shutil.copytree(ROOT / d, tree / d, ignore=skip)
    cmd = readme_docs_build_command()
    # MkDocs 1.x (and Material) print a banner about MkDocs 2 on every build, which .ci/run silences
    # the same way
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(tree / "src")}
    # the README's `mkdocs` is the venv's console script; `python -m mkdocs` is the same program
    r = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True, env=env, cwd=tree,
                       timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{' '.join(cmd)} failed (exit {r.returncode}):\n{out}"
    warnings = [ln for ln in out.splitlines() if re.match(r"\s*(\x1b\[[0-9;]*m)*WARNING\b", ln)]
    assert not warnings, f"{' '.join(cmd)} printed warnings:\n" + "\n".join(warnings)
    assert "MkDocs 2" not in out, "the MkDocs 2 banner came through although NO_MKDOCS_2_WARNING=1"
    return tree / "site"


def test_every_internal_link_and_anchor_resolves(site):
    pages = {p: _Links() for p in site.rglob("*.html")}
    for p, parser in pages.items():
        parser.feed(p.read_text(encoding="utf-8"))
    broken, remote = [], []
    for p, parser in pages.items():
        remote += [f"{p.relative_to(site)}: {r}" for r in parser.remote]
        for _key, link in parser.links:
            u = urlsplit(link)
            if not u.path:
                target = p
            elif u.path.startswith("/"):  # root-relative (the 404 page): from the site's root
                target = (site / unquote(u.path).lstrip("/")).resolve()
            else:
                target = (p.parent / unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{p.relative_to(site)}: {link}")
                continue
            if u.fragment and target.suffix == ".html" and target in pages:
                if unquote(u.fragment) not in pages[target].ids:
                    broken.append(f"{p.relative_to(site)}: {link} (no id {u.fragment!r})")
    assert not broken, "broken links:\n" + "\n".join(broken[:30])
    assert not remote, "the site loads resources from the network:\n" + "\n".join(remote[:30])


def test_site_has_the_promised_pages(site):
    for page in ("guide/language", "guide/types", "guide/memory", "guide/intrinsics", "guide/waves",
                 "guide/control", "guide/errors", "guide/debugging", "porting", "tools/cli", "tools/explorer",
                 "api", "spec", "instructions"):
        assert (site / page / "index.html").exists(), page
    for t in sorted((DOCS / "tutorials").glob("*.md")):
        assert (site / "tutorials" / t.stem / "index.html").exists(), t.name
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    # generated from docstrings: the launch errors and the registry's functions are documented there
    for name in ("KernelFunction", "LaunchError", "backend_names", "read_wbin", "relocate", "emulate"):
        assert 'id="anywave.' in api and name in api, name


def test_intrinsics_page_covers_every_intrinsic():
    text = (DOCS / "guide" / "intrinsics.md").read_text(encoding="utf-8")
    missing = [n for n in INTRINSICS if not re.search(rf"`{n}\(|\b{n}\b`|`{n}`|, `?{n}\b", text)]
    assert not missing, f"docs/guide/intrinsics.md does not describe: {missing}"


def test_readme_points_to_the_site_and_says_how_to_build_it():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in text and "docs/index.md" in text and "[docs]" in text
