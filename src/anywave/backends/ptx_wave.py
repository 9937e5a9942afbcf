"""PTX emitters of the wave operations (``shfl``, ``bcast``, ``ballot``, ``any``/``all``,
``wred``, ``wscan``) and of ``mma``. They are used by the mask-stack lowering only: every
existing lane of the warp runs their lines, ``b.pe`` is the executing set (spec §8.8)."""

from __future__ import annotations

from anywave.backends.lowering.collectives import butterfly_steps, exclusive_first, identity, kogge_stone_steps
from anywave.backends.ptx_alu import _minmax
from anywave.backends.ptx_block import INT_PTX, WAVE_WIDTH, Block
from anywave.binary.module import Instruction
from anywave.isa.types import ScalarType

T = ScalarType


# --- wave operations (uniform lowering only: every existing lane executes these lines)
def _ballot_e(b: Block) -> str:
    """The warp's ballot of the executing lanes. For the lanes active with no guard (``%A``) it
    is kept in ``%emA`` and reused by the next wave operations while ``A`` is unchanged
    (``b.kx.em_a``), so a run of shuffles votes once."""
    if b.pe == "%A" and b.kx.ballot_reuse:  # (the lighter lowering: ptx.PTX_ISLANDS)
        if not b.kx.em_a:
            b("vote.sync.ballot.b32 %emA, %A, %exist;")
            b.kx.em_a = True
        return "%emA"
    em = b.t()
    b(f"vote.sync.ballot.b32 {em}, {b.pe}, %exist;")
    return em


def _lane_in(b: Block, em: str, lane: str, valid: str) -> None:
    """valid &= bit ``lane`` of ``em`` (shift counts >= 32 give 0)."""
    t = b.t()
    q = b.t("pred")
    b(f"shr.b32 {t}, {em}, {lane};")
    b(f"and.b32 {t}, {t}, 1;")
    b(f"setp.ne.b32 {q}, {t}, 0;")
    b(f"and.pred {valid}, {valid}, {q};")


def _e_shfl(b: Block, ins: Instruction) -> None:
    mode = ins.defn.variant
    dst, a, c = ins.operands
    av, bv = b.r(a), b.r(c)
    em = _ballot_e(b)
    s, v = b.t(), b.t("pred")
    if mode == "idx":
        b(f"setp.lt.u32 {v}, {bv}, 32;")
        b(f"mov.b32 {s}, {bv};")
    elif mode == "up":
        b(f"setp.le.u32 {v}, {bv}, %sr_lane;")
        b(f"sub.u32 {s}, %sr_lane, {bv};")
    elif mode == "down":
        room = b.t()
        b(f"sub.u32 {room}, 32, %sr_lane;")
        b(f"setp.lt.u32 {v}, {bv}, {room};")
        b(f"add.u32 {s}, %sr_lane, {bv};")
    else:
        b(f"setp.lt.u32 {v}, {bv}, 32;")
        b(f"xor.b32 {s}, %sr_lane, {bv};")
    _lane_in(b, em, s, v)
    b(f"selp.b32 {s}, {s}, %sr_lane, {v};")
    r = b.t()
    b(f"shfl.sync.idx.b32 {r}, {av}, {s}, 0x1f, %exist;")
    b(f"selp.b32 {r}, {r}, {av}, {v};")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")


def _e_bcast(b: Block, ins: Instruction) -> None:
    dst, a, c = ins.operands
    em = _ballot_e(b)
    low, t = b.t(), b.t()
    b(f"brev.b32 {t}, {em};")
    b(f"clz.b32 {low}, {t};")
    b(f"and.b32 {low}, {low}, 31;")  # empty E: nobody writes; keep the index in range
    big_l = b.t()
    b(f"shfl.sync.idx.b32 {big_l}, %r{c}, {low}, 0x1f, %exist;")
    v = b.t("pred")
    b(f"setp.lt.u32 {v}, {big_l}, 32;")
    _lane_in(b, em, big_l, v)
    src = b.t()
    b(f"selp.b32 {src}, {big_l}, {low}, {v};")
    r = b.t()
    b(f"shfl.sync.idx.b32 {r}, %r{a}, {src}, 0x1f, %exist;")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")


def _e_ballot(b: Block, ins: Instruction) -> None:
    dst, p = ins.operands
    q = b.t("pred")
    b(f"and.pred {q}, {b.pe}, {b.pred(p)};")
    r = b.t()
    b(f"vote.sync.ballot.b32 {r}, {q}, %exist;")
    b(f"@{b.pe} mov.b32 %r{dst}, {r};")
    b(f"@{b.pe} mov.b32 %r{dst + 1}, 0;")  # bits >= W = 32 are 0


def _e_vote(b: Block, ins: Instruction) -> None:
    dst, p = ins.operands
    q, r = b.t("pred"), b.t("pred")
    if ins.defn.op == "any":
        b(f"and.pred {q}, {b.pe}, {b.pred(p)};")
        b(f"vote.sync.any.pred {r}, {q}, %exist;")
        b(f"@{b.pe} mov.pred %p{dst}, {r};")
    else:  # all: no executing lane has p false
        b(f"and.pred {q}, {b.pe}, {b.pred(p, negate=True)};")
        b(f"vote.sync.any.pred {r}, {q}, %exist;")
        b(f"@{b.pe} not.pred %p{dst}, {r};")


def _combine(b: Block, op: str, t: ScalarType, left: str, right: str, out: str) -> None:
    """out = left OP right (f32 add rounded to nearest even; min/max f32 minimumNumber)."""
    if t is T.F32 and op == "add":
        b(f"add.rn.f32 {out}, {left}, {right};")
    elif t is T.F32:
        r = _minmax(b, op, T.F32, left, right, left, right)
        b(f"mov.b32 {out}, {r};")
    elif op == "add":
        b(f"add.u32 {out}, {left}, {right};")
    elif op in ("min", "max"):
        b(f"{op}.{INT_PTX[t]} {out}, {left}, {right};")
    else:
        b(f"{op}.b32 {out}, {left}, {right};")


def _e_wred(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    op = d.variant
    dst, a = ins.operands
    ident = identity(d)
    s = b.t()
    b(f"selp.b32 {s}, %r{a}, {ident:#010x}, {b.pe};")
    nexist = b.t()
    b(f"popc.b32 {nexist}, %exist;")
    for k in butterfly_steps(WAVE_WIDTH):
        # butterfly partner block: lanes [base, base + k) with base = (lane ^ k) & ~(k - 1).
        # Every lane of a block holds the block's value, so its lowest lane stands for it;
        # a block without existing lanes holds the identity (all contributions inactive).
        base, o = b.t(), b.t()
        v = b.t("pred")
        b(f"xor.b32 {base}, %sr_lane, {k};")
        b(f"and.b32 {base}, {base}, {~(k - 1) & 0xFFFFFFFF:#010x};")
        b(f"setp.lt.u32 {v}, {base}, {nexist};")
        b(f"selp.b32 {base}, {base}, %sr_lane, {v};")
        b(f"shfl.sync.idx.b32 {o}, {s}, {base}, 0x1f, %exist;")
        b(f"selp.b32 {o}, {o}, {ident:#010x}, {v};")
        _combine(b, op, t, s, o, s)
    b(f"@{b.pe} mov.b32 %r{dst}, {s};")


def _e_wscan(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    dst, a = ins.operands
    ident = identity(d)
    s = b.t()
    b(f"selp.b32 {s}, %r{a}, {ident:#010x}, {b.pe};")
    for k in kogge_stone_steps(WAVE_WIDTH):
        # Kogge-Stone: s = s[lane - k] + s for lane >= k (lower lanes' partial on the left);
        # the source lane is below an existing lane, so it exists
        o = b.t()
        v = b.t("pred")
        b(f"shfl.sync.up.b32 {o}|{v}, {s}, {k}, 0, %exist;")
        if t is T.F32:
            b(f"@{v} add.rn.f32 {s}, {o}, {s};")
        else:
            b(f"@{v} add.u32 {s}, {o}, {s};")
    if d.variant == "excl":
        o = b.t()
        v = b.t("pred")
        b(f"shfl.sync.up.b32 {o}|{v}, {s}, 1, 0, %exist;")
        b(f"selp.b32 {s}, {o}, {exclusive_first(d)}, {v};")  # lane 0: +0.0 / 0
    b(f"@{b.pe} mov.b32 %r{dst}, {s};")


def _e_mma(b: Block, ins: Instruction) -> None:
    """Per-element MMA: lane l computes D[i][j] for elements e = l + 32*m (m = 0..7):
    i = l/16 + 2m, j = l%16, accumulating k = 0..15 in order with fma.rn.f32."""
    et = ins.defn.src_type
    rd, ra, rb, rc = ins.operands
    lq, lr = b.t(), b.t()
    b(f"shr.u32 {lq}, %sr_lane, 4;")
    b(f"and.b32 {lr}, %sr_lane, 15;")

    def base(reg: int, row_bytes: int, col_bytes: int) -> str:
        p = b.t("b64")
        t = b.t()
        b(f"mul.lo.u32 {t}, {lq}, {row_bytes};")
        b(f"mad.lo.u32 {t}, {lr}, {col_bytes}, {t};")
        b(f"add.u32 {t}, {t}, %r{reg};")
        b(f"cvt.u64.u32 {p}, {t};")
        b(f"add.s64 {p}, {p}, %lmbase;")
        return p

    # the mask-stack machine walks every instruction with the whole warp, also where no lane is
    # active (after a break, in a skipped branch): an mma whose executing set is empty must not
    # run (it would accumulate once more: issue 15)
    skip = b.label("mma_skip")
    anyq = b.t("pred")
    b(f"vote.sync.any.pred {anyq}, {b.pe}, %exist;")
    b(f"@!{anyq} bra {skip};")
    pa = base(ra, 32, 0)  # A[i][k]: A + 32*i + 2k, i = lq + 2m
    pb = base(rb, 0, 2)  # B[k][j]: B + 32*k + 2j
    pc = base(rc, 64, 4)  # C[i][j]: C + 64*i + 4j
    pd = base(rd, 64, 4)
    b("bar.warp.sync %exist;")  # order the wave's earlier local stores before the reads
    acc = [b.t() for _ in range(8)]
    for m, r in enumerate(acc):
        b(f"ld.shared.b32 {r}, [{pc}+{128 * m}];")
    k = b.t()
    q = b.t("pred")
    loop = b.label("mma")
    b(f"mov.b32 {k}, 0;")
    b(f"{loop}:")

    def load_f32(ptr: str, off: int) -> str:
        x = b.t()
        b(f"ld.shared.u16 {x}, [{ptr}+{off}];")
        return b.to_f32(et, x)

    fb = load_f32(pb, 0)
    for m, r in enumerate(acc):
        fa = load_f32(pa, 64 * m)
        b(f"fma.rn.f32 {r}, {fa}, {fb}, {r};")
    b(f"add.s64 {pa}, {pa}, 2;")
    b(f"add.s64 {pb}, {pb}, 32;")
    b(f"add.u32 {k}, {k}, 1;")
    b(f"setp.lt.u32 {q}, {k}, 16;")
    b(f"@{q} bra {loop};")
    b("bar.warp.sync %exist;")  # every lane has read A, B, C before D is written
    for m, r in enumerate(acc):
        b(f"st.shared.b32 [{pd}+{128 * m}], {r};")
    b("bar.warp.sync %exist;")
    b(f"{skip}:")
