"""Generate docs/instructions.md, the instruction reference, from the instruction table.

The reference is derived data: every row comes from :data:`anywave.isa.INSTRUCTIONS`
(src/anywave/isa/table.py), grouped by :class:`anywave.isa.Category` in category order and,
inside a category, in opcode order. tests/test_docs.py regenerates it in memory and fails
when the checked-in file differs, so the file never drifts from the table.

Usage::

    python tools/gen_instruction_docs.py            # rewrite docs/instructions.md
    python tools/gen_instruction_docs.py --check    # exit 1 if the file is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from anywave.isa import INSTRUCTIONS, Category, Flag, InstrDef, Operand

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "instructions.md"

#: section titles of the categories (docs/spec.md §8 uses the same names)
CATEGORY_TITLES: dict[Category, str] = {
    Category.INTEGER: "Integer arithmetic",
    Category.FLOAT: "Floating-point arithmetic",
    Category.BITWISE: "Bitwise and shifts",
    Category.COMPARE: "Compare, select and predicate logic",
    Category.LOCAL_MEMORY: "Local memory",
    Category.DEVICE_MEMORY: "Device memory",
    Category.ATOMIC: "Atomics",
    Category.WAVE: "Wave operations",
    Category.SYNC: "Synchronisation",
    Category.CONTROL: "Control flow",
    Category.CONVERT: "Conversions",
    Category.MOVE: "Data movement",
    Category.MMA: "Matrix multiply-accumulate",
    Category.ASYNC_COPY: "Asynchronous copies",
}

# Assembly placeholders of each operand kind (docs/spec.md §13, "Operand syntax").
_SOURCE_NAMES = ("a", "b", "c", "e")


def operand_syntax(defn: InstrDef) -> str:
    """The operand list of ``defn`` as assembly placeholders, e.g. ``rD, rA, rB``.

    Register sources are lettered a, b, c in order; pairs are written ``rA:rA+1``, quads
    ``rA:rA+3``; a guard spelled as an operand (``break p0``) is shown as ``[[!]pG]``. The
    four MMA operands are registers holding tile offsets and are named after their tiles.
    """
    if defn.category is Category.MMA and defn.op == "mma":
        # four wave-uniform local-memory byte offsets: D, A, B, C (spec §8.13)
        return "rD_off, rA_off, rB_off, rC_off"
    parts: list[str] = []
    src = 0
    fsrc = 0
    for kind in defn.operands:
        if kind in (Operand.RS, Operand.RS64, Operand.RS128, Operand.PS):
            letter = _SOURCE_NAMES[src].upper()
            src += 1
        if kind is Operand.RD:
            parts.append("rD")
        elif kind is Operand.RD64:
            parts.append("rD:rD+1")
        elif kind is Operand.RD128:
            parts.append("rD:rD+3")
        elif kind is Operand.RS:
            parts.append(f"r{letter}")
        elif kind is Operand.RS64:
            parts.append(f"r{letter}:r{letter}+1")
        elif kind is Operand.RS128:
            parts.append(f"r{letter}:r{letter}+3")
        elif kind is Operand.PD:
            parts.append("pD")
        elif kind is Operand.PS:
            parts.append(f"[!]p{letter}")
        elif kind is Operand.IMM32:
            parts.append("imm32")
        elif kind is Operand.IMM64:
            parts.append("imm64")
        elif kind is Operand.SREG:
            parts.append("sr_NAME")
        elif kind is Operand.ARG:
            parts.append("ARG")
        elif kind is Operand.DADDR:
            parts.append("BUF[rO±imm]")
        elif kind is Operand.DADDR64:
            parts.append("BUF[rO:rO+1±imm]")
        elif kind is Operand.LADDR:
            parts.append("[rO±imm]")
        elif kind is Operand.SCOPE:
            parts.append(".scope")
        elif kind is Operand.ORDER:
            parts.append(".order")
        elif kind is Operand.FUNC:
            parts.append("FUNC")
        elif kind is Operand.FD:  # MMA fragments (spec §8.14)
            parts.append("fD")
        elif kind is Operand.FS:
            parts.append(f"f{_SOURCE_NAMES[fsrc].upper()}")
            fsrc += 1
        else:  # pragma: no cover - a new operand kind must be given a spelling here
            raise AssertionError(f"no assembly placeholder for operand kind {kind}")
    if Flag.GUARD_OPERAND in defn.flags:
        parts.append("[[!]pG]")
    return ", ".join(parts)


def _cell(text: str) -> str:
    """Escape a table cell for GitHub-flavoured Markdown (``|`` separates cells)."""
    return text.replace("|", "\\|")


#: characters that open inline Markdown outside code spans (``a[i][j]`` would be read as a
#: reference link, ``a_b_c`` or ``*`` as emphasis); both Python-Markdown and GitHub accept a
#: backslash before each of them
_INLINE_MARKUP = "\\`*_[]"


def _text_cell(text: str) -> str:
    """A table cell of plain text (not a code span): Markdown's inline markup escaped."""
    for ch in _INLINE_MARKUP:
        text = text.replace(ch, "\\" + ch)
    return _cell(text)


def _type_cell(defn: InstrDef) -> str:
    if defn.type is None:
        return "—"
    if defn.src_type is not None:
        return f"{defn.type.spelling} ← {defn.src_type.spelling}"
    return defn.type.spelling


def _notes(defn: InstrDef) -> str:
    notes = []
    if Flag.NO_GUARD in defn.flags:
        notes.append("no guard")
    if Flag.GUARD_OPERAND in defn.flags:
        notes.append("guard as operand")
    if Flag.WAVE_COLLECTIVE in defn.flags:
        notes.append("wave-collective")
    return ", ".join(notes)


def render() -> str:
    """Return the full text of docs/instructions.md (deterministic: same table, same text)."""
    out: list[str] = [
        "# WAVE 1.0 instruction reference",
        "",
        "<!-- Generated by tools/gen_instruction_docs.py from src/anywave/isa/table.py."
        " Do not edit by hand. -->",
        "",
        f"{len(INSTRUCTIONS)} instructions in {len(CATEGORY_TITLES)} categories. The normative "
        "semantics are in [spec.md](spec.md); the summaries below are one-line reminders. "
        "Columns: **opcode** is the 16-bit opcode `category << 8 | index` (spec §14.2); "
        "**words** is the encoded length in 32-bit words; **type** is the type the operation "
        "computes in (for conversions `destination ← source`); **class** is the determinism "
        "class (spec §10); **capability** is the capability a kernel using the instruction "
        "declares (spec §11), `—` for core instructions. In the operand column `rO±imm` is an "
        "offset register plus an optional signed immediate and `[[!]pG]` an optional guard "
        "written as an operand (spec §7.3).",
        "",
    ]
    for cat in Category:
        rows = sorted((d for d in INSTRUCTIONS if d.category is cat), key=lambda d: d.opcode)
        out.append(f"## {int(cat)}. {CATEGORY_TITLES[cat]} (`{cat.name}`, opcodes "
                   f"0x{int(cat):02X}00–0x{int(cat):02X}{len(rows) - 1:02X})")
        out.append("")
        out.append("| mnemonic | opcode | operands | words | type | class | capability | notes | summary |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for d in rows:
            caps = ", ".join(d.capability.spellings()) or "—"
            out.append(
                f"| `{d.mnemonic}` | 0x{d.opcode:04X} | `{_cell(operand_syntax(d)) or ' '}` | {d.words} "
                f"| {_type_cell(d)} | {d.determinism.value} | {caps} | {_notes(d)} | {_text_cell(d.summary)} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Write docs/instructions.md, or with ``--check`` report whether it is up to date.

    Returns the process exit status: 0 on success, 1 when ``--check`` finds the file
    missing or stale.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="file to write (default: %(default)s)")
    ns = parser.parse_args(argv)
    text = render()
    if ns.check:
        current = ns.output.read_text(encoding="utf-8") if ns.output.exists() else None
        if current != text:
            print(f"{ns.output} is out of date; run: python tools/gen_instruction_docs.py", file=sys.stderr)
            return 1
        return 0
    ns.output.write_text(text, encoding="utf-8")
    print(f"wrote {ns.output} ({len(INSTRUCTIONS)} instructions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
