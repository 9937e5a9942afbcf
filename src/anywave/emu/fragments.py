"""MMA fragments in the emulator (docs/spec.md §8.14): the canonical definition.

A fragment slot holds a whole tile per owner: per **wave** for the wave-scope shape
``m16n16k16`` (array ``[waves, rows*cols]``), per **thread** for the thread-scope shape
``m4n4k4`` (``[lanes, 16]``). The lane layout a target uses is not observable (no ordinary
instruction can name a fragment), so the emulator keeps the tile in row-major order and its
results are the definition: ``mma`` accumulates ``s = c[i][j]; for k: s = fma_f32(a[i][k],
b[k][j], s)``. A/B elements are kept as their exact f32 values. Every slot starts as +0.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anywave.binary.module import DeviceAddr, Instruction, LocalAddr
from anywave.emu import floats as fl
from anywave.emu.alu import Run
from anywave.emu.memory import check_access
from anywave.errors import EmulationError
from anywave.isa.mma import (
    GROUP_ALIGN,
    GROUP_PANEL,
    GROUP_WAVES,
    SHAPES,
    fragment_kinds,
    group_async,
    group_b_offset,
    group_bt,
    group_bt_offset,
    group_n,
    operand_slots,
    row_n,
)
from anywave.isa.types import ScalarType as T

I64 = np.int64
#: alignment (bytes) of a wave-scope tile's base offset and row stride (the 16-byte rows
#: vendor matrix loads such as PTX ``ldmatrix`` need)
WAVE_TILE_ALIGN = 16


def _slot(st: Any, f: int, owners: int, elems: int) -> np.ndarray:
    frags = st.__dict__.setdefault("_fragments", {})
    a = frags.get(f)
    if a is None or a.shape != (owners, elems):
        a = frags[f] = np.zeros((owners, elems), np.float32)
    return a


def _wave_owners(st: Any, ins: Instruction, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(waves executing, their lowest lane) for a wave-scope instruction; every executing wave
    must execute it with all W lanes of a complete wave (spec §8.14, as §8.13)."""
    W = st.W
    m = mask.reshape(-1, W)
    waves = np.flatnonzero(m.any(axis=1))
    low = np.argmax(m[waves], axis=1) if waves.size else np.zeros(0, I64)
    short = ~m[waves].all(axis=1)
    if short.any():
        w = int(np.flatnonzero(short)[0])
        raise EmulationError(
            f"{st.where()}: {ins.mnemonic} must be executed by all {W} lanes of a complete wave, but the wave "
            f"of {st.describe_lane(int(waves[w] * W + low[w]))} executes it with {int(m[waves[w]].sum())} of "
            f"{W} lanes (divergence, a false guard, or a partial wave)")
    return waves, waves * W + low


def _uniform(st: Any, ins: Instruction, reg: int, waves: np.ndarray, lane_ids: np.ndarray, what: str) -> np.ndarray:
    W = st.W
    v = st.regs[reg].reshape(-1, W)[waves]
    ref = st.regs[reg][lane_ids]
    bad = (v != ref[:, None]).any(axis=1)
    if bad.any():
        w = int(np.flatnonzero(bad)[0])
        raise EmulationError(f"{st.where()}: {ins.mnemonic} {what} r{reg} must be wave-uniform, but the wave of "
                             f"{st.describe_lane(int(lane_ids[w]))} holds different values in its lanes")
    return ref


def _tile_bytes(st: Any, ins: Instruction, addr: Any, stride: np.ndarray, idx: np.ndarray, rows: int, cols: int,
                esz: int, wave: bool, store: bool) -> tuple[np.ndarray, np.ndarray, Any]:
    """(flat byte indices [owners, rows*cols*esz] into the memory array, that array, its race
    shadow) for a tile at ``addr`` (offset register value per owner ``idx``) with row stride."""
    base = st.regs[addr.reg][idx].astype(I64) + int(addr.offset)
    stride = stride.astype(I64)
    align = WAVE_TILE_ALIGN if wave else esz
    for what, v in (("tile offset", base), ("row stride", stride)):
        mis = (v % align) != 0
        if mis.any():
            i = int(np.flatnonzero(mis)[0])
            raise EmulationError(f"{st.where()}: {ins.mnemonic} {what} {int(v[i])} is not a multiple of {align} "
                                 f"bytes (spec §8.14), by {st.describe_lane(int(idx[i]))}")
    el = (np.arange(rows, dtype=I64)[:, None] * 0 + np.arange(cols, dtype=I64)[None, :] * esz).reshape(-1)
    row = np.repeat(np.arange(rows, dtype=I64), cols)
    off = base[:, None] + row[None, :] * stride[:, None] + el[None, :]
    who = np.repeat(idx, rows * cols)
    if isinstance(addr, LocalAddr):
        check_access(st, ins, "fragment tile", off.reshape(-1), esz, st.local_bytes, who, "local memory", align=esz)
        flat = st.wgi[idx].astype(I64)[:, None] * st.local_bytes + off
        mem, shadow = st.local, st.local_shadow
    else:
        b = st.launch.buffer(addr.buffer, ins, st)
        if store and not b.writable:
            raise EmulationError(f"store to read-only buffer argument {b.name!r} in {st.where()}")
        check_access(st, ins, f"argument {b.name!r}", off.reshape(-1), esz, b.u8.size, who, "device memory",
                     align=esz)
        flat = off
        mem, shadow = b.u8, b.shadow(st)
    byt = (flat.reshape(-1)[:, None] + np.arange(esz, dtype=I64)[None, :]).reshape(len(idx), -1)
    if shadow is not None:
        thr = np.repeat(st.gthread[idx], byt.shape[1])
        shadow.access_bytes(st, byt.reshape(-1), thr, "write" if store else "read")
    return byt, mem, shadow


def _owners(st: Any, ins: Instruction, mask: np.ndarray, wave: bool) -> tuple[np.ndarray, np.ndarray]:
    """(owner rows of the fragment arrays, a representative lane per owner)."""
    if wave:
        return _wave_owners(st, ins, mask)
    idx = np.flatnonzero(mask)
    return idx, idx


def _nowners(st: Any, wave: bool) -> int:
    return st.N // st.W if wave else st.N


def _fload(ins: Instruction) -> Run:
    d, addr, rs = ins.operands
    kind = fragment_kinds(ins.defn)[0]
    wave = kind.shape.scope == "wave"
    esz = ins.defn.type.nbytes
    conv = {T.F16: fl.f16_bits_to_f32, T.BF16: fl.bf16_bits_to_f32}.get(ins.defn.type)

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, lanes = _owners(st, ins, mask, wave)
        if own.size == 0:
            return
        if wave:
            _uniform(st, ins, addr.reg, own, lanes, "offset register")
            stride = _uniform(st, ins, rs, own, lanes, "row stride")
        else:
            stride = st.regs[rs][lanes]
        byt, mem, _ = _tile_bytes(st, ins, addr, stride, lanes, kind.rows, kind.cols, esz, wave, False)
        raw = mem[byt].reshape(own.size, kind.elems, esz)
        bits = raw.copy().view(np.uint16 if esz == 2 else np.uint32).reshape(own.size, kind.elems)
        vals = conv(bits) if conv is not None else bits.view(np.float32)
        _slot(st, d, _nowners(st, wave), kind.elems)[own] = vals
    return run


def _fstore(ins: Instruction) -> Run:
    addr, f, rs = ins.operands
    kind = fragment_kinds(ins.defn)[1]
    wave = kind.shape.scope == "wave"

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, lanes = _owners(st, ins, mask, wave)
        if own.size == 0:
            return
        if wave:
            _uniform(st, ins, addr.reg, own, lanes, "offset register")
            stride = _uniform(st, ins, rs, own, lanes, "row stride")
        else:
            stride = st.regs[rs][lanes]
        vals = np.ascontiguousarray(_slot(st, f, _nowners(st, wave), kind.elems)[own])
        byt, mem, _ = _tile_bytes(st, ins, addr, stride, lanes, kind.rows, kind.cols, 4, wave, True)
        mem[byt.reshape(-1)] = vals.view(np.uint8).reshape(-1)
    return run


def _fmma(ins: Instruction) -> Run:
    d, a, b, c = ins.operands
    ka, kb, kc = fragment_kinds(ins.defn)[1], fragment_kinds(ins.defn)[2], fragment_kinds(ins.defn)[0]
    shape = kc.shape
    wave = shape.scope == "wave"
    m, n, k = shape.m, shape.n, shape.k

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, _ = _owners(st, ins, mask, wave)
        if own.size == 0:
            return
        no = _nowners(st, wave)
        A = _slot(st, a, no, ka.elems)[own].reshape(-1, m, k)
        B = _slot(st, b, no, kb.elems)[own].reshape(-1, k, n)
        acc = _slot(st, c, no, kc.elems)[own].reshape(-1, m, n)
        _slot(st, d, no, kc.elems)[own] = _fma_chain(A, B, acc)
    return run


def _fma_chain(A: np.ndarray, B: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """``s = acc[i][j]; for k: s = fma_f32(A[i][k], B[k][j], s)`` per owner (A [o, m, k], B [o, k,
    n], acc [o, m, n]), the spec's order; the results canonical, as [o, m*n] f32."""
    for kk in range(A.shape[2]):
        acc = fl.fma_f32(np.broadcast_to(A[:, :, kk, None], acc.shape), np.broadcast_to(B[:, None, kk, :], acc.shape),
                         acc)
    return fl.canon32(acc.reshape(-1)).view(np.float32).reshape(acc.shape[0], -1)


def _felementwise(ins: Instruction) -> Run:
    op = ins.defn.op
    kind = fragment_kinds(ins.defn)[0]
    wave = kind.shape.scope == "wave"
    d = ins.operands[0]

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, lanes = _owners(st, ins, mask, wave)
        if own.size == 0:
            return
        no = _nowners(st, wave)
        if op == "ffill":
            r = ins.operands[1]
            v = _uniform(st, ins, r, own, lanes, "value") if wave else st.regs[r][lanes]
            _slot(st, d, no, kind.elems)[own] = np.repeat(v.view(np.float32)[:, None], kind.elems, axis=1)
            return
        src = _slot(st, ins.operands[1], no, kind.elems)[own]
        if op == "fscale":
            r = ins.operands[2]
            v = _uniform(st, ins, r, own, lanes, "scale") if wave else st.regs[r][lanes]
            out = src * v.view(np.float32)[:, None]
        else:  # fbias: d[i][j] = a[i][j] + bias[j]
            addr: DeviceAddr = ins.operands[2]
            _uniform(st, ins, addr.reg, own, lanes, "offset register")
            one = np.zeros(lanes.size, I64)
            byt, mem, _ = _tile_bytes(st, ins, addr, one, lanes, 1, kind.cols, 4, True, False)
            bias = mem[byt].copy().view(np.float32).reshape(lanes.size, kind.cols)
            out = (src.reshape(-1, kind.rows, kind.cols) + bias[:, None, :]).reshape(own.size, -1)
        res = fl.canon32(out.reshape(-1).astype(np.float32)).view(np.float32)
        _slot(st, d, no, kind.elems)[own] = res.reshape(own.size, -1)
    return run


def _fgmma(ins: Instruction) -> Run:
    """``mma.group``: per wave, accumulators fD+j (j < N/16) += A x B[:, 16j:16j+16], B read from
    local memory in the swizzled panel layout; the four waves of a group execute it together
    with the same B offset and panel stride (spec §8.14)."""
    d, a, addr, rp = ins.operands
    kc, ka = fragment_kinds(ins.defn)[0], fragment_kinds(ins.defn)[1]
    nfrag = group_n(ins.defn) // 16
    asynchronous = group_async(ins.defn)
    bt = group_bt(ins.defn)
    ncols = 16 * nfrag
    conv = fl.bf16_bits_to_f32 if ins.defn.src_type is T.BF16 else fl.f16_bits_to_f32
    kk_, nn_ = np.meshgrid(np.arange(16, dtype=I64), np.arange(ncols, dtype=I64), indexing="ij")

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, lanes = _wave_owners(st, ins, mask)
        if own.size == 0:
            return
        base = _uniform(st, ins, addr.reg, own, lanes, "offset register").astype(I64) + int(addr.offset)
        pstride = _uniform(st, ins, rp, own, lanes, "panel stride").astype(I64)
        G = GROUP_WAVES
        if st.nw % G:
            raise EmulationError(f"{st.where()}: {ins.mnemonic} needs a workgroup of a multiple of {G} waves "
                                 f"(groups of {G} consecutive waves, spec §8.14); this launch has {st.nw} waves of "
                                 f"{st.W} lanes per workgroup")
        grp = own // G
        ug, first = np.unique(grp, return_index=True)
        counts = np.bincount(np.searchsorted(ug, grp), minlength=ug.size)
        if (counts != G).any():
            g = int(np.flatnonzero(counts != G)[0])
            raise EmulationError(
                f"{st.where()}: {ins.mnemonic} must be executed by the {G} waves of a group together, but only "
                f"{int(counts[g])} of the group of {st.describe_lane(int(lanes[first[g]]))} execute it (the other "
                f"waves diverged, or exited)")
        for what, v in (("B tile offset", base), ("panel stride", pstride)):
            ref = v[first][np.searchsorted(ug, grp)]
            if bt and what == "panel stride":
                continue  # unused by the transposed form
            if (v != ref).any():
                i = int(np.flatnonzero(v != ref)[0])
                raise EmulationError(f"{st.where()}: {ins.mnemonic} {what} must be the same in the {G} waves of a "
                                     f"group, but {st.describe_lane(int(lanes[i]))} has {int(v[i])} where its group "
                                     f"has {int(ref[i])}")
            mis = ((v % GROUP_ALIGN) % 32 != 0) | ((v % GROUP_ALIGN) >= 128) if bt else (v % GROUP_ALIGN) != 0
            if mis.any():
                i = int(np.flatnonzero(mis)[0])
                want = f"0, 32, 64 or 96 modulo {GROUP_ALIGN}" if bt else f"a multiple of {GROUP_ALIGN}"
                raise EmulationError(f"{st.where()}: {ins.mnemonic} {what} {int(v[i])} is not {want} bytes "
                                     f"(spec §8.14), by {st.describe_lane(int(lanes[i]))}")
        short = pstride < GROUP_PANEL
        if ncols > 64 and short.any() and not bt:
            i = int(np.flatnonzero(short)[0])
            raise EmulationError(f"{st.where()}: {ins.mnemonic} panel stride {int(pstride[i])} is less than "
                                 f"{GROUP_PANEL} bytes (16 rows of 128), by {st.describe_lane(int(lanes[i]))}")
        if bt:
            bm = (base % GROUP_ALIGN)[:, None, None]
            off = base[:, None, None] - bm + group_bt_offset(kk_[None], nn_[None], bm)
        else:
            off = base[:, None, None] + group_b_offset(kk_[None], nn_[None], pstride[:, None, None])
        off = off.reshape(own.size, -1)
        who = np.repeat(lanes, off.shape[1])
        check_access(st, ins, "B tile", off.reshape(-1), 2, st.local_bytes, who, "local memory", align=2)
        flat = st.wgi[lanes].astype(I64)[:, None] * st.local_bytes + off
        byt = (flat.reshape(-1)[:, None] + np.arange(2, dtype=I64)[None, :]).reshape(own.size, -1)
        if st.local_shadow is not None:
            thr = np.repeat(st.gthread[lanes], byt.shape[1])
            st.local_shadow.access_bytes(st, byt.reshape(-1), thr, "read")
        raw = st.local[byt].copy()
        bits = raw.view(np.uint16).reshape(own.size, 16, ncols)
        if asynchronous:  # in flight until an mma.wait: keep what it read, to check at completion
            _inflight(st).append(_Group(own.copy(), d, nfrag, a, ins.mnemonic, byt, raw, st.where()))
        B = conv(bits)
        no = _nowners(st, True)
        A = _slot(st, a, no, ka.elems)[own].reshape(-1, 16, 16)
        for j in range(nfrag):
            acc = _slot(st, d + j, no, kc.elems)[own].reshape(-1, 16, 16)
            _slot(st, d + j, no, kc.elems)[own] = _fma_chain(A, B[:, :, 16 * j:16 * j + 16], acc)
    return run


def _facc(ins: Instruction) -> Run:
    """The accumulator row and element operations (spec §8.14, "Accumulator operations"), per
    wave on the row-major tiles: ``frowmax``/``frowsum`` over a strip, ``fexp2``, ``fmul``,
    ``fdiv``, ``fmask`` and ``fcvt`` (to an A fragment, kept as the exact values of its elements)."""
    op = ins.defn.op
    ops = ins.operands
    nstrip = row_n(ins.defn) // 16 if op in ("frowmax", "frowsum") else 1

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        own, lanes = _wave_owners(st, ins, mask)
        if own.size == 0:
            return
        no = _nowners(st, True)

        def get(f: int) -> np.ndarray:
            return _slot(st, f, no, 256)[own].reshape(-1, 16, 16)

        with np.errstate(all="ignore"):
            if op in ("frowmax", "frowsum"):
                strip = np.concatenate([get(ops[1] + j) for j in range(nstrip)], axis=2)  # [o, 16, 16 N/16]
                c = get(ops[2])
                if op == "frowmax":
                    m = strip[:, :, 0]
                    for j in range(1, strip.shape[2]):
                        m = fl.max_num(m, strip[:, :, j])
                    out = fl.max_num(c, np.broadcast_to(m[:, :, None], c.shape))
                else:  # the f64 sum of at most 129 f32 terms, rounded once: within the bound
                    tot = strip.astype(np.float64).sum(axis=2)
                    out = (c.astype(np.float64) + tot[:, :, None]).astype(np.float32)
            elif op == "fexp2":
                r = ops[3]
                v = _uniform(st, ins, r, own, lanes, "scale").view(np.float32)[:, None, None]
                a, b = get(ops[1]), get(ops[2])
                x = fl.fma_f32(a, np.broadcast_to(v, a.shape).astype(np.float32), -b)
                out = np.exp2(x.astype(np.float64)).astype(np.float32)
            elif op in ("fmul", "fdiv"):
                a, b = get(ops[1]), get(ops[2])
                out = a * b if op == "fmul" else a / b
            elif op == "fmask":
                ra = _uniform(st, ins, ops[2], own, lanes, "diagonal limit").view(np.int32).astype(I64)
                rb = _uniform(st, ins, ops[3], own, lanes, "column limit").view(np.int32).astype(I64)
                i = np.arange(16, dtype=I64)[None, :, None]
                j = np.arange(16, dtype=I64)[None, None, :]
                keep = ((j - i) <= ra[:, None, None]) & (j < rb[:, None, None])
                src = _slot(st, ops[1], no, 256)[own].reshape(-1, 16, 16)
                res = np.where(keep, src, np.float32(-np.inf)).astype(np.float32)
                _slot(st, ops[0], no, 256)[own] = res.reshape(own.size, -1)
                return
            else:  # fcvt: round to the A fragment's 16-bit type (nearest even), keep the exact value
                a = get(ops[1]).reshape(own.size, -1)
                if ins.defn.type is T.BF16:
                    vals = fl.bf16_bits_to_f32(fl.f32_to_bf16_bits(a))
                else:
                    vals = fl.f16_bits_to_f32(fl.f32_to_f16_bits(a))
                _slot(st, ops[0], no, 256)[own] = vals
                return
        res = fl.canon32(np.asarray(out, np.float32).reshape(-1)).view(np.float32)
        _slot(st, ops[0], no, 256)[own] = res.reshape(own.size, -1)
    return run


@dataclass
class _Group:
    """One issue of ``mma.group.async``, still in flight in (some of) the waves that issued it."""

    waves: np.ndarray  # int64: batch waves still waiting for it
    strip: int  # first accumulator slot
    nfrag: int
    a: int  # A slot
    mnemonic: str
    byt: np.ndarray  # int64 [waves, bytes]: flat local bytes of B it read
    data: np.ndarray  # uint8 [waves, bytes]: their values at issue
    where: str


def _inflight(st: Any) -> list[_Group]:
    return st.__dict__.setdefault("_mma_inflight", [])


def _retire(st: Any, g: _Group, rows: np.ndarray) -> None:
    """Complete group ``g`` in its waves ``rows`` (indices into g.waves): the B bytes it read
    must still hold the values it read (spec §8.14: no thread may write them while it is in
    flight)."""
    now = st.local[g.byt[rows].reshape(-1)]
    was = g.data[rows].reshape(-1)
    bad = now != was
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        wave = int(g.waves[rows][i // g.byt.shape[1]])
        byte = int(g.byt[rows].reshape(-1)[i] % st.local_bytes)
        raise EmulationError(
            f"{st.where()}: local byte {byte}, read as B by the mma.group.async of {g.where} (wave {wave % st.nw} of "
            f"its workgroup), was written while that product was in flight (before an mma.wait completed it); a "
            f"target may read either value (spec §8.14)")


def _fwait(ins: Instruction) -> Run:
    keep = int(ins.operands[0])

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        groups = _inflight(st)
        if not groups:
            return
        own, _ = _wave_owners(st, ins, mask)
        if own.size == 0:
            return
        newer = np.zeros(st.N // st.W, np.int64)  # per wave: in-flight groups issued after this one
        for g in reversed(groups):
            cnt = newer[g.waves]
            done = np.isin(g.waves, own) & (cnt >= keep)
            newer[g.waves] += 1
            if done.any():
                rows = np.flatnonzero(done)
                _retire(st, g, rows)
                left = np.flatnonzero(~done)
                g.waves, g.byt, g.data = g.waves[left], g.byt[left], g.data[left]
        st.__dict__["_mma_inflight"] = [g for g in groups if g.waves.size]
    return run


def _check_inflight(ins: Instruction, run: Run) -> Run:
    """Wrap a fragment instruction's semantics: it may not touch the slots of an
    ``mma.group.async`` still in flight in an executing wave (spec §8.14): write its A slot,
    or read or write its accumulators (except another ``mma.group.async`` of the same shape into
    the same strip, which the target orders after it)."""
    slots = operand_slots(ins.defn, ins.operands)
    writes = {v for n, v, _ in slots if ins.defn.operands[n].is_dest}
    accs = {v for _, v, k in slots if k.role == "c"}
    chain = group_async(ins.defn)
    first = ins.operands[0] if ins.defn.op == "fgmma" else None

    def checked(st: Any, mask: np.ndarray, dense: bool) -> None:
        groups = st.__dict__.get("_mma_inflight")
        if groups:
            waves = np.unique(np.flatnonzero(mask) // st.W)
            for g in groups:
                if not np.isin(g.waves, waves).any():
                    continue
                strip = set(range(g.strip, g.strip + g.nfrag))
                if chain and g.mnemonic == ins.mnemonic and g.strip == first:
                    hit = writes & {g.a}  # the chain itself: only a write of the A slot in flight
                else:
                    hit = ((writes | accs) & strip) | (writes & {g.a})
                if hit:
                    w = int(g.waves[np.isin(g.waves, waves)][0])
                    raise EmulationError(
                        f"{st.where()}: {ins.mnemonic} uses fragment f{min(hit)}, which the mma.group.async of "
                        f"{g.where} still uses in wave {w % st.nw} of its workgroup (in flight until an mma.wait "
                        f"completes it; spec §8.14)")
        run(st, mask, dense)
    return checked


def finish_batch(st: Any) -> None:
    """At the end of a batch of workgroups: a group never completed by an mma.wait may not have
    had its B bytes written after it either (the target reads them some time after the issue)."""
    for g in _inflight(st):
        _retire(st, g, np.arange(g.waves.size))
    st.__dict__["_mma_inflight"] = []


def _guarded(factory):  # noqa: ANN001, ANN202
    return lambda ins: _check_inflight(ins, factory(ins))


#: the emulator's semantics of the MMA fragment instructions, by ``InstrDef.sem``
SEMANTICS = {"mma.fload": _guarded(_fload), "mma.fstore": _guarded(_fstore), "mma.fmma": _guarded(_fmma),
             "mma.ffill": _guarded(_felementwise), "mma.fscale": _guarded(_felementwise),
             "mma.fbias": _guarded(_felementwise), "mma.fgmma": _guarded(_fgmma), "mma.fwait": _fwait,
             **{f"mma.{op}": _guarded(_facc) for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask",
                                                       "fcvt")}}
assert set(SHAPES) == {"m16n16k16", "m4n4k4"}
