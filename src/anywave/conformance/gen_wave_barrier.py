"""Cases for the wave barrier ``barrier.wave`` (WAVE 1.1, docs/spec.md §7.10): lanes of one wave
exchanging values through local and device memory, ordered by the barrier alone (no workgroup
barrier between the accesses). Expected values come from a per-wave model of the exchanges in
plain Python; every case is race free, so the emulator runs them in checked mode too, where an
exchange the barrier did not order would be reported as a data race."""

from __future__ import annotations

import numpy as np

from anywave.conformance.build import kernel_text, out_buffer, rng_for
from anywave.conformance.case import Case

GROUP = "sync.wave"
M32 = 0xFFFFFFFF
_CAPS = ("wave_ops",)

#: r0 = thread linear id, r1 = 2, r2 = 4 * r0 (the thread's local slot), r9 = global thread
#: index * 4 (its element of the buffers), r5 = lane, r13 = W, r14 = wave's first thread * 4
_PROLOGUE = [
    "mov.sr r0, sr_thread_linear_id",
    "movi.u32 r1, 2",
    "shl.b32 r2, r0, r1",
    "mov.sr r9, sr_workgroup_id_x",
    "mov.sr r10, sr_workgroup_size_x",
    "mul.i32 r11, r9, r10",
    "add.i32 r11, r11, r0",
    "shl.b32 r9, r11, r1",
    "mov.sr r5, sr_lane_id",
    "mov.sr r13, sr_wave_width",
    "sub.i32 r14, r11, r5",
    "shl.b32 r14, r14, r1",
]


def _tail(wg: int = 128, grid: int = 3) -> Case:
    """A warp-synchronous tree reduction in local memory: each wave sums its lanes' values with
    ``for off = W/2 .. 1: if lane < off: v += s[lane + off]; barrier.wave; s[lane] = v;
    barrier.wave`` -- the tail of a block reduction, with the barrier instead of lock step."""
    name = "wave_barrier_tail"
    rng = rng_for(name)
    a = rng.integers(0, 1 << 32, grid * wg, dtype=np.uint64).astype(np.uint32)
    body = _PROLOGUE + [
        "ld.device.b32 r3, a[r9]",
        "st.local.b32 [r2], r3",
        "barrier.wave",
        "movi.u32 r6, 1",
        "movi.u32 r12, 0",
        "shr.u32 r4, r13, r6",  # off = W / 2
        "loop",
        "  setp.eq.u32 p0, r4, r12",
        "  break p0",
        "  setp.lt.u32 p1, r5, r4",
        "  if p1",
        "    shl.b32 r7, r4, r1",
        "    add.i32 r7, r7, r2",
        "    ld.local.b32 r8, [r7]",
        "    add.i32 r3, r3, r8",
        "  endif",
        "  barrier.wave",  # every read of this step before the writes
        "  @p1 st.local.b32 [r2], r3",
        "  barrier.wave",  # the writes before the next step's reads
        "  shr.u32 r4, r4, r6",
        "endloop",
        "st.device.b32 out[r9], r3",
    ]

    def expected(w: int) -> dict[str, np.ndarray]:
        out = np.zeros(grid * wg, np.uint32)
        for base in range(0, grid * wg, w):
            s = [int(x) for x in a[base:base + w]]
            v = list(s)
            off = w // 2
            while off:
                for lane in range(off):
                    v[lane] = (v[lane] + s[lane + off]) & M32
                for lane in range(off):
                    s[lane] = v[lane]
                off //= 2
            out[base:base + w] = v
        return {"out": out}

    return Case(name, GROUP, kernel_text(name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")],
                                         body, local_memory=wg * 4, capabilities=_CAPS),
                (grid, 1, 1), (wg, 1, 1), {"a": a, "out": out_buffer(grid * wg, 32)}, expected,
                requires=_CAPS, description="per-wave tree reduction in local memory ordered by barrier.wave")


def _divergent(wg: int = 128, grid: int = 2) -> Case:
    """The barrier executed by some lanes only (the even lanes, inside an ``if``): each even lane
    stores its value, the even lanes pass the barrier, and each reads the value of the even lane
    two above it in its wave (cyclically); odd lanes write a marker."""
    name = "wave_barrier_divergent"
    rng = rng_for(name)
    a = rng.integers(0, 1 << 32, grid * wg, dtype=np.uint64).astype(np.uint32)
    body = _PROLOGUE + [
        "ld.device.b32 r3, a[r9]",
        "movi.u32 r6, 1",
        "and.b32 r7, r5, r6",
        "movi.u32 r12, 0",
        "setp.eq.u32 p1, r7, r12",
        "movi.u32 r8, 0xdeadbeef",
        "if p1",
        "  st.local.b32 [r2], r3",
        "  barrier.wave",
        "  movi.u32 r7, 2",
        "  add.i32 r7, r5, r7",  # lane + 2
        "  sub.i32 r12, r13, r6",
        "  and.b32 r7, r7, r12",  # mod W (a power of two)
        "  sub.i32 r15, r0, r5",  # the wave's first thread
        "  add.i32 r7, r7, r15",
        "  shl.b32 r7, r7, r1",
        "  ld.local.b32 r8, [r7]",
        "endif",
        "st.device.b32 out[r9], r8",
    ]

    def expected(w: int) -> dict[str, np.ndarray]:
        out = np.zeros(grid * wg, np.uint32)
        for t in range(grid * wg):
            lane = t % w
            out[t] = a[t - lane + (lane + 2) % w] if lane % 2 == 0 else 0xDEADBEEF
        return {"out": out}

    return Case(name, GROUP, kernel_text(name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")],
                                         body, local_memory=wg * 4, capabilities=_CAPS),
                (grid, 1, 1), (wg, 1, 1), {"a": a, "out": out_buffer(grid * wg, 32)}, expected,
                requires=_CAPS, description="barrier.wave executed by the even lanes of each wave only")


def _device(wg: int = 128, grid: int = 2) -> Case:
    """An exchange through device memory: each lane writes its value to its element of ``mem``,
    passes the barrier, and reads the element of the next lane of its wave (cyclically)."""
    name = "wave_barrier_device"
    rng = rng_for(name)
    a = rng.integers(0, 1 << 32, grid * wg, dtype=np.uint64).astype(np.uint32)
    body = _PROLOGUE + [
        "ld.device.b32 r3, a[r9]",
        "st.device.b32 mem[r9], r3",
        "barrier.wave",
        "movi.u32 r6, 1",
        "add.i32 r7, r5, r6",
        "sub.i32 r12, r13, r6",
        "and.b32 r7, r7, r12",
        "shl.b32 r7, r7, r1",
        "add.i32 r7, r7, r14",
        "ld.device.b32 r8, mem[r7]",
        "st.device.b32 out[r9], r8",
    ]

    def expected(w: int) -> dict[str, np.ndarray]:
        out = np.zeros(grid * wg, np.uint32)
        for t in range(grid * wg):
            lane = t % w
            out[t] = a[t - lane + (lane + 1) % w]
        return {"out": out, "mem": a.copy()}

    return Case(name, GROUP, kernel_text(name, [("a", "buffer", "u32", "read"), ("mem", "buffer", "u32", "readwrite"),
                                                ("out", "buffer", "u32", "write")], body, capabilities=_CAPS),
                (grid, 1, 1), (wg, 1, 1),
                {"a": a, "mem": out_buffer(grid * wg, 32), "out": out_buffer(grid * wg, 32)}, expected,
                requires=_CAPS, description="lanes of a wave exchanging through device memory across barrier.wave")


def cases() -> list[Case]:
    return [_tail(), _divergent(), _device()]


# ----------------------------------------------------------------------------- constant buffers

CONSTANT_GROUP = "constant_buffers"
#: what the refusal of too many constant bytes must say (every target's message names the rule)
CONSTANT_REFUSAL = r"(?is)constant buffers"


def _constant_kernel(name: str) -> str:
    return kernel_text(name, [("tab", "buffer", "u32", "constant"), ("idx", "buffer", "u32", "read"),
                              ("out", "buffer", "u32", "write")], [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r2, r0, r1",
        "ld.device.b32 r3, idx[r2]",  # a per-thread index into the table
        "shl.b32 r3, r3, r1",
        "ld.device.b32 r4, tab[r3]",
        "movi.u32 r5, 0",
        "ld.device.b32 r6, tab[r5+4]",  # the same element in every thread (a uniform address)
        "add.i32 r4, r4, r6",
        "st.device.b32 out[r2], r4",
    ], registers=8)


def constant_cases() -> list[Case]:
    """A constant buffer (WAVE 1.1, docs/spec.md §12) read at per-thread and uniform addresses:
    the results of a read buffer; and a launch whose constant buffer exceeds 64 KiB, refused
    before it runs (the output keeps its sentinel)."""
    from anywave.conformance.build import SENTINEL

    rng = rng_for("constant_table")
    n = 128
    tab = rng.integers(0, 1 << 32, 1000, dtype=np.uint64).astype(np.uint32)
    idx = rng.integers(0, tab.size, n, dtype=np.uint64).astype(np.uint32)
    exp = ((tab[idx].astype(np.uint64) + int(tab[1])) & M32).astype(np.uint32)
    ok = Case("constant_table", CONSTANT_GROUP, _constant_kernel("constant_table"), (2, 1, 1), (64, 1, 1),
              {"tab": tab, "idx": idx, "out": out_buffer(n, 32)}, {"out": exp},
              description="constant buffer read at per-thread and at uniform addresses")
    big = np.zeros(16385, np.uint32)  # 65,540 bytes: past LIMITS.max_constant_bytes
    sent = np.full(n, SENTINEL[32], np.uint32)
    refused = Case("constant_too_big", CONSTANT_GROUP, _constant_kernel("constant_too_big"), (2, 1, 1), (64, 1, 1),
                   {"tab": big, "idx": np.zeros(n, np.uint32), "out": sent.copy()}, {"out": sent.copy()},
                   expect_refusal=CONSTANT_REFUSAL,
                   description="a constant buffer of 65,540 bytes: the launch is refused, the output untouched")
    return [ok, refused]
