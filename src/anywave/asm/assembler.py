"""The ``.wave`` assembler: text → :class:`anywave.binary.module.Module`.

The native syntax is defined in docs/decisions.md ("Assembly text"); the reference
toolchain's dialect is accepted too (:mod:`anywave.asm.dialect` says when a kernel is
read in that dialect and how its mnemonics map). Everything is driven by the instruction
table: a mnemonic is looked up in ``BY_MNEMONIC`` and its operands are parsed by their
table kinds.

Work happens in three passes so that names may be used before they are defined:

1. *lex*: lines → blocks (``.kernel`` / ``.func`` … ``.end``) of directives and raw
   instructions (tokens with columns);
2. *parse*: each raw instruction → table record + operand values, with kernel-argument
   and function names left as placeholders; structured control flow is checked for
   balance here;
3. *resolve*: function names → indices, argument names → indices (a ``.func`` body
   resolves names in the kernels that call it), then registers and capabilities are
   inferred where the text leaves them out.

Every error is an :class:`anywave.errors.AsmError` carrying file:line:column and the
offending line with a caret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from anywave.asm import dialect
from anywave.asm.operands import (
    ArgRef,
    FuncRef,
    OperandParser,
    PendingDeviceAddr,
    operand_kinds_text,
)
from anywave.asm.syntax import (
    IDENT,
    Line,
    Token,
    check_literal_length,
    did_you_mean,
    first_word,
    parse_int,
    split_operands,
    split_words,
    strip_comment,
    unquote,
)
from anywave.binary.module import (
    FORMAT_VERSION,
    FORMAT_VERSIONS,
    KERNEL_FLAG_FLAT,
    KERNEL_FLAG_W_INVARIANT,
    PRINT_ARG,
    Arg,
    DeviceAddr,
    Function,
    Instruction,
    Kernel,
    LocalAddr,
    Module,
    Pred,
    PrintFormat,
    reachable_functions,
    settle_version,
    version_problem,
    version_text,
)
from anywave.binary.structure import parse as parse_structure
from anywave.errors import AsmError, SourceLoc
from anywave.isa.table import BY_MNEMONIC, Flag, InstrDef, Operand
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

#: kernel flags by their ``.flags`` spelling
KERNEL_FLAG_NAMES: dict[str, int] = {"flat": KERNEL_FLAG_FLAT, "w_invariant": KERNEL_FLAG_W_INVARIANT}

_KERNEL_DIRECTIVES = (".arg", ".registers", ".local_memory", ".workgroup_size", ".max_workgroup_size",
                      ".capabilities", ".flags", ".dialect", ".print")
_STRING = re.compile(r'\s*("(?:[^"\\]|\\.)*")')
_PRINT_TYPES = {t.spelling: t for t in ScalarType}
_BLOCK_DIRECTIVES = (".loc", ".end")
_TOP_DIRECTIVES = (".version", ".nodebug", ".kernel", ".func")
_LABEL = re.compile(rf"\s*({IDENT})\s*:(?=\s|$)")
_U32_MAX = (1 << 32) - 1


@dataclass
class _RawIns:
    line: Line
    guard: Token | None
    mnemonic: Token
    operands: list[Token]
    loc: SourceLoc | None


@dataclass
class _Block:
    kind: str  # "kernel" or "func"
    name: str
    line: Line
    name_tok: Token
    directives: dict[str, tuple[Line, list[Token]]] = field(default_factory=dict)
    args: list[tuple[Line, list[Token]]] = field(default_factory=list)
    #: ``.print`` directives in site order: (line, code without comment, end of the word, word)
    prints: list[tuple[Line, str, int, Token]] = field(default_factory=list)
    body: list[_RawIns] = field(default_factory=list)
    #: reference dialect labels: (name, index into body, line, token)
    labels: list[tuple[str, int, Line, Token]] = field(default_factory=list)
    end_line: Line | None = None


@dataclass
class _Parsed:
    defn: InstrDef
    operands: list[object]
    guard: Pred | None
    loc: SourceLoc | None
    raw: _RawIns


@dataclass
class _Unit:
    """A kernel or function after parsing: code with unresolved names."""

    kind: str
    name: str
    line: Line
    name_tok: Token
    code: list[_Parsed]
    kernel: Kernel | None = None
    prologue: list[Instruction] = field(default_factory=list)


def assemble(text: str, filename: str = "<string>", *, debug: bool = True) -> Module:
    """Assemble ``.wave`` text into a Module.

    Args:
        text: the source, native syntax and/or the reference toolchain's dialect.
        filename: used in error locations and in the debug table.
        debug: record each instruction's own ``filename:line:column`` in the debug table, so
            verifier and emulator errors point at the ``.wave`` line. This happens only when
            the text has no ``.loc`` directive (explicit locations win) and no ``.nodebug``
            directive (which the disassembler prints for modules without debug info, so a
            round trip stays byte-identical).

    Returns:
        A Module whose kernels and functions appear in text order (``call`` operands index
        ``Module.functions`` in the order the ``.func`` blocks, and reference-dialect label
        functions, appear).

    Raises:
        AsmError: for any malformed input, with file:line:column, the offending line and a
        caret under the offending token.
    """
    return _Assembler(text, filename, debug).run()


class _Assembler:
    def __init__(self, text: str, filename: str, debug: bool = True) -> None:
        self.filename = filename
        self.debug = debug
        self.saw_loc = False
        self.nodebug = False
        if text.startswith("\ufeff"):  # a UTF-8 byte order mark is not part of the text
            text = text[1:]
        # lines end at "\n" only (an optional "\r" before it is dropped), so line numbers
        # match what editors show
        self.lines = [Line(filename, i + 1, t[:-1] if t.endswith("\r") else t)
                      for i, t in enumerate(text.split("\n"))]
        #: the ``.version`` directive's version and where it is (None: the module gets the lowest
        #: version that has its instructions, docs/spec.md §1.4)
        self.version: tuple[int, int] | None = None
        self.version_at: tuple[Line, Token] | None = None
        self.blocks: list[_Block] = []

    # ------------------------------------------------------------------ pass 1: lex
    def lex(self) -> None:
        block: _Block | None = None
        pending_loc: SourceLoc | None = None
        seen_version = False
        for line in self.lines:
            code = strip_comment(line.text)
            if not code.strip():
                continue
            word, end = first_word(code)
            assert word is not None
            if word.text.startswith("."):
                name = word.text
                if block is None:
                    if name == ".version":
                        if seen_version:
                            raise line.error_at("duplicate .version directive", word)
                        seen_version = True
                        self.version = self._version(line, split_words(code, end), word)
                        self.version_at = (line, split_words(code, end)[0])
                    elif name == ".nodebug":
                        extra = split_words(code, end)
                        if extra:
                            raise line.error_at(f"unexpected text after .nodebug: {extra[0].text!r}", extra[0])
                        self.nodebug = True
                    elif name in (".kernel", ".func"):
                        block = self._open_block(line, word, split_words(code, end))
                        pending_loc = None
                    elif name in _KERNEL_DIRECTIVES or name in _BLOCK_DIRECTIVES:
                        raise line.error_at(f"directive {name} outside a .kernel or .func block", word)
                    else:
                        raise line.error_at(f"unknown directive {name!r}; expected one of "
                                            f"{', '.join(_TOP_DIRECTIVES)}"
                                            + did_you_mean(name, _TOP_DIRECTIVES), word)
                    continue
                if name == ".end":
                    extra = split_words(code, end)
                    if extra:
                        raise line.error_at(f"unexpected text after .end: {extra[0].text!r}", extra[0])
                    block.end_line = line
                    self.blocks.append(block)
                    block = None
                    continue
                if name == ".loc":
                    pending_loc = self._loc(line, code, end, word)
                    self.saw_loc = True
                    continue
                if name in (".kernel", ".func", ".version"):
                    raise line.error_at(f"missing .end: {block.kind} {block.name!r} opened at line "
                                        f"{block.line.lineno} is still open at {name}", word)
                if name not in _KERNEL_DIRECTIVES:
                    valid = _KERNEL_DIRECTIVES + _BLOCK_DIRECTIVES
                    raise line.error_at(f"unknown directive {name!r}" + did_you_mean(name, valid)
                                        + f"; valid here: {', '.join(valid)}", word)
                if block.kind == "func":
                    raise line.error_at(f"directive {name} is not allowed in a .func block (functions "
                                        "run on their caller's registers and arguments)", word)
                if name == ".print":
                    block.prints.append((line, code, end, word))
                    continue
                args = split_words(code, end)
                if name == ".arg":
                    block.args.append((line, args))
                elif name in block.directives:
                    first = block.directives[name][0].lineno
                    raise line.error_at(f"duplicate {name} directive (first at line {first})", word)
                else:
                    block.directives[name] = (line, [word, *args])
                continue
            if block is None:
                raise line.error_at(f"instruction {word.text!r} outside a .kernel or .func block; "
                                    "start one with .kernel NAME", word)
            # label?  (reference dialect)
            m = _LABEL.match(code)
            if m is not None:
                block.labels.append((m.group(1), len(block.body), line, Token(m.group(1), m.start(1) + 1)))
                rest = code[m.end():]
                if not rest.strip():
                    continue
                word, end = first_word(code, m.end())
                assert word is not None
            guard = None
            if word.text.startswith("@"):
                guard = Token(word.text[1:], word.col + 1)
                word, end = first_word(code, end)
                if word is None:
                    raise line.error(f"guard @{guard.text} is not followed by an instruction",
                                     guard.col - 1, len(guard.text) + 1)
            block.body.append(_RawIns(line, guard, word, split_operands(line, code, end), pending_loc))
            pending_loc = None
        if block is not None:
            last = self.lines[-1] if self.lines else block.line
            raise block.line.error(f"missing .end: {block.kind} {block.name!r} opened here is still open "
                                   f"at the end of the file (line {last.lineno})", block.name_tok.col,
                                   len(block.name_tok.text))

    def _version(self, line: Line, words: list[Token], word: Token) -> tuple[int, int]:
        if len(words) != 1 or re.fullmatch(r"\d+\.\d+", words[0].text) is None:
            tok = words[0] if words else word
            raise line.error_at("expected .version MAJOR.MINOR (e.g. .version 1.0)", tok)
        check_literal_length(line, words[0], "version number")
        major, minor = words[0].text.split(".")
        if (int(major), int(minor)) not in FORMAT_VERSIONS:
            raise line.error_at(f"unsupported .version {words[0].text}; this assembler reads "
                                f"{', '.join(version_text(v) for v in FORMAT_VERSIONS)}", words[0])
        return int(major), int(minor)

    def _open_block(self, line: Line, word: Token, words: list[Token]) -> _Block:
        kind = word.text[1:]
        if len(words) != 1 or re.fullmatch(IDENT, words[0].text) is None:
            tok = words[0] if words else word
            got = " ".join(w.text for w in words) or "nothing"
            raise line.error_at(f"expected .{kind} NAME (a name like [A-Za-z_][A-Za-z0-9_]*), "
                                f"got {got!r}", tok)
        return _Block(kind, words[0].text, line, words[0])

    def _loc(self, line: Line, code: str, end: int, word: Token) -> SourceLoc:
        m = re.compile(r'\s*("(?:[^"\\]|\\.)*")').match(code, end)
        if m is None:
            bad = split_words(code, end)
            raise line.error_at("expected .loc \"FILE\" LINE [COLUMN] with the file in double quotes",
                                bad[0] if bad else word)
        file = unquote(line, Token(m.group(1), m.start(1) + 1))
        nums = split_words(code, m.end())
        if not 1 <= len(nums) <= 2:
            tok = nums[2] if len(nums) > 2 else word
            raise line.error_at("expected .loc \"FILE\" LINE [COLUMN]", tok)
        lineno = parse_int(line, nums[0], "a line number", 0, _U32_MAX)
        col = parse_int(line, nums[1], "a column number", 0, _U32_MAX) if len(nums) == 2 else 0
        return SourceLoc(file, lineno, col)

    # ------------------------------------------------------------------ pass 2: parse
    def parse_instruction(self, raw: _RawIns, parser: OperandParser, reference: bool) -> _Parsed:
        line, mn_tok = raw.line, raw.mnemonic
        operands = raw.operands
        mnemonic = mn_tok.text
        if reference:
            mnemonic, operands = dialect.strip_cache_hints(mnemonic, operands)
            alias = dialect.lookup(mnemonic)
            if alias is not None:
                return self._parse_alias(raw, alias, mnemonic, operands, parser)
        defn = BY_MNEMONIC.get(mnemonic)
        if defn is None:
            choices: Iterable[str] = BY_MNEMONIC
            if reference:
                choices = list(BY_MNEMONIC) + list(dialect.ALIASES)
            raise line.error_at(f"unknown mnemonic {mnemonic!r}" + did_you_mean(mnemonic, set(choices)),
                                mn_tok)
        return self._parse_with(raw, defn, operands, parser, order=None, defaults=())

    def _parse_alias(self, raw: _RawIns, alias: dialect.Alias, name: str, operands: list[Token],
                     parser: OperandParser) -> _Parsed:
        errors: list[tuple[str, AsmError]] = []
        for native in alias.native:
            defn = BY_MNEMONIC[native]
            try:
                if alias.fixed:
                    need = len(defn.operands) - len(alias.fixed) + len(alias.ignored)
                    if len(operands) != need:
                        tok = operands[need] if len(operands) > need else raw.mnemonic
                        raise raw.line.error_at(f"wrong operand count: {name} takes {need} register operands, "
                                                f"got {len(operands)}", tok)
                parsed = self._parse_with(raw, defn, operands, parser, alias.order, alias.defaults,
                                          dict(alias.fixed))
                for i in alias.ignored:
                    if i < len(operands):
                        parser.reg(raw.line, operands[i], 1)
                return parsed
            except AsmError as exc:
                errors.append((native, exc))
        if len(errors) == 1:
            raise errors[0][1]
        detail = "; ".join(f"as {n}: {e.message}" for n, e in errors)
        raise raw.line.error(f"no form of {name!r} accepts these operands ({detail})",
                             raw.mnemonic.col, len(raw.mnemonic.text))

    def _parse_with(self, raw: _RawIns, defn: InstrDef, operands: list[Token], parser: OperandParser,
                    order: tuple[int, ...] | None, defaults: tuple[object, ...],
                    fixed: dict[int, object] | None = None) -> _Parsed:
        line, mn_tok = raw.line, raw.mnemonic
        guard = parser.pred(line, raw.guard) if raw.guard is not None else None
        if raw.guard is not None and Flag.NO_GUARD in defn.flags:
            raise line.error(f"{defn.mnemonic} cannot carry a guard predicate (guards are not allowed on "
                             "if/else/endif/loop/endloop, barrier, fence, call)",
                             raw.guard.col - 1, len(raw.guard.text) + 1)
        if Flag.GUARD_OPERAND in defn.flags:
            if len(operands) > 1:
                raise line.error_at(f"{defn.mnemonic} takes at most one operand (a guard predicate "
                                    f"such as p1 or !p1), got {len(operands)}", operands[1])
            if operands:
                if raw.guard is not None:
                    raise line.error_at(f"{defn.mnemonic} has a guard twice (@{raw.guard.text} "
                                        f"and {operands[0].text}); write one of them", operands[0])
                guard = parser.pred(line, operands[0])
            return _Parsed(defn, [], guard, raw.loc, raw)
        n = len(defn.operands)
        given = len(operands)
        if not fixed and not n - len(defaults) <= given <= n:
            want = f"{n}" if not defaults else f"{n - len(defaults)} to {n}"
            tok = operands[n] if given > n else mn_tok
            raise line.error_at(f"wrong operand count: {defn.mnemonic} takes {want} operands "
                                f"({operand_kinds_text(defn)}), got {given}", tok)
        values: list[object] = []
        for i, kind in enumerate(defn.operands):
            if fixed and i in fixed:  # a reference alias's implicit operand
                values.append(fixed[i])
                continue
            src = order[i] if order is not None else i
            if src < given:
                values.append(parser.operand(line, operands[src], kind, defn))
            else:
                values.append(defaults[len(defaults) - (n - i)])
        if defn.op == "red" and Operand.ORDER in defn.operands:
            k = defn.operands.index(Operand.ORDER)
            if values[k] not in (MemoryOrder.RELAXED, MemoryOrder.RELEASE):
                src = order[k] if order is not None else k
                tok = operands[src] if src < given else mn_tok
                raise line.error_at(f"the order of a non-returning atomic ({defn.mnemonic}) must be "
                                    f".relaxed or .release, got {values[k].spelling} (it has no result "  # type: ignore[attr-defined]
                                    "to acquire; spec §6.1)", tok)
        return _Parsed(defn, values, guard, raw.loc, raw)

    def check_structure(self, unit_kind: str, name: str, code: list[_Parsed], end_line: Line) -> None:
        """Raise the first structure error of a body (spec §7.2 rules 1-2), worded with line
        numbers; the region tree is :mod:`anywave.binary.structure`'s."""
        problems = [p for p in parse_structure(code).problems if p.kind != "too-deep"]
        if not problems:
            return
        first = next((p for p in problems if p.kind != "unclosed"), None)
        if first is None:  # only unclosed regions: name the innermost
            prob = problems[-1]
            closer = "endif" if prob.role == "if" else "endloop"
            p = code[prob.index]
            raise p.raw.line.error_at(f"unbalanced control flow: {prob.role} is never closed by {closer} before "
                                      f"the end of {unit_kind} {name!r} (line {end_line.lineno})", p.raw.mnemonic)
        p = code[first.index]
        op, tok = first.role, p.raw.mnemonic
        other = code[first.other].raw.line.lineno if first.other is not None else None
        if first.kind == "else-without-if":
            inner = f" (innermost open region is the loop at line {other})" if other is not None else ""
            raise p.raw.line.error_at("else without a matching if" + inner, tok)
        if first.kind == "second-else":
            raise p.raw.line.error_at(f"second else for the if at line {other}", tok)
        if first.kind == "unmatched-close":
            want = "if" if op == "endif" else "loop"
            if other is None:
                raise p.raw.line.error_at(f"{op} without a matching {want}", tok)
            closer = "endif" if first.other_role == "if" else "endloop"
            raise p.raw.line.error_at(f"{op} closes the {first.other_role} opened at line {other}; expected "
                                      f"{closer}", tok)
        raise p.raw.line.error_at(f"{op} outside a loop", tok)  # jump-outside-loop

    # ------------------------------------------------------------------ kernel header
    def kernel_header(self, b: _Block) -> Kernel:
        k = Kernel(b.name)
        names: dict[str, Line] = {}
        for line, words in b.args:
            k.args.append(self._arg(line, words, names))
        d = b.directives
        if ".registers" in d:
            k.registers = self._single_int(d[".registers"], "a register count", 1, LIMITS.max_registers)
        if ".local_memory" in d:
            k.local_memory = self._single_int(d[".local_memory"], "a local memory size in bytes", 0, _U32_MAX)
        if ".max_workgroup_size" in d:
            k.max_workgroup_size = self._single_int(d[".max_workgroup_size"], "a thread count", 1, _U32_MAX)
        if ".workgroup_size" in d:
            line, words = d[".workgroup_size"]
            dims = words[1:]
            if not 1 <= len(dims) <= 3:
                raise line.error_at("expected .workgroup_size X[, Y[, Z]]",
                                    dims[3] if len(dims) > 3 else words[0])
            x, y, z = ([parse_int(line, t, "a workgroup dimension", 1, _U32_MAX) for t in dims] + [1, 1])[:3]
            k.workgroup_size = (x, y, z)
        for line, code, end, word in b.prints:
            k.prints.append(self._print(line, code, end, word))
        if k.prints and (not k.args or k.args[-1].name != PRINT_ARG or not k.args[-1].is_buffer):
            line, _, _, word = b.prints[0]
            raise line.error_at(f"a kernel with .print sites must have the {PRINT_ARG!r} buffer as its last "
                                f"argument (.arg {PRINT_ARG} buffer u32 readwrite)", word)
        if ".flags" in d:
            line, words = d[".flags"]
            for t in words[1:]:
                if t.text in KERNEL_FLAG_NAMES:
                    k.flags |= KERNEL_FLAG_NAMES[t.text]
                elif t.text[:1].isdigit():
                    k.flags |= parse_int(line, t, "a flag value", 0, _U32_MAX)
                else:
                    raise line.error_at(f"unknown kernel flag {t.text!r}; known flags: "
                                        f"{', '.join(KERNEL_FLAG_NAMES)} (or a number)", t)
        return k

    def _print(self, line: Line, code: str, end: int, word: Token) -> PrintFormat:
        # .print "FORMAT" [TYPE[, TYPE...]] [at "WHERE"]
        usage = 'expected .print "FORMAT" [TYPE, ...] [at "FILE:LINE"] with the format in double quotes'
        m = _STRING.match(code, end)
        if m is None:
            bad = split_words(code, end)
            raise line.error_at(usage, bad[0] if bad else word)
        fmt = unquote(line, Token(m.group(1), m.start(1) + 1))
        words = split_words(code, m.end())
        types: list[ScalarType] = []
        where = ""
        for i, t in enumerate(words):
            if t.text == "at":
                w = _STRING.match(code, t.col - 1 + len(t.text))
                if w is None:
                    raise line.error_at('expected a double-quoted place after "at" (at "FILE:LINE")',
                                        words[i + 1] if i + 1 < len(words) else t)
                where = unquote(line, Token(w.group(1), w.start(1) + 1))
                rest = split_words(code, w.end())
                if rest:
                    raise line.error_at(f"unexpected text after the place: {rest[0].text!r}", rest[0])
                break
            if t.text not in _PRINT_TYPES:
                raise line.error_at(f"unknown print value type {t.text!r}; expected one of "
                                    f"{', '.join(_PRINT_TYPES)}" + did_you_mean(t.text, tuple(_PRINT_TYPES)), t)
            types.append(_PRINT_TYPES[t.text])
        return PrintFormat(fmt, tuple(types), where)

    def capabilities(self, b: _Block) -> Capability | None:
        if ".capabilities" not in b.directives:
            return None
        line, words = b.directives[".capabilities"]
        known = Capability.names()
        cap = Capability.NONE
        items = words[1:]
        if len(items) == 1 and items[0].text == "none":
            return cap
        for t in items:
            if t.text not in known:
                raise line.error_at(f"unknown capability {t.text!r}" + did_you_mean(t.text, known)
                                    + f"; known: {', '.join(known)}, or none", t)
            cap |= known[t.text]
        return cap

    def _single_int(self, entry: tuple[Line, list[Token]], what: str, lo: int, hi: int) -> int:
        line, words = entry
        if len(words) != 2:
            tok = words[2] if len(words) > 2 else words[0]
            raise line.error_at(f"expected {words[0].text} followed by {what}", tok)
        return parse_int(line, words[1], what, lo, hi)

    def _arg(self, line: Line, words: list[Token], names: dict[str, Line]) -> Arg:
        usage = "expected .arg NAME buffer TYPE ACCESS or .arg NAME scalar TYPE"
        if len(words) < 3:
            raise line.error(usage + f", got {len(words)} field(s)", words[0].col if words else 1)
        name, kind_tok, type_tok = words[:3]
        if re.fullmatch(IDENT, name.text) is None:
            raise line.error_at(f"argument name {name.text!r} is not a name ([A-Za-z_][A-Za-z0-9_]*)", name)
        if name.text in names:
            raise line.error_at(f"duplicate argument {name.text!r} (first declared at line "
                                f"{names[name.text].lineno})", name)
        names[name.text] = line
        if kind_tok.text not in ("buffer", "scalar"):
            raise line.error_at(f"expected argument kind buffer or scalar, got {kind_tok.text!r}", kind_tok)
        kind = ArgKind.BUFFER if kind_tok.text == "buffer" else ArgKind.SCALAR
        allowed = BUFFER_TYPES if kind is ArgKind.BUFFER else SCALAR_ARG_TYPES
        spellings = {t.spelling: t for t in allowed}
        t = spellings.get(type_tok.text)
        if t is None:
            raise line.error_at(f"a {kind_tok.text} argument's type must be one of "
                                f"{', '.join(spellings)}, got {type_tok.text!r}", type_tok)
        access_names = {a.spelling: a for a in Access}
        rest = words[3:]
        constant = False
        if kind is ArgKind.BUFFER:
            if not rest:
                raise line.error("a buffer argument needs its access: read, write, readwrite or constant",
                                 type_tok.col + len(type_tok.text) + 1)
            constant = rest[0].text == "constant"  # a read buffer with the constant hint (WAVE 1.1)
            access = Access.READ if constant else access_names.get(rest[0].text)
            if access is None:
                raise line.error_at(f"expected access read, write, readwrite or constant, got {rest[0].text!r}",
                                    rest[0])
        else:
            access = Access.READ
            if rest and rest[0].text != "read":
                raise line.error_at(f"scalar arguments are read-only; expected read or nothing, "
                                    f"got {rest[0].text!r}", rest[0])
        if len(rest) > 1:
            raise line.error_at(f"unexpected {rest[1].text!r}; " + usage, rest[1])
        return Arg(name.text, kind, t, access, constant)

    # ------------------------------------------------------------------ driver
    def run(self) -> Module:
        self.lex()
        if self.debug and not self.saw_loc and not self.nodebug:
            for block in self.blocks:
                for raw in block.body:
                    raw.loc = SourceLoc(self.filename, raw.line.lineno, raw.mnemonic.col)
        units: list[_Unit] = []
        func_index: dict[str, tuple[int, _Unit]] = {}
        kernel_names: dict[str, Line] = {}
        cap_decl: dict[int, Capability | None] = {}
        reg_decl: dict[int, bool] = {}

        def add_function(unit: _Unit) -> None:
            if unit.name in func_index:
                prev = func_index[unit.name][1].line.lineno
                raise unit.line.error_at(f"duplicate function {unit.name!r} (first defined at line {prev})",
                                         unit.name_tok)
            func_index[unit.name] = (len(func_index), unit)
            units.append(unit)

        for b in self.blocks:
            if b.kind == "func":
                if b.labels:
                    _, _, line, tok = b.labels[0]
                    raise line.error_at("labels are only allowed in reference-dialect kernels", tok)
                parser = OperandParser()
                code = [self.parse_instruction(r, parser, False) for r in b.body]
                self.check_structure("function", b.name, code, b.end_line or b.line)
                add_function(_Unit("func", b.name, b.line, b.name_tok, code))
                continue
            if b.name in kernel_names:
                raise b.line.error_at(f"duplicate kernel {b.name!r} (first defined at line "
                                      f"{kernel_names[b.name].lineno})", b.name_tok)
            kernel_names[b.name] = b.line
            reference = self._is_reference(b)
            if not reference and b.labels:
                _, _, line, tok = b.labels[0]
                raise line.error_at(f"labels are only allowed in reference-dialect kernels; kernel "
                                    f"{b.name!r} is native (it has .arg directives or .dialect native), "
                                    "so write a .func block and call it instead", tok)
            kernel = self.kernel_header(b)
            parser = OperandParser(lenient=reference, flat_buffer=0)
            if reference:
                if b.args:
                    line, words = b.args[0]
                    raise line.error("reference-dialect kernels get their arguments from .registers; "
                                     ".arg is not allowed", words[0].col if words else 1)
                kernel.flags |= KERNEL_FLAG_FLAT
            first_label = b.labels[0][1] if b.labels else len(b.body)
            code = [self.parse_instruction(r, parser, reference) for r in b.body[:first_label]]
            self.check_structure("kernel", b.name, code, b.end_line or b.line)
            unit = _Unit("kernel", b.name, b.line, b.name_tok, code, kernel=kernel)
            units.append(unit)
            cap_decl[id(unit)] = self.capabilities(b)
            reg_decl[id(unit)] = ".registers" in b.directives
            for i, (label, start, line, tok) in enumerate(b.labels):
                stop = b.labels[i + 1][1] if i + 1 < len(b.labels) else len(b.body)
                fcode = [self.parse_instruction(r, parser, True) for r in b.body[start:stop]]
                end = b.labels[i + 1][2] if i + 1 < len(b.labels) else (b.end_line or line)
                self.check_structure("function", label, fcode, end)
                add_function(_Unit("func", label, line, tok, fcode))
            if reference:
                if not reg_decl[id(unit)]:
                    kernel.registers = max(1, _max_register(p for p in code))
                    reg_decl[id(unit)] = True
                kernel.args = dialect.flat_args(kernel.registers)
                unit.prologue = dialect.flat_prologue(kernel.registers)

        functions = [u for u in units if u.kind == "func"]
        kernels = [u for u in units if u.kind == "kernel"]
        # function names -> indices
        for u in units:
            for p in u.code:
                for i, v in enumerate(p.operands):
                    if isinstance(v, FuncRef):
                        if v.name not in func_index:
                            raise v.line.error_at(f"call to undefined function {v.name!r}"
                                                  + did_you_mean(v.name, func_index), v.tok)
                        p.operands[i] = func_index[v.name][0]
        reach = {id(k): set(reachable_functions(functions, k.code)) for k in kernels}
        # argument names -> indices
        for k in kernels:
            assert k.kernel is not None
            self._resolve_args(k, [k.kernel])
        for idx, f in enumerate(functions):
            callers = [k.kernel for k in kernels if idx in reach[id(k)] and k.kernel is not None]
            self._resolve_args(f, callers)
        module = Module(version=self.version or FORMAT_VERSION)
        module.functions = [Function(f.name, _instructions(f)) for f in functions]
        for k in kernels:
            kernel = k.kernel
            assert kernel is not None
            kernel.code = k.prologue + _instructions(k)
            bodies = [kernel.code] + [module.functions[i].code for i in sorted(reach[id(k)])
                                      if i < len(module.functions)]
            declared = cap_decl[id(k)]
            if declared is None:
                cap = Capability.NONE
                for body in bodies:
                    for ins in body:
                        cap |= ins.defn.capability
                kernel.capabilities = cap
            else:
                kernel.capabilities = declared
            if not reg_decl[id(k)]:
                kernel.registers = max(1, max((_max_register_ins(ins) for body in bodies for ins in body),
                                              default=0))
            module.kernels.append(kernel)
        if self.version is None:
            settle_version(module)
        else:
            why = version_problem(module)
            if why is not None and self.version_at is not None:
                line, tok = self.version_at
                raise line.error_at(why, tok)
        return module

    def _is_reference(self, b: _Block) -> bool:
        if ".dialect" in b.directives:
            line, words = b.directives[".dialect"]
            if len(words) != 2 or words[1].text not in ("reference", "native"):
                tok = words[1] if len(words) > 1 else words[0]
                raise line.error_at("expected .dialect reference or .dialect native", tok)
            return words[1].text == "reference"
        return dialect.detect(has_args=bool(b.args), has_labels=bool(b.labels),
                              mnemonics=[r.mnemonic.text for r in b.body])

    def _resolve_args(self, unit: _Unit, kernels: list[Kernel]) -> None:
        for p in unit.code:
            for i, v in enumerate(p.operands):
                if isinstance(v, ArgRef):
                    p.operands[i] = self._arg_index(unit, v, kernels)
                elif isinstance(v, PendingDeviceAddr):
                    buf = v.arg if isinstance(v.arg, int) else self._arg_index(unit, v.arg, kernels)
                    p.operands[i] = DeviceAddr(buf, v.reg, v.offset)

    def _arg_index(self, unit: _Unit, ref: ArgRef, kernels: list[Kernel]) -> int:
        want = "buffer" if ref.buffer else "scalar"
        use = "a device address" if ref.buffer else "ldarg"
        if not kernels:
            raise ref.line.error_at(f"function {unit.name!r} names argument {ref.name!r}, but no kernel "
                                    "calls "
                                    f"it, so the name cannot be resolved; use a raw index ($N)", ref.tok)
        found: set[int] = set()
        for k in kernels:
            idx = next((i for i, a in enumerate(k.args) if a.name == ref.name), None)
            if idx is None:
                where = f"kernel {k.name!r}"
                if unit.kind == "func":
                    where += f" (which calls function {unit.name!r})"
                raise ref.line.error_at(f"unknown argument {ref.name!r} in {where}"
                                        + did_you_mean(ref.name, [a.name for a in k.args])
                                        + "; its arguments are: "
                                        + (", ".join(a.name for a in k.args) or "none"),
                                        ref.tok)
            arg = k.args[idx]
            if arg.is_buffer != ref.buffer:
                raise ref.line.error_at(f"{use} needs a {want} argument, but {ref.name!r} is a "
                                        f"{arg.kind.name.lower()} argument of kernel {k.name!r}", ref.tok)
            found.add(idx)
        if len(found) > 1:
            raise ref.line.error_at(f"argument {ref.name!r} sits at different positions in the kernels that "
                                    f"call function {unit.name!r}; use a raw index ($N)", ref.tok)
        return found.pop()


def _instructions(unit: _Unit) -> list[Instruction]:
    return [Instruction(p.defn, tuple(p.operands), p.guard, p.loc) for p in unit.code]  # type: ignore[arg-type]


def _max_register_ins(ins: Instruction) -> int:
    """1 + the highest register index an instruction names (0 if none)."""
    top = 0
    for kind, v in zip(ins.defn.operands, ins.operands, strict=False):
        if kind.reg_count and isinstance(v, int):
            top = max(top, v + kind.reg_count)
        elif isinstance(v, DeviceAddr):
            top = max(top, v.reg + (2 if kind is Operand.DADDR64 else 1))
        elif isinstance(v, LocalAddr):
            top = max(top, v.reg + 1)
    return top


def _max_register(code: Iterable[_Parsed]) -> int:
    top = 0
    for p in code:
        for kind, v in zip(p.defn.operands, p.operands, strict=False):
            if kind.reg_count and isinstance(v, int):
                top = max(top, v + kind.reg_count)
            elif isinstance(v, (PendingDeviceAddr, LocalAddr)):
                top = max(top, v.reg + (2 if kind is Operand.DADDR64 else 1))
    return top


__all__ = ["KERNEL_FLAG_NAMES", "ScalarType", "assemble"]
