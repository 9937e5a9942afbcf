"""The kernel language's accumulator operations and ``aw.mma_group_bt`` (docs/spec.md §8.14,
capability ``mma_acc``): results on the emulator at several W against NumPy, compile errors that
name the mistake, their PTX lowering (sm_90: wgmma with a K-major descriptor; quad shuffles for
the row reductions) and the verifier's check of the transposed tile's immediate."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import anywave as aw
from anywave.compiler.errors import CompileError


@aw.kernel
def _acc_ops(x: aw.In[aw.f32], y: aw.In[aw.f32], ident: aw.In[aw.u16], out: aw.Out[aw.f32], s: aw.f32, lim: aw.i32,
             cols: aw.i32):
    xs = aw.fragments(4, "acc")
    yf = aw.fragment("acc")
    r = aw.fragments(8, "acc")
    pa = aw.fragment("a", aw.bf16)
    eye = aw.fragment("b", aw.bf16)
    q = aw.workgroup_id(0) * aw.num_waves() + aw.wave_id()
    for j in aw.static_range(4):
        aw.mma_load(xs[j], x, q * 1024 + 16 * j, 64)
    aw.mma_load(yf, y, q * 256, 16)
    aw.mma_load(eye, ident, 0, 16)
    aw.mma_rowmax(r[0], xs, yf)
    aw.mma_rowsum(r[1], xs[0], yf)
    aw.mma_exp2(r[2], xs[0], xs[1], s)
    aw.mma_mul(r[3], xs[0], xs[1])
    aw.mma_div(r[4], xs[0], yf)
    aw.mma_mask(r[5], xs[0], lim, cols)
    aw.mma_cvt(pa, yf)
    aw.mma_sync(r[6], pa, eye, r[7])
    aw.mma_scale(r[7], yf, s)
    for j in aw.static_range(8):
        aw.mma_store(out, r[j], q * 2048 + 256 * j, 16)


@pytest.mark.parametrize("W", [8, 32, 64])
def test_accumulator_operations_on_the_emulator(W):
    rng = np.random.default_rng(W)
    waves = 2 * (64 // W)
    X = rng.integers(-5, 6, (waves, 16, 64)).astype(np.float32)
    Y = (2.0 ** rng.integers(-2, 3, (waves, 16, 16)) * 1.3).astype(np.float32)
    out = np.zeros(waves * 2048, np.float32)
    ident = np.eye(16).astype(ml_dtypes.bfloat16).reshape(-1).view(np.uint16)
    _acc_ops(X.reshape(-1), Y.reshape(-1), ident, out, np.float32(0.5), -2, 11, grid=(2,), workgroup=(64,),
             target="emulator", wave_width=W)
    o = out.reshape(waves, 8, 16, 16)
    i, j = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    for q in range(waves):
        x, y = X[q].astype(np.float64), Y[q].astype(np.float64)
        x0, x1 = x[:, :16], x[:, 16:32]
        want = [np.maximum(y, x.max(1, keepdims=True)), y + x0.sum(1, keepdims=True), np.exp2(x0 * 0.5 - x1),
                x0 * x1, (x0 / y).astype(np.float32), np.where((j - i <= -2) & (j < 11), x0, -np.inf),
                Y[q].astype(ml_dtypes.bfloat16).astype(np.float64), y * 0.5]
        for n, w in enumerate(want):
            np.testing.assert_array_equal(o[q, n], np.asarray(w, np.float32), err_msg=f"wave {q}, result {n}")


_SERIAL = iter(range(10**6))


def _compile_src(body: str, tmp_path):
    """Compile a small kernel whose body is ``body`` (kernels are read from their source file)."""
    import importlib.util

    src = ("import anywave as aw\n\n\n@aw.kernel\ndef k(out: aw.Out[aw.f32]):\n    a = aw.fragments(4, 'acc')\n"
           "    b = aw.fragments(4, 'acc')\n    fa = aw.fragment('a', aw.bf16)\n"
           "    t = aw.local_array(aw.u32, (4096,), align=1024)\n" + body)
    path = tmp_path / f"acc_kernel_{next(_SERIAL)}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k.compile()


@pytest.mark.parametrize("body,match", [
    ("    aw.mma_rowmax(a[0], (a[0], a[1], a[2], b[1]), a[1])\n", "must be consecutive"),
    ("    aw.mma_rowsum(a[0], (a[0], a[1], a[2]), a[1])\n", "N must be one of 16, 64, 128"),
    ("    aw.mma_cvt(a[0], a[1])\n", "expected an aw.fragment\\('a', ...\\)"),
    ("    aw.mma_group_bt(a, fa, t, 16)\n", "not 0, 32, 64 or 96 modulo 1024"),
    ("    aw.mma_group_bt(a, fa, t, 16384)\n", "reads 64 rows of 128 bytes"),
    ("    aw.mma_mul(a[0], fa, a[1])\n", "aw.mma_mul a: expected an aw.fragment\\('acc'"),
])
def test_mistakes_are_named(body, match, tmp_path):
    with pytest.raises(CompileError, match=match):
        _compile_src(body, tmp_path)


def test_ptx_lowering_and_the_verifier(tmp_path):
    from anywave.backends import ptx
    from anywave.binary.verify import verify

    mod = _compile_src("    aw.mma_group_bt(a, fa, t, 8192 + 96)\n    aw.mma_rowmax(b[0], a, b[0])\n"
                       "    aw.mma_cvt(fa, b[0])\n    aw.mma_store(out, b[0], 0, 16)\n", tmp_path)
    text = ptx.translate(mod, "sm_90").text
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in text and ", 1, 1, 1, 0;" in text
    assert text.count("shfl.sync.bfly.b32") == 4 and "cvt.rn.bf16x2.f32" in text
    sm80 = ptx.translate(mod, "sm_80").text
    assert "wgmma" not in sm80 and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in sm80
    import dataclasses

    k = mod.kernels[0]
    at = next(n for n, i in enumerate(k.code) if i.defn.mnemonic.startswith("mma.group.bt"))
    ins = k.code[at]
    assert ins.operands[2].offset % 1024 == 96
    verify(mod)
    bad = dataclasses.replace(ins, operands=(*ins.operands[:2], dataclasses.replace(ins.operands[2], offset=8192 + 16),
                                             *ins.operands[3:]))
    code = list(k.code)
    code[at] = bad
    mod2 = dataclasses.replace(mod, kernels=[dataclasses.replace(k, code=type(k.code)(code))])
    with pytest.raises(Exception, match="not 0, 32, 64 or 96 modulo 1024"):
        verify(mod2)
