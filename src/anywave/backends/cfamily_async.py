"""C-family (OpenCL, SYCL, HIP, Metal) lowering of the asynchronous copies (docs/spec.md §4.5).

The copy is synchronous here: ``cp.async.bK`` is a load from the buffer and a store to local
memory at the issue, one ``K``-bit access each (``u32``, ``u64``, or the dialect's 4-vector,
aligned by the spec's rule); ``cp.async.commit`` and ``cp.async.wait`` then have nothing left to
do. That is one of the schedules §4.5 allows, so the bits are those of the emulator for every
kernel that follows the rules (the destination is read only after the wait, and by other
threads only after a barrier that follows it).
"""

from __future__ import annotations

from typing import Any

from anywave.binary.module import Instruction


def _cp_async(x: Any, ins: Instruction) -> list[str]:
    laddr, daddr = ins.operands
    size = ins.defn.type.nbytes
    src, dst = x.daddr(daddr, False), x.laddr(laddr)
    ctype = {4: "u32", 8: "u64"}.get(size) or x.d.vec4
    if ctype:
        return [f"*(({x.d.local_ptr(ctype)}){dst}) = *(({x.d.global_ptr(ctype)}){src});"]
    return [f"{x.d.global_ptr('u32')} qs = ({x.d.global_ptr('u32')}){src};",
            f"{x.d.local_ptr('u32')} qd = ({x.d.local_ptr('u32')}){dst};",
            *[f"qd[{i}] = qs[{i}];" for i in range(4)]]


def _nothing(x: Any, ins: Instruction) -> list[str]:
    return []


#: handlers of the ASYNC_COPY category, registered in cfamily._HANDLERS
HANDLERS = {"cp_async": _cp_async, "cp_commit": _nothing, "cp_wait": _nothing}
