"""Hostile inputs through the attention wrappers (anywave.kernels.attention: attention,
attention_decode, attention_backward) and the torch op (torch.ops.anywave.attention*), on the
emulator (CPU tensors), with tiny shapes.

Each generated case says what it expects: a correct result (compared with a float64 reference
within the §8.17 bound, or exactly where the result is defined: zeros, -inf, empty) or a refusal
(anywave's errors, ValueError or TypeError, whose message names the offending thing). Outcomes:
``ok``, ``refused`` (as expected), ``torch_schema`` (torch's own argument-type check refused it
before anywave's code ran: a RuntimeError naming the argument), ``wrong`` (a result outside the
bound), ``accepted_invalid``, ``unexpected_refusal``, ``uncaught`` (an exception that is none of
the above), ``hang`` (past 60 s), ``crash`` (the worker process died). Every category runs in its
own worker process so that a crash is recorded, not fatal.

    python bench/hostile_attention.py          # writes bench/results/hostile_attention.json
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "hostile_attention.json"
CATEGORIES = ["rank", "shape", "heads", "empty", "head_dim", "dtype_numpy", "dtype_torch", "layout_numpy",
              "layout_torch", "requires_grad", "scale", "causal", "mode", "device", "compile_dynamic", "chunk",
              "backward_args", "magnitude"]
U = 2.0**-24


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def ref64(q, k, v, causal, scale):
    """float64 O, LSE and the §8.17 forward bound."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, hq, sq, d = q.shape
    sk = k.shape[2]
    rep = hq // k.shape[1] if k.shape[1] else 1
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    vis = (j <= i + (sk - sq)) if causal else np.ones((sq, sk), bool)
    with np.errstate(all="ignore"):
        s = np.where(vis, np.einsum("bhid,bhjd->bhij", q, k) * scale, -np.inf)
        m = s.max(-1, keepdims=True) if sk else np.full(s.shape[:-1] + (1,), -np.inf)
        mm = np.where(np.isfinite(m), m, 0)
        p = np.where(vis, np.exp(s - mm), 0.0)
        ls = p.sum(-1, keepdims=True)
        o = np.where(ls > 0, np.einsum("bhij,bhjd->bhid", p, v) / np.where(ls > 0, ls, 1), 0.0)
        lse = np.where(ls[..., 0] > 0, m[..., 0] + np.log(np.where(ls[..., 0] > 0, ls[..., 0], 1)), -np.inf)
        n = vis.sum(-1)
        smag = np.where(vis, np.einsum("bhid,bhjd->bhij", np.abs(q), np.abs(k)) * abs(scale), 0)
        smag = smag.max(-1) if sk else np.zeros(s.shape[:-1])
        vmax = np.where(vis[None, None, :, :, None], np.abs(v)[:, :, None], 0)
        vmax = vmax.max(3) if sk else np.zeros(o.shape)
        nb = np.ceil(n / 64)
        bo = U * (4 * (d + 2) * smag + 2 * n + 12 * nb + 16)[..., None] * vmax
        bl = U * (3 * (d + 2) * smag + n + 12 * nb + 16 + 2 * np.where(np.isfinite(lse), np.abs(lse), 0))
    return o, lse, bo, bl


def within(got, want, bound, factor=1.0):
    got = np.asarray(got, np.float64)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    same_inf = np.isinf(want) & (got == want)
    bad = ~((np.abs(got - want) <= factor * bound) | same_inf)
    if bad.any():
        return False, f"{int(bad.sum())} of {bad.size} outside the bound"
    return True, ""


def rnd(shape, seed, scale=1.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype=np.float32)


# ----------------------------------------------------------------------------- case generators
# A case: (name, expect, fn) with expect "ok" or "refuse"; fn() returns (passed: bool, detail) for
# "ok" cases (it raises for a refusal).


def _np_fwd_case(q, k, v, causal=False, scale=None, fn="attention", chunk=64, factor=1.0):
    from anywave.kernels import attention as A

    def run():
        if fn == "attention":
            o, lse = A.attention(q, k, v, causal, scale)
            f = 1.0
        else:
            o, lse = A.attention_decode(q, k, v, causal, scale, chunk=chunk)
            f = 2.0
        qa = np.asarray(q, np.float32)
        sc = A.default_scale(qa.shape[-1]) if scale is None else float(np.float32(scale))
        ro, rl, bo, bl = ref64(np.asarray(q, np.float32), np.asarray(k, np.float32), np.asarray(v, np.float32),
                               causal, sc)
        ok1, d1 = within(o, ro, bo, f * factor)
        ok2, d2 = within(lse, rl, bl, f * factor)
        return ok1 and ok2, (d1 + " " + d2).strip()
    return run


def gen(cat: str):
    """Yield (name, expect, fn) for one category."""
    import torch

    import anywave.torch.ops  # noqa: F401
    from anywave.kernels import attention as A

    T = torch.ops.anywave
    if cat == "rank":
        for rq in range(0, 7):
            for rk in (3, 4, 5):
                shq = (1, 2, 3, 8)[:rq] if rq <= 4 else (1,) * (rq - 4) + (1, 2, 3, 8)
                shk = (1, 1, 5, 8)[:rk] if rk <= 4 else (1,) * (rk - 4) + (1, 1, 5, 8)
                exp = "ok" if (rq == 4 and rk == 4) else "refuse"
                q, k = rnd(shq, 1), rnd(shk, 2)
                yield f"numpy q{rq}D k{rk}D", exp, _np_fwd_case(q, k, k)
                tq, tk = torch.from_numpy(q), torch.from_numpy(k)
                yield f"torch q{rq}D k{rk}D", exp, lambda tq=tq, tk=tk: (T.attention(tq, tk, tk).shape == tq.shape, "")
    elif cat == "shape":
        base = dict(b=1, hq=2, hkv=1, sq=3, sk=5, d=8)
        muts = [("k batch 2", dict(kb=2)), ("k d 12", dict(kd=12)), ("v sk 6", dict(vsk=6)), ("v d 12", dict(vd=12)),
                ("v hkv 2", dict(vh=2)), ("q batch 2", dict(qb=2)), ("v batch 2", dict(vb=2))]
        for seed in range(4):
            for name, mu in muts:
                q = rnd((mu.get("qb", 1), 2, 3, 8), seed)
                k = rnd((mu.get("kb", 1), 1, 5, mu.get("kd", 8)), seed + 1)
                v = rnd((mu.get("vb", 1), mu.get("vh", 1), mu.get("vsk", 5), mu.get("vd", 8)), seed + 2)
                yield f"numpy {name} #{seed}", "refuse", _np_fwd_case(q, k, v)
                tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                yield f"torch {name} #{seed}", "refuse", lambda a=tq, b=tk, c=tv: (T.attention(a, b, c) is None, "")
        del base
    elif cat == "heads":
        for hq in range(1, 7):
            for hkv in range(1, 7):
                exp = "ok" if hq % hkv == 0 else "refuse"
                q, k, v = rnd((1, hq, 2, 4), hq), rnd((1, hkv, 3, 4), hkv), rnd((1, hkv, 3, 4), hkv + 9)
                yield f"numpy Hq{hq} Hkv{hkv}", exp, _np_fwd_case(q, k, v)
                if hq <= 4:
                    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                    yield f"torch Hq{hq} Hkv{hkv}", exp, lambda a=tq, b=tk, c=tv: _torch_vs_ref(a, b, c)
        for hq, hkv in ((0, 1), (2, 0), (0, 0)):
            q, k = np.zeros((1, hq, 2, 4), np.float32), np.zeros((1, hkv, 3, 4), np.float32)
            yield f"numpy Hq{hq} Hkv{hkv}", "refuse", _np_fwd_case(q, k, k)
            yield f"torch Hq{hq} Hkv{hkv}", "refuse", lambda a=q, b=k: T.attention(torch.from_numpy(a),
                                                                                     torch.from_numpy(b),
                                                                                     torch.from_numpy(b))
    elif cat == "empty":
        for b, sq, sk in ((0, 3, 5), (1, 0, 5), (1, 3, 0), (0, 0, 0), (2, 0, 0), (1, 1, 0)):
            for causal in (False, True):
                q, k = rnd((b, 2, sq, 8), 1), rnd((b, 1, sk, 8), 2)
                for fn in ("attention", "decode"):
                    yield f"numpy {fn} B{b} Sq{sq} Sk{sk} c{int(causal)}", "ok", _np_fwd_case(q, k, k, causal, fn=fn)

                def tcase(q=q, k=k, causal=causal):
                    tq, tk = (torch.from_numpy(x).requires_grad_() for x in (q, k))
                    o = T.attention(tq, tk, tk, causal, None, "exact")
                    o.sum().backward()
                    good = o.shape == tq.shape and bool((o == 0).all()) and tq.grad.shape == tq.shape
                    return good and bool((tq.grad == 0).all()) and bool((tk.grad == 0).all()), ""
                yield f"torch fwd+bwd B{b} Sq{sq} Sk{sk} c{int(causal)}", "ok", tcase
                yield (f"numpy backward B{b} Sq{sq} Sk{sk}", "ok",
                       lambda q=q, k=k, bw=A.attention_backward: (
                           all((x == 0).all() for x in bw(q, k, k, q, q[..., 0], q)), ""))
    elif cat == "head_dim":
        for d in list(range(0, 21)) + [30, 63, 66, 100, 252, 256, 257, 260, 300, 512]:
            exp = "ok" if (d % 4 == 0 and 4 <= d <= 256) else "refuse"
            sk = 3 if d > 64 else 5
            q, k, v = rnd((1, 1, 2, d), d), rnd((1, 1, sk, d), d + 1), rnd((1, 1, sk, d), d + 2)
            yield f"numpy D{d}", exp, _np_fwd_case(q, k, v)
            if d <= 20 or d in (256, 257):
                tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                yield f"torch D{d}", exp, lambda a=tq, b=tk, c=tv: _torch_vs_ref(a, b, c)
    elif cat == "dtype_numpy":
        import ml_dtypes

        good = [np.float32, np.float16, ml_dtypes.bfloat16]
        bad = [np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.bool_, np.complex64,
               np.longdouble, object, "U4"]
        q0, k0 = rnd((1, 2, 3, 8), 1), rnd((1, 1, 70, 8), 2)
        for dt in good + bad:
            for which in ("q", "k", "v", "all"):
                exp = "ok" if dt in good else "refuse"
                args = [q0, k0, k0]
                for idx, nm in enumerate("qkv"):
                    if which in (nm, "all"):
                        args[idx] = args[idx].astype(dt) if dt is not object else args[idx].astype(object)
                name = getattr(dt, "__name__", str(dt))
                yield f"numpy {which}={name}", exp, _np_fwd_case(*args)
    elif cat == "dtype_torch":
        dts = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int64, torch.int8,
               torch.uint8, torch.bool, torch.complex64]
        for dq_ in dts:
            for dk_ in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32):
                exp = "ok" if (dq_ == dk_ and dq_ in (torch.float32, torch.bfloat16, torch.float16)) else "refuse"
                q = torch.randn(1, 2, 3, 8).to(dq_)
                k = torch.randn(1, 1, 6, 8).to(dk_)
                yield f"torch q={dq_} kv={dk_}", exp, lambda q=q, k=k: _torch_vs_ref(q, k, k)
    elif cat == "layout_numpy":
        for seed in range(6):
            base = rnd((2, 5, 3, 4, 8), seed)  # a bigger array to take views from
            q = base[:, 1:3, :, 0, :]  # (2, 2, 3, 8) strided
            k = np.moveaxis(rnd((2, 70, 1, 8), seed + 1), 1, 2)  # (B, S, H, D) storage as (B, H, S, D)
            v = rnd((2, 1, 70, 16), seed + 2)[..., ::2]  # every other column
            yield f"numpy strided views #{seed}", "ok", _np_fwd_case(q, k, v, bool(seed % 2))
            yield f"numpy reversed #{seed}", "ok", _np_fwd_case(q[:, ::-1], k[:, :, ::-1], v[:, :, ::-1])
            yield f"numpy fortran #{seed}", "ok", _np_fwd_case(np.asfortranarray(q), np.asfortranarray(k), v)
            kb = np.broadcast_to(rnd((1, 1, 1, 8), seed + 3), (2, 1, 70, 8))
            yield f"numpy broadcast #{seed}", "ok", _np_fwd_case(q, kb, v)
            ro = q.copy()
            ro.setflags(write=False)
            yield f"numpy read-only #{seed}", "ok", _np_fwd_case(ro, k, v, fn="decode")
    elif cat == "layout_torch":
        for seed in range(6):
            g = torch.Generator().manual_seed(seed)
            q = torch.randn(2, 3, 2, 8, generator=g).transpose(1, 2)
            k = torch.randn(2, 70, 1, 8, generator=g).transpose(1, 2)
            v = torch.randn(2, 1, 8, 70, generator=g).transpose(2, 3)
            yield f"torch transposed #{seed}", "ok", lambda q=q, k=k, v=v: _torch_vs_ref(q, k, v, grad=True)
            ke = torch.randn(2, 1, 1, 8, generator=g).expand(2, 1, 70, 8)
            yield f"torch expanded #{seed}", "ok", lambda q=q, k=ke, v=v: _torch_vs_ref(q, k, v, grad=True)
            qs = torch.randn(2, 2, 6, 16, generator=g)[:, :, ::2, ::2]
            yield f"torch sliced #{seed}", "ok", lambda q=qs, k=k, v=v: _torch_vs_ref(q, k, v, grad=True)
            qf = torch.randn(2, 2, 3, 8, generator=g).flip(2)
            yield f"torch flipped #{seed}", "ok", lambda q=qf, k=k, v=v: _torch_vs_ref(q, k, v, causal=True)
            q0 = torch.randn(0, 2, 3, 8).transpose(2, 3).transpose(2, 3)
            yield f"torch empty view #{seed}", "ok", lambda q=q0: (T.attention(q, q[:, :1], q[:, :1]).shape == q.shape,
                                                                   "")
    elif cat == "requires_grad":
        for mask in range(8):
            for causal in (False, True):
                for sq, sk in ((3, 5), (6, 2), (2, 66)):
                    g = torch.Generator().manual_seed(mask * 10 + sq)
                    q, k, v = (torch.randn(s, generator=g) for s in ((1, 2, sq, 8), (1, 1, sk, 8), (1, 1, sk, 8)))
                    for i, t in enumerate((q, k, v)):
                        if mask >> i & 1:
                            t.requires_grad_()
                    yield (f"torch grad mask {mask:03b} c{int(causal)} Sq{sq} Sk{sk}", "ok",
                           lambda q=q, k=k, v=v, c=causal: _torch_grads(q, k, v, c))
    elif cat == "scale":
        good = [0.0, -0.0, 1.0, -1.0, 0.125, -3.5, 1e-30, -1e-30, 1e-45, 3e4, 1e30, 7, np.float32(0.3),
                np.float64(0.2), np.int64(2), None]
        bad = [math.inf, -math.inf, math.nan, 1e39, -1e39, 1e308, "0.5", 1j, [0.5], True, np.array([0.5, 1.0])]
        q, k = rnd((1, 2, 3, 8), 1), rnd((1, 1, 70, 8), 2)
        for s in good + bad:
            exp = "ok" if any(s is g for g in good) else "refuse"
            for fn in ("attention", "decode"):
                yield f"numpy {fn} scale={s!r}", exp, _np_fwd_case(q, k, k, True, s, fn=fn)
            yield (f"numpy backward scale={s!r}", exp,
                   lambda s=s: (A.attention_backward(q, k, k, q, q[..., 0], q, None, True, s)[0].shape == q.shape, ""))
            if not isinstance(s, (str, list, complex, np.ndarray)):
                # torch's `float?` schema turns True into 1.0 before anywave's code sees it (as for SDPA)
                texp = "ok" if s is True else exp
                yield f"torch scale={s!r}", texp, lambda s=s: _torch_vs_ref(torch.from_numpy(q), torch.from_numpy(k),
                                                                             torch.from_numpy(k), True, s)
        # scores that overflow float32 (scale 3.4e38): the §8.17 sequence gives inf/NaN, as its
        # float32 arithmetic does; compared bit for bit (NaN as NaN) with tests/attention_ref.py
        for s in (3.4e38, -3.4e38, 1e38):
            yield f"numpy scale={s!r} (f32 overflow: the spec's sequence)", "ok", lambda s=s: _vs_bitref(q, k, k, s)
    elif cat == "causal":
        for sq in (1, 2, 5, 9):
            for sk in (1, 3, 5, 9, 65, 70):
                for causal in (False, True):
                    q, k, v = rnd((1, 2, sq, 4), sq), rnd((1, 1, sk, 4), sk), rnd((1, 1, sk, 4), sk + 1)
                    yield f"numpy Sq{sq} Sk{sk} c{int(causal)}", "ok", _np_fwd_case(q, k, v, causal)
                    if sk <= 9:
                        yield (f"numpy decode Sq{sq} Sk{sk} c{int(causal)}", "ok",
                               _np_fwd_case(q, k, v, causal, fn="decode"))
        for bad in ("yes", np.array([1, 0]), None, 1.5):
            yield f"numpy causal={bad!r}", "refuse", _np_fwd_case(rnd((1, 1, 2, 4), 0), rnd((1, 1, 2, 4), 1),
                                                                  rnd((1, 1, 2, 4), 2), bad)
    elif cat == "mode":
        q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 5, 8)
        for mode in ("exact", "fast", "EXACT", "Fast", "", "fastest", "exact ", "bounded", "none", "auto"):
            exp = "ok" if mode in ("exact", "fast") else "refuse"
            for dt in (torch.float32, torch.bfloat16):
                yield f"torch mode={mode!r} {dt}", exp, lambda m=mode, dt=dt: _torch_vs_ref(q.to(dt), k.to(dt),
                                                                                           k.to(dt), mode=m)
    elif cat == "device":
        q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 5, 8)
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for causal in (False, True):
                def meta(dt=dt, c=causal):
                    qm, km = q.to(dt).to("meta"), k.to(dt).to("meta")
                    o, lse = T.attention_forward(qm, km, km, c)
                    good = o.device.type == "meta" and o.shape == q.shape and o.dtype == dt
                    return good and lse.shape == (1, 2, 3), ""
                yield f"torch meta {dt} c{int(causal)}", "ok", meta
            yield f"torch cpu q, meta k {dt}", "refuse", lambda dt=dt: T.attention(q.to(dt), k.to(dt).to("meta"),
                                                                                  k.to(dt))
            yield f"torch meta bad D {dt}", "refuse", lambda dt=dt: T.attention(q[..., :6].to("meta"),
                                                                               k[..., :6].to("meta"),
                                                                               k[..., :6].to("meta"))
    elif cat == "compile_dynamic":
        f = torch.compile(lambda q, k, v: T.attention(q, k, v, True, None, "exact"), dynamic=True, fullgraph=True)
        for sq, sk, hq in ((2, 3, 2), (3, 7, 2), (5, 9, 4), (4, 66, 2), (1, 1, 2), (7, 2, 2)):
            def cc(sq=sq, sk=sk, hq=hq):
                g = torch.Generator().manual_seed(sq * sk)
                q, k, v = (torch.randn(s, generator=g) for s in ((1, hq, sq, 8), (1, 1, sk, 8), (1, 1, sk, 8)))
                return torch.equal(f(q, k, v), T.attention(q, k, v, True, None, "exact")), ""
            yield f"compile dynamic Sq{sq} Sk{sk} Hq{hq}", "ok", cc
        yield "compile dynamic bad D", "refuse", lambda: f(torch.randn(1, 2, 3, 6), torch.randn(1, 1, 4, 6),
                                                            torch.randn(1, 1, 4, 6))
    elif cat == "chunk":
        q, k = rnd((1, 2, 2, 8), 1), rnd((1, 1, 150, 8), 2)
        for c in (64, 128, 192, 512, 4096, np.int64(64), np.int32(128), 0, -64, 32, 100, 65, 64.0, "64", None, True,
                  2**40 * 64):
            exp = "ok" if (isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 64
                           and c % 64 == 0) else "refuse"
            for causal in (False, True):
                yield f"numpy chunk={c!r} c{int(causal)}", exp, _np_fwd_case(q, k, k, causal, fn="decode", chunk=c)
    elif cat == "backward_args":
        q, k = rnd((1, 2, 3, 8), 1), rnd((1, 1, 5, 8), 2)
        o, lse = A.attention(q, k, k)
        good = dict(o=o, lse=lse, do=q, dlse=None)
        muts = {"o": [o[..., :4], o[:, :1], o.astype(np.float64), o[0]],
                "lse": [lse[..., None], lse[:, :1], lse.astype(np.int32), lse[0]],
                "do": [q[..., :4], q.astype(np.complex64), q[:, :, :2]],
                "dlse": [lse[..., :2], lse.astype(np.float64), np.zeros((1, 2, 3, 1), np.float32)]}
        for name, vals in muts.items():
            for i, bad in enumerate(vals):
                args = dict(good, **{name: bad})
                yield f"numpy backward bad {name} #{i}", "refuse", lambda a=args: A.attention_backward(
                    q, k, k, a["o"], a["lse"], a["do"], a["dlse"])
                t = {n: (torch.from_numpy(np.ascontiguousarray(x)) if x is not None else torch.zeros(1, 2, 3))
                     for n, x in args.items()}
                if t[name].dtype in (torch.complex64,):
                    continue
                tq, tk = torch.from_numpy(q), torch.from_numpy(k)
                yield f"torch backward bad {name} #{i}", "refuse", lambda t=t, tq=tq, tk=tk: T.attention_backward(
                    t["do"], t["dlse"], tq, tk, tk, t["o"], t["lse"], False, None)
        for seed in range(5):
            qq, kk, dd = rnd((1, 2, 3, 8), seed), rnd((1, 1, 5, 8), seed + 1), rnd((1, 2, 3, 8), seed + 2)
            oo, ll = A.attention(qq, kk, kk)

            def bcheck(qq=qq, kk=kk, dd=dd, oo=oo, ll=ll):
                tq, tk, tv = (torch.from_numpy(x).double().requires_grad_() for x in (qq, kk, kk.copy()))
                torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True).backward(
                    torch.from_numpy(dd).double())
                g = A.attention_backward(qq, kk, kk, oo, ll, dd)
                err = max(float(np.abs(a - b.grad.numpy()).max()) for a, b in zip(g, (tq, tk, tv), strict=True))
                return err < 1e-5, f"max err {err:.3g}"
            yield f"numpy backward vs float64 SDPA #{seed}", "ok", bcheck
    elif cat == "magnitude":
        for e in range(-20, 16, 3):
            for seed in range(3):
                s = 10.0**e
                q, k, v = rnd((1, 1, 3, 8), seed, s), rnd((1, 1, 70, 8), seed + 1), rnd((1, 1, 70, 8), seed + 2, s)
                yield f"numpy |q|,|v| ~ 1e{e} #{seed}", "ok", _np_fwd_case(q, k, v, seed == 1, 1.0 / (1 + s))


def _vs_bitref(q, k, v, scale, causal=True):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import attention_ref as R
    from anywave.kernels import attention as A

    o, lse = A.attention(q, k, v, causal, scale)
    ro, rl = R.forward(q, k, v, causal, np.float32(scale))
    same = all(bool(((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))).all())
               for a, b in ((o, ro), (lse, rl)))
    return same, f"{int(np.isnan(o).sum())} NaN of {o.size}"


def _torch_vs_ref(q, k, v, causal=False, scale=None, mode="exact", grad=False):
    import torch

    if grad:
        q = q.detach().clone().requires_grad_()
    o = torch.ops.anywave.attention(q, k, v, causal, scale, mode)
    if o.shape != q.shape or o.dtype != q.dtype:
        return False, f"shape/dtype {o.shape} {o.dtype}"
    d = q.shape[-1]
    sc = (1.0 / math.sqrt(d)) if scale is None else float(np.float32(scale))
    ro, _, bo, _ = ref64(q.detach().float().numpy(), k.float().numpy(), v.float().numpy(), causal, sc)
    got = o.detach().float().numpy()
    half = q.dtype != torch.float32
    bound = bo + (np.abs(ro) * 2.0**-8 if half else 0)
    ok, det = within(got, ro, bound)
    if grad and ok:
        o.square().sum().backward()
        ok = q.grad is not None and q.grad.shape == q.shape and bool(torch.isfinite(q.grad).all())
        det = "" if ok else "bad grad"
    return ok, det


def _torch_grads(q, k, v, causal):
    import torch

    o = torch.ops.anywave.attention(q, k, v, causal, None, "exact")
    if not o.requires_grad:
        return (not any(t.requires_grad for t in (q, k, v))), "no grad path"
    g = torch.ones_like(o)
    o.backward(g)
    sq, sk = q.shape[2], k.shape[2]
    mask = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq) if causal else None
    r = [t.detach().double().requires_grad_() for t in (q, k, v)]
    with torch.no_grad():
        pass
    ro = torch.nn.functional.scaled_dot_product_attention(*r, attn_mask=mask, enable_gqa=True)
    ro = torch.nan_to_num(ro)  # SDPA gives NaN for rows without keys; the op gives 0
    ro.backward(g.double())
    for t, rr in zip((q, k, v), r, strict=True):
        if t.requires_grad:
            if t.grad is None:
                return False, "missing grad"
            want = torch.nan_to_num(rr.grad)
            if not torch.allclose(t.grad.double(), want, rtol=0, atol=1e-5):
                return False, f"grad err {float((t.grad.double() - want).abs().max()):.3g}"
        elif t.grad is not None:
            return False, "grad on a tensor without requires_grad"
    return True, ""


# ----------------------------------------------------------------------------- runner

def classify(exc: BaseException) -> str:
    from anywave.errors import WaveError

    if isinstance(exc, (WaveError, ValueError, TypeError)):
        return "error"
    # torch.compile wraps an error raised while tracing (the fake kernel's checks): the cause is ours
    seen, todo = set(), [exc.__cause__, exc.__context__]
    while todo:
        c = todo.pop()
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        if isinstance(c, WaveError):
            return "error"
        todo += [c.__cause__, c.__context__]
    if type(exc).__name__ == "TorchRuntimeError" and "OpInputError('anywave." in str(exc):
        return "error"  # dynamo keeps only the text of the fake kernel's error
    if isinstance(exc, RuntimeError) and "Expected a value of type" in str(exc):
        return "torch_schema"
    return "uncaught"


def worker(cat: str, out: Path) -> None:
    os.environ["ANYWAVE_EMU_BUDGET"] = "none"
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    for name, expect, fn in gen(cat):
        t0 = time.time()
        signal.alarm(60)
        try:
            res = fn()
            signal.alarm(0)
            passed, detail = res if isinstance(res, tuple) else (True, "")
            if expect == "refuse":
                outcome = "accepted_invalid"
            else:
                outcome = "ok" if passed else "wrong"
        except Hang:
            outcome, detail = "hang", "past 60 s"
        except BaseException as e:  # noqa: BLE001 - every outcome is recorded
            signal.alarm(0)
            kind = classify(e)
            detail = f"{type(e).__name__}: {str(e)[:300]}"
            if kind == "uncaught":
                outcome = "uncaught"
                detail += " | " + traceback.format_exc(limit=3)[-500:]
            elif expect == "refuse":
                outcome = "refused" if kind == "error" else "torch_schema"
            else:
                outcome = "unexpected_refusal"
        rows.append({"case": name, "expect": expect, "outcome": outcome, "detail": detail,
                     "seconds": round(time.time() - t0, 3)})
        out.write_text(json.dumps(rows))


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        cat, path = sys.argv[2].split(":", 1)
        worker(cat, Path(path))
        return
    import tempfile

    results, summary = {}, {}
    t_all = time.time()
    for cat in CATEGORIES:
        with tempfile.TemporaryDirectory() as td:
            path = Path(td) / "rows.json"
            p = subprocess.run([sys.executable, __file__, "--worker", f"{cat}:{path}"], capture_output=True, text=True)
            rows = json.loads(path.read_text()) if path.exists() else []
            if p.returncode != 0:
                rows.append({"case": f"{cat} worker", "expect": "ok", "outcome": "crash",
                             "detail": f"rc {p.returncode}: {p.stderr[-800:]}", "seconds": 0})
        results[cat] = rows
        counts = {}
        for r in rows:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        summary[cat] = {"cases": len(rows), **counts}
        print(cat, summary[cat], flush=True)
    bad = {"wrong", "accepted_invalid", "unexpected_refusal", "uncaught", "hang", "crash"}
    totals: dict[str, int] = {}
    for s in summary.values():
        for k, n in s.items():
            totals[k] = totals.get(k, 0) + n
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = ""
    doc = {"what": "hostile inputs through anywave.kernels.attention and torch.ops.anywave.attention* (emulator)",
           "commit": commit, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "seconds": round(time.time() - t_all, 1), "totals": totals, "per_category": summary,
           "problems": [dict(r, category=c) for c, rows in results.items() for r in rows if r["outcome"] in bad],
           "cases": results}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print("totals", totals, "problems", len(doc["problems"]), "->", OUT)


if __name__ == "__main__":
    main()
