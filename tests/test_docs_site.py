"""The documentation site builds with warnings as errors, its internal links and anchors all
resolve, it loads nothing from the network, and the pages cover what they promise."""

from __future__ import annotations

import re
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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install 'anywave[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install 'anywave[docs]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install 'anywave[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}
    import os

    env = {**os.environ, **env}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    return out


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
