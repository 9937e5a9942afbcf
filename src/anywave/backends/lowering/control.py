"""Structured control flow lowered once for every backend that generates code (PTX, the C
family, SPIR-V; a new target spells the same walk).

A backend gives a :class:`Spelling` (how to write a branch, a label, a mask update in its
language) and :class:`ControlWalk` does the rest: it walks each body's region tree
(:mod:`anywave.binary.structure`), inlines ``call`` (spec §7.7: no recursion, functions share
the caller's registers), keeps the stack of open constructs (:class:`Frame`), resolves which
loop a ``break``/``continue`` leaves and where a ``ret`` returns to, and picks one of two
strategies:

* **per-thread** (a kernel without wave-collective instructions, spec §7.8: each thread then
  behaves as if it ran alone): every construct becomes the target's own branch or block; the
  walk calls ``thread_*`` hooks.
* **mask stack** (a kernel that uses wave operations or ``mma``): the spec's mask-stack
  machine (§7.4) kept *per lane* in boolean variables, so every lane of a wave walks the
  same program and collective operations run in converged control flow with exactly the
  spec's executing set. The walk computes every mask update itself (:meth:`Spelling.mask`)
  and asks the backend only to spell "skip this region when no lane of the wave is active"
  (:meth:`Spelling.enter` / :meth:`Spelling.leave`) and the loop back-edge.

The mask-stack machine (one formulation for PTX and the C family). ``A`` is the lane's
active bit; each open frame at depth ``d`` keeps

* ``fo[d]``: ``A`` when the construct was entered (restored when it closes: a lane that left
  the construct through ``break``/``continue``/``ret`` comes back there);
* ``fp[d]`` (``if``): lanes still pending for the ``else`` region;
* ``fc[d]`` (``loop``): lanes that took ``continue`` in this iteration.

A lane that leaves (``x = A && guard``) is cleared from ``A`` and from every frame deeper than
the construct it leaves (the loop for ``break``/``continue``, the call for ``ret``, all frames
for ``halt``), so it is never reactivated inside. A padding lane (not part of the workgroup)
starts with ``A`` false and is therefore never active.

Targets and their spellings of the structure events:

* **Unstructured text** (PTX): ``enter``/``leave`` are a vote and a branch past a label;
  ``loop_open``/``loop_close`` a label and a conditional back edge; the per-thread hooks
  branches. ``ret`` in an inlined call is a branch to the call's end label.
* **Structured text with goto** (OpenCL C, SYCL, HIP): blocks, ``if``, ``while``/``do``;
  ``ret`` in an inlined call is ``goto`` the call's end.
* **Structured targets without goto** (SPIR-V, which needs ``OpSelectionMerge`` /
  ``OpLoopMerge`` and has no multi-level exit; Metal, whose language has no ``goto``; WGSL):
  either the mask-stack strategy for every kernel (SPIR-V does this: ``enter``/``leave`` are
  one selection construct, ``loop_open``/``loop_close`` one loop construct whose only exit is
  at its header; ``break``/``continue``/``ret``/``halt`` only update masks, so no branch ever
  leaves more than one construct; for a kernel without wave operations "some lane of the
  wave is active" is just the lane's own ``A``), or the per-thread strategy with
  ``goto_free=True``: an inlined call whose body holds a ``ret`` is one one-trip loop
  (:attr:`Frame.structured`), a ``ret`` is ``break`` (after setting the call's *returned*
  flag when a loop of the callee is open, :attr:`Frame.ret_in_loop`), and each loop of the
  callee that holds such a ``ret`` is followed by "if returned, break"
  (:meth:`Spelling.thread_escape` / :meth:`Spelling.thread_escape_loop`). ``break`` and
  ``continue`` only ever leave the innermost loop (spec §7.2), which every such language has;
  ``halt`` and a kernel-level ``ret`` are the language's ``return``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from anywave.binary.module import Instruction, Module, Pred
from anywave.binary.structure import If, Loop, parse, walk
from anywave.isa.table import Category, Flag, Operand


@dataclass
class Frame:
    """One open construct of the walk.

    Attributes:
        kind: ``"if"``, ``"loop"`` or ``"call"`` (an inlined function body).
        depth: number of frames around it (0 for the outermost); the mask variables of the
            mask-stack machine are indexed by it.
        tag: the backend's name for the construct (a label prefix, a number), from
            :meth:`Spelling.frame_tag`.
        has_else: for an ``if``: whether its ``else`` has been reached.
        exits: for a ``loop``: whether its body holds a way out (a ``break`` of this loop, a
            ``ret``/``halt``, or a call, counted as one). False: the loop can never end, which
            C++ (forward-progress rule, [intro.progress]) makes undefined unless the body has a
            side effect; the C++ dialects then add one (:attr:`Dialect.spin_side_effect`).
        structured: for a ``call`` of the per-thread walk with ``goto_free``: its body holds a
            ``ret``, so the spelling wraps the inlined body in a one-trip loop that the ``ret``
            leaves with ``break`` (:meth:`Spelling.thread_call`).
        ret_in_loop: for a ``structured`` call: some ``ret`` of its body is inside a loop of
            the body, so the call needs its *returned* flag (declared at
            :meth:`Spelling.thread_call`, tested by :meth:`Spelling.thread_escape_loop`).
        escaped: for a ``loop`` inside a ``structured`` call: a ``ret`` of that call was met in
            the loop's body (so the loop's end is followed by :meth:`Spelling.thread_escape_loop`).
    """

    kind: str
    depth: int
    tag: str
    has_else: bool = False
    exits: bool = True
    structured: bool = False
    ret_in_loop: bool = False
    escaped: bool = False


@dataclass(frozen=True)
class Mask:
    """An operand of a mask update: the active bit ``A``, a frame variable ``fo``/``fp``/``fc``
    at ``depth``, the leaving lanes ``x``, a WAVE predicate (``pred``), ``False``, or a name the
    backend chose (``raw``); ``neg`` negates it."""

    kind: str  # "A" | "fo" | "fp" | "fc" | "x" | "pred" | "false" | "raw"
    depth: int = -1
    pred: Pred | None = None
    name: str = ""
    neg: bool = False

    def __invert__(self) -> Mask:
        return Mask(self.kind, self.depth, self.pred, self.name, not self.neg)


A = Mask("A")
X = Mask("x")
FALSE = Mask("false")


def of_pred(p: Pred, negate: bool = False) -> Mask:
    """The mask operand of WAVE predicate ``p`` (``negate`` flips it once more)."""
    return Mask("pred", pred=p, neg=negate)


class Spelling(Protocol):
    """What a backend writes for the walk (all methods write to the backend's output)."""

    def body_begin(self, code: Sequence[Instruction]) -> None:
        """A body (kernel or inlined function) starts."""

    def body_end(self, code: Sequence[Instruction]) -> None:
        """The body started by the matching :meth:`body_begin` ends."""

    def at(self, code: Sequence[Instruction], index: int) -> None:
        """Called before each instruction of ``code`` in code order (markers included)."""

    def instruction(self, ins: Instruction) -> None:
        """An instruction without a structural role (arithmetic, memory, barrier, nop ...)."""

    def frame_tag(self, kind: str) -> str:
        """A fresh name for a new construct of ``kind``."""

    # per-thread strategy
    def thread_if(self, f: Frame, cond: Pred) -> None: ...
    def thread_else(self, f: Frame) -> None: ...
    def thread_endif(self, f: Frame) -> None: ...
    def thread_loop(self, f: Frame) -> None: ...
    def thread_endloop(self, f: Frame) -> None: ...
    def thread_jump(self, role: str, loop: Frame, guard: Pred | None) -> None:
        """``break``/``continue`` (``role``) of ``loop`` where ``guard`` holds (None: always)."""
    def thread_ret(self, call: Frame | None, guard: Pred | None) -> None:
        """Return from the inlined function ``call``, or end the thread (``call`` None: a
        ``halt``, or a ``ret`` of the kernel body)."""
    def thread_call(self, f: Frame) -> None:
        """An inlined call's body starts. With ``f.structured`` (``goto_free`` walk): open a
        one-trip loop around it, preceded by the call's *returned* flag (false) when
        ``f.ret_in_loop``."""
    def thread_endcall(self, f: Frame) -> None:
        """The inlined call's body ends (``f.structured``: close the one-trip loop)."""
    def thread_escape(self, call: Frame, guard: Pred | None, in_loop: bool) -> None:
        """``goto_free`` walk: a ``ret`` of the structured call ``call`` where ``guard`` holds
        (None: always): ``break`` the innermost loop construct, setting the call's returned flag
        first when ``in_loop`` (a loop of the callee is open, so the break lands at its end)."""
    def thread_escape_loop(self, call: Frame) -> None:
        """``goto_free`` walk: just after the end of a loop of ``call``'s body that a ``ret``
        left: ``break`` the innermost loop construct (an outer loop of the callee, or the
        call's one-trip loop) when the call's returned flag is set."""

    # mask-stack strategy
    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        """``dst = a`` (op ``"mov"``), ``dst = a && b`` (``"and"``), ``dst = a || b`` (``"or"``)."""
    def condition(self, cond: Pred) -> Mask:
        """The operand to use for an ``if``'s predicate (default: :func:`of_pred`)."""
    def enter(self, f: Frame, part: str) -> None:
        """Open the region ``part`` (``"then"``, ``"else"``, ``"call"``) of ``f``: skipped as a
        whole when no lane of the wave is active (``A`` false everywhere)."""
    def leave(self, f: Frame, part: str) -> None:
        """Close the region opened by :meth:`enter`."""
    def loop_open(self, f: Frame) -> None:
        """Start loop ``f``: skip it when no lane is active, else begin the first iteration."""
    def loop_close(self, f: Frame) -> None:
        """End an iteration of ``f``: repeat while some lane of the wave is active."""

    # mask-stack strategy with islands (a spelling whose ``islands`` attribute is true)
    def island_begin(self, tag: str) -> None:
        """A per-thread island starts (:meth:`ControlWalk._island`): lanes whose ``A`` is false
        skip to its end; the lanes that enter run the island's constructs through the
        ``thread_*`` hooks, each instruction for the lane alone."""
    def island_end(self, tag: str) -> None:
        """The island started by the matching :meth:`island_begin` ends."""


def uses_wave_ops(module: Module, code: Sequence[Instruction], seen: set[int] | None = None) -> bool:
    """Whether ``code`` (or a function it calls, transitively) contains a wave-collective
    instruction: then the kernel needs the mask-stack strategy."""
    seen = set() if seen is None else seen
    for ins in code:
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            return True
        if ins.defn.op == "call":
            f = int(ins.operands[0])
            if f not in seen:
                seen.add(f)
                if uses_wave_ops(module, module.functions[f].code, seen):
                    return True
    return False


#: the categories of the instructions a per-thread island of a mask-stack kernel may hold
#: (:meth:`ControlWalk._island`), besides the workgroup ``barrier`` and ``fence``
ISLAND_CATEGORIES = frozenset({Category.INTEGER, Category.FLOAT, Category.BITWISE, Category.COMPARE,
                               Category.LOCAL_MEMORY, Category.DEVICE_MEMORY, Category.ATOMIC, Category.CONVERT,
                               Category.MOVE})


def _island_instruction(ins: Instruction, barriers: bool = True) -> bool:
    """Whether an island may hold ``ins`` (an instruction without a structural role); the
    workgroup ``barrier`` only where ``barriers``."""
    d = ins.defn
    if d.flags & Flag.WAVE_COLLECTIVE:
        return False
    return d.category in ISLAND_CATEGORIES or (d.category is Category.SYNC and (
        d.op == "fence" or (d.op == "barrier" and barriers)))


def _inside(inner: Any, outer: Any) -> bool:
    """Whether region node ``inner`` is ``outer`` or lies inside it."""
    n = inner
    while n is not None:
        if n is outer:
            return True
        n = n.parent
    return False


def _dests(ins: Instruction) -> tuple[set[int], set[int]]:
    """(registers, predicates) that ``ins`` writes (a wide register operand: all its words)."""
    regs: set[int] = set()
    preds: set[int] = set()
    d = ins.defn
    for i in d.dests:
        kind = d.operands[i]
        v = ins.operands[i]
        if kind is Operand.PD:
            preds.add(int(v))
        elif kind in (Operand.RD, Operand.RD64, Operand.RD128):
            words = {Operand.RD64: 2, Operand.RD128: 4}.get(kind, 1)
            if d.type is not None:
                words = max(words, d.type.bits // 32)
            regs.update(range(int(v), int(v) + words))
    return regs, preds


def _writes_any(module: Module, node: Any, regs: set[int], preds: set[int], seen: set[int] | None = None) -> bool:
    """Whether the construct or leaf ``node`` (calls followed) may write one of ``regs``/``preds``."""
    seen = set() if seen is None else seen
    for n in walk([node]):
        if isinstance(n, (If, Loop)):
            continue
        if n.role == "call":
            f = int(n.ins.operands[0])
            if f not in seen:
                seen.add(f)
                body = parse(module.functions[f].code).nodes
                if any(_writes_any(module, x, regs, preds, seen) for x in body):
                    return True
            continue
        r, p = _dests(n.ins)
        if r & regs or p & preds:
            return True
    return False


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_INT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "and": lambda a, b: a & b,
            "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "min": min, "max": max}


def condition_value(module: Module, nodes: Sequence[Any], pos: int, wave_width: int) -> bool | None:
    """The value of the predicate of the ``if`` at ``nodes[pos]`` when a target that runs wave
    width ``wave_width`` can know it before the launch, else None.

    It can when the predicate's definition is found in the same region before the ``if`` (an
    unguarded instruction, with no write to the register in between, nested constructs and
    called functions included), computed by ``setp``/``min``/``max``/``add``/``sub``/bitwise
    operations on 32-bit integers, predicate logic and moves from ``movi`` and ``mov.sr
    sr_wave_width`` (= ``wave_width``), each operand found the same way. Then every lane that
    reaches the ``if`` ran those definitions (they are in its region, before it: a lane that is
    active at the ``if`` was active at each of them), so the predicate has that one value in
    all of them. The CUDA front end's W = 32 body is chosen by such an ``if``."""
    from anywave.isa.types import ScalarType, SpecialRegister

    def value(j: int, reg: int, pred: bool, depth: int) -> int | None:
        if depth > 32:
            return None
        want_r = set() if pred else {reg}
        want_p = {reg} if pred else set()
        for k in range(j - 1, -1, -1):
            n = nodes[k]
            if isinstance(n, (If, Loop)) or n.role == "call":
                if _writes_any(module, n, want_r, want_p):
                    return None
                continue
            if n.role is not None:  # break/continue/ret/halt: lanes leave, nothing is written
                continue
            r, p = _dests(n.ins)
            if not (r & want_r or p & want_p):
                continue
            return evaluate(k, n.ins, depth)
        return None

    def operand(k: int, x: Any, kind: Any, depth: int) -> int | None:
        if kind is Operand.RS:
            return value(k, int(x), False, depth + 1)
        if kind is Operand.PS:
            v = value(k, int(x.index), True, depth + 1)
            return None if v is None else int(bool(v) != bool(x.negated))
        if kind is Operand.IMM32:
            return int(x) & 0xFFFFFFFF
        return None

    def evaluate(k: int, ins: Instruction, depth: int) -> int | None:
        d = ins.defn
        if ins.guard is not None:
            return None
        t = d.type
        if d.op == "movi" and t is not None and t.bits == 32:
            return int(ins.operands[1]) & 0xFFFFFFFF
        if d.op == "mov_sr":
            return wave_width if ins.operands[1] == SpecialRegister.WAVE_WIDTH else None
        if d.op == "setp_const":
            return int(d.variant == "true") if d.variant in ("true", "false") else None
        srcs = [operand(k, x, kind, depth) for x, kind in zip(ins.operands, d.operands, strict=True)
                if not kind.is_dest]
        if any(v is None for v in srcs):
            return None
        if t is ScalarType.PRED and d.op in ("and", "or", "xor", "mov"):
            a = [bool(v) for v in srcs]
            return int(a[0] if d.op == "mov" else a[0] and a[1] if d.op == "and" else
                       a[0] or a[1] if d.op == "or" else a[0] != a[1])
        if t not in (ScalarType.B32, ScalarType.U32, ScalarType.I32):
            return None
        signed = t is ScalarType.I32

        def sv(v: int) -> int:
            return v - (1 << 32) if signed and v >> 31 else v

        if d.op == "setp" and d.variant in _CMP and len(srcs) == 2:
            return int(_CMP[d.variant](sv(srcs[0]), sv(srcs[1])))
        if d.op == "mov" and len(srcs) == 1:
            return srcs[0]
        if d.op in _INT_OPS and len(srcs) == 2:
            return _INT_OPS[d.op](sv(srcs[0]), sv(srcs[1])) & 0xFFFFFFFF
        return None

    node = nodes[pos]
    p = node.ins.operands[0]
    v = value(pos, int(p.index), True, 0)
    return None if v is None else bool(v) != bool(p.negated)


def loop_may_exit(loop: Loop) -> bool:
    """Whether ``loop``'s body holds a way out of it: a ``break`` whose innermost loop is
    ``loop``, a ``ret`` or ``halt`` at any depth, or a ``call`` (not looked into: counted as a
    way out). False means the loop never ends once entered."""

    def walk(nodes: Sequence[Any], own: bool) -> bool:
        for n in nodes:
            if isinstance(n, If):
                if walk(n.then, own) or walk(n.orelse, own):
                    return True
            elif isinstance(n, Loop):
                if walk(n.body, False):
                    return True
            elif n.role in ("ret", "halt", "call") or (own and n.role == "break"):
                return True
        return False

    return walk(loop.body, True)


class ControlWalk:
    """Walk one kernel with calls inlined, driving ``spelling`` (see the module docstring).

    Args:
        module: the (verified) module, for the bodies of called functions.
        spelling: the backend's :class:`Spelling`.
        mask_stack: use the mask-stack strategy (else per-thread).
        goto_free: per-thread strategy for a target without ``goto`` or labels: a ``ret`` in
            an inlined call leaves it through a one-trip loop (see the module docstring and
            :meth:`Spelling.thread_escape`) instead of :meth:`Spelling.thread_ret`'s jump to
            the call's end. Has no effect on the mask-stack strategy (which never jumps).

    Attributes:
        frames: the open constructs, outermost first.
        max_depth: the deepest frame stack seen (how many ``fo``/``fp``/``fc`` to declare).
    """

    def __init__(self, module: Module, spelling: Any, mask_stack: bool, *, goto_free: bool = False) -> None:
        self.m = module
        self.s = spelling
        self.mask_stack = mask_stack
        self.goto_free = goto_free
        self.frames: list[Frame] = []
        self.max_depth = 0
        #: the wave width the target runs (the spelling's ``wave_width``; None: not one fixed W): an
        #: ``if`` whose condition depends only on it and on constants is folded (:func:`condition_value`)
        self.wave_width: int | None = getattr(spelling, "wave_width", None)
        #: the mask stack with per-thread islands (the spelling's ``islands``; see :meth:`_island`)
        self.islands = bool(getattr(spelling, "islands", False))
        #: islands may hold the workgroup barrier (the spelling's ``island_barriers``, default yes:
        #: a lane inactive at the island does not reach the barrier, as in the mask stack's own
        #: predicated barrier; no for a target whose mask stack runs barriers in every lane)
        self.island_barriers = bool(getattr(spelling, "island_barriers", True))
        self._island_memo: dict[int, bool] = {}

    def run(self, code: Sequence[Instruction]) -> None:
        """Lower one body (the kernel's code); the spelling receives everything."""
        self.s.body_begin(code)
        self._nodes(code, parse(code).nodes)
        self.s.body_end(code)

    # ---------------------------------------------------------------- islands
    def _island(self, node: Any) -> bool:
        """Mask stack, with a spelling that has ``islands``: whether ``node`` (an ``if`` or a
        loop) may run as a per-thread island. It may when nothing in it (calls followed) is a
        wave-collective instruction or anything outside :data:`ISLAND_CATEGORIES` (the workgroup
        ``barrier`` and ``fence`` allowed), and no control leaves it: no ``halt``, no ``ret`` of
        the body it is in, no ``break``/``continue`` of a loop around it. Then the lanes that are
        active where it starts run it with the target's own branches (:meth:`Spelling.island_begin`
        skips it in the others) and leave it together at its end: inside, each lane behaves as if
        it ran alone, which is what the spec asks of code without wave operations (§7.8), and no
        mask variable changes. The wave's next collective instruction, whose lowering waits for
        every existing lane (``vote.sync``/``shfl.sync`` with the warp's mask on PTX), joins the
        lanes again."""
        for n in walk([node]):
            if isinstance(n, (If, Loop)):
                continue
            role = n.role
            if role in ("halt", "ret"):
                return False
            if role in ("break", "continue") and (n.loop is None or not _inside(n.loop, node)):
                return False
            if role == "call":
                if not self._function_island_ok(int(n.ins.operands[0])):
                    return False
            elif role is None and not _island_instruction(n.ins, self.island_barriers):
                return False
        return True

    def _function_island_ok(self, index: int) -> bool:
        """Whether function ``index`` (and what it calls) holds only instructions an island may
        run and no ``halt``."""
        memo = self._island_memo
        if index not in memo:
            memo[index] = True  # (no recursion in verified code; a placeholder while visiting)
            ok = True
            for ins in self.m.functions[index].code:
                d = ins.defn
                if d.category is Category.CONTROL:  # its own structure, ret included, stays inside
                    ok = d.op != "halt" and (d.op != "call" or self._function_island_ok(int(ins.operands[0])))
                else:
                    ok = _island_instruction(ins, self.island_barriers)
                if not ok:
                    break
            memo[index] = ok
        return memo[index]

    # ---------------------------------------------------------------- frames
    def push(self, kind: str) -> Frame:
        f = Frame(kind, len(self.frames), self.s.frame_tag(kind))
        self.frames.append(f)
        self.max_depth = max(self.max_depth, len(self.frames))
        return f

    def innermost(self, kind: str) -> Frame | None:
        """The innermost open frame of ``kind`` (None when there is none)."""
        for f in reversed(self.frames):
            if f.kind == kind:
                return f
        return None

    # ---------------------------------------------------------------- the walk
    def _nodes(self, code: Sequence[Instruction], nodes: Sequence[Any]) -> None:
        s = self.s
        for pos, n in enumerate(nodes):
            if isinstance(n, If) and self.wave_width is not None:
                known = condition_value(self.m, nodes, pos, self.wave_width)
                if known is not None:
                    # a condition of W and constants: the same in every lane (the target runs one
                    # W), so the construct is its one live region; the other is never entered
                    s.at(code, n.index)
                    self._nodes(code, n.then if known else n.orelse)
                    continue
            if self.mask_stack and self.islands and isinstance(n, (If, Loop)) and self._island(n):
                tag = s.frame_tag("island")
                s.island_begin(tag)
                self.mask_stack = False
                try:
                    self._nodes(code, [n])
                finally:
                    self.mask_stack = True
                s.island_end(tag)
                continue
            if isinstance(n, If):
                s.at(code, n.index)
                self._if(n.ins.operands[0])
                self._nodes(code, n.then)
                if n.else_index is not None:
                    s.at(code, n.else_index)
                    self._else()
                    self._nodes(code, n.orelse)
                s.at(code, n.end_index)
                self._endif()
            elif isinstance(n, Loop):
                s.at(code, n.index)
                self._loop(loop_may_exit(n))
                self._nodes(code, n.body)
                s.at(code, n.end_index)
                self._endloop()
            else:
                s.at(code, n.index)
                self._leaf(n.role, n.ins)

    def _leaf(self, role: str | None, ins: Instruction) -> None:
        if role is None:
            self.s.instruction(ins)
        elif role == "call":
            self._call(int(ins.operands[0]))
        elif role in ("break", "continue"):
            self._jump(role, ins.guard)
        elif role == "ret":
            self._ret(self.innermost("call"), ins.guard)
        elif role == "halt":
            self._ret(None, ins.guard)
        else:  # pragma: no cover - verified code has no unmatched markers
            raise AssertionError(f"unmatched {role} in verified code")

    # ---------------------------------------------------------------- constructs
    def _if(self, p: Pred) -> None:
        f = self.push("if")
        if not self.mask_stack:
            self.s.thread_if(f, p)
            return
        s, d = self.s, f.depth
        c = s.condition(p)
        s.mask("mov", Mask("fo", d), A)
        s.mask("and", Mask("fp", d), A, ~c)
        s.mask("and", A, A, c)
        s.enter(f, "then")

    def _else(self) -> None:
        f = self.frames[-1]
        f.has_else = True
        if not self.mask_stack:
            self.s.thread_else(f)
            return
        s, d = self.s, f.depth
        s.leave(f, "then")
        s.mask("mov", A, Mask("fp", d))
        s.mask("mov", Mask("fp", d), FALSE)
        s.enter(f, "else")

    def _endif(self) -> None:
        f = self.frames.pop()
        if not self.mask_stack:
            self.s.thread_endif(f)
            return
        self.s.leave(f, "else" if f.has_else else "then")
        self.s.mask("mov", A, Mask("fo", f.depth))

    def _loop(self, exits: bool = True) -> None:
        f = self.push("loop")
        f.exits = exits
        if not self.mask_stack:
            self.s.thread_loop(f)
            return
        s, d = self.s, f.depth
        s.mask("mov", Mask("fo", d), A)
        s.mask("mov", Mask("fc", d), FALSE)
        s.loop_open(f)

    def _endloop(self) -> None:
        f = self.frames.pop()
        if not self.mask_stack:
            self.s.thread_endloop(f)
            if f.escaped:
                call = self.innermost("call")
                assert call is not None and call.structured
                self.s.thread_escape_loop(call)
            return
        s, d = self.s, f.depth
        s.mask("or", A, A, Mask("fc", d))
        s.mask("mov", Mask("fc", d), FALSE)
        s.loop_close(f)
        s.mask("mov", A, Mask("fo", d))

    def _call(self, index: int) -> None:
        f = self.push("call")
        code = self.m.functions[index].code
        if not self.mask_stack:
            body = parse(code)
            if self.goto_free:
                rets = [n for n in body.walk() if getattr(n, "role", None) == "ret"]
                f.structured = bool(rets)
                f.ret_in_loop = any(n.loop_parent is not None for n in rets)
            self.s.thread_call(f)
            self.s.body_begin(code)
            self._nodes(code, body.nodes)
            self.s.body_end(code)
            self.frames.pop()
            self.s.thread_endcall(f)
            return
        s = self.s
        s.mask("mov", Mask("fo", f.depth), A)
        s.enter(f, "call")
        s.body_begin(code)
        self._nodes(code, parse(code).nodes)
        s.body_end(code)
        self.frames.pop()
        s.leave(f, "call")
        s.mask("mov", A, Mask("fo", f.depth))

    def _leaving(self, guard: Pred | None) -> Mask:
        """Mask stack: ``x`` = the active lanes where ``guard`` holds."""
        if guard is None:
            self.s.mask("mov", X, A)
        else:
            self.s.mask("and", X, A, of_pred(guard))
        return X

    def _remove(self, x: Mask, above: int) -> None:
        """Mask stack: lanes in ``x`` leave every frame deeper than ``above`` (and ``A``)."""
        s = self.s
        for f in self.frames[above + 1:]:
            s.mask("and", Mask("fo", f.depth), Mask("fo", f.depth), ~x)
            if f.kind == "if":
                s.mask("and", Mask("fp", f.depth), Mask("fp", f.depth), ~x)
            elif f.kind == "loop":
                s.mask("and", Mask("fc", f.depth), Mask("fc", f.depth), ~x)
        s.mask("and", A, A, ~x)

    def _jump(self, role: str, guard: Pred | None) -> None:
        lf = self.innermost("loop")
        assert lf is not None, "verified code has break/continue only inside loops"
        if not self.mask_stack:
            self.s.thread_jump(role, lf, guard)
            return
        x = self._leaving(guard)
        self._remove(x, lf.depth)
        if role == "continue":
            self.s.mask("or", Mask("fc", lf.depth), Mask("fc", lf.depth), x)

    def _ret(self, call: Frame | None, guard: Pred | None) -> None:
        if not self.mask_stack:
            if call is not None and call.structured:
                loops = [f for f in self.frames[call.depth + 1:] if f.kind == "loop"]
                for f in loops:
                    f.escaped = True
                self.s.thread_escape(call, guard, bool(loops))
            else:
                self.s.thread_ret(call, guard)
            return
        # halted lanes leave every frame (never reactivated) but keep walking the program with
        # the wave, so collective operations keep a fixed member set
        self._remove(self._leaving(guard), -1 if call is None else call.depth)
