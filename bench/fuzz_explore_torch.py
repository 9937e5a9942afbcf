"""Hostile pass (issue 31, items 4-6 and 13): fuzz the explorer's HTTP API and torch tensors as
kernel buffers; write what happened to ``bench/results/fuzz_explore_torch.json``.

Explorer: ``anywave explore`` runs as a child process (emulator only); random methods, paths,
Host/Origin/token headers, Content-Length values, bodies (bytes, random JSON shapes, valid
requests whose source leaves a marker file when imported), raw garbage request lines, and
slow clients that stall or trickle while other requests go on. Counted: answers by status,
hangs (no answer or close within the budget), server crashes (the process ended), internal
errors (500 answers, "internal error" lines on its stderr, tracebacks), and sources imported
although the request failed the Host/Origin/token checks.

Torch: random tensors (dtypes, layouts, meta, non-contiguous and overlapping views, expanded,
conjugate/negative views, 0-size, requires-grad leaves, views of leaves, non-leaves, nn.Parameter,
inference tensors, DLPack capsules fresh and consumed) as the read and the written buffer of a
kernel, grad mode on or off, on the emulator and the OpenCL CPU target when present; each chunk
in a child process (a crash is counted, not fatal). Counted: launches, clean anywave errors,
raw (non-anywave) exceptions, wrong results, writes torch would refuse that went through,
writes that did not bump the version counter, crashes, hangs.

    python bench/fuzz_explore_torch.py [--http N] [--torch N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "fuzz_explore_torch.json"

EXAMPLE = '''\
import anywave as aw


@aw.kernel
def saxpy(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]
'''


# ----------------------------------------------------------------------------- explorer

def _start_server() -> tuple[subprocess.Popen, int, str, Path]:
    err = Path(tempfile.mkstemp(prefix="fuzz-explore-", suffix=".err")[1])
    proc = subprocess.Popen([sys.executable, "-m", "anywave", "explore", "--port", "0", "--target", "emulator",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=err.open("w"), text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    port = int(re.search(r":(\d+)/", line).group(1))
    status, body, _ = _send(port, b"GET / HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % port, 30)
    token = re.search(rb'name="anywave-token" content="([^"]+)"', body).group(1).decode()
    return proc, port, token, err


def _send(port: int, data: bytes, timeout: float, trickle: float = 0.0) -> tuple[int | None, bytes, str]:
    """(status or None, body, outcome): outcome 'answered', 'closed' (no answer), 'hang'."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if trickle:
            for i in range(0, len(data), 3):
                s.sendall(data[i:i + 3])
                time.sleep(trickle)
        else:
            s.sendall(data)
        chunks = []
        t0 = time.monotonic()
        while True:
            if time.monotonic() - t0 > timeout:
                return None, b"", "hang"
            try:
                c = s.recv(65536)
            except TimeoutError:
                return None, b"", "hang"
            except OSError:
                break
            if not c:
                break
            chunks.append(c)
    except TimeoutError:
        return None, b"", "hang"
    except OSError:
        return None, b"", "closed"  # the server cut the connection while we were sending
    finally:
        s.close()
    raw = b"".join(chunks)
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    if not m:
        return None, raw, "closed"
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(m.group(1)), body, "answered"


def _rand_json(rng: random.Random, depth: int = 0) -> object:
    k = rng.randrange(9 if depth < 4 else 5)
    if k == 0:
        return rng.choice([0, 1, -1, 2 ** 63, -(2 ** 70), 10 ** 400, 32, 8, 1000])
    if k == 1:
        return rng.choice([0.5, -0.0, 1e308, 1e-320, 3.0, 1e300 * 10])
    if k == 2:
        return rng.choice(["", "x", "\u0000", "\ud7ff" * 3, "a" * 1000, EXAMPLE])
    if k == 3:
        return rng.choice([True, False, None])
    if k == 4:
        return None
    if k in (5, 6):
        return {rng.choice(["source", "kernel", "wave_width", "n", "x", ""]): _rand_json(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    return [_rand_json(rng, depth + 1) for _ in range(rng.randrange(4))]


def _json_text(v: object) -> bytes:
    text = json.dumps(v, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


def fuzz_http(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    proc, port, token, err = _start_server()
    own = f"127.0.0.1:{port}"
    markers = Path(tempfile.mkdtemp(prefix="fuzz-explore-markers-"))
    stats: dict = {"requests": 0, "by_category": {}, "status": {}, "hangs": 0, "hang_samples": [],
                   "server_crashes": 0, "internal_error_answers": 0, "imported_without_auth": 0,
                   "slow_clients": 0, "slow_clients_not_cut": 0, "busy_503": 0}

    def count(cat: str, status: int | None, outcome: str, sample: bytes) -> None:
        stats["requests"] += 1
        stats["by_category"][cat] = stats["by_category"].get(cat, 0) + 1
        key = str(status) if status is not None else outcome
        stats["status"][key] = stats["status"].get(key, 0) + 1
        if outcome == "hang":
            stats["hangs"] += 1
            if len(stats["hang_samples"]) < 5:
                stats["hang_samples"].append(sample[:200].decode("latin-1"))
        if status == 500:
            stats["internal_error_answers"] += 1
        if status == 503:
            stats["busy_503"] += 1

    def slow_client(kind: str) -> None:
        # a client that stalls (sends part of a request, then nothing) or trickles bytes; the
        # server must close it (read timeout 10 s, request deadline 30 s), well within 90 s
        s = socket.create_connection(("127.0.0.1", port), timeout=90)
        t0 = time.monotonic()
        cut = False
        try:
            s.sendall(b"POST /api/run HTTP/1.1\r\nHost: " + own.encode() + b"\r\n")
            if kind == "trickle":
                while time.monotonic() - t0 < 90:
                    s.sendall(b"X-A: b\r\n")
                    time.sleep(2)
            else:
                s.settimeout(90)
                while s.recv(4096):
                    pass
                cut = True
        except OSError:
            cut = True
        finally:
            s.close()
        if not cut:
            stats["slow_clients_not_cut"] += 1

    threads = []

    def slow_wave(size: int) -> None:  # slow clients at once (the server serves 16 requests at a time)
        for j in range(size):
            t = threading.Thread(target=slow_client, args=("trickle" if j % 2 else "stall",), daemon=True)
            t.start()
            threads.append(t)
            stats["slow_clients"] += 1

    methods = ["GET", "POST", "POST", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "FOO", "G\x00T", ""]
    paths = ["/", "/api/compile", "/api/run", "/api/run", "/api/example", "/../pyproject.toml", "/%2e%2e/x",
             "/app.js", "/index.html?x=1", "//etc/passwd", "*", "/" + "a" * 5000, "/api/run?x", "/\\..\\x",
             "/.hidden", "/static/app.js"]
    for i in range(n):
        if i % 400 == 10:  # 8 slow clients hold half the server's threads while the fuzz goes on
            slow_wave(8)
            time.sleep(0.5)
        if proc.poll() is not None:
            stats["server_crashes"] += 1
            proc, port, token, err = _start_server()
            own = f"127.0.0.1:{port}"
        # (a request that passes the checks runs the source in a child: those are the slow ones)
        cat = rng.choice(["headers"] * 26 + ["json"] * 22 + ["content_length"] * 16 + ["garbage"] * 14
                         + ["valid", "auth"])
        marker = markers / f"m{i}"
        authorized = True
        if cat == "garbage":
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            if rng.random() < 0.5:
                data += b"\r\n\r\n"
            status, _, outcome = _send(port, data, 60)
            count(cat, status, outcome, data)
            continue
        method = "POST" if cat in ("json", "content_length", "valid", "auth") else rng.choice(methods)
        path = rng.choice(["/api/compile", "/api/run"]) if method == "POST" and rng.random() < 0.8 \
            else rng.choice(paths)
        headers: list[tuple[str, str]] = []
        host = own
        if cat in ("headers", "auth"):
            host = rng.choice([own, own, f"localhost:{port}", f"evil.example:{port}", "127.0.0.1:1", "", "a" * 3000,
                               f"127.0.0.1:{port}.evil.example", None, "multiple"])
        if host == "multiple":
            headers += [("Host", own), ("Host", f"evil.example:{port}")]
            authorized = False
        elif host is not None:
            headers.append(("Host", host))
            if host not in (own, f"localhost:{port}"):
                authorized = False
        else:
            authorized = False
        tok = token
        if cat in ("headers", "auth"):
            tok = rng.choice([token, token, None, "", token[:-1], token + "x", "\u00e9" * 10, "a" * 5000])
            if tok != token:
                authorized = False
        if tok is not None:
            headers.append(("X-Anywave-Token", tok))
        if cat in ("headers", "auth") and rng.random() < 0.5:
            origin = rng.choice([f"http://{own}", "http://evil.example", "null", f"https://{own}", "", "x" * 400])
            headers.append(("Origin", origin))
            if origin != f"http://{own}":
                authorized = False
        if cat == "headers" and rng.random() < 0.3:
            headers.append(("Sec-Fetch-Site", rng.choice(["same-origin", "cross-site", "none"])))
            if headers[-1][1] == "cross-site":
                authorized = False
        if cat == "headers" and rng.random() < 0.1:
            headers += [(f"X-{j}", "v" * rng.randrange(100)) for j in range(rng.randrange(50, 120))]
        # body
        src = f"open({str(marker)!r}, 'w').write('x')\n" + EXAMPLE
        if cat in ("valid", "auth"):
            body = json.dumps({"source": src, "n": rng.choice([1, 7, 64, 100]),
                               "wave_width": rng.choice([8, 16, 32, 64])}).encode()
        elif cat == "json":
            v = _rand_json(rng)
            if isinstance(v, dict) and rng.random() < 0.2:
                v["source"] = src
            body = _json_text(v)
        else:
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))) if rng.random() < 0.5 \
                else _json_text({"source": src})
        cl: str | None = str(len(body))
        if cat == "content_length":
            cl = rng.choice(["-1", "-100", "abc", "", "1e3", "0x10", str(1 << 21), "9" * 30, "9" * 5000,
                             str(len(body) + 50), str(max(0, len(body) - 5)), "1,2", " 5", "\u0661", None,
                             str(len(body))])
            if rng.random() < 0.1:
                headers.append(("Transfer-Encoding", "chunked"))
        if cl is not None:
            headers.append(("Content-Length", cl))
        if cat == "content_length" and rng.random() < 0.1:
            headers.append(("Content-Length", "3"))
        head = f"{method} {path} HTTP/1.{rng.choice([0, 1])}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        data = head.encode("utf-8", "replace") + b"\r\n" + (body if method != "GET" or rng.random() < 0.2 else b"")
        short = cl is not None and cl.isdigit() and cl.isascii() and len(cl) < 10 and int(cl) > len(body)
        status, _, outcome = _send(port, data, 60 if not short else 90)
        count(cat, status, outcome, data)
        if not authorized and marker.exists():
            stats["imported_without_auth"] += 1
        if cat == "auth" and authorized and method == "POST" and status not in (200, 503, None):
            stats.setdefault("authorized_refused", 0)
            stats["authorized_refused"] += 1
    for t in threads:
        t.join(120)
    # saturation: 24 slow clients hold all 16 threads; requests get 503 at once, and once the
    # server has cut the slow clients (read timeout, request deadline) it serves again
    threads.clear()
    slow_wave(24)
    time.sleep(1.0)
    get = b"GET /api/example HTTP/1.0\r\nHost: " + own.encode() + b"\r\n\r\n"
    during = [_send(port, get, 60) for _ in range(20)]
    stats["saturated_requests"] = len(during)
    stats["saturated_503"] = sum(1 for st, _, _ in during if st == 503)
    stats["requests"] += len(during)
    stats["by_category"]["saturation"] = len(during)
    for t in threads:
        t.join(120)
    after = [_send(port, get, 60) for _ in range(20)]
    stats["requests"] += len(after)
    stats["by_category"]["after_saturation"] = len(after)
    stats["served_after_saturation"] = sum(1 for st, _, _ in after if st == 200)
    stats["hangs"] += sum(1 for _, _, o in during + after if o == "hang")
    alive = proc.poll() is None
    if not alive:
        stats["server_crashes"] += 1
    proc.kill()
    proc.communicate()
    text = err.read_text(errors="replace")
    stats["stderr_internal_error_lines"] = text.count("internal error")
    stats["stderr_tracebacks"] = text.count("Traceback")
    stats["stderr_sample"] = text[-2000:]
    return stats


# ----------------------------------------------------------------------------- torch

TORCH_CHILD = r'''
import json, random, re, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import anywave as aw
from anywave.errors import WaveError

@aw.kernel
def twice(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * 2.0

seed, count, targets = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
rng = random.Random(seed)
DT = [torch.float32] * 6 + [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8,
                            torch.bool, torch.complex64]

def make(rng):
    """(value, description, facts) with facts: dense float32 contiguous tensor or not, etc."""
    kind = rng.choice(["plain"] * 6 + ["dtype", "sparse", "csr", "mkldnn", "meta", "noncontig", "expand", "overlap",
                       "conj", "neg", "empty", "leaf_rg", "view_leaf", "nonleaf", "param", "inference", "capsule",
                       "consumed", "quant", "numpy", "offset_view", "scalar0d", "channels_last"])
    n = rng.choice([0, 1, 3, 8, 17, 64])
    base = torch.arange(max(n, 1) * 4, dtype=torch.float32) / 7
    t = base[:n].clone()
    d = kind
    if kind == "dtype":
        t = t.to(rng.choice(DT)); d += f":{t.dtype}"
    elif kind == "sparse":
        t = t.to_sparse()
    elif kind == "csr":
        t = torch.zeros(2, max(n, 1)).to_sparse_csr()
    elif kind == "mkldnn":
        t = t.to_mkldnn() if torch.backends.mkldnn.is_available() else t
    elif kind == "meta":
        t = torch.empty(n, device="meta")
    elif kind == "noncontig":
        t = base[: 2 * n : 2] if n else base[:0]
    elif kind == "expand":
        t = torch.ones(1).expand(max(n, 1))
    elif kind == "overlap":
        t = base.as_strided((max(n, 1),), (0,))
    elif kind == "conj":
        t = torch.ones(max(n, 1), dtype=torch.complex64).conj()
    elif kind == "neg":
        t = torch._neg_view(torch.ones(max(n, 1), dtype=torch.complex64))
    elif kind == "empty":
        t = torch.empty(0)
    elif kind == "leaf_rg":
        t = t.requires_grad_(True)
    elif kind == "view_leaf":
        leaf = base.clone().requires_grad_(True)
        t = leaf[:n]
    elif kind == "nonleaf":
        t = (base[:n].clone().requires_grad_(True) * 1.0)
    elif kind == "param":
        t = torch.nn.Parameter(t)
    elif kind == "inference":
        with torch.inference_mode():
            t = base[:n].clone()
    elif kind == "capsule":
        t = base[:n].clone().__dlpack__()
    elif kind == "consumed":
        t = base[:n].clone().__dlpack__(); torch.from_dlpack(t)
    elif kind == "quant":
        t = torch.quantize_per_tensor(base[:max(n, 1)], 0.1, 0, torch.quint8)
    elif kind == "numpy":
        t = np.arange(n, dtype=np.float32)
    elif kind == "offset_view":
        t = base[1 : n + 1]
    elif kind == "scalar0d":
        t = torch.tensor(1.5)
    elif kind == "channels_last":
        t = torch.zeros(1, 2, 2, 2).to(memory_format=torch.channels_last)
    return t, d

res = {"inputs": 0, "launched": 0, "clean_errors": 0, "raw_exceptions": 0, "wrong_results": 0,
       "refusable_writes_accepted": 0, "version_not_bumped": 0, "samples": [], "clean_kinds": {}}
def sample(k, text):
    if len(res["samples"]) < 12:
        res["samples"].append(f"{k}: {text[:300]}")

def numel(v):
    if isinstance(v, torch.Tensor):
        return v.numel() if v.layout == torch.strided and not v.is_meta else None
    if isinstance(v, np.ndarray):
        return v.size
    return None

for it in range(count):
    x, dx = make(rng)
    y, dy = make(rng)
    grad = rng.random() < 0.6
    target = rng.choice(targets)
    nx, ny = numel(x), numel(y)
    n = min(nx or 0, ny or 0)
    res["inputs"] += 1
    yt = y if isinstance(y, torch.Tensor) else None
    v0 = yt._version if yt is not None and yt.layout == torch.strided and not yt.is_inference() else None
    before = None
    try:
        if isinstance(x, torch.Tensor) and x.layout == torch.strided and not x.is_meta and x.dtype == torch.float32 \
                and not x.is_conj():
            before = x.detach().reshape(-1)[:n].clone()
        elif isinstance(x, np.ndarray):
            before = torch.from_numpy(x.copy())[:n]
    except Exception:
        before = None
    try:
        with torch.set_grad_enabled(grad):
            twice(x, y, n, grid=(max(1, -(-n // 8)), 1, 1), workgroup=(8, 1, 1), target=target)
    except WaveError as e:
        res["clean_errors"] += 1
        key = type(e).__name__ + ": " + re.sub(r"'[^']*'|\d+", "_", str(e))[:70]
        res["clean_kinds"][key] = res["clean_kinds"].get(key, 0) + 1
        continue
    except Exception as e:
        res["raw_exceptions"] += 1
        sample("raw", f"x={dx} y={dy} grad={grad} target={target}: {type(e).__name__}: {e}")
        continue
    res["launched"] += 1
    if yt is not None:
        if grad and yt.requires_grad and (yt.is_leaf or (yt._base is not None and yt._base.is_leaf
                                                           and yt._base.requires_grad)):
            res["refusable_writes_accepted"] += 1
            sample("refusable", f"x={dx} y={dy}")
        if v0 is not None and n > 0 and yt._version == v0:
            res["version_not_bumped"] += 1
            sample("version", f"x={dx} y={dy}")
        if before is not None and n > 0:
            got = yt.detach().reshape(-1)[:n].to(torch.float32)
            if not torch.equal(got, (before * 2.0).to(torch.float32)):
                res["wrong_results"] += 1
                sample("wrong", f"x={dx} y={dy}")
print(json.dumps(res))
'''


def fuzz_torch(n: int, seed: int) -> dict:
    targets = ["emulator"]
    try:
        from anywave.runtime import opencl

        if opencl.status()[0]:
            targets.append("opencl")
    except Exception:  # noqa: BLE001 - no OpenCL here
        pass
    total = {"inputs": 0, "launched": 0, "clean_errors": 0, "raw_exceptions": 0, "wrong_results": 0,
             "refusable_writes_accepted": 0, "version_not_bumped": 0, "crashes": 0, "hangs": 0, "samples": [],
             "targets": targets, "clean_kinds": {}}
    chunk = 100
    script = Path(tempfile.mkdtemp(prefix="fuzz-torch-")) / "child.py"  # kernels need a file
    script.write_text(TORCH_CHILD)
    for c in range(0, n, chunk):
        k = min(chunk, n - c)
        try:
            p = subprocess.run([sys.executable, str(script), str(seed + c), str(k), ",".join(targets)],
                               capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            total["hangs"] += 1
            total["inputs"] += k
            continue
        if p.returncode != 0:
            total["crashes"] += 1
            total["inputs"] += k
            total["samples"].append(f"chunk {c}: exit {p.returncode}: {p.stderr[-500:]}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        for key in ("inputs", "launched", "clean_errors", "raw_exceptions", "wrong_results",
                    "refusable_writes_accepted", "version_not_bumped"):
            total[key] += r[key]
        total["samples"] += r["samples"][: max(0, 20 - len(total["samples"]))]
        for key, v in r["clean_kinds"].items():
            total["clean_kinds"][key] = total["clean_kinds"].get(key, 0) + v
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, default=3200)
    ap.add_argument("--torch", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from anywave.torch.train import provenance

    t0 = time.time()
    out = {**provenance(), "script": "bench/fuzz_explore_torch.py", "seed": a.seed}
    done: dict = {}
    worker = threading.Thread(target=lambda: done.update(r=fuzz_torch(a.torch, a.seed)))
    worker.start()  # (the torch chunks are child processes: they run beside the HTTP fuzz)
    out["explorer_http"] = fuzz_http(a.http, a.seed)
    worker.join()
    out["torch_buffers"] = done["r"]
    print("torch:", {k: v for k, v in out["torch_buffers"].items() if k != "samples"}, flush=True)
    print("http:", {k: v for k, v in out["explorer_http"].items() if k not in ("stderr_sample",)}, flush=True)
    out["seconds"] = round(time.time() - t0, 1)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
