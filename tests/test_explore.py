"""The kernel explorer: its service functions, its HTTP endpoints, and the page end to end in
headless Chromium (Debian's /usr/bin/chromium driven by Playwright; skipped with the reason
when either is missing)."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from anywave.backends.registry import backend_names
from anywave.explore import server as server_mod
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


def _post(url: str, body: dict, token: str) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                  "X-Anywave-Token": token})
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
        assert f'<meta name="anywave-token" content="{srv.token}">' in html  # the page carries the token
        r = _post(base + "api/compile", {"source": service.EXAMPLE, "wave_width": 16}, srv.token)
        assert r["ok"] and "W=16" in r["outputs"]["opencl"]["title"]
        with pytest.raises(urllib.error.HTTPError):
            _post(base + "api/compile", {"source": "", "wave_width": 12}, srv.token)
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


# ----------------------------------------------------------------------------- hostile requests (issue 31)

def _raw(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"",
         timeout: float = 300) -> tuple[int, dict]:
    """Send exactly these headers (no Host or Content-Length added); (status, JSON body or {})."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            c.putheader(k, v)
        c.endheaders(body or None)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {}
    finally:
        c.close()


def _marked_source(marker: Path) -> str:
    # module-level code that leaves a file behind when the source is imported
    return f"open({str(marker)!r}, 'w').write('imported')\n" + service.EXAMPLE


def test_foreign_origin_host_and_missing_token_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    srv, base = serve_in_thread(targets=[])
    port = srv.server_address[1]
    own = f"127.0.0.1:{port}"
    body = json.dumps({"source": _marked_source(marker)}).encode()
    good = {"Host": own, "Content-Type": "application/json", "Content-Length": str(len(body)),
            "X-Anywave-Token": srv.token}
    try:
        refused = [
            # a cross-site "simple" POST: text/plain, foreign Origin, no token
            {**good, "Content-Type": "text/plain", "Origin": "http://evil.example", "X-Anywave-Token": ""},
            {**good, "Origin": "http://evil.example"},            # foreign Origin, even with the token
            {**good, "Origin": "null"},
            {**good, "Host": f"evil.example:{port}"},             # DNS rebinding: foreign Host
            {**good, "Host": "127.0.0.1:1"},                      # another port
            {k: v for k, v in good.items() if k != "Host"},       # no Host
            {k: v for k, v in good.items() if k != "X-Anywave-Token"},
            {**good, "X-Anywave-Token": srv.token[:-1] + ("A" if srv.token[-1] != "A" else "B")},
            {**good, "Sec-Fetch-Site": "cross-site"},
        ]
        for h in refused:
            for path in ("/api/compile", "/api/run"):
                status, r = _raw(port, "POST", path, h, body)
                assert status == 403, (h, status)
                assert r["ok"] is False and r["error"]["message"], h
        assert not marker.exists()  # nothing of the source was imported
        # a rebinding page cannot read the token either
        status, _ = _raw(port, "GET", "/", {"Host": f"evil.example:{port}"})
        assert status == 403
        for host in (own, f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
            status, r = _raw(port, "POST", "/api/compile", {**good, "Host": host,
                                                            "Origin": f"http://{host.lower()}"}, body)
            assert status == 200 and r["ok"], host
        assert marker.read_text() == "imported"  # the same request with the checks passed does run it
    finally:
        srv.shutdown()


def test_content_length_and_malformed_bodies_get_clean_4xx(tmp_path):
    marker = tmp_path / "ran"
    srv, base = serve_in_thread(targets=[])
    port = srv.server_address[1]
    h = {"Host": f"127.0.0.1:{port}", "X-Anywave-Token": srv.token}
    src = json.dumps({"source": _marked_source(marker)}).encode()
    try:
        for cl, want in (("-1", 400), ("abc", 400), ("1e3", 400), ("+5", 400), (" ", 400),
                         (str(server_mod.MAX_BODY + 1), 413), ("9" * 5000, 413)):
            status, r = _raw(port, "POST", "/api/run", {**h, "Content-Length": cl}, src)
            assert status == want and r["ok"] is False, (cl, status)
        status, r = _raw(port, "POST", "/api/run", h, src)  # no Content-Length
        assert status == 411 and r["ok"] is False
        assert not marker.exists()
        bodies = [b"[1, 2]", b'"x"', b"3", b"null", b"{", b"\xff\xfe", b'{"n": "abc"}', b'{"n": 1e400}',
                  b'{"n": NaN}', b'{"n": Infinity}', b'{"n": -5}', b'{"n": 0}', b'{"n": 1.5}', b'{"n": true}',
                  b'{"n": [1]}', b'{"n": 1099511627776}', b'{"wave_width": "32"}', b'{"wave_width": true}',
                  b'{"wave_width": 12}', b'{"source": 5}', b'{"source": ["a"]}', b'{"kernel": 3}',
                  b"[" * 100000]
        for b in bodies:
            for path in ("/api/run", "/api/compile"):
                status, r = _raw(port, "POST", path, {**h, "Content-Length": str(len(b))}, b)
                if path == "/api/compile" and b.startswith(b'{"n"'):
                    continue  # compile takes no n (checked below: the other fields still are)
                assert status == 400, (path, b[:40], status)
                assert r["ok"] is False and r["error"]["message"].startswith("bad request"), b[:40]
        # a body shorter than its Content-Length: the read times out or ends, an answer either way
        assert srv.token and not marker.exists()
    finally:
        srv.shutdown()


def test_stalled_and_trickling_clients_are_cut_off_and_threads_are_bounded(monkeypatch):
    # (the read timeout and the deadline are read when a connection is set up: each phase
    # sets the ones it needs, so no phase depends on how fast the machine is)
    monkeypatch.setattr(server_mod.Handler, "timeout", 600.0)
    monkeypatch.setattr(server_mod, "REQUEST_DEADLINE", 600.0)
    srv, base = serve_in_thread(targets=[], max_threads=4)
    port = srv.server_address[1]
    example = {"Host": f"127.0.0.1:{port}"}
    socks = []
    try:
        for _ in range(4):  # four clients that connect and send nothing hold the four threads
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=60))
        # (the listen queue is FIFO: the four are accepted before the fifth)
        status, r = _raw(port, "GET", "/api/example", example)
        assert status == 503 and r["ok"] is False and "busy" in r["error"]["message"]
        for s in socks:
            s.close()
        for _ in range(600):  # their threads end when they go away; then the server serves again
            status, r = _raw(port, "GET", "/api/example", example)
            if status == 200:
                break
            time.sleep(0.1)
        assert status == 200 and "saxpy" in r["source"]
        # a client that stalls is closed by the server at the read timeout, not held forever
        monkeypatch.setattr(server_mod.Handler, "timeout", 1.0)
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        socks.append(s)
        s.sendall(b"POST /api/run HTTP/1.1\r\n")
        while s.recv(4096):
            pass
        # a client that trickles a byte at a time, each within the read timeout, is cut at the deadline
        monkeypatch.setattr(server_mod.Handler, "timeout", 600.0)
        monkeypatch.setattr(server_mod, "REQUEST_DEADLINE", 3.0)
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        socks.append(s)
        s.sendall(b"GET / HTTP/1.0\r\n")
        cut = False
        for _ in range(1200):  # up to 1200 * 0.5 s; the deadline cuts it after 3 s
            try:
                s.sendall(b"X")
            except OSError:
                cut = True
                break
            time.sleep(0.5)
        assert cut
        status, r = _raw(port, "GET", "/api/example", example)
        assert status == 200 and "saxpy" in r["source"]
    finally:
        for s in socks:
            s.close()
        srv.shutdown()


_NO_BOUNDS = '''\
import anywave as aw


@aw.kernel
def wild(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    y[i * 16777216] = x[i]   # no `if i < n`, and far past the buffer's end
'''

_FOREVER = '''\
import anywave as aw


@aw.kernel
def spin(y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    j = i
    while j >= 0:
        j = (j + 1) & 65535
    y[i] = j
'''

_OOB_READ = '''\
import anywave as aw


@aw.kernel
def over(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i + 1]      # reads one element past x's end in the last thread
'''


def _cpu_targets() -> list[str]:
    from anywave.jit.targets import available_targets

    return [t for t in available_targets() if t in ("opencl", "sycl")]


def _start_cli_server(targets: list[str]) -> tuple[subprocess.Popen, int, str]:
    cmd = [sys.executable, "-m", "anywave", "explore", "--port", "0"]
    for t in targets:
        cmd += ["--target", t]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://[^:]+:(\d+)/", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(m.group(1))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/")
        html = c.getresponse().read().decode()
        c.close()
        token = re.search(r'name="anywave-token" content="([^"]+)"', html)
        assert token, "the page carries no session token"
        return proc, port, token.group(1)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise


def test_kernel_without_bounds_check_does_not_kill_the_server():
    targets = _cpu_targets()
    if not targets:
        pytest.skip("no OpenCL or SYCL CPU target here")
    proc, port, token = _start_cli_server(targets)  # a child process: a crash must not take pytest with it
    h = {"Host": f"127.0.0.1:{port}", "X-Anywave-Token": token}
    try:
        body = json.dumps({"source": _NO_BOUNDS, "n": 1000}).encode()
        status, r = _raw(port, "POST", "/api/run", {**h, "Content-Length": str(len(body))}, body)
        assert status == 200 and r["ok"], r
        rows = {x["target"]: x for x in r["results"]}
        assert rows["emulator"]["error"] and "out-of-bounds" in rows["emulator"]["error"]
        assert set(rows) == {"emulator", *targets}
        for t in targets:  # the wild write was that target's error (bounds check or a crashed child)
            assert rows[t]["error"] or rows[t]["identical"] is None, rows[t]
        assert proc.poll() is None  # the server is alive and serves the next run
        body = json.dumps({"source": service.EXAMPLE, "n": 100}).encode()
        status, r = _raw(port, "POST", "/api/run", {**h, "Content-Length": str(len(body))}, body)
        assert status == 200 and [x["identical"] for x in r["results"]] == [True] * (1 + len(targets)), r
    finally:
        proc.kill()
        proc.communicate()


def test_never_ending_kernel_is_stopped_and_later_runs_work(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the children's source files go
    targets = _cpu_targets()[:1]
    r = service.run_source(_FOREVER, n=64, targets=targets, timeout=5.0)
    assert list(tmp_path.glob("anywave-explore-*")) == []  # a killed child leaves no directory behind
    assert r["ok"]
    assert [x["target"] for x in r["results"]] == ["emulator", *targets]
    for row in r["results"]:
        assert row["error"], row  # the emulator's own budget, or the explorer's
    for row in r["results"][1:]:
        assert "budget" in row["error"] and "stopped" in row["error"], row
    r = service.run_source(service.EXAMPLE, n=100, targets=targets)
    assert [x["error"] for x in r["results"]] == [None] * (1 + len(targets))
    assert all(x["identical"] is True for x in r["results"])


def test_no_bit_identical_claim_without_an_emulator_result():
    targets = _cpu_targets()
    r = service.run_source(_OOB_READ, n=100, targets=targets)
    assert r["ok"] and r["results"][0]["target"] == "emulator"
    assert "out-of-bounds" in r["results"][0]["error"]
    for row in r["results"][1:]:
        assert row["error"] or row["identical"] is None, row
    # the rule itself: nothing is identical to a failed reference; otherwise bytes decide
    rows = [{"target": "emulator", "error": "boom"}, {"target": "a", "error": None}, {"target": "b", "error": None}]
    service.compare_rows(rows, [None, [b"x"], [b"x"]])
    assert [x.get("identical") for x in rows] == [None, None, None]
    rows = [{"error": None}, {"error": None}, {"error": None}, {"error": "e"}]
    service.compare_rows(rows, [[b"x"], [b"x"], [b"y"], None])
    assert [x.get("identical") for x in rows] == [True, True, False, None]
