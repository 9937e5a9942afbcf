"""Local and device memory: loads, stores, atomics and checked-mode race detection.

Addresses are byte offsets: ``buffer[r + imm]`` into a buffer argument (a ``uint8`` view
of the caller's array, zero-copy) or ``[r + imm]`` into the workgroup's local memory
(one flat ``uint8`` array per batch, ``local_memory`` bytes per workgroup). Every access
is bounds- and alignment-checked (docs/decisions.md, "Memory"); a violation raises
:class:`~anywave.errors.EmulationError` naming the argument, byte offset, thread and
instruction.

Serialisation order: lanes in increasing (workgroup linear id, thread linear id) order,
which is the batch's lane order. For plain stores from several lanes to the same
address in one instruction the *last* lane in that order wins (checked mode reports it
as a race). Atomics return exactly what executing the lanes one after the other in that
order returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anywave.binary.module import Instruction
from anywave.emu.alu import Run, r64
from anywave.errors import EmulationError, OutOfBoundsError
from anywave.isa.semantics import identity
from anywave.isa.table import Operand
from anywave.isa.types import ScalarType as T

U32, U64, I64 = np.uint32, np.uint64, np.int64
_VIEW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def elem_view(u8: np.ndarray, size: int) -> np.ndarray:
    """``u8`` reinterpreted as unsigned elements of ``size`` bytes (trailing bytes dropped)."""
    n = (u8.size // size) * size
    return u8[:n].view(_VIEW[size])


def _last_wins(e: np.ndarray) -> np.ndarray | None:
    """Indices of the last occurrence of each distinct value of e, or None if all distinct
    (cheap test first: strictly increasing addresses, the coalesced case)."""
    if e.size < 2 or bool(np.all(e[1:] > e[:-1])):
        return None
    rev = e[::-1]
    _, first = np.unique(rev, return_index=True)
    if first.size == e.size:
        return None
    return np.sort(e.size - 1 - first)


# ----------------------------------------------------------------------------- addressing

def _offsets(st: Any, ins: Instruction, addr: Any, kind: Operand, idx: np.ndarray) -> np.ndarray:
    """Byte offsets (int64) for the lanes idx; a 64-bit pair offset >= 2^62 is clamped to
    a value that fails the bounds check."""
    if kind is Operand.DADDR64:
        v = take(r64(st, addr.reg), idx)
        big = v >= np.uint64(1 << 62)
        off = np.where(big, np.uint64(1 << 62), v).astype(I64)
    else:
        off = take(st.regs[addr.reg], idx).astype(I64)
    return off + int(addr.offset)


def check_access(st: Any, ins: Instruction, what: str, off: np.ndarray, size: int, limit: int,
                 idx: np.ndarray, space: str, align: int | None = None) -> None:
    """Raise EmulationError for the first lane whose [off, off+size) leaves [0, limit) or is
    misaligned: off must be a multiple of ``align`` (a power of two; default ``size``)."""
    if off.size == 0:
        return
    if int(off.min()) < 0 or int(off.max()) > limit - size:
        bad = (off < 0) | (off > limit - size)
        i = int(np.flatnonzero(bad)[0])
        raise OutOfBoundsError(
            f"out-of-bounds {space} access in {st.where()}: {what} byte offset {int(off[i])} "
            f"({size}-byte access; {limit} bytes, valid offsets 0..{max(limit - size, -1)}) by "
            f"{st.describe_lane(int(idx[i]))}; {int(bad.sum())} lane(s) out of bounds")
    align = size if align is None else align
    if align > 1 and int(np.bitwise_or.reduce(off)) & (align - 1):
        mis = (off & (align - 1)) != 0
        i = int(np.flatnonzero(mis)[0])
        raise EmulationError(
            f"misaligned {space} access in {st.where()}: {what} byte offset {int(off[i])} is not a "
            f"multiple of {align} ({'the access size' if align == size else 'the required alignment'}), by "
            f"{st.describe_lane(int(idx[i]))}")


def take(row: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """row[idx], without the gather when idx is every lane."""
    return row if idx.size == row.size else row[idx]


def put(row: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
    """row[idx] = vals, without the scatter when idx is every lane."""
    if idx.size == row.size:
        row[:] = vals
    else:
        row[idx] = vals


class _Target:
    """Where one memory instruction's lanes go: a flat uint8 array plus flat offsets."""

    __slots__ = ("u8", "flat", "shadow", "label")

    def __init__(self, u8: np.ndarray, flat: np.ndarray, shadow: Any, label: Any) -> None:
        self.u8 = u8
        self.flat = flat
        self.shadow = shadow
        self.label = label


def _resolve(st: Any, ins: Instruction, addr: Any, kind: Operand, idx: np.ndarray, size: int,
             store: bool) -> _Target:
    if kind is Operand.LADDR:
        off = _offsets(st, ins, addr, kind, idx)
        check_access(st, ins, "local memory", off, size, st.local_bytes, idx, "local memory")
        flat = take(st.wgi, idx) * st.local_bytes + off
        return _Target(st.local, flat, st.local_shadow, None)
    b = st.launch.buffer(addr.buffer, ins, st)
    if store and not b.writable:
        raise EmulationError(
            f"store to read-only buffer argument {b.name!r} in {st.where()}; the kernel's ABI "
            f"declares it 'read' (declare it write or readwrite)")
    off = _offsets(st, ins, addr, kind, idx)
    check_access(st, ins, f"argument {b.name!r}", off, size, b.u8.size, idx, "device memory")
    return _Target(b.u8, off, b.shadow(st), b.name)


def _contiguous(st: Any, addr: Any, kind: Operand, idx: np.ndarray, size: int,
                limit: int) -> int | None:
    """The first element index when lanes ``idx`` access consecutive, in-bounds, aligned
    elements of a device buffer (lane i at byte ``start + i*size``: the coalesced case),
    else None (then the general path checks and reports). Needs no gather or scatter."""
    if kind is not Operand.DADDR:
        return None
    row = take(st.regs[addr.reg], idx)
    n = row.size
    v0 = int(row[0])
    if v0 + (n - 1) * size >= 1 << 32:
        return None
    d = row - st.launch.ramp(size, n)  # uint32; constant iff row[i] = v0 + i*size exactly
    if int(d.min()) != v0 or int(d.max()) != v0:
        return None
    start = v0 + int(addr.offset)
    if start < 0 or start + n * size > limit or start % size:
        return None
    return start // size


# ----------------------------------------------------------------------------- ld / st

def _load(ins: Instruction) -> Run:
    d, addr = ins.operands
    kind = ins.defn.operands[1]
    t = ins.defn.type
    size = t.nbytes
    shift = size.bit_length() - 1

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        idx = st.lanes(mask)
        if idx.size == 0:
            return
        if size <= 8 and not st.launch.check:
            b = st.launch.buffer(addr.buffer, ins, st) if kind is Operand.DADDR else None
            e0 = None if b is None else _contiguous(st, addr, kind, idx, size, b.u8.size)
            if e0 is not None:
                vals = elem_view(b.u8, size)[e0:e0 + idx.size]
                _put_loaded(st, d, idx, vals, size, t.is_signed)
                return
        tg = _resolve(st, ins, addr, kind, idx, size, False)
        if tg.shadow is not None:
            tg.shadow.access(st, tg.flat, size, idx, write=False)
        if size == 16:
            v32 = elem_view(tg.u8, 4)
            q = (tg.flat >> 2)
            for k in range(4):
                put(st.regs[d + k], idx, v32[q + k])
            return
        view = elem_view(tg.u8, size)
        _put_loaded(st, d, idx, view[tg.flat >> shift], size, t.is_signed)
    return run


def _put_loaded(st: Any, d: int, idx: np.ndarray, vals: np.ndarray, size: int, signed: bool) -> None:
    """Write loaded elements (unsigned, ``size`` bytes) to register d (pair for 8 bytes)."""
    if size == 8:
        w = vals.view(U32).reshape(-1, 2)  # little-endian: low word first
        put(st.regs[d], idx, w[:, 0])
        put(st.regs[d + 1], idx, w[:, 1])
        return
    if signed:
        vals = vals.view(np.int8 if size == 1 else np.int16).astype(np.int32).view(U32)
    put(st.regs[d], idx, vals)


def _store(ins: Instruction) -> Run:
    addr, s = ins.operands
    kind = ins.defn.operands[0]
    size = ins.defn.type.nbytes
    shift = size.bit_length() - 1

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        idx = st.lanes(mask)
        if idx.size == 0:
            return
        if size <= 8 and kind is Operand.DADDR and not st.launch.check:
            b = st.launch.buffer(addr.buffer, ins, st)
            e0 = _contiguous(st, addr, kind, idx, size, b.u8.size) if b.writable else None
            if e0 is not None:  # distinct consecutive elements: no last-wins resolution
                dst = elem_view(b.u8, size)[e0:e0 + idx.size]
                if size == 8:
                    w = dst.view(U32).reshape(-1, 2)
                    w[:, 0] = take(st.regs[s], idx)
                    w[:, 1] = take(st.regs[s + 1], idx)
                else:
                    dst[:] = take(st.regs[s], idx)  # narrow stores keep the low bits
                return
        tg = _resolve(st, ins, addr, kind, idx, size, True)
        if tg.shadow is not None:
            tg.shadow.access(st, tg.flat, size, idx, write=True)
        if size == 16:
            e = ((tg.flat >> 2)[:, None] + np.arange(4)).reshape(-1)
            vals = np.stack([take(st.regs[s + k], idx) for k in range(4)], axis=1).reshape(-1)
            view = elem_view(tg.u8, 4)
        else:
            e = tg.flat >> shift
            if size == 8:
                vals = take(r64(st, s), idx)
            else:
                vals = take(st.regs[s], idx).astype(_VIEW[size])
            view = elem_view(tg.u8, size)
        keep = _last_wins(e)
        if keep is not None:
            e, vals = e[keep], vals[keep]
        view[e] = vals
    return run


# ----------------------------------------------------------------------------- atomics

def _seg_scan(v: np.ndarray, seg: np.ndarray, fn: Any) -> np.ndarray:
    """Inclusive segmented scan (Hillis-Steele) of v with associative ufunc fn; segments are
    runs of equal values in seg (sorted)."""
    s = v.copy()
    n = s.size
    k = 1
    while k < n:
        same = seg[k:] == seg[:-k]
        s[k:] = np.where(same, fn(s[:-k], s[k:]), s[k:])
        k *= 2
    return s


_INT_ATOM = {"add": np.add, "sub": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor, "min": np.minimum, "max": np.maximum}


def _identity(op: str, dt: np.dtype) -> Any:
    """The identity of ``op`` as a value of dt (int32 or uint32): anywave.isa.semantics."""
    bits = identity(op, T.I32 if dt.kind == "i" else T.U32)
    return np.uint32(bits).view(dt)


def atomic_apply(view: np.ndarray, e: np.ndarray, v: np.ndarray, op: str, t: T,
                 cmp: np.ndarray | None = None) -> np.ndarray:
    """Apply one atomic instruction's lanes to ``view`` (uint32 elements ``e``, in lane
    order) and return the old values (uint32), as executing them one by one in order."""
    n = e.size
    order = np.argsort(e, kind="stable")
    es = e[order]
    starts = np.ones(n, bool)
    starts[1:] = es[1:] != es[:-1]
    if starts.all():
        old = view[e]
        view[e] = _combine(op, t, old, v, cmp)
        return old
    vs = v[order]
    seg = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.append(first[1:] - 1, n - 1)
    mem0 = view[es[first]]  # initial value per segment
    if op in _INT_ATOM and t is not T.F32:
        dt = np.dtype(np.int32) if t.is_signed else np.dtype(np.uint32)
        x = vs.view(dt) if op != "sub" else (U32(0) - vs).view(dt)
        fn = _INT_ATOM[op]
        inc = _seg_scan(x, seg, fn)
        excl = np.empty_like(inc)
        excl[1:] = inc[:-1]
        excl[starts] = _identity(op, dt)
        m0 = mem0.view(dt)[seg]
        old_s = fn(m0, excl).view(U32)
        view[es[first]] = fn(mem0.view(dt), inc[last]).view(U32)
    elif op == "exch":
        old_s = np.empty(n, U32)
        old_s[1:] = vs[:-1]
        old_s[starts] = mem0
        view[es[first]] = vs[last]
    else:
        # CAS and f32 add: sequential by nature; loop over conflict rounds (lanes of equal
        # rank within their address group are distinct addresses) or over groups
        rank = np.arange(n) - first[seg]
        rounds = int(rank.max()) + 1
        old_s = np.empty(n, U32)
        cs = cmp[order] if cmp is not None else None
        if rounds <= first.size:
            for r in range(rounds):
                sel = np.flatnonzero(rank == r)
                cur = view[es[sel]]
                old_s[sel] = cur
                view[es[sel]] = _combine(op, t, cur, vs[sel], None if cs is None else cs[sel])
        else:
            for g in range(first.size):
                a, b = int(first[g]), int(last[g]) + 1
                if op == "cas":
                    cur = view[es[a]]
                    for i in range(a, b):
                        old_s[i] = cur
                        if cur == cs[i]:
                            cur = vs[i]
                    view[es[a]] = cur
                else:
                    seq = np.concatenate(([view[es[a]]], vs[a:b])).view(np.float32)
                    acc = np.add.accumulate(seq, dtype=np.float32)
                    bits = _canon_f32(acc)
                    old_s[a:b] = bits[:-1]
                    view[es[a]] = bits[-1]
    old = np.empty(n, U32)
    old[order] = old_s
    return old


def _canon_f32(x: np.ndarray) -> np.ndarray:
    from anywave.emu.floats import canon32
    return canon32(x)


def _combine(op: str, t: T, old: np.ndarray, v: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    if op == "cas":
        return np.where(old == cmp, v, old)
    if op == "exch":
        return v
    if t is T.F32:
        return _canon_f32(old.view(np.float32) + v.view(np.float32))
    if op == "sub":
        return old - v
    dt = np.int32 if t.is_signed else np.uint32
    return _INT_ATOM[op](old.view(dt), v.view(dt)).view(U32)


def _atomic(ins: Instruction) -> Run:
    defn = ins.defn
    has_dest = bool(defn.dests)  # atom returns the old value, red does not
    ops = list(ins.operands)
    d = ops.pop(0) if has_dest else None
    addr = ops[0]
    kind = defn.operands[defn.srcs[0]]  # the address operand (laddr / daddr)
    op = ins.defn.combine
    t = ins.defn.type
    vreg = ops[1]
    creg = None
    if op == "cas":
        # atom.cas d, addr, cmp, v
        creg, vreg = ops[1], ops[2]

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        idx = st.lanes(mask)
        if idx.size == 0:
            return
        tg = _resolve(st, ins, addr, kind, idx, 4, True)
        if tg.shadow is not None:
            tg.shadow.access(st, tg.flat, 4, idx, write=True, atomic=True)
        v = take(st.regs[vreg], idx)
        c = take(st.regs[creg], idx) if creg is not None else None
        old = atomic_apply(elem_view(tg.u8, 4), tg.flat >> 2, v, op, t, c)
        if d is not None:
            put(st.regs[d], idx, old)
    return run


#: the emulator's semantics of loads, stores and atomics, by ``InstrDef.sem``
SEMANTICS = {"mem.ld": _load, "mem.st": _store, "atomic.atom": _atomic, "atomic.red": _atomic}


# ----------------------------------------------------------------------------- races

class RaceShadow:
    """Checked-mode shadow state for a memory region (per byte).

    Since the last synchronisation (a barrier for local memory; the launch for device
    memory) each byte remembers: ``writer``/``writer_ins``, the last plain write (global
    thread number, instruction id); ``reader``/``reader2``, two distinct plain readers
    (enough to know whether any thread other than a given one has read); ``atom``/
    ``atom2``, two distinct threads that updated it atomically. ``written`` (local memory
    only): ever written, to report reads of uninitialised local memory.

    Races (docs/decisions.md, "Memory", "Atomics"): two accesses to the same byte by
    different threads with no synchronisation between, at least one of them a write, and
    not both atomic. An atomic counts as a write (read-modify-write).
    """

    #: bytes per shadow page: shadow state exists only for pages an access touched, so the
    #: cost is proportional to what a launch touches, not to the buffer (issue 11, item 20:
    #: 60 bytes of shadow per buffer byte made 8 MB buffers cost 320 MB)
    PAGE = 4096
    _THREAD = ("writer", "reader", "reader2", "atom", "atom2")
    _INS = ("writer_ins", "reader_ins", "reader2_ins", "atom_ins", "atom2_ins")

    def __init__(self, nbytes: int, space: str, track_init: bool, describe: Any) -> None:
        self.nbytes = nbytes
        #: shadow page of each buffer page (-1: never touched)
        self.page_slot = np.full(max(1, -(-nbytes // self.PAGE)), -1, I64)
        self.pages = 0
        for name in self._THREAD:
            setattr(self, name, np.full(0, -1, I64))
        for name in self._INS:
            setattr(self, name, np.zeros(0, np.int32))
        self.written = np.zeros(0, bool) if track_init else None
        self.space = space
        self.describe = describe  # flat byte -> text
        #: local memory: in-flight asynchronous copies per flat byte (emu/async_copy.py) and the
        #: message for an access to such a byte, ``note(st, byte)``; None until a copy is issued
        self.pending: np.ndarray | None = None
        self.pending_note: Any = None

    def _grow(self, need: int) -> None:
        """Room for ``need`` shadow pages (capacity doubles)."""
        cap = self.writer.size // self.PAGE
        if need <= cap:
            return
        extra = (max(need, 2 * cap) - cap) * self.PAGE
        for name in self._THREAD:
            setattr(self, name, np.concatenate([getattr(self, name), np.full(extra, -1, I64)]))
        for name in self._INS:
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra, np.int32)]))
        if self.written is not None:
            self.written = np.concatenate([self.written, np.zeros(extra, bool)])

    def _slots(self, b: np.ndarray) -> np.ndarray:
        """Shadow indices of flat bytes ``b`` (pages allocated on first touch)."""
        pg = b >> 12
        slot = self.page_slot[pg]
        if (slot < 0).any():
            new = np.unique(pg[slot < 0])
            self._grow(self.pages + new.size)
            self.page_slot[new] = np.arange(self.pages, self.pages + new.size)
            self.pages += new.size
            slot = self.page_slot[pg]
        return slot * self.PAGE + (b & (self.PAGE - 1))

    def reset(self, lo: int, hi: int) -> None:
        """Forget accesses to bytes [lo, hi) (a barrier)."""
        P = self.PAGE
        for p in range(lo // P, -(-hi // P)):
            slot = int(self.page_slot[p])
            if slot < 0:
                continue
            a0, a1 = max(lo, p * P) - p * P + slot * P, min(hi, (p + 1) * P) - p * P + slot * P
            for a in (self.writer, self.reader, self.reader2, self.atom, self.atom2):
                a[a0:a1] = -1

    def access(self, st: Any, flat: np.ndarray, size: int, idx: np.ndarray, write: bool,
               atomic: bool = False) -> None:
        """Record that lanes ``idx`` access bytes [flat, flat+size) (flat: int64 [len(idx)])."""
        b = (flat[:, None] + np.arange(size)).reshape(-1)
        thr = np.repeat(take(st.gthread, idx), size)
        self.access_bytes(st, b, thr, "atomic" if atomic else ("write" if write else "read"))

    def _check_other(self, st: Any, s: np.ndarray, b: np.ndarray, thr: np.ndarray, who: np.ndarray,
                     who_ins: np.ndarray, what1: str, what2: str) -> None:
        w = who[s]
        hit = (w >= 0) & (w != thr)
        if hit.any():
            i = int(np.flatnonzero(hit)[0])
            self._race(st, int(b[i]), int(w[i]), int(who_ins[s[i]]), what1, int(thr[i]), st.cur_id, what2)

    def _record(self, s: np.ndarray, thr: np.ndarray, one: np.ndarray, one_ins: np.ndarray,
                two: np.ndarray, two_ins: np.ndarray, ins_id: int) -> None:
        r = one[s]
        first = r < 0
        one[s[first]] = thr[first]
        one_ins[s[first]] = ins_id
        other = (one[s] != thr) & (two[s] < 0)
        two[s[other]] = thr[other]
        two_ins[s[other]] = ins_id

    def access_bytes(self, st: Any, b: np.ndarray, thr: np.ndarray, kind: str) -> None:
        """Record accesses of bytes ``b`` (flat, int64) by threads ``thr`` (global thread
        numbers, same length); kind is "read", "write" or "atomic". Raises EmulationError
        on a race or (local memory) a read of never-written bytes."""
        ins_id = st.cur_id
        if self.pending is not None:
            hit = self.pending[b] > 0
            if hit.any():
                i = int(np.flatnonzero(hit)[0])
                what = {"read": "read", "write": "write", "atomic": "atomic update"}[kind]
                raise EmulationError(f"{what} in {st.where()} by {st.describe_thread(int(thr[i]))}: "
                                     + self.pending_note(st, int(b[i])))
        s = self._slots(b)
        if kind != "write" and self.written is not None:
            un = ~self.written[s]
            if un.any():
                i = int(np.flatnonzero(un)[0])
                raise EmulationError(
                    f"read of uninitialised {self.space} ({self.describe(int(b[i]))}) in "
                    f"{st.where()} by {st.describe_thread(int(thr[i]))}; local memory starts "
                    f"undefined, write it before reading")
        verb = {"read": "read", "write": "wrote", "atomic": "atomically updated"}[kind]
        if kind == "write":
            # two lanes of this instruction writing the same byte
            order = np.argsort(b, kind="stable")
            bs, ts = b[order], thr[order]
            dup = np.flatnonzero((bs[1:] == bs[:-1]) & (ts[1:] != ts[:-1]))
            if dup.size:
                i = int(dup[0])
                self._race(st, int(bs[i]), int(ts[i]), ins_id, "wrote", int(ts[i + 1]), ins_id, "wrote")
        # against plain writes, plain reads (unless this is a read) and atomics (unless atomic)
        self._check_other(st, s, b, thr, self.writer, self.writer_ins, "wrote", verb)
        if kind != "read":
            self._check_other(st, s, b, thr, self.reader, self.reader_ins, "read", verb)
            self._check_other(st, s, b, thr, self.reader2, self.reader2_ins, "read", verb)
        if kind != "atomic":
            self._check_other(st, s, b, thr, self.atom, self.atom_ins, "atomically updated", verb)
            self._check_other(st, s, b, thr, self.atom2, self.atom2_ins, "atomically updated", verb)
        if kind == "read":
            self._record(s, thr, self.reader, self.reader_ins, self.reader2, self.reader2_ins, ins_id)
            return
        if kind == "write":
            self.writer[s] = thr
            self.writer_ins[s] = ins_id
        else:
            self._record(s, thr, self.atom, self.atom_ins, self.atom2, self.atom2_ins, ins_id)
        if self.written is not None:
            self.written[s] = True

    def _race(self, st: Any, byte: int, t1: int, i1: int, what1: str, t2: int, i2: int,
              what2: str) -> None:
        sync = "barrier" if self.space == "local memory" else "end of the launch (device memory)"
        raise EmulationError(
            f"data race on {self.space} ({self.describe(byte)}): {st.describe_thread(t1)} "
            f"{what1} it at {st.launch.describe_ins(i1)} and {st.describe_thread(t2)} {what2} it at "
            f"{st.launch.describe_ins(i2)} with no {sync} between")
