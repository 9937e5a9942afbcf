"""Wave-collective operations and MMA (docs/decisions.md, "Wave operations", "MMA").

A batch's lanes are ``[waves, W]`` when reshaped (every workgroup is padded to whole
waves; lanes beyond the workgroup size never exist and are never active). The lanes that
execute a collective are the ``mask`` lanes (active, and where a guard is given, the
guard holds); only they are sources and only their destinations are written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anywave.binary.module import Instruction
from anywave.emu import floats as fl
from anywave.emu.alu import Run, rp, w32, w64, wp
from anywave.emu.memory import check_access
from anywave.errors import EmulationError
from anywave.isa.semantics import exclusive_first, identity
from anywave.isa.types import ScalarType as T

U32, U64, I64 = np.uint32, np.uint64, np.int64
NEG_ZERO = np.float32(-0.0)


def _shfl(ins: Instruction) -> Run:
    d, a, b = ins.operands
    mode = ins.defn.variant

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        av = st.regs[a].reshape(-1, W)
        bv = st.regs[b].reshape(-1, W).astype(I64)
        lane = np.arange(W, dtype=I64)
        if mode == "idx":
            src = bv
        elif mode == "up":
            src = lane - bv
        elif mode == "down":
            src = lane + bv
        else:
            src = lane ^ bv
        ok = (src >= 0) & (src < W)
        srcc = np.where(ok, src, lane)
        ok &= np.take_along_axis(m, srcc, 1)
        res = np.where(ok, np.take_along_axis(av, srcc, 1), av)
        w32(st, d, res.reshape(-1), mask, False)
    return run


def _bcast(ins: Instruction) -> Run:
    d, a, b = ins.operands

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        av = st.regs[a].reshape(-1, W)
        bv = st.regs[b].reshape(-1, W)
        low = np.argmax(m, axis=1)  # lowest active lane (0 for waves with none: unused)
        rows = np.arange(m.shape[0])
        L = bv[rows, low].astype(I64)
        ok = L < W
        Lc = np.where(ok, L, 0)
        ok &= m[rows, Lc]
        src = np.where(ok, Lc, low)
        res = np.repeat(av[rows, src], W)
        w32(st, d, res, mask, False)
    return run


def _ballot(ins: Instruction) -> Run:
    d, p = ins.operands

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        bits = (mask & rp(st, p)).reshape(-1, W).astype(U64) << np.arange(W, dtype=U64)
        val = np.bitwise_or.reduce(bits, axis=1)
        w64(st, d, np.repeat(val, W), mask, False)
    return run


def _any_all(ins: Instruction) -> Run:
    d, p = ins.operands
    is_any = ins.defn.op == "any"

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        v = rp(st, p).reshape(-1, W)
        res = (v & m).any(axis=1) if is_any else (v | ~m).all(axis=1)
        wp(st, d, np.repeat(res, W), mask, False)
    return run


def _butterfly(s: np.ndarray, fn: Any) -> np.ndarray:
    W = s.shape[1]
    lane = np.arange(W)
    k = 1
    while k < W:
        s = fn(s, s[:, lane ^ k])
        k *= 2
    return s


def _wred(ins: Instruction) -> Run:
    d, a = ins.operands
    op = ins.defn.combine
    t = ins.defn.type
    # what inactive lanes contribute: the combine's identity (anywave.isa.semantics)
    ident_bits = U32(identity(ins.defn))

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        if t is T.F32:
            x = st.regs[a].view(np.float32).reshape(-1, W)
            ident = ident_bits.view(np.float32)
            if op == "add":
                s = _butterfly(np.where(m, x, ident), np.add)
            else:
                fn = fl.min_num if op == "min" else fl.max_num
                s = _butterfly(np.where(m, x, ident), fn)
            res = fl.canon32(s[:, 0])
        else:
            dt = np.int32 if t.is_signed else np.uint32
            x = st.regs[a].view(dt).reshape(-1, W)
            if op == "add":
                res = np.where(m, x.view(U32), ident_bits).sum(axis=1, dtype=U64).astype(U32)
            elif op in ("min", "max"):
                ident = ident_bits.view(dt)
                red = np.min if op == "min" else np.max
                res = red(np.where(m, x, ident), axis=1).view(U32) if dt is np.uint32 else \
                    red(np.where(m, x, ident), axis=1).astype(np.int32).view(U32)
            else:
                ufn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
                res = ufn.reduce(np.where(m, x.view(U32), ident_bits), axis=1)
        w32(st, d, np.repeat(np.asarray(res, U32), W), mask, False)
    return run


def _wscan(ins: Instruction) -> Run:
    d, a = ins.operands
    incl = ins.defn.variant == "incl"
    t = ins.defn.type
    ident_bits = U32(identity(ins.defn))  # -0.0 for f32, 0 for integers
    first_bits = U32(exclusive_first(ins.defn) or 0)  # lane 0 of an exclusive scan: +0.0 / 0

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        if t is T.F32:
            ident = ident_bits.view(np.float32)
            first = first_bits.view(np.float32)
            s = np.where(m, st.regs[a].view(np.float32).reshape(-1, W), ident)
        else:
            ident = ident_bits
            first = first_bits
            s = np.where(m, st.regs[a].reshape(-1, W), ident)
        k = 1
        while k < W:
            shifted = np.empty_like(s)
            shifted[:, :k] = ident
            shifted[:, k:] = s[:, :-k]
            s = shifted + s  # lower lanes' partial on the left
            k *= 2
        if not incl:
            ex = np.empty_like(s)
            ex[:, 0] = first
            ex[:, 1:] = s[:, :-1]
            s = ex
        res = fl.canon32(s.reshape(-1)) if t is T.F32 else s.reshape(-1)
        w32(st, d, res, mask, False)
    return run


MMA_TILE_ALIGN = 32  # bytes


def _mma(ins: Instruction) -> Run:
    rd, ra, rb, rc = ins.operands
    src = ins.defn.src_type
    conv = fl.f16_bits_to_f32 if src is T.F16 else fl.bf16_bits_to_f32

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        W = st.W
        m = mask.reshape(-1, W)
        waves = np.flatnonzero(m.any(axis=1))
        if waves.size == 0:
            return
        low = np.argmax(m[waves], axis=1)
        lane_ids = waves * W + low
        # spec §8.13: executed by all W lanes of a complete wave (no divergence, no false
        # guard, not the partial last wave) -- what vendor matrix units require
        short = ~m[waves].all(axis=1)
        if short.any():
            w = int(np.flatnonzero(short)[0])
            raise EmulationError(
                f"{st.where()}: {ins.mnemonic} must be executed by all {W} lanes of a complete wave, "
                f"but the wave of {st.describe_lane(int(lane_ids[w]))} executes it with "
                f"{int(m[waves[w]].sum())} of {W} lanes (divergence, a false guard, or a partial wave)")
        offs = []
        for r in (rd, ra, rb, rc):
            v = st.regs[r].reshape(-1, W)[waves]
            ref = v[np.arange(waves.size), low]
            nonuni = (v != ref[:, None]) & m[waves]
            if nonuni.any():
                w = int(np.flatnonzero(nonuni.any(axis=1))[0])
                raise EmulationError(
                    f"{st.where()}: MMA operand r{r} must be wave-uniform, but the wave of "
                    f"{st.describe_lane(int(lane_ids[w]))} holds different values in its active lanes")
            offs.append(ref.astype(I64))
        base = st.wgi[lane_ids] * st.local_bytes
        tiles = []
        for off, esz in zip(offs, (4, 2, 2, 4), strict=False):
            # a tile is 256 elements, in bounds as a whole; its offset a multiple of 32 bytes
            # (spec §8.13: the alignment vendor matrix loads need)
            check_access(st, ins, "MMA tile", off, 256 * esz, st.local_bytes, lane_ids, "local memory",
                         align=MMA_TILE_ALIGN)
            tiles.append((base + off)[:, None] + np.arange(256 * esz))
        sh = st.local_shadow
        if sh is not None:
            # checked mode: the wave's lowest active lane stands for the wave; A, B, C are read
            # (and must have been written), then D is written (and becomes initialised)
            thr = st.gthread[lane_ids]
            for k in (1, 2, 3):
                t = tiles[k]
                sh.access_bytes(st, t.reshape(-1), np.repeat(thr, t.shape[1]), "read")
            sh.access_bytes(st, tiles[0].reshape(-1), np.repeat(thr, tiles[0].shape[1]), "write")
        A = conv(st.local[tiles[1]].view(np.uint16)).reshape(-1, 16, 16)
        B = conv(st.local[tiles[2]].view(np.uint16)).reshape(-1, 16, 16)
        acc = st.local[tiles[3]].view(np.float32).reshape(-1, 16, 16).copy()
        for k in range(16):
            acc = fl.fma_f32(np.broadcast_to(A[:, :, k, None], acc.shape),
                             np.broadcast_to(B[:, None, k, :], acc.shape), acc)
        out = fl.canon32(acc.reshape(-1)).reshape(waves.size, -1).view(np.uint8)
        # waves write in order: for overlapping D tiles the later wave wins
        for i in range(waves.size):
            st.local[tiles[0][i]] = out[i]
    return run


#: the emulator's semantics of the wave collectives and the tile MMA, by ``InstrDef.sem``
#: (the fragment instructions: :data:`anywave.emu.fragments.SEMANTICS`)
SEMANTICS = {"wave.shfl": _shfl, "wave.bcast": _bcast, "wave.ballot": _ballot, "wave.any": _any_all,
             "wave.all": _any_all, "wave.wred": _wred, "wave.wscan": _wscan, "mma.mma": _mma}
