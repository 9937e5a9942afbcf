"""The kernel explorer: its service functions, its HTTP endpoints, and the page end to end in
headless Chromium (Debian's /usr/bin/chromium driven by Playwright; skipped with the reason
when either is missing)."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from anywave.backends.registry import backend_names
from anywave.explore import service
from anywave.explore.server import serve_in_thread

CHROMIUM = os.environ.get("ANYWAVE_CHROMIUM", "/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_compile_links_every_panel_to_source_lines():
    r = service.compile_source(service.EXAMPLE)
    assert r["ok"] and r["kernels"] == ["saxpy"]
    assert set(r["outputs"]) == {"wave", *backend_names()}
    src_lines = service.EXAMPLE.splitlines()
    fma_line = next(i for i, t in enumerate(src_lines, 1) if "a * x[i] + y[i]" in t)
    for name, out in r["outputs"].items():
        assert out["error"] is None, (name, out["error"])
        linked = {s for _, s in out["lines"] if s is not None}
        assert linked <= set(range(1, len(src_lines) + 1)), name
        if name in service.TITLES:  # the six panels the page promises (SPIR-V text has no line info)
            assert fma_line in linked, name  # the multiply-add's code is linked to its source line
    wave = [t for t, s in r["outputs"]["wave"]["lines"] if s == fma_line]
    assert any("mul.f32" in t for t in wave) and any("add.f32" in t for t in wave)  # a*x + y: no contraction


def test_compile_error_has_line_and_caret():
    r = service.compile_source(service.EXAMPLE.replace("a * x[i]", "a * q[i]"))
    assert not r["ok"]
    e = r["error"]
    assert e["line"] == 8 and "'q' is not defined" in e["message"] and "^" in e["message"]
    assert "/tmp" not in e["message"]


def test_run_compares_targets_bit_for_bit():
    r = service.run_source(service.EXAMPLE, n=100, targets=[])
    assert r["ok"] and r["results"][0]["target"] == "emulator"
    assert r["results"][0]["printed"] == ["thread 0: y = " + r["results"][0]["printed"][0].split("= ")[1],
                                          "thread 1: y = " + r["results"][0]["printed"][1].split("= ")[1]]


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as f:
        return json.load(f)


def test_http_endpoints():
    srv, base = serve_in_thread(targets=[])
    try:
        with urllib.request.urlopen(base, timeout=600) as f:
            html = f.read().decode()
        assert "app.js" in html and "http" not in html.replace("http-equiv", "")  # nothing from a CDN
        with urllib.request.urlopen(base + "app.js", timeout=600) as f:
            assert "fetch(" in f.read().decode()
        r = _post(base + "api/compile", {"source": service.EXAMPLE, "wave_width": 16})
        assert r["ok"] and "W=16" in r["outputs"]["opencl"]["title"]
        with pytest.raises(urllib.error.HTTPError):
            _post(base + "api/compile", {"source": "", "wave_width": 12})
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "../pyproject.toml", timeout=600)
    finally:
        srv.shutdown()


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian package 'chromium'; or set ANYWAVE_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install 'anywave[browser]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                              "--disable-background-networking"])
        try:
            yield b
        finally:
            b.close()


def test_explorer_end_to_end_in_chromium(browser, tmp_path):
    from anywave.runtime import opencl

    others = ["opencl"] if opencl.status()[0] else []
    srv, base = serve_in_thread(targets=others)
    try:
        page = browser.new_page(viewport={"width": 1700, "height": 1000})
        page.set_default_timeout(600_000)  # hang guards (ms), not budgets: a loaded machine is slow
        page.goto(base)
        page.wait_for_selector("body[data-ready='1']")
        # load: every panel is there and filled
        for name in ("wave", *backend_names()):
            assert page.locator(f"#panel-{name} .body div").count() > 10, name
        assert set(service.TITLES) <= {"wave", *backend_names()}
        # hover a WAVE line of the multiply: lines of other panels from the same source line light up
        fma = page.locator("#panel-wave .body div", has_text="mul.f32").first
        line = fma.get_attribute("data-src")
        fma.hover()
        assert page.locator(f"#panel-ptx .body div.hl[data-src='{line}']").count() > 0
        assert page.locator(f"#panel-opencl .body div.hl[data-src='{line}']").count() > 0
        assert page.locator(f"#gutter div.hl[data-line='{line}']").count() == 1
        # edit in an error, compile: the message with the caret, the line marked
        good = page.input_value("#source")
        page.fill("#source", good.replace("a * x[i]", "a * q[i]"))
        page.click("#compile")
        page.wait_for_selector("#error:not([hidden])")
        err = page.inner_text("#error")
        assert "line 8" in err and "'q' is not defined" in err and "^" in err
        assert page.locator("#gutter div.err[data-line='8']").count() == 1
        # fix it, compile, run
        page.fill("#source", good.replace("y[i] = a * x[i] + y[i]", "y[i] = a * x[i] + y[i] * 0.5"))
        page.click("#compile")
        page.wait_for_selector("#error[hidden]", state="attached")
        assert "compiled saxpy" in page.inner_text("#status")
        page.click("#run")
        page.wait_for_function("document.querySelectorAll('#results tbody tr').length > 0")
        rows = page.locator("#results tbody tr")
        assert rows.count() == 1 + len(others)
        targets = [rows.nth(i).get_attribute("data-target") for i in range(rows.count())]
        assert targets == ["emulator", *others]
        for i in range(rows.count()):
            assert rows.nth(i).locator("td").nth(4).inner_text() == "yes"
        assert "thread 0: y =" in page.inner_text("#printed")
        fma = page.locator("#panel-wave .body div", has_text="mul.f32").first
        fma.hover()
        shot = tmp_path / "explorer.png"
        page.screenshot(path=str(shot), full_page=False)
        assert shot.stat().st_size > 10_000
        if os.environ.get("ANYWAVE_UPDATE_SCREENSHOT"):
            shutil.copy(shot, DOCS / "explorer.png")
    finally:
        srv.shutdown()
