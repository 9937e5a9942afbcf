"""The wave barrier (``barrier.wave``, docs/spec.md §7.10) in the emulator and in its race detector.

Executing the barrier changes no value: the emulator runs the lanes of a wave in one step, so
every access before it has happened, in every lane, before any access after it. What it changes
is which accesses of *different* lanes are ordered (happens-before, spec §5.3 rule 4), and so
what the checked emulator reports as a data race.

**Clocks.** In a checked launch of a kernel that contains ``barrier.wave``, every thread ``t``
keeps a vector clock ``C[t]`` over the W lanes of its wave (the algorithm of Flanagan and Freund,
"FastTrack: efficient and precise dynamic race detection", PLDI 2009, restricted to one wave):
``C[t][lane(t)]`` counts the wave barriers ``t`` has executed (its *epoch*), and ``C[t][l]`` is
the epoch of lane ``l`` up to which ``l``'s accesses happen before ``t``'s next one (-1: none).
An access by ``u`` at epoch ``e`` happens before the current point of ``t`` iff ``u = t``, or
``u`` and ``t`` are lanes of one wave and ``e <= C[t][lane(u)]``. A wave barrier executed by the
lanes ``E`` of a wave joins their clocks (element-wise maximum over ``E``, given to every lane of
``E``) and then starts a new epoch in each of them. Lanes of different waves are never ordered
by a wave barrier, so an access of another wave is ordered only by a workgroup ``barrier``, which
the detector already handles by forgetting local memory's accesses (``RaceShadow.reset``).

**Per byte** (:class:`WaveRaceShadow`), since the last workgroup barrier (local memory) or the
launch (device memory):

* the last plain write: thread, instruction, epoch. A write that races with nothing makes every
  earlier read and atomic of the byte happen before it, so they are forgotten (FastTrack's rule:
  a later access unordered with one of them is unordered with the write too, and is reported
  against the write);
* reads: while each read happens after the previous one, the last one (thread, instruction,
  epoch) -- a read ordered after another stands in for it, by transitivity. A read concurrent
  with the kept one makes the byte *read-shared*: a row of a side table holds the wave the
  first reader belongs to (the row's *home* wave), the epoch and instruction of the last read
  by each of its lanes, and one reader of another wave if there is one (any write then races
  with a read: different waves are unordered);
* atomics: kept like reads (two atomics never race with each other; an atomic races with an
  unordered plain read or write).

A write or atomic by ``t`` races with the kept reads iff some reader is not ordered before
``t``: another wave's reader, or a home-wave lane ``l`` whose last read epoch exceeds
``C[t][l]``. The detector is exact for this model: a race is reported iff two conflicting
accesses (spec §5.3 rule 6) are not ordered by program order, wave barriers and workgroup
barriers (local memory), as the clocks compute it.

A kernel without ``barrier.wave`` keeps :class:`~anywave.emu.memory.RaceShadow` and no clocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anywave.binary.module import Instruction
from anywave.emu.alu import Run
from anywave.emu.memory import RaceShadow
from anywave.errors import EmulationError

I32, I64 = np.int32, np.int64


def _wave_barrier(ins: Instruction) -> Run:
    """``barrier.wave``: no value changes; in a checked launch the executing lanes' clocks join."""
    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        if st.wclock is not None:
            join(st.wclock, mask, st.W)
    return run


#: the emulator's semantics of the wave barrier, by ``InstrDef.sem``
SEMANTICS = {"sync.wave_barrier": _wave_barrier}


def new_clocks(n: int, W: int) -> np.ndarray:
    """Clocks of ``n`` lanes (``n`` a multiple of W), before any barrier: ``C[t][lane(t)] = 0``,
    every other entry -1 (int32 [n, W])."""
    c = np.full((n // W, W, W), -1, I32)
    c[:, np.arange(W), np.arange(W)] = 0
    return c.reshape(n, W)


def join(clock: np.ndarray, mask: np.ndarray, W: int) -> None:
    """A wave barrier executed by the lanes ``mask`` (bool [n]): in every wave, each executing
    lane's clock becomes the element-wise maximum over the executing lanes, then its own entry
    is incremented (a new epoch). A workgroup barrier is the same with every lane executing."""
    m = mask.reshape(-1, W)
    waves = np.flatnonzero(m.any(axis=1))
    if waves.size == 0:
        return
    c = clock.reshape(-1, W, W)
    sub = c[waves]                                 # [k, W lanes, W entries]
    mk = m[waves]
    top = np.where(mk[:, :, None], sub, np.iinfo(I32).min).max(axis=1)  # [k, W]
    sub = np.where(mk[:, :, None], top[:, None, :], sub)
    diag = np.arange(W)
    sub[:, diag, diag] += mk.astype(I32)
    c[waves] = sub


class _Rows:
    """The side table of read-shared (or atomic-shared) bytes: per row the home wave, and per
    lane of it the epoch and instruction of its last access (-1: none)."""

    def __init__(self, W: int) -> None:
        self.W = W
        self.n = 0
        self.home = np.zeros(0, I64)
        self.ep = np.zeros((0, W), I32)
        self.ins = np.zeros((0, W), I32)

    def new(self, k: int) -> np.ndarray:
        """Indices of ``k`` fresh rows (no access recorded yet)."""
        need = self.n + k
        if need > self.home.size:
            cap = max(need, 2 * self.home.size, 64)
            grow = cap - self.home.size
            self.home = np.concatenate([self.home, np.zeros(grow, I64)])
            self.ep = np.concatenate([self.ep, np.full((grow, self.W), -1, I32)])
            self.ins = np.concatenate([self.ins, np.zeros((grow, self.W), I32)])
        rows = np.arange(self.n, need, dtype=I64)
        self.ep[rows] = -1
        self.n = need
        return rows

    def compact(self, refs: list[np.ndarray]) -> None:
        """Keep only the rows some slot of ``refs`` (index arrays, -1 none) still names."""
        live = np.unique(np.concatenate([r[r >= 0] for r in refs])) if refs else np.zeros(0, I64)
        remap = np.full(self.n, -1, I64)
        remap[live] = np.arange(live.size)
        self.home[:live.size] = self.home[live]
        self.ep[:live.size] = self.ep[live]
        self.ins[:live.size] = self.ins[live]
        self.n = live.size
        for r in refs:
            hit = r >= 0
            r[hit] = remap[r[hit]]


class WaveRaceShadow(RaceShadow):
    """:class:`~anywave.emu.memory.RaceShadow` for a kernel with wave barriers: the same reports,
    with accesses ordered by wave barriers not reported (module docstring). ``W`` is the launch's
    wave width."""

    _THREAD = RaceShadow._THREAD + ("rrow", "arow")
    _INS = RaceShadow._INS + ("writer_ep", "reader_ep", "atom_ep")

    def __init__(self, nbytes: int, space: str, track_init: bool, describe: Any, W: int) -> None:
        super().__init__(nbytes, space, track_init, describe)
        self.rows = {"read": _Rows(W), "atomic": _Rows(W)}
        self._live_at_compact = 0

    # ---------------------------------------------------------------- threads, waves, clocks
    @staticmethod
    def _wkey(st: Any, g: np.ndarray) -> np.ndarray:
        """A number naming the wave of each global thread ``g`` (unique in the launch)."""
        return (g // st.T) * st.nw + (g % st.T) // st.W

    @staticmethod
    def _lane(st: Any, g: np.ndarray) -> np.ndarray:
        return (g % st.T) % st.W

    @staticmethod
    def _bidx(st: Any, g: np.ndarray) -> np.ndarray:
        """Lane index in the running batch of threads ``g`` (which belong to it)."""
        return (g // st.T - st.wg0) * st.Tp + g % st.T

    def _epoch(self, st: Any, g: np.ndarray) -> np.ndarray:
        return st.wclock[self._bidx(st, g), self._lane(st, g)]

    def _hb(self, st: Any, u: np.ndarray, ep: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Whether an access by thread ``u`` (>= 0) at epoch ``ep`` happens before the current
        point of thread ``x`` (every ``x`` in the running batch)."""
        res = u == x
        same = ~res & (self._wkey(st, u) == self._wkey(st, x))
        if same.any():
            xs, us = x[same], u[same]
            res[same] = st.wclock[self._bidx(st, xs), self._lane(st, us)] >= ep[same]
        return res

    # ---------------------------------------------------------------- storage
    def reset(self, lo: int, hi: int) -> None:
        super().reset(lo, hi)
        P = self.PAGE
        for p in range(lo // P, -(-hi // P)):
            slot = int(self.page_slot[p])
            if slot < 0:
                continue
            a0, a1 = max(lo, p * P) - p * P + slot * P, min(hi, (p + 1) * P) - p * P + slot * P
            self.rrow[a0:a1] = -1
            self.arow[a0:a1] = -1
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        n = sum(r.n for r in self.rows.values())
        if n > max(4096, 2 * self._live_at_compact):
            self.rows["read"].compact([self.rrow])
            self.rows["atomic"].compact([self.arow])
            self._live_at_compact = sum(r.n for r in self.rows.values())

    # ---------------------------------------------------------------- checks
    def _check_one(self, st: Any, s: np.ndarray, b: np.ndarray, thr: np.ndarray, who: np.ndarray,
                   who_ins: np.ndarray, who_ep: np.ndarray, what1: str, what2: str) -> None:
        w = who[s]
        hit = w >= 0
        if hit.any():
            i = np.flatnonzero(hit)
            bad = ~self._hb(st, w[i], who_ep[s[i]], thr[i])
            if bad.any():
                j = int(i[np.flatnonzero(bad)[0]])
                self._race(st, int(b[j]), int(w[j]), int(who_ins[s[j]]), what1, int(thr[j]), st.cur_id, what2)

    def _check_rows(self, st: Any, s: np.ndarray, b: np.ndarray, thr: np.ndarray, kind: str,
                    what1: str, what2: str) -> None:
        """Races of ``thr``'s access with the shared reads (kind "read") or atomics ("atomic")."""
        ref = self.rrow if kind == "read" else self.arow
        other, other_ins = (self.reader2, self.reader2_ins) if kind == "read" else (self.atom2, self.atom2_ins)
        tab = self.rows[kind]
        r = ref[s]
        i = np.flatnonzero(r >= 0)
        if i.size == 0:
            return
        rows, x = r[i], thr[i]
        inhome = tab.home[rows] == self._wkey(st, x)
        # another wave's access (kept one per byte) is never ordered with x's ...
        f = other[s[i]]
        bad = (f >= 0) & inhome
        # ... nor is a home-wave access with x of another wave (a row holds at least one)
        bad |= ~inhome
        # within the home wave: lane l's last access must be within x's clock
        h = np.flatnonzero(inhome & ~bad)
        if h.size:
            c = st.wclock[self._bidx(st, x[h])]                     # [k, W]
            late = tab.ep[rows[h]] > c
            bad[h] |= late.any(axis=1)
        if not bad.any():
            return
        j = int(np.flatnonzero(bad)[0])
        k = int(i[j])
        row = int(rows[j])
        if f[j] >= 0 and inhome[j]:
            t1, i1 = int(f[j]), int(other_ins[s[k]])
        else:
            if inhome[j]:
                lanes = np.flatnonzero(tab.ep[row] > st.wclock[self._bidx(st, x[j:j + 1])][0])
            else:
                lanes = np.flatnonzero(tab.ep[row] >= 0)
            lane = int(lanes[0])
            home = int(tab.home[row])
            T, W, nw = st.T, st.W, st.nw
            t1 = (home // nw) * T + (home % nw) * W + lane
            i1 = int(tab.ins[row, lane])
        self._race(st, int(b[k]), t1, i1, what1, int(thr[k]), st.cur_id, what2)

    # ---------------------------------------------------------------- recording
    def _record_shared(self, st: Any, s: np.ndarray, thr: np.ndarray, ep: np.ndarray, kind: str,
                       ins_id: int) -> None:
        """Record accesses ``thr`` (epochs ``ep``) to slots ``s`` as reads ("read") or atomics,
        turning a slot read-shared where the access is concurrent with the kept one."""
        if kind == "read":
            one, one_ins, one_ep, ref, other, other_ins = (self.reader, self.reader_ins, self.reader_ep,
                                                           self.rrow, self.reader2, self.reader2_ins)
        else:
            one, one_ins, one_ep, ref, other, other_ins = (self.atom, self.atom_ins, self.atom_ep,
                                                           self.arow, self.atom2, self.atom2_ins)
        tab = self.rows[kind]
        # slots with several threads in this instruction: their accesses are concurrent
        order = np.argsort(s, kind="stable")
        ss = s[order]
        multi_sorted = np.zeros(ss.size, bool)
        if ss.size > 1:
            eq = ss[1:] == ss[:-1]
            multi_sorted[1:] |= eq
            multi_sorted[:-1] |= eq
        multi = np.empty_like(multi_sorted)
        multi[order] = multi_sorted
        excl = (ref[s] < 0) & ~multi
        # exclusive slots with one new access: keep it if the kept one happens before it
        if excl.any():
            i = np.flatnonzero(excl)
            old = one[s[i]]
            keep = old < 0
            has = np.flatnonzero(~keep)
            if has.size:
                keep[has] = self._hb(st, old[has], one_ep[s[i[has]]], thr[i[has]])
            k = i[keep]
            one[s[k]] = thr[k]
            one_ins[s[k]] = ins_id
            one_ep[s[k]] = ep[k]
            excl[i[~keep]] = False
        # the rest go to rows: new rows for slots not yet shared
        rest = np.flatnonzero(~excl)
        if rest.size == 0:
            return
        rs = s[rest]
        fresh = ref[rs] < 0
        if fresh.any():
            sub = rest[fresh]
            fresh_slots, idx = np.unique(s[sub], return_index=True)
            accessor = thr[sub[idx]]  # the first new accessor of each slot
            rows = tab.new(fresh_slots.size)
            ref[fresh_slots] = rows
            kept = one[fresh_slots]
            # home wave: the kept access's wave (it moves into the row), else the first accessor's
            tab.home[rows] = self._wkey(st, np.where(kept >= 0, kept, accessor))
            k = np.flatnonzero(kept >= 0)
            if k.size:
                lanes = self._lane(st, kept[k])
                tab.ep[rows[k], lanes] = one_ep[fresh_slots[k]]
                tab.ins[rows[k], lanes] = one_ins[fresh_slots[k]]
            one[fresh_slots] = -1
        rows = ref[rs]
        x = thr[rest]
        inhome = tab.home[rows] == self._wkey(st, x)
        h = np.flatnonzero(inhome)
        if h.size:
            lanes = self._lane(st, x[h])
            tab.ep[rows[h], lanes] = np.maximum(tab.ep[rows[h], lanes], ep[rest[h]])
            tab.ins[rows[h], lanes] = ins_id
        f = np.flatnonzero(~inhome)
        if f.size:
            other[rs[f]] = x[f]
            other_ins[rs[f]] = ins_id

    def access_bytes(self, st: Any, b: np.ndarray, thr: np.ndarray, kind: str) -> None:
        """:meth:`RaceShadow.access_bytes` with wave barriers (module docstring)."""
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
            order = np.argsort(b, kind="stable")
            bs, ts = b[order], thr[order]
            dup = np.flatnonzero((bs[1:] == bs[:-1]) & (ts[1:] != ts[:-1]))
            if dup.size:
                i = int(dup[0])
                self._race(st, int(bs[i]), int(ts[i]), ins_id, "wrote", int(ts[i + 1]), ins_id, "wrote")
        self._check_one(st, s, b, thr, self.writer, self.writer_ins, self.writer_ep, "wrote", verb)
        if kind != "read":
            self._check_one(st, s, b, thr, self.reader, self.reader_ins, self.reader_ep, "read", verb)
            self._check_rows(st, s, b, thr, "read", "read", verb)
        if kind != "atomic":
            self._check_one(st, s, b, thr, self.atom, self.atom_ins, self.atom_ep, "atomically updated", verb)
            self._check_rows(st, s, b, thr, "atomic", "atomically updated", verb)
        ep = self._epoch(st, thr)
        if kind == "write":
            self.writer[s] = thr
            self.writer_ins[s] = ins_id
            self.writer_ep[s] = ep
            # every earlier read and atomic happens before this write: forget them
            for name in ("reader", "reader2", "atom", "atom2", "rrow", "arow"):
                getattr(self, name)[s] = -1
        else:
            self._record_shared(st, s, thr, ep, kind, ins_id)
        if self.written is not None and kind != "read":
            self.written[s] = True

    def _race(self, st: Any, byte: int, t1: int, i1: int, what1: str, t2: int, i2: int,
              what2: str) -> None:
        sync = "barrier" if self.space == "local memory" else "end of the launch (device memory)"
        sync += " (nor a barrier.wave of both, for lanes of one wave)"
        raise EmulationError(
            f"data race on {self.space} ({self.describe(byte)}): {st.describe_thread(t1)} "
            f"{what1} it at {st.launch.describe_ins(i1)} and {st.describe_thread(t2)} {what2} it at "
            f"{st.launch.describe_ins(i2)} with no {sync} between")
