"""The vectorised reference emulator: launch, argument binding and structured control flow.

Design (design.md §3.7): a *batch* of workgroups runs together; every thread of the batch
is one lane of NumPy arrays (``regs: uint32[nregs, N]``, ``preds: bool[8, N]``, lanes in
(workgroup, thread linear id) order, each workgroup padded to whole waves). Because WAVE
control flow is structured, all waves walk the same instruction stream together with
one execution mask per lane; a region is skipped when no lane of the batch is active in
it, and a loop repeats while any lane of the batch is still in it. Per-lane state lives
in a Python stack of frames (``if``: the mask at entry and the lanes that took the
then-branch; ``loop``: the mask at entry and the lanes still iterating; ``call``: the
mask at the call). ``break``/``continue``/``ret``/``halt`` remove lanes from the current
mask and from the frames up to the construct they leave (docs/decisions.md,
"Control flow").
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anywave.abi import SCALAR_INT as _SCALAR_INT  # noqa: F401 - re-exported (moved)
from anywave.abi import abi_text as _abi_text
from anywave.abi import check_constant_bytes, dims3, load_program, word_converter
from anywave.abi import scalar_word as _scalar_word
from anywave.binary.module import Instruction, Kernel, Module, kernel_bodies
from anywave.binary.structure import If, Loop
from anywave.binary.structure import parse as parse_structure
from anywave.emu import alu, async_copy, fragments, memory, waveops, wavesync
from anywave.emu.alu import Run
from anywave.emu.async_copy import finish_batch
from anywave.emu.memory import RaceShadow
from anywave.emu.wavesync import WaveRaceShadow
from anywave.errors import EmulationError, LaunchConfigError
from anywave.isa import dispatch
from anywave.isa.mma import MMA_SREG_VALUES
from anywave.isa.table import InstrDef, Role
from anywave.isa.types import LIMITS, Access, SpecialRegister

__all__ = ["DEFAULT_LIMITS", "BudgetExceeded", "EmulationStats", "EmulatorLimits", "PreparedLaunch", "emulate",
           "emulate_flat", "compile_instruction"]

# entry kinds
ORD, IF, ELSE, ENDIF, LOOP, ENDLOOP, BREAK, CONTINUE, RET, HALT, CALL, BARRIER = range(12)
#: entry kind of the instructions the walk (Batch.run_code) executes itself, by region role
_ROLE_KIND = {Role.IF: IF, Role.ELSE: ELSE, Role.ENDIF: ENDIF, Role.LOOP: LOOP, Role.ENDLOOP: ENDLOOP,
              Role.BREAK: BREAK, Role.CONTINUE: CONTINUE, Role.RET: RET, Role.HALT: HALT, Role.CALL: CALL}

#: the emulator's semantics, by semantic key (``InstrDef.sem``): a factory ``make(ins) -> run``
#: per ordinary instruction; None for those the walk executes (control flow, the barrier)
EMULATOR = dispatch.consumer("emulator", error=EmulationError)
EMULATOR.register({**alu.SEMANTICS, **memory.SEMANTICS, **waveops.SEMANTICS, **fragments.SEMANTICS,
                   **async_copy.SEMANTICS, **wavesync.SEMANTICS})
EMULATOR.register([f"ctl.{r.value}" for r in Role], None)
EMULATOR.register("sync.barrier", None)


def _entry_kind(d: InstrDef) -> int:
    if d.role is not None:
        return _ROLE_KIND[d.role]
    return BARRIER if d.sem == "sync.barrier" else ORD

#: lanes per batch (register rows permitting); a fixed number so results never depend on
#: the machine (atomic return values across workgroups follow the batch schedule). 2^16
#: measured best on bench/bench_emu.py (2^12..2^18 tried): smaller batches pay Python
#: overhead per instruction, larger ones fall out of cache.
BATCH_LANES = 1 << 16
_BATCH_REG_BYTES = 32 << 20
#: bound on the local memory of one batch (bytes): workgroups per batch shrink for kernels
#: with large ``.local_memory``
_BATCH_LOCAL_BYTES = 64 << 20
#: default bound on loop iterations per batch (emulate's max_loop_iterations)
DEFAULT_MAX_LOOP_ITERATIONS = 10 ** 7
#: default time budget of emulate(): seconds one loop may keep iterating, from entering it to
#: leaving it, in one batch of workgroups; ``ANYWAVE_EMU_BUDGET`` (seconds, or ``none``)
#: overrides it. An infinite loop is reported after this long instead of after the
#: iteration bound (which takes minutes at ~60 us per iteration). It is a **wall-clock**
#: convenience for interactive use: whether a long launch hits it depends on the machine's
#: speed and load. Code that must behave the same on every machine (tests, scripts) passes
#: ``budget=None`` and bounds the work instead (``max_instructions``, ``max_loop_iterations``).
DEFAULT_LOOP_BUDGET = 10.0


def _default_budget() -> float | None:
    env = os.environ.get("ANYWAVE_EMU_BUDGET", "").strip().lower()
    if not env:
        return DEFAULT_LOOP_BUDGET
    if env in ("none", "off", "0", "inf"):
        return None
    try:
        v = float(env)
    except ValueError:
        raise LaunchConfigError(f"ANYWAVE_EMU_BUDGET={env!r}: expected seconds (a positive number) or "
                                "'none'") from None
    if not v > 0:
        raise LaunchConfigError(f"ANYWAVE_EMU_BUDGET={env!r}: expected a positive number of seconds or 'none'")
    return v


class BudgetExceeded(EmulationError):
    """A loop ran past the launch's time budget, instruction budget or iteration bound (an
    infinite loop?); the message names the kernel, the loop instruction, its source line and
    the bound."""


@dataclass(frozen=True)
class EmulatorLimits:
    """The target limits the emulator enforces at launch (spec §11.3).

    Attributes:
        max_workgroup_size: largest ``Sx*Sy*Sz`` (threads) of a launch; default 1024.
        max_local_memory: largest ``.local_memory`` of a kernel, in bytes; default 65536.

    Both must be at least the spec's guaranteed minimums (``LIMITS.min_max_workgroup_size``
    = 256 threads, ``LIMITS.min_local_memory`` = 32 KiB); ValueError otherwise.
    """

    max_workgroup_size: int = 1024
    max_local_memory: int = 64 * 1024

    def __post_init__(self) -> None:
        for name, lo in (("max_workgroup_size", LIMITS.min_max_workgroup_size),
                         ("max_local_memory", LIMITS.min_local_memory)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"emulator limit {name} = {v!r}: must be an int of at least {lo} (the "
                                 f"spec's guaranteed minimum, §11.2)")


#: the emulator's default target limits: 1024 threads per workgroup, 64 KiB local memory
DEFAULT_LIMITS = EmulatorLimits()

_U32_LIMIT = 1 << 32


def check_launch(kernel: Kernel, grid: tuple[int, int, int], wg: tuple[int, int, int],
                 limits: EmulatorLimits = DEFAULT_LIMITS) -> None:
    """Refuse a launch the target cannot run, before any work or allocation (spec §2.1, §3.3,
    §11.2): grid and workgroup dimensions ≥ 1, every grid dimension and every per-dimension
    thread count ``G·S`` (so every global id) within 32 bits, the kernel's required/maximum
    workgroup size, ``Sx·Sy·Sz`` ≤ ``limits.max_workgroup_size`` and the kernel's local
    memory ≤ ``limits.max_local_memory``.

    Raises:
        LaunchConfigError (a ValueError): naming the offending value and the limit.
    """
    for what, dims in (("grid", grid), ("workgroup", wg)):
        for axis, v in zip("xyz", dims, strict=True):
            if v < 1:
                raise LaunchConfigError(f"{what} dimension {axis} = {v}: must be at least 1")
    for axis, g, s in zip("xyz", grid, wg, strict=True):
        if g >= _U32_LIMIT:
            raise LaunchConfigError(f"grid dimension {axis} = {g} workgroups does not fit in 32 bits "
                             f"(sr_grid_size_{axis} is a u32; at most {_U32_LIMIT - 1})")
        if g * s > _U32_LIMIT:
            raise LaunchConfigError(f"grid {axis} = {g} workgroups of {s} threads = {g * s} threads along {axis}: "
                             f"global ids would not fit in 32 bits (grid*workgroup along one dimension "
                             f"must be at most 2^32 = {_U32_LIMIT}; spec §3.3)")
    T = wg[0] * wg[1] * wg[2]
    if kernel.workgroup_size is not None and tuple(kernel.workgroup_size) != wg:
        raise LaunchConfigError(f"kernel {kernel.name!r} requires workgroup size {tuple(kernel.workgroup_size)}, "
                         f"got {wg}")
    if kernel.max_workgroup_size is not None and T > kernel.max_workgroup_size:
        raise LaunchConfigError(f"workgroup {wg} has {T} threads; kernel {kernel.name!r} allows at most "
                         f"{kernel.max_workgroup_size}")
    if T > limits.max_workgroup_size:
        raise LaunchConfigError(f"workgroup {wg} has {T} threads; the emulator's max workgroup size is "
                         f"{limits.max_workgroup_size} (raise it with emulate(..., max_workgroup_size=N))")
    if kernel.local_memory > limits.max_local_memory:
        raise LaunchConfigError(f"kernel {kernel.name!r} declares {kernel.local_memory} bytes of local memory; the "
                         f"emulator provides at most {limits.max_local_memory} bytes per workgroup "
                         f"(raise it with emulate(..., max_local_memory=N))")


@dataclass
class EmulationStats:
    """What a launch did.

    Attributes:
        kernel: kernel name.
        wave_width: W the launch ran at.
        workgroups: workgroups launched (grid x*y*z).
        threads: threads launched.
        waves: waves launched (partial last waves included).
        instructions: wave-instructions issued (an instruction counts once per wave with at
            least one active lane when it executes; structural ones included).
        thread_instructions: sum over issued instructions of the active lanes.
        wall_seconds: wall-clock time of the launch (seconds).
        trace: per-instruction register changes of the traced lane (``trace_lane``).
    """

    kernel: str
    wave_width: int
    workgroups: int = 0
    threads: int = 0
    waves: int = 0
    instructions: int = 0
    thread_instructions: int = 0
    wall_seconds: float = 0.0
    trace: list[str] = field(default_factory=list)

    @property
    def efficiency(self) -> float:
        """Active-lane efficiency: thread_instructions / (instructions * W), in [0, 1]."""
        return self.thread_instructions / (self.instructions * self.wave_width) if self.instructions else 0.0

    @property
    def thread_instructions_per_second(self) -> float:
        return self.thread_instructions / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def summary(self) -> str:
        return (f"kernel {self.kernel}: {self.workgroups} workgroups, {self.threads} threads, "
                f"{self.waves} waves of {self.wave_width}; {self.instructions} wave-instructions, "
                f"{self.thread_instructions} thread-instructions, lane efficiency "
                f"{self.efficiency:.1%}, {self.wall_seconds:.4f} s "
                f"({self.thread_instructions_per_second / 1e6:.1f} M thread-instr/s)")


# ----------------------------------------------------------------------------- compile

def compile_instruction(ins: Instruction) -> Run | None:
    """The closure executing an ordinary instruction, or None for structural/control ones.

    Raises EmulationError if the instruction has no semantics (a table record without an
    emulator implementation: the coverage test catches that)."""
    make = EMULATOR.handler(ins.defn)  # EmulationError naming the record if it has none
    return None if make is None else make(ins)


@dataclass
class _Code:
    label: str
    entries: list[tuple[int, Any, Instruction, int]]
    match: list[int]
    skip: list[int]


def _structure(label: str, code: list[Instruction]) -> tuple[list[int], list[int]]:
    """match[pc] (if -> else/endif, else -> endif, loop -> endloop, endif -> if, endloop ->
    loop) and skip[pc] (where to go when no lane is active at pc: the else/endif/endloop that
    closes the stretch of code containing pc, or len(code)), from the body's region tree
    (:mod:`anywave.binary.structure`)."""
    n = len(code)
    body = parse_structure(code)
    if body.problems:  # the verifier words these; the emulator only refuses
        bad = [p for p in body.problems if p.kind in ("unmatched-close", "else-without-if", "second-else")]
        if bad:
            raise EmulationError(f"{label}: unbalanced {bad[0].role} at instruction {bad[0].index}")
        unclosed = [p for p in body.problems if p.kind == "unclosed"]
        if unclosed:  # the innermost
            raise EmulationError(f"{label}: {unclosed[-1].role} at instruction {unclosed[-1].index} is never closed")
    match = [-1] * n
    skip = [n] * n

    for node in body.walk():
        r = node.parent
        if r is None:
            skip[node.index] = n
        elif isinstance(r, If) and r.else_index is not None and node.index < r.else_index:
            skip[node.index] = r.else_index
        else:
            skip[node.index] = r.end_index
        if isinstance(node, (If, Loop)):
            end = node.end_index
            e = node.else_index if isinstance(node, If) else None
            match[node.index] = end if e is None else e
            match[end] = node.index
            skip[end] = end
            if e is not None:
                match[e] = end
                skip[e] = e
    return match, skip


def _compile_code(label: str, code: list[Instruction], id0: int) -> _Code:
    match, skip = _structure(label, code)
    entries = []
    for pc, ins in enumerate(code):
        kind = _entry_kind(ins.defn)
        fn = compile_instruction(ins) if kind == ORD else None
        entries.append((kind, fn, ins, id0 + pc))
    return _Code(label, entries, match, skip)


# ----------------------------------------------------------------------------- arguments

class _Buffer:
    __slots__ = ("name", "u8", "writable", "_shadow", "check")

    def __init__(self, name: str, u8: np.ndarray, writable: bool, check: bool) -> None:
        self.name = name
        self.u8 = u8
        self.writable = writable
        self._shadow: RaceShadow | None = None
        self.check = check

    def shadow(self, st: Any) -> RaceShadow | None:
        if not self.check:
            return None
        if self._shadow is None:
            def describe(b: int, n: str = self.name) -> str:
                return f"argument {n!r} byte offset {b}"
            self._shadow = (WaveRaceShadow(self.u8.size, "device memory", False, describe, st.W)
                            if st.launch.wave_sync else RaceShadow(self.u8.size, "device memory", False, describe))
        return self._shadow


def _bind(kernel: Kernel, args: Mapping[str, Any] | Sequence[Any],
          check: bool) -> tuple[dict[int, _Buffer], dict[int, int]]:
    names = [a.name for a in kernel.args]
    if isinstance(args, Mapping):
        unknown = [k for k in args if k not in names]
        missing = [n for n in names if n not in args]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if unknown:
                parts.append(f"unknown {unknown}")
            raise TypeError(f"kernel {kernel.name!r} arguments: {'; '.join(parts)}; its ABI is "
                            f"({_abi_text(kernel)})")
        values = [args[n] for n in names]
    else:
        values = list(args)
        if len(values) != len(names):
            raise TypeError(f"kernel {kernel.name!r} takes {len(names)} arguments "
                            f"({_abi_text(kernel)}), got {len(values)}")
    buffers: dict[int, _Buffer] = {}
    scalars: dict[int, int] = {}
    for i, (a, v) in enumerate(zip(kernel.args, values, strict=False)):
        if a.is_buffer:
            writable = bool(a.access & Access.WRITE)
            if not isinstance(v, np.ndarray):
                raise TypeError(f"buffer argument {a.name!r} of kernel {kernel.name!r} takes a NumPy "
                                f"array, got {type(v).__name__}")
            if not v.flags.c_contiguous:
                if writable:
                    raise ValueError(f"buffer argument {a.name!r} is written by the kernel and must "
                                     f"be C-contiguous (use np.ascontiguousarray and copy back)")
                v = np.ascontiguousarray(v)
            if writable and not v.flags.writeable:
                raise ValueError(f"buffer argument {a.name!r} is declared {a.access.spelling} but the "
                                 f"array is read-only")
            u8 = v.reshape(-1).view(np.uint8) if v.size else np.zeros(0, np.uint8)
            buffers[i] = _Buffer(a.name, u8, writable, check)
        else:
            scalars[i] = _scalar_word(kernel, a.name, a.type, v)
    return buffers, scalars


# ----------------------------------------------------------------------------- launch

class _Launch:
    def __init__(self, module: Module, kernel: Kernel, W: int, grid: tuple[int, int, int],
                 wg: tuple[int, int, int], buffers: dict[int, _Buffer], scalars: dict[int, int],
                 check: bool) -> None:
        self.module = module
        self.kernel = kernel
        self.W = W
        self.grid = grid
        self.wg = wg
        self.T = wg[0] * wg[1] * wg[2]
        self.nwg = grid[0] * grid[1] * grid[2]
        self.buffers = buffers
        self.scalars = scalars
        self.check = check
        #: checked mode with wave barriers: per-lane clocks order the lanes of a wave (emu/wavesync)
        self.wave_sync = check and any(ins.defn.sem == "sync.wave_barrier" for _o, body in
                                       kernel_bodies(module, kernel) for ins in body)
        self.max_loop_iterations = DEFAULT_MAX_LOOP_ITERATIONS
        self.max_instructions: int | None = None
        self.budget: float | None = DEFAULT_LOOP_BUDGET
        self._shapes: dict[int, _BatchShape] = {}
        self._ramps: dict[tuple[int, int], np.ndarray] = {}
        self.sr_cache: dict[tuple[SpecialRegister, int], np.ndarray] = {}
        self.ins_table: list[tuple[str, int, Instruction]] = []
        self.kcode = self._compile(f"kernel {kernel.name!r}", kernel.code)
        self.fcode: dict[int, _Code] = {}
        self.nregs = max(kernel.registers, _max_reg(kernel.code), 1)
        for f in module.functions:
            self.nregs = max(self.nregs, _max_reg(f.code))

    def ramp(self, size: int, n: int) -> np.ndarray:
        """``arange(n) * size`` as uint32 (cached; read-only)."""
        r = self._ramps.get((size, n))
        if r is None:
            r = self._ramps[(size, n)] = (np.arange(n, dtype=np.int64) * size).astype(np.uint32)
        return r

    def batch_shape(self, nwg: int) -> _BatchShape:
        """Arrays shared by every batch of nwg workgroups (cached)."""
        s = self._shapes.get(nwg)
        if s is None:
            s = self._shapes[nwg] = _BatchShape(self, nwg)
        return s

    def _compile(self, label: str, code: list[Instruction]) -> _Code:
        c = _compile_code(label, code, len(self.ins_table))
        self.ins_table.extend((label, pc, ins) for pc, ins in enumerate(code))
        return c

    def function(self, index: int) -> _Code:
        c = self.fcode.get(index)
        if c is None:
            if not 0 <= index < len(self.module.functions):
                raise EmulationError(f"call to function index {index}; the module has "
                                     f"{len(self.module.functions)} functions")
            f = self.module.functions[index]
            c = self.fcode[index] = self._compile(f"function {f.name!r}", f.code)
        return c

    def buffer(self, index: int, ins: Instruction, st: Any) -> _Buffer:
        b = self.buffers.get(index)
        if b is None:
            raise EmulationError(f"{st.where()}: argument {index} is not a buffer argument; the ABI "
                                 f"is ({_abi_text(self.kernel)})")
        return b

    def scalar_word(self, index: int, ins: Instruction) -> int:
        v = self.scalars.get(index)
        if v is None:
            raise EmulationError(f"{ins.mnemonic}: argument {index} is not a scalar argument; the "
                                 f"ABI is ({_abi_text(self.kernel)})")
        return v

    def text(self, ins: Instruction) -> str:
        """The instruction as assembly text (for traces)."""
        try:
            from anywave.asm.disassembler import _Printer
            args = self.kernel.args
            return _Printer(self.module).instruction(
                ins, lambda i, buf: args[i].name if 0 <= i < len(args) else f"${i}")
        except Exception:  # the trace must never fail because of formatting
            return ins.mnemonic

    def describe_ins(self, ins_id: int) -> str:
        label, pc, ins = self.ins_table[ins_id]
        loc = f" at {ins.loc}" if ins.loc is not None else ""
        return f"instruction {pc} ({ins.mnemonic}) of {label}{loc}"


def _max_reg(code: list[Instruction]) -> int:
    top = 0
    for ins in code:
        for kind, v in zip(ins.defn.operands, ins.operands, strict=False):
            rc = kind.reg_count
            if rc:
                top = max(top, int(v) + rc)
            elif hasattr(v, "reg"):
                top = max(top, int(v.reg) + (2 if kind.spelling == "daddr64" else 1))
    return top


class _BatchShape:
    """Per-launch arrays for batches of ``nwg`` workgroups: lane layout and reusable storage
    for the registers (every batch starts from zeroed registers and predicates)."""

    def __init__(self, launch: _Launch, nwg: int) -> None:
        W, T = launch.W, launch.T
        Tp = -(-T // W) * W
        N = nwg * Tp
        self.t_small = np.arange(Tp, dtype=np.int64)
        self.wgi = np.repeat(np.arange(nwg, dtype=np.int64), Tp)
        self.tid = np.tile(self.t_small, nwg)
        self.exists = np.tile(self.t_small < T, nwg)
        self.all_lanes = np.arange(N, dtype=np.int64)
        self._regs = np.zeros((launch.nregs, N), np.uint32)
        # scratch rows for masked writes (contents never carried between instructions)
        self.scratch32 = np.empty(N, np.uint32)
        self.scratch32b = np.empty(N, np.uint32)
        self.scratch8 = np.empty(N, np.uint8)
        self.scratch_pred = np.empty(N, bool)
        self._preds = np.zeros((LIMITS.num_predicates, N), bool)
        self._used = False

    def fresh_regs(self) -> np.ndarray:
        if self._used:
            self._regs.fill(0)
        return self._regs

    def fresh_preds(self) -> np.ndarray:
        if self._used:
            self._preds.fill(False)
        self._used = True
        return self._preds


class Batch:
    """The lanes of a run of consecutive workgroups, executing together."""

    def __init__(self, launch: _Launch, wg0: int, nwg: int, trace_lane: int | None,
                 stats: EmulationStats) -> None:
        self.launch = launch
        W = self.W = launch.W
        T = self.T = launch.T
        self.nw = -(-T // W)
        Tp = self.Tp = self.nw * W
        self.wg0 = wg0
        self.nwg = nwg
        N = self.N = nwg * Tp
        # per-shape arrays are shared by every batch of the same size (read-only)
        shape = launch.batch_shape(nwg)
        self.t_small, self.wgi, self.tid, self.exists = shape.t_small, shape.wgi, shape.tid, shape.exists
        self.g_small = wg0 + np.arange(nwg, dtype=np.int64)
        self.all_exist = T == Tp
        self.regs = shape.fresh_regs()
        self.scratch32, self.scratch32b = shape.scratch32, shape.scratch32b
        self.scratch8, self.scratch_pred = shape.scratch8, shape.scratch_pred
        self.preds = shape.fresh_preds()
        self._gthread: np.ndarray | None = None
        self.halted = np.zeros(N, bool)
        self.local_bytes = launch.kernel.local_memory
        self.local = np.zeros(nwg * self.local_bytes, np.uint8)
        self.local_shadow: RaceShadow | None = None
        #: checked mode with wave barriers: the lanes' vector clocks (emu/wavesync), else None
        self.wclock: np.ndarray | None = None
        if launch.wave_sync:
            self.wclock = wavesync.new_clocks(N, W)
            self.local_shadow = WaveRaceShadow(self.local.size, "local memory", True, self._local_byte, W)
        elif launch.check:
            self.local_shadow = RaceShadow(self.local.size, "local memory", True, self._local_byte)
        self.frames: list[list[Any]] = []
        self.depth = 0
        self.cur_id = 0
        self.stats = stats
        self._sr: dict[SpecialRegister, np.ndarray] = {}
        self.trace_idx: int | None = None
        if trace_lane is not None:
            g, t = divmod(trace_lane, T)
            if wg0 <= g < wg0 + nwg:
                self.trace_idx = (g - wg0) * Tp + t
        self.loop_iterations = 0
        self.max_loop_iterations = launch.max_loop_iterations
        self.max_instructions = launch.max_instructions
        self.budget = launch.budget
        self._set(self.exists.copy())

    @property
    def gthread(self) -> np.ndarray:
        """Global thread number of every lane (int64 [N]; for messages and checked mode)."""
        if self._gthread is None:
            self._gthread = (self.wg0 + self.wgi) * self.T + self.tid
        return self._gthread

    # -- mask bookkeeping
    def _set(self, m: np.ndarray) -> None:
        self.active = m
        self._count: int | None = None
        self._waves: int | None = None
        self._idx: np.ndarray | None = None
        self._m32: np.ndarray | None = None

    def mask32(self, mask: np.ndarray) -> np.ndarray:
        """uint32 [N]: 0xFFFFFFFF where mask holds, else 0 (cached for the active mask)."""
        if mask is self.active:
            if self._m32 is None:
                self._m32 = np.negative(mask.view(np.uint8), dtype=np.uint32)
            return self._m32
        return np.negative(mask.view(np.uint8), dtype=np.uint32)

    def _lanes_active(self) -> int:
        c = self._count
        if c is None:
            c = self._count = int(np.count_nonzero(self.active))
        return c

    def any_active(self) -> bool:
        return self._lanes_active() > 0

    def dense(self) -> bool:
        """True when every existing lane of the batch is active."""
        c = self._lanes_active()
        if self.all_exist:
            return c == self.N
        return c == self.nwg * self.T and bool(np.array_equal(self.active, self.exists))

    def lanes(self, mask: np.ndarray) -> np.ndarray:
        """Indices of the lanes set in mask (cached for the current active mask)."""
        if mask is self.active:
            if self._idx is None:
                self._idx = self.launch.batch_shape(self.nwg).all_lanes if \
                    self._lanes_active() == self.N else np.flatnonzero(mask)
            return self._idx
        return np.flatnonzero(mask)

    def _issue(self) -> None:
        c = self._lanes_active()
        w = self._waves
        if w is None:
            if c == 0:
                w = 0
            elif c == self.N:
                w = self.N // self.W
            else:
                # a wave is W bools = W/8 uint64 words; it issues if any word is nonzero
                v = self.active.view(np.uint64).reshape(-1, self.W // 8)
                acc = v[:, 0]
                for j in range(1, self.W // 8):
                    acc = acc | v[:, j]
                w = int(np.count_nonzero(acc))
            self._waves = w
        self.stats.instructions += w
        self.stats.thread_instructions += c

    # -- descriptions for errors
    def describe_thread(self, g: int) -> str:
        L = self.launch
        wg, t = divmod(int(g), L.T)
        gx, gy, gz = wg % L.grid[0], (wg // L.grid[0]) % L.grid[1], wg // (L.grid[0] * L.grid[1])
        sx, sy = L.wg[0], L.wg[1]
        tx, ty, tz = t % sx, (t // sx) % sy, t // (sx * sy)
        return f"workgroup ({gx},{gy},{gz}) thread ({tx},{ty},{tz})"

    def describe_lane(self, i: int) -> str:
        return self.describe_thread(int(self.gthread[i]))

    def _local_byte(self, flat: int) -> str:
        wgi, off = divmod(flat, self.local_bytes)
        L = self.launch
        wg = self.wg0 + wgi
        gx, gy, gz = wg % L.grid[0], (wg // L.grid[0]) % L.grid[1], wg // (L.grid[0] * L.grid[1])
        return f"byte offset {off} of workgroup ({gx},{gy},{gz})"

    def where(self) -> str:
        return self.launch.describe_ins(self.cur_id)

    # -- special registers
    def special(self, sr: SpecialRegister) -> np.ndarray:
        """Special register sr for every lane (uint32 [N]; shared, do not modify)."""
        v = self._sr.get(sr)
        if v is None:
            L = self.launch
            key = (sr, self.nwg)
            v = L.sr_cache.get(key)
            if v is None:
                per_wg, per_thread, thread_only = self._special_parts(sr)
                pt = (np.asarray(per_thread, np.int64) % (1 << 32)).astype(np.uint32)
                pw = np.broadcast_to(np.asarray(per_wg, np.int64), (self.nwg,))
                step = int(pw[1] - pw[0]) if self.nwg > 1 else 0
                if thread_only:  # no per-workgroup part at all: the same in every batch
                    v = L.sr_cache[key] = np.tile(pt, self.nwg)
                elif not np.any(pw):  # zero in this batch only (e.g. workgroup id y in a batch of row 0)
                    v = np.tile(pt, self.nwg)
                elif np.array_equal(np.diff(pw), np.full(self.nwg - 1, step)):
                    # affine in the batch's workgroup index (e.g. global id x): a cached
                    # pattern plus one scalar per batch
                    pkey = (sr, self.nwg, step)
                    pat = L.sr_cache.get(pkey)
                    if pat is None:
                        rel = (np.arange(self.nwg, dtype=np.int64) * step) % (1 << 32)
                        pat = L.sr_cache[pkey] = np.add.outer(rel.astype(np.uint32), pt).reshape(-1)
                    v = pat + np.uint32(int(pw[0]) % (1 << 32))  # wraps modulo 2^32 like the register
                else:
                    pw32 = (pw % (1 << 32)).astype(np.uint32)
                    v = np.add.outer(pw32, pt).reshape(-1)
            self._sr[sr] = v
        return v

    def _special_parts(self, sr: SpecialRegister) -> tuple[Any, Any, bool]:
        """(per-workgroup part [nwg], per-thread part [Tp], whether the register has no
        per-workgroup part at all) for this batch; the register is the sum of the two parts."""
        L = self.launch
        S = SpecialRegister
        sx, sy, sz = L.wg
        gx, gy, gz = L.grid
        t = self.t_small
        g = self.g_small
        zg = np.zeros(self.nwg, np.int64)
        zt = np.zeros(self.Tp, np.int64)
        table = {
            S.THREAD_ID_X: lambda: (zg, t % sx), S.THREAD_ID_Y: lambda: (zg, (t // sx) % sy),
            S.THREAD_ID_Z: lambda: (zg, t // (sx * sy)), S.WAVE_ID: lambda: (zg, t // self.W),
            S.LANE_ID: lambda: (zg, t % self.W), S.WORKGROUP_ID_X: lambda: (g % gx, zt),
            S.WORKGROUP_ID_Y: lambda: ((g // gx) % gy, zt), S.WORKGROUP_ID_Z: lambda: (g // (gx * gy), zt),
            S.WORKGROUP_SIZE_X: lambda: (zg, zt + sx), S.WORKGROUP_SIZE_Y: lambda: (zg, zt + sy),
            S.WORKGROUP_SIZE_Z: lambda: (zg, zt + sz), S.GRID_SIZE_X: lambda: (zg, zt + gx),
            S.GRID_SIZE_Y: lambda: (zg, zt + gy), S.GRID_SIZE_Z: lambda: (zg, zt + gz),
            S.WAVE_WIDTH: lambda: (zg, zt + self.W), S.NUM_WAVES: lambda: (zg, zt + self.nw),
            S.GLOBAL_ID_X: lambda: ((g % gx) * sx, t % sx),
            S.GLOBAL_ID_Y: lambda: (((g // gx) % gy) * sy, (t // sx) % sy),
            S.GLOBAL_ID_Z: lambda: ((g // (gx * gy)) * sz, t // (sx * sy)),
            S.THREAD_LINEAR_ID: lambda: (zg, t),
            **{S[name]: (lambda v=v: (zg, zt + v)) for name, v in MMA_SREG_VALUES.items()},
        }
        per_wg, per_thread = table[sr]()
        return per_wg, per_thread, per_wg is zg

    # -- control flow
    def _remove(self, lanes: np.ndarray, kind: int) -> None:
        """Take lanes out of the current mask and out of every frame up to the construct
        they leave (break/continue: innermost loop; ret: the call; halt: everything)."""
        keep = ~lanes
        for f in reversed(self.frames):
            tag = f[0]
            if tag == IF:
                f[1] &= keep
            elif tag == LOOP:
                if kind == BREAK:
                    f[2] &= keep
                    break
                if kind == CONTINUE:
                    break
                f[1] &= keep
                f[2] &= keep
            else:  # CALL
                if kind == RET:
                    break
                if kind in (BREAK, CONTINUE):
                    raise EmulationError(f"{self.where()}: break/continue outside a loop")
                f[1] &= keep
        else:
            if kind in (BREAK, CONTINUE):
                raise EmulationError(f"{self.where()}: break/continue outside a loop")
        self._set(self.active & keep)

    def _guarded(self, ins: Instruction) -> np.ndarray:
        g = ins.guard
        if g is None:
            return self.active
        p = self.preds[g.index]
        return self.active & (~p if g.negated else p)

    def _barrier(self) -> None:
        act = self.active.reshape(self.nwg, self.Tp)
        ex = self.exists.reshape(self.nwg, self.Tp)
        arrived = act.any(axis=1)
        missing = ex & ~act & arrived[:, None]
        if missing.any():
            w = int(np.flatnonzero(missing.any(axis=1))[0])
            base = w * self.Tp
            here = np.flatnonzero(act[w])
            gone = np.flatnonzero(missing[w])
            halted = int(np.count_nonzero(self.halted[base + gone]))

            def ex_(ids: np.ndarray) -> str:
                shown = ", ".join(self.describe_lane(base + int(i)).split(" thread ")[1] for i in ids[:4])
                return shown + (", ..." if ids.size > 4 else "")
            wg_text = self.describe_lane(base).split(" thread ")[0]
            raise EmulationError(
                f"divergent barrier at {self.where()}: in {wg_text} {here.size} of {self.T} threads "
                f"arrived (threads {ex_(here)}) and {gone.size} did not (threads {ex_(gone)}"
                f"{f'; {halted} of them had halted' if halted else ''}); every thread of a "
                f"workgroup must reach the same barrier")
        if self.wclock is not None:  # a workgroup barrier orders every lane of each wave too
            wavesync.join(self.wclock, self.active, self.W)
        if self.local_shadow is not None and self.local_bytes:
            for w in np.flatnonzero(arrived).tolist():
                self.local_shadow.reset(w * self.local_bytes, (w + 1) * self.local_bytes)

    def run_code(self, code: _Code) -> None:
        ents, skip, match = code.entries, code.skip, code.match
        n = len(ents)
        pc = 0
        frames = self.frames
        tr = self.trace_idx
        while pc < n:
            if not self.any_active():
                pc = skip[pc]
                if pc >= n:
                    break
            kind, fn, ins, ins_id = ents[pc]
            self.cur_id = ins_id
            self._issue()
            if tr is not None:
                was_active = bool(self.active[tr])
                before = (self.regs[:, tr].copy(), self.preds[:, tr].copy())
            if kind == ORD:
                if ins.guard is None:
                    fn(self, self.active, self.dense())
                else:
                    fn(self, self._guarded(ins), False)
                pc += 1
            elif kind == IF:
                p = ins.operands[0]
                c = self.preds[p.index]
                then = self.active & (~c if p.negated else c)
                frames.append([IF, self.active, then])
                self._set(then.copy())
                pc = pc + 1 if self.any_active() else match[pc]
            elif kind == ELSE:
                f = frames[-1]
                self._set(f[1] & ~f[2])
                pc += 1
            elif kind == ENDIF:
                self._set(frames.pop()[1])
                pc += 1
            elif kind == LOOP:
                frames.append([LOOP, self.active, self.active.copy(), time.perf_counter()])
                self._set(self.active.copy())
                pc += 1
            elif kind == ENDLOOP:
                f = frames[-1]
                if f[2].any():
                    self.loop_iterations += 1
                    if self.loop_iterations > self.max_loop_iterations:
                        self._too_many_iterations(ents[match[pc]][3])
                    if self.max_instructions is not None and self.stats.instructions > self.max_instructions:
                        self._too_many_instructions(ents[match[pc]][3])
                    if self.budget is not None and time.perf_counter() - f[3] > self.budget:
                        self._over_budget(ents[match[pc]][3], time.perf_counter() - f[3])
                    self._set(f[2].copy())
                    pc = match[pc] + 1
                else:
                    frames.pop()
                    self._set(f[1])
                    pc += 1
            elif kind in (BREAK, CONTINUE):
                lanes = self._guarded(ins)
                if lanes.any():
                    self._remove(lanes, kind)
                pc += 1
            elif kind in (RET, HALT):
                lanes = self._guarded(ins)
                if lanes.any():
                    if kind == HALT or self.depth == 0:
                        self.halted |= lanes
                        self._remove(lanes, HALT)
                    else:
                        self._remove(lanes, RET)
                pc += 1
            elif kind == CALL:
                callee = self.launch.function(int(ins.operands[0]))
                if self.depth >= LIMITS.max_call_depth:
                    raise EmulationError(f"{self.where()}: call depth exceeds {LIMITS.max_call_depth}")
                frames.append([CALL, self.active])
                self._set(self.active.copy())
                self.depth += 1
                self.run_code(callee)
                self.depth -= 1
                self.cur_id = ins_id
                f = frames.pop()
                if f[0] != CALL:
                    raise EmulationError(f"{callee.label}: control region left open at its end")
                self._set(f[1])
                pc += 1
            elif kind == BARRIER:
                self._barrier()
                pc += 1
            if tr is not None and was_active:
                self._trace(ins_id, before)

    def _over_budget(self, loop_id: int, seconds: float) -> None:
        L = self.launch
        raise BudgetExceeded(
            f"kernel {L.kernel.name!r}: the loop at {L.describe_ins(loop_id)} has run for {seconds:.1f} s "
            f"in the batch of workgroups {self.wg0}..{self.wg0 + self.nwg - 1} without ending, past the "
            f"time budget of {self.budget:g} s (an infinite loop?); pass budget=<seconds> (or None) to "
            f"emulate() or to the launch, or set ANYWAVE_EMU_BUDGET, if it really runs that long")

    def _too_many_instructions(self, loop_id: int) -> None:
        L = self.launch
        raise BudgetExceeded(
            f"kernel {L.kernel.name!r}: instruction budget exceeded at {L.describe_ins(loop_id)}: the launch "
            f"has issued {self.stats.instructions} wave-instructions, more than max_instructions="
            f"{self.max_instructions}, and the loop is still iterating in the batch of workgroups "
            f"{self.wg0}..{self.wg0 + self.nwg - 1} (an infinite loop?); pass a larger max_instructions "
            f"(or None) to emulate() or to the launch if the kernel really does that much work")

    def _too_many_iterations(self, loop_id: int) -> None:
        L = self.launch
        raise BudgetExceeded(
            f"kernel {L.kernel.name!r}: loop iteration bound exceeded at {L.describe_ins(loop_id)}: "
            f"more than {self.max_loop_iterations} loop iterations in the batch of workgroups "
            f"{self.wg0}..{self.wg0 + self.nwg - 1} (an infinite loop?); pass a larger "
            f"max_loop_iterations to emulate() if the kernel really iterates that often")

    def _trace(self, ins_id: int, before: tuple[np.ndarray, np.ndarray]) -> None:
        tr = self.trace_idx
        regs, preds = before
        now_r = self.regs[:, tr]
        now_p = self.preds[:, tr]
        changes = [f"r{i}=0x{int(now_r[i]):08x}" for i in np.flatnonzero(now_r != regs)]
        changes += [f"p{i}={bool(now_p[i])}" for i in np.flatnonzero(now_p != preds)]
        label, pc, ins = self.launch.ins_table[ins_id]
        line = f"{pc:5d} {self.launch.text(ins)}"
        self.stats.trace.append(f"{line:<52} {' '.join(changes)}".rstrip())


# ----------------------------------------------------------------------------- API

def emulate(program: Module | bytes | str | os.PathLike[str], kernel: str, *,
            grid: int | Sequence[int] = (1, 1, 1), workgroup: int | Sequence[int] = (1, 1, 1),
            args: Mapping[str, Any] | Sequence[Any] = (), wave_width: int = 32,
            check: bool = False, trace_lane: int | None = None,
            max_loop_iterations: int = DEFAULT_MAX_LOOP_ITERATIONS,
            max_workgroup_size: int | None = None, max_local_memory: int | None = None,
            limits: EmulatorLimits | None = None, budget: float | None | str = "default",
            max_instructions: int | None = None) -> EmulationStats:
    """Run ``kernel`` of ``program`` on the reference emulator.

    Args:
        program: a :class:`Module`, ``.wbin`` bytes, or a path to a ``.wbin``/``.wave`` file.
            It is verified first (VerifyError if invalid).
        kernel: kernel name.
        grid: workgroups per dimension (int or 1-3 ints).
        workgroup: threads per workgroup per dimension (int or 1-3 ints); must equal the
            kernel's required size if it declares one, and x*y*z must not exceed its maximum.
        args: by name (mapping) or in ABI order (sequence). Buffers are NumPy arrays, used
            zero-copy (the kernel writes into them; any dtype, bounds = ``nbytes``; arrays the
            kernel writes must be C-contiguous and writeable). Scalars are Python/NumPy numbers
            converted to the ABI type with range checks.
        wave_width: W in {8, 16, 32, 64}.
        check: detect data races on local and device memory and reads of uninitialised
            local memory (slower).
        trace_lane: global thread number (workgroup linear id * threads per workgroup +
            thread linear id) whose register changes are recorded in ``stats.trace``.
        max_loop_iterations: bound on loop iterations (back edges taken by ``endloop``, all
            loops together) per batch of workgroups; exceeding it raises EmulationError
            naming the kernel, the loop instruction and its source line instead of hanging.
            Default 10^7.
        max_instructions: bound on the work of the launch, counted in wave-instructions
            issued (``EmulationStats.instructions``: an instruction counts once per wave with
            an active lane, all batches together); checked at each loop back edge, so the
            launch stops with :class:`BudgetExceeded` at the first ``endloop`` that would
            iterate past it. A count, not a time: the same launch stops at the same place on
            every machine, whatever its speed or load. None (default): no such bound.
        budget: **wall-clock** seconds one loop may keep iterating (from entering it until it
            exits, in one batch of workgroups) before the launch stops with
            :class:`BudgetExceeded` (an EmulationError naming the kernel, the loop and its
            source line); None for no time bound. Default :data:`DEFAULT_LOOP_BUDGET` = 10 s,
            or ``ANYWAVE_EMU_BUDGET``. Straight-line code never counts against it. Whether a
            long-running launch reaches it depends on the machine's speed and load: code
            that must behave the same everywhere passes ``budget=None`` and
            ``max_instructions`` (anywave's test session sets ``ANYWAVE_EMU_BUDGET=none``).
        limits: the target limits the launch is checked against (:class:`EmulatorLimits`;
            default 1024 threads per workgroup and 65536 bytes of local memory, spec §11.3).
        max_workgroup_size: overrides ``limits.max_workgroup_size``.
        max_local_memory: overrides ``limits.max_local_memory``.

    The launch is refused (ValueError naming the value and the limit) before any work when
    a grid or workgroup dimension is < 1, a grid dimension or ``grid*workgroup`` along a
    dimension exceeds 32 bits (global ids are u32, spec §3.3), the workgroup size breaks the
    kernel's required/maximum size or the emulator's maximum, or the kernel's local memory
    exceeds the emulator's. Large grids are legal; they run in batches of workgroups.

    Returns:
        :class:`EmulationStats`.

    Raises:
        EmulationError: the kernel did something the spec makes an error (out-of-bounds or
            misaligned access, divergent barrier, race in checked mode ...); the message names
            the instruction, its source line and the threads.
        TypeError / ValueError: bad launch parameters or arguments (the message lists the ABI).
        VerifyError, BinaryFormatError, AsmError: an invalid program.
    """
    prep = PreparedLaunch(program, kernel, grid=grid, workgroup=workgroup, wave_width=wave_width, check=check,
                          max_loop_iterations=max_loop_iterations, max_workgroup_size=max_workgroup_size,
                          max_local_memory=max_local_memory, limits=limits, budget=budget,
                          max_instructions=max_instructions)
    buffers, scalars = _bind(prep.kernel, args, check)
    prep.check_trace_lane(trace_lane)
    return prep.run(buffers, scalars, trace_lane)


class PreparedLaunch:
    """A launch of one kernel with one geometry and set of options, with every check of
    :func:`emulate` done that does not depend on the arguments (same arguments, same errors, in
    the same order): the program verified, the kernel found, W, the geometry
    (:func:`check_launch`), ``max_loop_iterations``, ``budget`` and ``max_instructions``.

    :meth:`run_checked` launches it with arguments a launch layer has already checked (the
    kernel language's launch plans: each argument is checked once, by one layer; issue 24).

    Raises:
        what :func:`emulate` raises before it reads the arguments.
    """

    def __init__(self, program: Module | bytes | str | os.PathLike[str], kernel: str, *,
                 grid: int | Sequence[int] = (1, 1, 1), workgroup: int | Sequence[int] = (1, 1, 1),
                 wave_width: int = 32, check: bool = False, max_loop_iterations: int = DEFAULT_MAX_LOOP_ITERATIONS,
                 max_workgroup_size: int | None = None, max_local_memory: int | None = None,
                 limits: EmulatorLimits | None = None, budget: float | None | str = "default",
                 max_instructions: int | None = None) -> None:
        module = load_program(program)
        try:
            k = module.kernel(kernel)
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        if wave_width not in LIMITS.wave_widths:
            raise LaunchConfigError(f"wave_width {wave_width!r} is not supported; valid: {LIMITS.wave_widths}")
        g = dims3(grid, "grid")  # the one geometry parser: a float is refused, never truncated
        wg = dims3(workgroup, "workgroup")
        lim = limits if limits is not None else DEFAULT_LIMITS
        if max_workgroup_size is not None or max_local_memory is not None:
            lim = EmulatorLimits(lim.max_workgroup_size if max_workgroup_size is None else max_workgroup_size,
                                 lim.max_local_memory if max_local_memory is None else max_local_memory)
        check_launch(k, g, wg, lim)
        if isinstance(max_loop_iterations, bool) or not isinstance(max_loop_iterations, (int, np.integer)) \
                or max_loop_iterations < 1:
            raise ValueError(f"max_loop_iterations must be a positive int, got {max_loop_iterations!r}")
        #: the default budget is read from ANYWAVE_EMU_BUDGET at each run (as emulate() does)
        self._default_budget = isinstance(budget, str) and budget == "default"
        if self._default_budget:
            budget = _default_budget()
        elif budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer,
                                                                                        np.floating))
                                     or not budget > 0):
            raise LaunchConfigError(f"budget must be a positive number of seconds or None, got {budget!r}")
        if max_instructions is not None and (isinstance(max_instructions, bool)
                                             or not isinstance(max_instructions, (int, np.integer))
                                             or max_instructions < 1):
            raise LaunchConfigError(f"max_instructions must be a positive int (wave-instructions) or None, "
                                    f"got {max_instructions!r}")
        self.module, self.kernel, self.wave_width, self.grid, self.workgroup = module, k, wave_width, g, wg
        self.check = bool(check)
        self.max_loop_iterations = int(max_loop_iterations)
        self.budget = None if budget is None else float(budget)
        self.max_instructions = None if max_instructions is None else int(max_instructions)
        self._words: list[Any] | None = None
        #: ABI indices of the constant buffers (WAVE 1.1): their bytes are checked at each run
        self.constant_args = [i for i, a in enumerate(k.args) if a.constant]

    def check_trace_lane(self, trace_lane: int | None) -> None:
        """Raises ValueError: ``trace_lane`` is not a thread of this launch."""
        g, wg = self.grid, self.workgroup
        n = g[0] * g[1] * g[2] * wg[0] * wg[1] * wg[2]
        if trace_lane is not None and not 0 <= int(trace_lane) < n:
            raise ValueError(f"trace_lane {trace_lane} is outside the launch's {n} threads")

    def run_checked(self, values: Sequence[Any], trace_lane: int | None = None) -> EmulationStats:
        """Launch with ``values``, one per ABI argument in ABI order, already checked by the
        caller: buffers C-contiguous NumPy arrays (writable where the kernel writes), scalars
        Python ints within their type's range or Python floats; the scalars become their words
        (:func:`anywave.abi.word_converter`: :func:`anywave.abi.scalar_word`'s bits) and nothing
        is checked again. ``trace_lane`` as :func:`emulate` (checked by :meth:`check_trace_lane`).

        Raises:
            ValueError: a float overflowing its type (the converter's); EmulationError: as
                :func:`emulate`."""
        k, check = self.kernel, self.check
        words = self._words
        if words is None:
            words = self._words = [None if a.is_buffer else word_converter(k, a.name, a.type) for a in k.args]
        buffers: dict[int, _Buffer] = {}
        scalars: dict[int, int] = {}
        for i, (a, v, word) in enumerate(zip(k.args, values, words, strict=True)):
            if word is None:
                u8 = v.reshape(-1).view(np.uint8) if v.size else np.zeros(0, np.uint8)
                buffers[i] = _Buffer(a.name, u8, bool(a.access & Access.WRITE), check)
            else:
                scalars[i] = word(v)
        return self.run(buffers, scalars, trace_lane)

    def run(self, buffers: dict[int, _Buffer], scalars: dict[int, int], trace_lane: int | None) -> EmulationStats:
        """Run the launch with bound arguments (:func:`_bind`'s, or :meth:`run_checked`'s)."""
        k, wave_width, g, wg = self.kernel, self.wave_width, self.grid, self.workgroup
        if self.constant_args:  # the constant buffers' bytes (docs/spec.md §12), on every path here
            check_constant_bytes(k, [(k.args[i].name, buffers[i].u8.size) for i in self.constant_args],
                                 LaunchConfigError)
        T = wg[0] * wg[1] * wg[2]
        launch = _Launch(self.module, k, wave_width, g, wg, buffers, scalars, self.check)
        launch.max_loop_iterations = self.max_loop_iterations
        seconds = _default_budget() if self._default_budget else self.budget
        launch.budget = None if seconds is None else float(seconds)
        launch.max_instructions = self.max_instructions
        nwg = g[0] * g[1] * g[2]
        stats = EmulationStats(kernel=k.name, wave_width=wave_width, workgroups=nwg, threads=nwg * T,
                               waves=nwg * -(-T // wave_width))
        Tp = -(-T // wave_width) * wave_width
        budget = min(BATCH_LANES, max(Tp, _BATCH_REG_BYTES // (4 * launch.nregs)))
        per = max(1, budget // Tp)
        if k.local_memory:  # bound the local memory allocated per batch (fixed: results never depend on RAM)
            per = max(1, min(per, _BATCH_LOCAL_BYTES // k.local_memory))
        t0 = time.perf_counter()
        from anywave.progress import reporter

        prog = reporter(f"anywave emulator: kernel {k.name!r}", nwg, "workgroups")
        with np.errstate(all="ignore"):
            for start in range(0, nwg, per):
                b = Batch(launch, start, min(per, nwg - start), trace_lane, stats)
                b.run_code(launch.kcode)
                finish_batch(b)
                fragments.finish_batch(b)
                if b.frames:
                    raise EmulationError(f"kernel {k.name!r}: control region left open at its end")
                prog.update(min(start + per, nwg))
        stats.wall_seconds = time.perf_counter() - t0
        return stats


def emulate_flat(program: Module | bytes | str | os.PathLike[str], kernel: str, memory: np.ndarray,
                 registers: Mapping[int, int] | None = None, **kwargs: Any) -> EmulationStats:
    """Run a reference-dialect (flat memory) kernel: ``memory`` is its one device buffer
    (any C-contiguous writeable array, used zero-copy) and ``registers`` the initial values
    of r0.. (``{index: u32 value}``, others 0). Other keywords as :func:`emulate`."""
    module = load_program(program)
    try:
        k = module.kernel(kernel)
    except KeyError as e:
        raise ValueError(str(e.args[0])) from None
    names = [a.name for a in k.args]
    if not names or names[0] != "memory":
        raise ValueError(f"kernel {k.name!r} is not a flat-memory kernel; its ABI is ({_abi_text(k)})")
    args: dict[str, Any] = {"memory": memory}
    for n in names[1:]:
        args[n] = 0
    for r, v in (registers or {}).items():
        name = f"init_r{int(r)}"
        if name not in args:
            raise ValueError(f"register r{r} is not an initial register of kernel {k.name!r} "
                             f"(valid: r0..r{len(names) - 2})")
        args[name] = int(v) & 0xFFFFFFFF
    return emulate(module, kernel, args=args, **kwargs)

