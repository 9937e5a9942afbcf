"""Asynchronous copies from device to local memory (docs/spec.md §4.5): ``cp.async.b32/b64/b128``,
``cp.async.commit`` and ``cp.async.wait N``.

The emulator's schedule (one of those the spec allows, and the latest one): a copy reads its
device bytes when it is issued and writes its local bytes when the ``cp.async.wait`` that
completes it executes. Per thread, copies are numbered into groups by the commits: a copy
belongs to the group that the thread's next ``cp.async.commit`` closes. ``cp.async.wait N``
completes, for each executing thread, every copy of its groups other than the ``N`` most
recently committed ones (copies not yet committed are not completed). Copies that complete
in one wait are written in issue order and, within one issue, in lane order (the last lane
wins, as for plain stores).

Checked mode reports what the spec leaves undefined: an access (by any thread) to local bytes
that a copy in flight will write, a second copy in flight to the same bytes, and a copy that
its thread never completes (reported when the batch of workgroups ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anywave.binary.module import Instruction
from anywave.emu.alu import Run
from anywave.emu.memory import _resolve, take
from anywave.errors import EmulationError
from anywave.isa.table import Operand

__all__ = ["SEMANTICS", "finish_batch"]


@dataclass
class _Copies:
    """The copies of one issue of a ``cp.async`` still in flight, one row per lane."""

    lanes: np.ndarray  # int64 [n]: batch lane of each copy
    group: np.ndarray  # int64 [n]: the issuing thread's commit count at issue (its group number)
    flat: np.ndarray  # int64 [n]: flat local byte offset of the destination
    data: np.ndarray  # uint8 [n, size]: the device bytes read at issue
    ins_id: int


class _AsyncState:
    """Per batch: the commits of every lane and the copies in flight, in issue order."""

    def __init__(self, st: Any) -> None:
        self.commits = np.zeros(st.N, np.int64)
        self.inflight: list[_Copies] = []
        #: checked mode: in-flight copies per local byte (flat, the batch's local memory)
        self.busy = np.zeros(st.local.size, np.int32) if st.local_shadow is not None else None
        if self.busy is not None:
            st.local_shadow.pending = self.busy
            st.local_shadow.pending_note = _pending_note


def _pending_note(st: Any, byte: int) -> str:
    return (f"local memory ({st._local_byte(int(byte))}) is the destination of an asynchronous copy "
            f"(cp.async) in flight; it may be accessed only after the issuing thread's cp.async.wait "
            f"has completed the copy (by other threads: after a barrier that follows that wait; spec §4.5)")


def _state(st: Any) -> _AsyncState:
    s = getattr(st, "async_state", None)
    if s is None:
        s = st.async_state = _AsyncState(st)
    return s


def _cp_async(ins: Instruction) -> Run:
    laddr, daddr = ins.operands
    size = ins.defn.type.nbytes

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        idx = st.lanes(mask)
        if idx.size == 0:
            return
        s = _state(st)
        src = _resolve(st, ins, daddr, Operand.DADDR, idx, size, False)
        dst = _resolve(st, ins, laddr, Operand.LADDR, idx, size, True)
        if src.shadow is not None:
            src.shadow.access(st, src.flat, size, idx, write=False)
        data = src.u8[src.flat[:, None] + np.arange(size)]
        if s.busy is not None:
            b = (dst.flat[:, None] + np.arange(size)).reshape(-1)
            hit = s.busy[b] > 0
            if hit.any():
                i = int(np.flatnonzero(hit)[0])
                raise EmulationError(
                    f"asynchronous copy in {st.where()} by {st.describe_lane(int(idx[i // size]))}: local memory "
                    f"({st._local_byte(int(b[i]))}) is already the destination of a copy in flight; two copies "
                    f"in flight to the same bytes complete in an undefined order (spec §4.5)")
            # the copy may write at any time from now until its wait: a write for race detection
            # now (and again when it completes)
            st.local_shadow.access_bytes(st, b, np.repeat(take(st.gthread, idx), size), "write")
            np.add.at(s.busy, b, 1)
        s.inflight.append(_Copies(idx.copy(), s.commits[idx], dst.flat, data, st.cur_id))
    return run


def _cp_commit(ins: Instruction) -> Run:
    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        idx = st.lanes(mask)
        if idx.size:
            _state(st).commits[idx] += 1
    return run


def _cp_wait(ins: Instruction) -> Run:
    keep = int(ins.operands[0])

    def run(st: Any, mask: np.ndarray, dense: bool) -> None:
        s = getattr(st, "async_state", None)
        if s is None or not s.inflight:
            return
        idx = st.lanes(mask)
        if idx.size == 0:
            return
        # groups numbered below the limit are complete; lanes not executing keep theirs
        limit = np.full(st.N, np.iinfo(np.int64).min, np.int64)
        limit[idx] = s.commits[idx] - keep
        left: list[_Copies] = []
        for c in s.inflight:
            done = c.group < limit[c.lanes]
            if done.any():
                _complete(st, s, c, done)
                if not done.all():
                    nd = ~done
                    left.append(_Copies(c.lanes[nd], c.group[nd], c.flat[nd], c.data[nd], c.ins_id))
            else:
                left.append(c)
        s.inflight = left
    return run


def _complete(st: Any, s: _AsyncState, c: _Copies, done: np.ndarray) -> None:
    size = c.data.shape[1]
    b = (c.flat[done][:, None] + np.arange(size)).reshape(-1)
    vals = c.data[done].reshape(-1)
    if s.busy is not None:
        np.subtract.at(s.busy, b, 1)  # before the shadow write, which refuses bytes still in flight
        st.local_shadow.access_bytes(st, b, np.repeat(take(st.gthread, c.lanes[done]), size), "write")
    st.local[b] = vals  # fancy assignment: for a repeated byte the last (lane order) wins


def finish_batch(st: Any) -> None:
    """At the end of a batch: in checked mode, report a copy its thread never completed (spec
    §4.5: a thread shall complete its copies before it ends); otherwise drop such copies."""
    s = getattr(st, "async_state", None)
    if s is None or not s.inflight:
        return
    if s.busy is not None:
        c = s.inflight[0]
        raise EmulationError(
            f"{st.describe_lane(int(c.lanes[0]))} ended with an asynchronous copy in flight (issued at "
            f"{st.launch.describe_ins(c.ins_id)}): a thread shall complete its copies with cp.async.commit "
            f"and cp.async.wait before it ends (spec §4.5); {sum(x.lanes.size for x in s.inflight)} copies "
            f"were never completed")
    s.inflight = []


#: semantic key -> handler factory (registered in emu.machine's dispatch)
SEMANTICS = {"async.cp_async": _cp_async, "async.cp_commit": _cp_commit, "async.cp_wait": _cp_wait}
