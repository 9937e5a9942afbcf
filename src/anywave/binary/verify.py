"""The verifier: every rule of the spec that a module can be checked against statically.

:func:`check` returns every problem found (an empty list for a valid module);
:func:`verify` raises :class:`~anywave.errors.VerifyError` listing them. Readers of binaries
run it first (``read_wbin(verify=True)``), so the emulator and the backends may assume a
verified module. Each problem names the kernel or function, the instruction index, its
mnemonic and its source location when the debug table has one.

Rules (docs/spec.md, "Validation rules"):

* **Module**: format version 1.0; kernel names unique, function names unique, no name used by both a kernel
  and a function; names are identifiers ``[A-Za-z_][A-Za-z0-9_]*``.
* **Kernel header**: ``registers`` in 1..255; ``local_memory`` in 0..2^32-1; a required
  workgroup size has three components each >= 1 and, when ``max_workgroup_size`` is also
  given, a product <= it; ``max_workgroup_size`` >= 1; only defined capability and kernel
  flag bits.
* **ABI**: argument names unique identifiers; at most 65536 arguments; buffer element
  types in ``BUFFER_TYPES``, scalar types in ``SCALAR_ARG_TYPES``; scalars are ``read``.
* **Instructions**: operand count and kinds match the instruction table and fit their
  encoding; guards only on instructions without ``Flag.NO_GUARD``; predicates p0..p7;
  source locations have a file name without NUL and a line and column < 2^32.
* **Registers**: every register an instruction names (pairs and quads entirely, offset
  registers of addresses included) is below the kernel's declared count. A function runs
  on its caller's registers, so it is checked against every kernel that reaches it.
* **Structured control flow** per kernel or function body: ``if``/``else``/``endif`` and
  ``loop``/``endloop`` balanced and properly nested, at most one ``else`` per ``if``,
  ``break``/``continue`` only inside a loop of the same body, nesting depth <=
  ``LIMITS.max_control_nesting``.
* **Arguments**: a device address names a buffer argument; ``ldarg`` names a scalar one
  (``ldarg.b64`` a 64-bit type, ``ldarg.b32`` a 16- or 32-bit type). Loads need a buffer
  declared ``read`` or ``readwrite``, stores ``write`` or ``readwrite``, atomics
  ``readwrite``.
* **Asynchronous copies** (spec §4.5): ``cp.async.*`` reads a buffer declared ``read`` or
  ``readwrite`` and writes local memory (the local- and device-address rules below apply to
  both of its addresses); ``cp.async.wait N`` has ``N`` in 0..``MAX_ASYNC_WAIT`` (7).
* **Memory offsets**: the immediate offset of every address is a multiple of the access
  width (natural alignment of the immediate; the offset register's alignment is a run-time
  matter). Local memory: a kernel that accesses it declares ``local_memory`` > 0; a
  non-negative immediate with ``imm + width > local_memory`` is always out of bounds
  (offset registers are unsigned) and rejected; ``mma`` needs ``local_memory >= 1024``
  (one 16x16 f32 tile).
* **Fragments** (spec §8.14): fragment operands name f0..f31, and every slot has one kind
  (shape, role, element type) across the kernel and the functions it reaches. Fragments
  are a separate file: no ordinary instruction can name one.
* **Capabilities**: the kernel's declared capabilities include those of every instruction
  of the kernel and of every function it reaches.
* **Calls**: targets exist; the call graph has no cycle (no recursion); the call depth
  from each kernel is <= ``LIMITS.max_call_depth``; the kernel's inlined size (its
  instructions with every call replaced by the callee's body, recursively; computed per
  function by dynamic programming over the acyclic call graph) is <=
  ``LIMITS.max_inlined_instructions`` (spec §7.2 rule 4).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence

from anywave.binary.encoding import encode_instruction
from anywave.binary.module import (
    KERNEL_FLAG_FLAT,
    KERNEL_FLAG_W_INVARIANT,
    OPERAND_VALUE_TYPES,
    Arg,
    DeviceAddr,
    Function,
    Instruction,
    Kernel,
    LocalAddr,
    Module,
    Pred,
    reachable_functions,
    version_problem,
)
from anywave.binary.structure import parse as parse_structure
from anywave.errors import SourceLoc, VerifyError
from anywave.isa.mma import GROUP_ALIGN, MAX_FRAGMENTS, group_bt, group_n, operand_slots
from anywave.isa.table import BY_OPCODE, MAX_ASYNC_WAIT, Category, Flag, InstrDef, Operand
from anywave.isa.types import (
    BUFFER_TYPES,
    LIMITS,
    SCALAR_ARG_TYPES,
    Access,
    ArgKind,
    Capability,
    MemoryOrder,
    ScalarType,
)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KNOWN_CAPABILITIES = int(sum(int(c) for c in Capability.names().values()))
KNOWN_KERNEL_FLAGS = KERNEL_FLAG_FLAT | KERNEL_FLAG_W_INVARIANT
MAX_ARGS = 0x10000
#: bytes of the largest tile an ``mma`` reads or writes (16x16 f32)
MMA_TILE_BYTES = 16 * 16 * 4
_U32_MAX = 0xFFFFFFFF


def verify(module: Module) -> None:
    """Check ``module`` against every static rule of the spec.

    Raises:
        VerifyError: listing every problem found (``.problems``: list of str).
    """
    problems = check(module)
    if problems:
        raise VerifyError(problems)


#: verified modules: id(module) -> (weak reference, snapshot of what was verified)
_VERIFIED: dict[int, tuple[weakref.ref[Module], tuple]] = {}
_VERIFIED_LOCK = threading.Lock()


def _snapshot(module: Module) -> tuple:
    """Everything the verifier reads, as a tuple holding the (immutable) instructions themselves:
    equal snapshots mean an unchanged module (tuple comparison tries identity first, so an
    unchanged module compares in microseconds)."""
    ks = tuple((k.name, k.registers, k.local_memory, k.workgroup_size, k.max_workgroup_size, int(k.capabilities)
                if isinstance(k.capabilities, int) else k.capabilities, k.flags,
                tuple((a.name, a.kind, a.type, a.access, a.constant) for a in k.args), tuple(k.code))
               for k in module.kernels)
    fs = tuple((f.name, tuple(f.code)) for f in module.functions)
    return (tuple(module.version), ks, fs)


def verify_cached(module: Module) -> None:
    """:func:`verify`, done once per module object: a later call on the same, unchanged module
    (compared by a snapshot of its kernels, functions and instructions) returns at once. Hot
    launch paths and translators call this so that every reader verifies first without paying
    for it on every launch.

    Raises:
        VerifyError: as :func:`verify`.
    """
    if not isinstance(module, Module):
        verify(module)
        return
    try:
        snap = _snapshot(module)
    except (TypeError, AttributeError):  # malformed fields: let the verifier describe them
        verify(module)
        return
    key = id(module)
    with _VERIFIED_LOCK:
        ent = _VERIFIED.get(key)
        if ent is not None and ent[0]() is module and ent[1] == snap:
            return
    verify(module)
    with _VERIFIED_LOCK:
        if len(_VERIFIED) > 4096:  # drop entries of collected modules
            for k2 in [k2 for k2, (ref, _) in _VERIFIED.items() if ref() is None]:
                del _VERIFIED[k2]
        _VERIFIED[key] = (weakref.ref(module), snap)


def check(module: Module) -> list[str]:
    """Return every problem of ``module`` (empty when it is valid), one message each.

    Never raises for a malformed module built in memory: wrong field types are reported
    as problems too.
    """
    v = _Verifier(module)
    v.run()
    seen: set[str] = set()
    return [p for p in v.problems if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _where(owner: str, i: int, ins: Instruction) -> str:
    loc = getattr(ins, "loc", None)
    defn = getattr(ins, "defn", None)
    mn = defn.mnemonic if isinstance(defn, InstrDef) else "?"
    return f"{owner}, instruction {i} ({mn})" + (f" at {loc}" if loc is not None else "")


class _Where:
    """:func:`_where`, formatted only when a message needs it (most instructions have none)."""

    __slots__ = ("owner", "i", "ins", "text")

    def __init__(self, owner: str, i: int, ins: Instruction) -> None:
        self.owner, self.i, self.ins = owner, i, ins
        self.text: str | None = None

    def __str__(self) -> str:
        if self.text is None:
            self.text = _where(self.owner, self.i, self.ins)
        return self.text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


# operand checks of _context, per table record: (access width in bytes, ((operand index,
# check, register count), ...), whether it is an MMA-category record)
_K_REG, _K_DADDR, _K_LADDR, _K_ARG = range(4)
_CONTEXT_PLANS: dict[int, tuple[InstrDef, tuple]] = {}
#: per table record: (the record, the Python type of each operand value)
_VALUE_TYPES: dict[int, tuple[InstrDef, tuple[type, ...]]] = {}


def _context_plan(d: InstrDef) -> tuple:
    hit = _CONTEXT_PLANS.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    checks = []
    for n, kind in enumerate(d.operands):
        if kind.reg_count:
            checks.append((n, _K_REG, kind.reg_count))
        elif kind in (Operand.DADDR, Operand.DADDR64):
            checks.append((n, _K_DADDR, 2 if kind is Operand.DADDR64 else 1))
        elif kind is Operand.LADDR:
            checks.append((n, _K_LADDR, 1))
        elif kind is Operand.ARG:
            checks.append((n, _K_ARG, 0))
    plan = (d.type.nbytes if d.type is not None else 4, tuple(checks), d.category is Category.MMA)
    _CONTEXT_PLANS[id(d)] = (d, plan)
    return plan


class _Verifier:
    def __init__(self, module: Module) -> None:
        self.m = module
        self.problems: list[str] = []
        #: instructions whose operands passed the shape check, per body id
        self.valid: dict[int, list[bool]] = {}
        #: per kernel (by id): fragment slot -> (its kind, where it was first named)
        self._frag_kinds: dict[int, dict[int, tuple]] = {}
        #: ids of source locations already found well-formed
        self._good_locs: set[int] = set()

    def p(self, message: str) -> None:
        self.problems.append(message)

    # ---------------------------------------------------------------- driver
    def run(self) -> None:
        m = self.m
        if not isinstance(m, Module):
            self.p(f"not a Module: {type(m).__name__}")
            return
        kernels = [k for k in m.kernels if isinstance(k, Kernel)]
        functions = [f for f in m.functions if isinstance(f, Function)]
        if len(kernels) != len(m.kernels) or len(functions) != len(m.functions):
            self.p("module lists objects that are not Kernel/Function instances")
            return
        why = version_problem(m)
        if why is not None:
            self.p(why)
        self._names()
        for k in kernels:
            self._kernel_header(k)
        for k in kernels:
            self._body(f"kernel {k.name!r}", k.code)
        for f in functions:
            self._body(f"function {f.name!r}", f.code)
        self._call_graph()
        for k in kernels:
            reach = sorted(reachable_functions(functions, k.code))
            used = Capability.NONE
            self._context(k, f"kernel {k.name!r}", k.code)
            used |= self._caps(k.code)
            for fi in reach:
                f = functions[fi]
                self._context(k, f"function {f.name!r} (called from kernel {k.name!r})", f.code)
                used |= self._caps(f.code)
            declared = k.capabilities if isinstance(k.capabilities, int) else 0
            missing = Capability(int(used) & ~int(declared) & KNOWN_CAPABILITIES)
            if missing:
                have = ", ".join(Capability(int(declared) & KNOWN_CAPABILITIES).spellings()) or "none"
                self.p(f"kernel {k.name!r}: uses capabilities not declared: {', '.join(missing.spellings())} "
                       f"(declared: {have})")

    # ---------------------------------------------------------------- names
    def _names(self) -> None:
        seen_k: set[str] = set()
        for k in self.m.kernels:
            if not isinstance(k.name, str) or not IDENTIFIER.match(k.name):
                self.p(f"kernel name {k.name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
            elif k.name in seen_k:
                self.p(f"kernel name {k.name!r} is used twice; kernel names must be unique")
            seen_k.add(k.name)
        seen_f: set[str] = set()
        for f in self.m.functions:
            if not isinstance(f.name, str) or not IDENTIFIER.match(f.name):
                self.p(f"function name {f.name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
            elif f.name in seen_f:
                self.p(f"function name {f.name!r} is used twice; function names must be unique")
            elif f.name in seen_k:
                self.p(f"name {f.name!r} is used by both a kernel and a function")
            seen_f.add(f.name)

    # ---------------------------------------------------------------- kernel header and ABI
    def _kernel_header(self, k: Kernel) -> None:
        who = f"kernel {k.name!r}"
        if not _is_int(k.registers) or not 1 <= k.registers <= LIMITS.max_registers:
            self.p(f"{who}: register count {k.registers!r} is outside 1..{LIMITS.max_registers}")
        if not _is_int(k.local_memory) or not 0 <= k.local_memory <= _U32_MAX:
            self.p(f"{who}: local memory size {k.local_memory!r} is outside 0..{_U32_MAX} bytes")
        wg = k.workgroup_size
        mx = k.max_workgroup_size
        if mx is not None and (not _is_int(mx) or not 1 <= mx <= _U32_MAX):
            self.p(f"{who}: max workgroup size {mx!r} must be an integer in 1..{_U32_MAX} (or absent)")
            mx = None
        if wg is not None:
            if (not isinstance(wg, tuple) or len(wg) != 3
                    or not all(_is_int(c) and 1 <= c <= _U32_MAX for c in wg)):
                self.p(f"{who}: workgroup size {wg!r} must be three integers (x, y, z), each >= 1")
            elif mx is not None and wg[0] * wg[1] * wg[2] > mx:
                self.p(f"{who}: workgroup size {wg[0]}x{wg[1]}x{wg[2]} = {wg[0] * wg[1] * wg[2]} threads "
                       f"exceeds the declared max workgroup size {mx}")
        caps = k.capabilities
        if not _is_int(caps) or int(caps) & ~KNOWN_CAPABILITIES:
            self.p(f"{who}: capabilities {caps!r} has undefined bits; defined: "
                   f"{', '.join(Capability.names())}")
        if not _is_int(k.flags) or k.flags & ~KNOWN_KERNEL_FLAGS:
            self.p(f"{who}: flags {k.flags!r} has undefined bits; defined: {KNOWN_KERNEL_FLAGS:#x} (flat, w_invariant)")
        if len(k.args) > MAX_ARGS:
            self.p(f"{who}: {len(k.args)} arguments; at most {MAX_ARGS} are allowed")
        names: set[str] = set()
        for i, a in enumerate(k.args):
            if not isinstance(a, Arg):
                self.p(f"{who}: argument {i} is not an Arg: {a!r}")
                continue
            aw = f"{who}, argument {i} {a.name!r}"
            if not isinstance(a.name, str) or not IDENTIFIER.match(a.name):
                self.p(f"{aw}: name is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
            elif a.name in names:
                self.p(f"{aw}: duplicate argument name")
            names.add(a.name)
            if not isinstance(a.access, Access):
                self.p(f"{aw}: access {a.access!r} is not one of read, write, readwrite")
            if not isinstance(a.constant, bool):
                self.p(f"{aw}: constant {a.constant!r} is not a bool")
            elif a.constant and (a.kind is not ArgKind.BUFFER or a.access is not Access.READ):
                self.p(f"{aw}: only a buffer of access read can be constant (docs/spec.md §12)")
            if a.kind is ArgKind.BUFFER:
                if a.type not in BUFFER_TYPES:
                    self.p(f"{aw}: buffer element type {_spell(a.type)} is not allowed; valid: "
                           f"{', '.join(t.spelling for t in BUFFER_TYPES)}")
            elif a.kind is ArgKind.SCALAR:
                if a.type not in SCALAR_ARG_TYPES:
                    self.p(f"{aw}: scalar type {_spell(a.type)} is not allowed; valid: "
                           f"{', '.join(t.spelling for t in SCALAR_ARG_TYPES)}")
                if a.access is not Access.READ:
                    self.p(f"{aw}: a scalar argument is read-only; its access must be read, "
                           f"not {_spell(a.access)}")
            else:
                self.p(f"{aw}: kind {a.kind!r} is not buffer or scalar")

    # ---------------------------------------------------------------- context-free body checks
    def _body(self, owner: str, code: Sequence[Instruction]) -> None:
        valid: list[bool] = []
        self.valid[id(code)] = valid
        for i, ins in enumerate(code):
            ok = self._shape(owner, i, ins)
            valid.append(ok)
            if not ok:
                continue
            d = ins.defn
            if ins.guard is not None and d.flags & Flag.NO_GUARD:
                self.p(f"{_where(owner, i, ins)}: may not carry a guard predicate (found @{ins.guard})")
            if d.op == "movi" and d.type is not None and d.type.bits == 16 and ins.operands[1] >> 16:
                self.p(f"{_where(owner, i, ins)}: a {d.type.spelling} immediate is a 16-bit pattern; bits 16-31 of "
                       f"{ins.operands[1]:#010x} must be 0 (spec §8.12)")
            if d.op == "red" and Operand.ORDER in d.operands:
                order = ins.operands[d.operands.index(Operand.ORDER)]
                if order not in (MemoryOrder.RELAXED, MemoryOrder.RELEASE):
                    self.p(f"{_where(owner, i, ins)}: the order of a non-returning atomic must be .relaxed or "
                           f".release, got {order.spelling} (it has no result to acquire; spec §6)")
            if d.op in ("cp_wait", "fwait") and not 0 <= ins.operands[0] <= MAX_ASYNC_WAIT:
                self.p(f"{_where(owner, i, ins)}: {d.mnemonic} {ins.operands[0]}: the number of groups left "
                       f"pending must be 0..{MAX_ASYNC_WAIT} (spec {'§4.5' if d.op == 'cp_wait' else '§8.14'})")
            if d.op == "call" and not ins.operands[0] < len(self.m.functions):
                self.p(f"{_where(owner, i, ins)}: call target function index {ins.operands[0]} does not exist "
                       f"(the module has {len(self.m.functions)} functions)")
        # spec §7.2 rules 1-3, from the one structure parser
        for prob in parse_structure(code, usable=valid).problems:
            if prob.kind == "unclosed":
                self.p(f"{owner}: {prob.message}")
            else:
                self.p(f"{_where(owner, prob.index, code[prob.index])}: {prob.message}")

    def _shape(self, owner: str, i: int, ins: Instruction) -> bool:
        if not isinstance(ins, Instruction):
            self.p(f"{owner}, instruction {i}: not an Instruction: {ins!r}")
            return False
        d = ins.defn
        w = _Where(owner, i, ins)
        if not isinstance(d, InstrDef) or BY_OPCODE.get(d.opcode) is not d:
            self.p(f"{w}: not a record of the instruction table")
            return False
        if not isinstance(ins.operands, tuple) or len(ins.operands) != len(d.operands):
            self.p(f"{w}: takes {len(d.operands)} operands ({', '.join(o.spelling for o in d.operands)}), "
                   f"got {len(ins.operands) if isinstance(ins.operands, tuple) else ins.operands!r}")
            return False
        wants = _VALUE_TYPES.get(id(d))
        if wants is None or wants[0] is not d:
            wants = _VALUE_TYPES[id(d)] = (d, tuple(OPERAND_VALUE_TYPES[kind] for kind in d.operands))
        for n, (want, v) in enumerate(zip(wants[1], ins.operands)):  # noqa: B905 - lengths checked above
            if type(v) is want:
                continue
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                kind = d.operands[n]
                self.p(f"{w}: operand {n} ({kind.spelling}) must be a {want.__name__}, got {v!r}")
                return False
        if ins.guard is not None and not isinstance(ins.guard, Pred):
            self.p(f"{w}: guard {ins.guard!r} is not a predicate")
            return False
        loc = ins.loc
        if loc is not None and id(loc) not in self._good_locs:
            if (not isinstance(loc, SourceLoc) or not isinstance(loc.file, str) or "\0" in loc.file
                    or not all(_is_int(v) and 0 <= v <= _U32_MAX for v in (loc.line, loc.col))):
                self.p(f"{owner}, instruction {i}: source location {loc!r} needs a file name without NUL and a "
                       f"line and column in 0..{_U32_MAX}")
            else:  # the module keeps it alive while this verifier runs, so its id stays its own
                self._good_locs.add(id(loc))
        try:
            encode_instruction(ins)
        except (ValueError, TypeError) as e:
            self.p(f"{w}: {e}")
            return False
        return True

    # ---------------------------------------------------------------- calls
    def _call_graph(self) -> dict[int, set[int]]:
        """Edges function -> callees (valid targets only); reports cycles and depth."""
        nf = len(self.m.functions)
        calls = {fi: self._callees(f.code) for fi, f in enumerate(self.m.functions)}
        state: dict[int, int] = {}  # 1 = on stack, 2 = done
        depth: dict[int, int] = {}
        #: inlined size per function, capped just above the limit (a chain of doublings
        #: would otherwise make huge integers)
        cap = LIMITS.max_inlined_instructions + 1
        size: dict[int, int] = {}
        funcs = self.m.functions
        cyclic: set[int] = set()
        names = [f.name for f in self.m.functions]

        for root in range(nf):
            if root in state:
                continue
            # iterative depth-first search: a module may hold thousands of functions
            path: list[int] = [root]
            iters = [iter(sorted(calls[root]))]
            state[root] = 1
            while path:
                fi = path[-1]
                nxt = next(iters[-1], None)
                if nxt is None:
                    state[fi] = 2
                    depth[fi] = 1 + max((depth.get(c, 0) for c in calls[fi]), default=0)
                    size[fi] = self._inlined_size(funcs[fi].code, size, cap)
                    path.pop()
                    iters.pop()
                elif state.get(nxt) == 1:
                    cyc = path[path.index(nxt):] + [nxt]
                    cyclic.update(cyc)
                    self.p("recursion: call cycle " + " -> ".join(repr(names[c]) for c in cyc)
                           + " (the call graph must be acyclic)")
                elif nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    iters.append(iter(sorted(calls[nxt])))
        for k in self.m.kernels:
            callees = self._callees(k.code)
            if not callees or any(c in cyclic for c in callees):
                continue
            d = max(depth.get(c, 1) for c in callees)
            if d > LIMITS.max_call_depth:
                self.p(f"kernel {k.name!r}: call depth {d} exceeds the limit {LIMITS.max_call_depth}")
            n = self._inlined_size(k.code, size, cap)
            if n >= cap:
                big = max(callees, key=lambda c: size.get(c, 0))
                self.p(f"kernel {k.name!r}: inlined size exceeds the limit of {LIMITS.max_inlined_instructions} "
                       f"instructions (its code with every call replaced by the callee's body; function "
                       f"{names[big]!r} alone inlines to {'more than ' if size.get(big, 0) >= cap else ''}"
                       f"{min(size.get(big, 0), cap - 1)}); call functions from a loop instead of repeating "
                       f"the calls (spec §7.2 rule 4)")
        return calls

    def _inlined_size(self, code: Sequence[Instruction], size: dict[int, int], cap: int) -> int:
        """Instructions of ``code`` with every call inlined (callees' sizes from ``size``),
        at most ``cap``."""
        n = len(code)
        for ins, ok in zip(code, self.valid.get(id(code), []), strict=False):
            if ok and ins.defn.op == "call":
                n += size.get(ins.operands[0], 0)
                if n >= cap:
                    return cap
        return n

    def _callees(self, code: Sequence[Instruction]) -> set[int]:
        valid = self.valid.get(id(code), [])
        return {ins.operands[0] for ins, ok in zip(code, valid, strict=False)
                if ok and ins.defn.op == "call" and ins.operands[0] < len(self.m.functions)}

    def _caps(self, code: Sequence[Instruction]) -> Capability:
        defs = {id(ins.defn): ins.defn for ins, ok in zip(code, self.valid.get(id(code), []), strict=False) if ok}
        cap = Capability.NONE
        for d in defs.values():  # OR once per distinct record (enum.Flag ``|`` is slow)
            cap |= d.capability
        return cap

    # ---------------------------------------------------------------- checks needing the kernel
    def _context(self, k: Kernel, owner: str, code: Sequence[Instruction]) -> None:
        nregs = k.registers if _is_int(k.registers) else LIMITS.max_registers
        local = k.local_memory if _is_int(k.local_memory) else 0
        buffers_ok: set[tuple[int, int]] = set()  # (record id, buffer index) that passed _buffer
        for i, (ins, ok) in enumerate(zip(code, self.valid.get(id(code), []), strict=False)):
            if not ok:
                continue
            d = ins.defn
            plan = _context_plan(d)
            w = _Where(owner, i, ins)
            width = plan[0]
            for n, code_, count in plan[1]:
                v = ins.operands[n]
                if code_ == _K_REG:
                    if v + count > nregs:
                        self._reg(w, n, v, count, nregs, k)
                elif code_ == _K_DADDR:
                    if v.reg + count > nregs:
                        self._reg(w, n, v.reg, count, nregs, k)
                    key = (id(d), v.buffer)
                    if key not in buffers_ok:
                        before = len(self.problems)
                        self._buffer(w, d, v, k)
                        if len(self.problems) == before:
                            buffers_ok.add(key)
                    if v.offset % width:
                        self._align(w, v.offset, width)
                elif code_ == _K_LADDR:
                    if v.reg + 1 > nregs:
                        self._reg(w, n, v.reg, 1, nregs, k)
                    if v.offset % width:
                        self._align(w, v.offset, width)
                    if local == 0:
                        self.p(f"{w}: accesses local memory but kernel {k.name!r} declares 0 bytes of it "
                               f"(.local_memory)")
                    elif v.offset >= 0 and v.offset + width > local:
                        self.p(f"{w}: local access at immediate offset {v.offset} ({width} bytes) is always "
                               f"beyond the kernel's {local} bytes of local memory")
                else:  # _K_ARG
                    self._ldarg(w, d, v, k)
            if plan[2]:
                if d.op != "mma":
                    self._fragments(w, k, d, ins)
                elif local < MMA_TILE_BYTES:
                    self.p(f"{w}: mma needs at least {MMA_TILE_BYTES} bytes of local memory (one 16x16 f32 "
                           f"tile); kernel {k.name!r} declares {local}")

    def _fragments(self, w: str, k: Kernel, d: InstrDef, ins: Instruction) -> None:
        """Each fragment slot of a kernel (its functions included) has one static kind (spec
        §8.14): every instruction naming it agrees on shape, role and element type."""
        seen = self._frag_kinds.setdefault(id(k), {})
        if d.op == "fgmma":
            laddr = ins.operands[2]
            bt = group_bt(d)
            if isinstance(laddr, LocalAddr) and bt and (laddr.offset % 32 or laddr.offset % GROUP_ALIGN >= 128):
                self.p(f"{w}: the B tile's immediate offset {laddr.offset} is not 0, 32, 64 or 96 modulo "
                       f"{GROUP_ALIGN} bytes (mma.group.bt, spec §8.14)")
            elif isinstance(laddr, LocalAddr) and not bt and laddr.offset % GROUP_ALIGN:
                self.p(f"{w}: the B tile's immediate offset {laddr.offset} is not a multiple of {GROUP_ALIGN} bytes "
                       f"(mma.group, spec §8.14)")
        bad: set[int] = set()
        for n, v, fk in operand_slots(d, ins.operands):
            if not 0 <= v < MAX_FRAGMENTS:
                if n not in bad:
                    bad.add(n)
                    what = (f"the accumulator strip f{ins.operands[0]}..f{ins.operands[0] + group_n(d) // 16 - 1}"
                            if d.op == "fgmma" and n == 0 else f"fragment f{v}")
                    self.p(f"{w}: operand {n} names {what}; fragments are f0..f{MAX_FRAGMENTS - 1}")
                continue
            first = seen.get(v)
            if first is None:
                seen[v] = (fk, w)
            elif first[0] != fk:
                self.p(f"{w}: operand {n} uses f{v} as a {fk.spelling} fragment, but {first[1]} uses it as a "
                       f"{first[0].spelling} fragment (a fragment slot has one kind per kernel)")

    def _reg(self, w: str, n: int, reg: int, count: int, nregs: int, k: Kernel) -> None:
        if reg + count > nregs:
            name = f"r{reg}" if count == 1 else f"r{reg}:r{reg + count - 1}"
            self.p(f"{w}: operand {n} uses {name}, beyond kernel {k.name!r}'s {nregs} registers "
                   f"(r0..r{nregs - 1})")

    def _align(self, w: str, offset: int, width: int) -> None:
        if offset % width:
            self.p(f"{w}: immediate offset {offset} is not a multiple of the access width {width} bytes")

    def _buffer(self, w: str, d: InstrDef, v: DeviceAddr, k: Kernel) -> None:
        if v.buffer >= len(k.args):
            self.p(f"{w}: buffer argument index {v.buffer} does not exist (kernel {k.name!r} has "
                   f"{len(k.args)} arguments)")
            return
        a = k.args[v.buffer]
        if not isinstance(a, Arg):
            return
        if a.kind is not ArgKind.BUFFER:
            self.p(f"{w}: device address names argument {a.name!r}, which is a scalar, not a buffer")
            return
        if not isinstance(a.access, Access):
            return
        if d.flags & Flag.ATOMIC:
            if a.access is not Access.READWRITE:
                self.p(f"{w}: atomic on buffer {a.name!r} declared {a.access.spelling}; atomics need "
                       f"readwrite")
        elif d.flags & Flag.STORE and not a.access & Access.WRITE and d.category is not Category.ASYNC_COPY:
            # an asynchronous copy stores to local memory only: its device operand is a source
            self.p(f"{w}: store to buffer {a.name!r} declared {a.access.spelling}; stores need write or "
                   f"readwrite")
        elif d.flags & Flag.LOAD and not a.access & Access.READ:
            self.p(f"{w}: load from buffer {a.name!r} declared {a.access.spelling}; loads need read or "
                   f"readwrite")

    def _ldarg(self, w: str, d: InstrDef, idx: int, k: Kernel) -> None:
        if idx >= len(k.args):
            self.p(f"{w}: argument index {idx} does not exist (kernel {k.name!r} has {len(k.args)} "
                   f"arguments)")
            return
        a = k.args[idx]
        if not isinstance(a, Arg):
            return
        if a.kind is not ArgKind.SCALAR:
            self.p(f"{w}: ldarg names argument {a.name!r}, which is a buffer; ldarg reads scalar arguments")
            return
        if not isinstance(a.type, ScalarType):
            return
        want64 = d.type is ScalarType.B64
        if want64 and a.type.bits != 64:
            self.p(f"{w}: ldarg.b64 reads a 64-bit scalar; argument {a.name!r} is {a.type.spelling} "
                   f"(use ldarg.b32)")
        elif not want64 and a.type.bits > 32:
            self.p(f"{w}: ldarg.b32 reads a 16- or 32-bit scalar; argument {a.name!r} is "
                   f"{a.type.spelling} (use ldarg.b64)")


def _spell(v: object) -> str:
    return getattr(v, "spelling", None) or repr(v)

