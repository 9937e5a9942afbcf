"""The ``.wave`` disassembler: :class:`~anywave.binary.module.Module` → canonical native text.

The output is the assembler's input: ``assemble(disassemble(m)) == m`` for every module
the assembler accepts, with the same instruction words (and the same debug locations, which
are printed as ``.loc`` lines). Structured control flow is indented; kernel arguments and
functions are printed by name (``$N``, a raw index, where no name can be resolved
unambiguously); float immediates are printed as the shortest decimal that reads back to
the same bits (:mod:`anywave.asm.floats`).
"""

from __future__ import annotations

import re

from anywave.asm.floats import FLOAT_FORMATS, format_float_bits
from anywave.asm.syntax import IDENT, quote
from anywave.binary.module import DeviceAddr, Function, Instruction, Kernel, LocalAddr, Module, Pred
from anywave.binary.structure import parse as parse_structure
from anywave.errors import WaveError
from anywave.isa.table import Flag, InstrDef, Operand
from anywave.isa.types import Capability, ScalarType

_INDENT = "    "
_NEST = "  "
_MNEMONIC_WIDTH = 14
_FLAG_NAMES = {1 << 0: "flat", 1 << 1: "w_invariant"}  # mirrors assembler.KERNEL_FLAG_NAMES


def disassemble(module: Module, *, locations: bool = True) -> str:
    """Print a Module as canonical native ``.wave`` text.

    With ``locations=False`` the debug table is left out (no ``.loc`` lines; the text starts
    with ``.nodebug``, so it assembles to the module without source locations).

    Returns text that :func:`anywave.asm.assemble` turns back into an equal Module (same
    kernels, ABI, functions, instructions, guards and debug locations), hence the same
    ``.wbin`` bytes.

    Raises:
        WaveError: a kernel, function or argument name that the text syntax cannot spell
            (names are ``[A-Za-z_][A-Za-z0-9_]*``).
    """
    return _Printer(module, locations).run()


def _check_name(what: str, name: str) -> str:
    if re.fullmatch(IDENT, name) is None:
        raise WaveError(f"{what} name {name!r} cannot be written in .wave text; names are "
                        "[A-Za-z_][A-Za-z0-9_]*")
    return name


class _Printer:
    def __init__(self, module: Module, locations: bool = True) -> None:
        self.m = module
        self.locations = locations
        self.callers = self._callers()

    def _callers(self) -> dict[int, list[Kernel]]:
        """function index -> kernels that reach it through calls."""
        calls = [{ins.operands[0] for ins in f.code if ins.defn.op == "call"} for f in self.m.functions]
        out: dict[int, list[Kernel]] = {i: [] for i in range(len(self.m.functions))}
        for k in self.m.kernels:
            todo = [ins.operands[0] for ins in k.code if ins.defn.op == "call"]
            seen: set[int] = set()
            while todo:
                i = todo.pop()
                if not isinstance(i, int) or i in seen or not 0 <= i < len(self.m.functions):
                    continue
                seen.add(i)
                todo.extend(calls[i])
            for i in sorted(seen):
                out[i].append(k)
        return out

    def run(self) -> str:
        major, minor = self.m.version
        parts = [f".version {major}.{minor}\n"]
        units = [*self.m.kernels, *self.m.functions]
        has_debug = self.locations and any(ins.loc is not None for unit in units for ins in unit.code)
        if not has_debug:
            # without it, assembling this text would record its own lines as debug info
            parts.append(".nodebug\n")
        for k in self.m.kernels:
            parts.append(self.kernel(k))
        for i, f in enumerate(self.m.functions):
            parts.append(self.function(i, f))
        return "\n".join(parts)

    # ------------------------------------------------------------------ blocks
    def kernel(self, k: Kernel) -> str:
        out = [f".kernel {_check_name('kernel', k.name)}"]
        for pf in getattr(k, "prints", ()):
            # aw.print call sites (the binary's PRINT section), one .print per site in site order
            types = ", ".join(ScalarType(t).spelling for t in pf.types)
            out.append(f".print {quote(pf.format)}" + (f" {types}" if types else "")
                       + (f" at {quote(pf.where)}" if pf.where else ""))
        for a in k.args:
            access = (" constant" if a.constant else f" {a.access.spelling}") if a.is_buffer else ""
            out.append(f".arg {_check_name('argument', a.name)} {'buffer' if a.is_buffer else 'scalar'} "
                       f"{a.type.spelling}{access}")
        out.append(f".registers {k.registers}")
        if k.local_memory:
            out.append(f".local_memory {k.local_memory}")
        if k.workgroup_size is not None:
            out.append(".workgroup_size " + ", ".join(str(d) for d in k.workgroup_size))
        if k.max_workgroup_size is not None:
            out.append(f".max_workgroup_size {k.max_workgroup_size}")
        caps = Capability(k.capabilities).spellings()
        if caps:
            out.append(".capabilities " + ", ".join(caps))
        elif self._inferred_caps(k):
            out.append(".capabilities none")
        if k.flags:
            names = [n for bit, n in _FLAG_NAMES.items() if k.flags & bit]
            rest = k.flags & ~sum(_FLAG_NAMES)
            out.append(".flags " + ", ".join(names + ([f"{rest:#x}"] if rest else [])))
        out.extend(self.code(k.code, lambda idx, buffer: self._arg_name(idx, buffer, [k])))
        out.append(".end\n")
        return "\n".join(out)

    def function(self, index: int, f: Function) -> str:
        out = [f".func {_check_name('function', f.name)}"]
        callers = self.callers.get(index, [])
        out.extend(self.code(f.code, lambda idx, buffer: self._arg_name(idx, buffer, callers)))
        out.append(".end\n")
        return "\n".join(out)

    def _inferred_caps(self, k: Kernel) -> Capability:
        cap = Capability.NONE
        bodies = [k.code] + [f.code for i, f in enumerate(self.m.functions) if k in self.callers.get(i, [])]
        for body in bodies:
            for ins in body:
                cap |= ins.defn.capability
        return cap

    @staticmethod
    def _arg_name(index: int, buffer: bool, kernels: list[Kernel]) -> str:
        """The name the assembler resolves back to ``index`` in every kernel, else ``$index``."""
        if not kernels:
            return f"${index}"
        names = set()
        for k in kernels:
            if not 0 <= index < len(k.args) or k.args[index].is_buffer != buffer:
                return f"${index}"
            name = k.args[index].name
            if next(i for i, a in enumerate(k.args) if a.name == name) != index:
                return f"${index}"
            names.add(name)
        return names.pop() if len(names) == 1 else f"${index}"

    # ------------------------------------------------------------------ code
    def code(self, code: list[Instruction], arg_name) -> list[str]:  # type: ignore[no-untyped-def]
        lines: list[str] = []
        body = parse_structure(code)  # indentation: a region's markers at its depth, its contents one deeper
        for i, ins in enumerate(code):
            pad = _INDENT + _NEST * body.node_at(i).depth
            if ins.loc is not None and self.locations:
                lines.append(f"{pad}.loc {quote(ins.loc.file)} {ins.loc.line} {ins.loc.col}")
            lines.append(pad + self.instruction(ins, arg_name))
        return lines

    def instruction(self, ins: Instruction, arg_name) -> str:  # type: ignore[no-untyped-def]
        d = ins.defn
        if Flag.GUARD_OPERAND in d.flags:
            return d.mnemonic + (f" {ins.guard}" if ins.guard is not None else "")
        guard = f"@{ins.guard} " if ins.guard is not None else ""
        ops = [self.operand(d, kind, v, arg_name) for kind, v in zip(d.operands, ins.operands, strict=False)]
        if not ops:
            return guard + d.mnemonic
        return f"{guard}{d.mnemonic.ljust(_MNEMONIC_WIDTH)} {', '.join(ops)}"

    def operand(self, d: InstrDef, kind: Operand, v: object, arg_name) -> str:  # type: ignore[no-untyped-def]
        if kind.reg_count:
            assert isinstance(v, int)
            return f"r{v}" if kind.reg_count == 1 else f"r{v}:r{v + kind.reg_count - 1}"
        if kind is Operand.PD:
            return f"p{v}"
        if kind is Operand.PS:
            assert isinstance(v, Pred)
            return str(v)
        if kind in (Operand.IMM32, Operand.IMM64):
            assert isinstance(v, int) and d.type is not None
            return format_immediate(v, d.type, 32 * kind.words)
        if kind in (Operand.SREG, Operand.SCOPE, Operand.ORDER):
            return v.spelling  # type: ignore[attr-defined,no-any-return]
        if kind is Operand.ARG:
            assert isinstance(v, int)
            return arg_name(v, False)  # type: ignore[no-any-return]
        if kind in (Operand.DADDR, Operand.DADDR64):
            assert isinstance(v, DeviceAddr)
            regs = f"r{v.reg}" if kind is Operand.DADDR else f"r{v.reg}:r{v.reg + 1}"
            return f"{arg_name(v.buffer, True)}[{regs}{_offset(v.offset)}]"
        if kind is Operand.LADDR:
            assert isinstance(v, LocalAddr)
            return f"[r{v.reg}{_offset(v.offset)}]"
        if kind in (Operand.FD, Operand.FS):
            return f"f{v}"
        if kind is Operand.FUNC:
            assert isinstance(v, int)
            if 0 <= v < len(self.m.functions):
                return _check_name("function", self.m.functions[v].name)
            return f"${v}"
        raise AssertionError(f"unhandled operand kind {kind}")  # pragma: no cover


def _offset(offset: int) -> str:
    if offset == 0:
        return ""
    return f"+{offset}" if offset > 0 else f"-{-offset}"


def format_immediate(value: int, t: ScalarType, width: int) -> str:
    """Text for an immediate of type ``t`` stored in ``width`` bits (unsigned or signed int).

    Floats: shortest round-tripping decimal / inf / nan / raw hex (see floats.py); a 16-bit
    float immediate with bits above the low half set is printed as raw hex. Integers:
    ``b*`` in hex, ``u*`` unsigned decimal, ``i*`` signed decimal.
    """
    u = value & ((1 << width) - 1)
    if t.is_float:
        fbits = sum(FLOAT_FORMATS[t]) + 1
        if u >> fbits:
            return f"{u:#x}"
        return format_float_bits(u, t)
    if t.spelling.startswith("b"):
        return f"{u:#x}"
    if t.is_signed and u >> (width - 1):
        return str(u - (1 << width))
    return str(u)
