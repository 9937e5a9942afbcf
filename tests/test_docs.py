"""The documentation agrees with the instruction table and the ISA enumerations.

* docs/instructions.md is exactly what tools/gen_instruction_docs.py generates now
  (regenerated in memory), and lists every mnemonic with its opcode;
* docs/spec.md mentions every special register, capability, scope and memory order by
  its spelling, states the architectural limits with the values of ``LIMITS``, and gives
  the category numbers of the opcode scheme.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from anywave.binary import encoding
from anywave.isa import INSTRUCTIONS, LIMITS, Capability, Category, MemoryOrder, Scope, SpecialRegister
from anywave.isa.table import Determinism

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec.md"
REFERENCE = ROOT / "docs" / "instructions.md"


def _load_generator():
    path = ROOT / "tools" / "gen_instruction_docs.py"
    spec = importlib.util.spec_from_file_location("gen_instruction_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_instruction_docs", module)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reference_text() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def _mentions(text: str, word: str) -> bool:
    """True if ``word`` occurs in ``text`` not as part of a longer identifier."""
    pattern = r"(?<![A-Za-z0-9_.])" + re.escape(word) + r"(?![A-Za-z0-9_])"
    return re.search(pattern, text) is not None


# ------------------------------------------------------------------ instructions.md

def test_reference_is_up_to_date(reference_text: str) -> None:
    assert reference_text == gen.render(), (
        "docs/instructions.md is stale; run: python tools/gen_instruction_docs.py")


def test_summaries_are_plain_text_in_markdown() -> None:
    # issue 31 item 19: `a[i][j]` outside a code span was read as a reference link and broke
    # `mkdocs build --strict`; the generator escapes inline markup in the summary column
    assert gen._text_cell("d[i][j] = a[i][j] + bias[j]") == r"d\[i\]\[j\] = a\[i\]\[j\] + bias\[j\]"
    assert gen._text_cell(r"a * b_c | `x` \ y") == r"a \* b\_c \| \`x\` \\ y"
    # in the generated reference, no summary cell holds unescaped inline markup
    for line in gen.render().splitlines():
        if line.startswith("| `"):
            summary = re.split(r"(?<!\\)\|", line)[-2]
            assert not re.search(r"(?<!\\)[\[\]*_`]", summary), line
    import markdown  # MkDocs' renderer: the escaped text reads back as the summary

    for d in INSTRUCTIONS:
        html = markdown.markdown(f"| s |\n|---|\n| {gen._text_cell(d.summary)} |", extensions=["tables"])
        text = re.search(r"<td>(.*)</td>", html, re.S).group(1)
        plain = d.summary.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert text == plain, (d.mnemonic, d.summary, html)


def _reference_rows(text: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            assert m.group(1) not in rows, f"mnemonic {m.group(1)} listed twice"
            rows[m.group(1)] = cells
    return rows


def test_every_mnemonic_listed_once_with_its_opcode(reference_text: str) -> None:
    rows = _reference_rows(reference_text)
    assert set(rows) == {d.mnemonic for d in INSTRUCTIONS}
    for d in INSTRUCTIONS:
        cells = rows[d.mnemonic]
        # opcode computed independently from the scheme: category << 8 | position in category
        position = [x.mnemonic for x in INSTRUCTIONS if x.category is d.category].index(d.mnemonic)
        assert int(cells[1], 16) == (int(d.category) << 8) | position, d.mnemonic
        assert int(cells[3]) == 1 + sum(k.words for k in d.operands), d.mnemonic
        assert cells[5] == d.determinism.value, d.mnemonic
        caps = set() if cells[6] == "—" else {c.strip() for c in cells[6].split(",")}
        assert caps == set(d.capability.spellings()), d.mnemonic


def test_reference_groups_rows_under_their_category(reference_text: str) -> None:
    current: Category | None = None
    seen: set[Category] = set()
    for line in reference_text.splitlines():
        head = re.match(r"^## (\d+)\. .*\(`([A-Z_]+)`", line)
        if head:
            current = Category[head.group(2)]
            assert int(head.group(1)) == int(current)
            seen.add(current)
            continue
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m:
            d = next(x for x in INSTRUCTIONS if x.mnemonic == m.group(1))
            assert d.category is current, f"{d.mnemonic} listed under {current}"
    assert seen == set(Category)


def test_operand_syntax_covers_every_operand_kind() -> None:
    # each operand kind gets a placeholder: the rendered list has one entry per operand
    # (plus the optional guard operand), so a new operand kind cannot slip through silently
    for d in INSTRUCTIONS:
        text = gen.operand_syntax(d)
        count = len([p for p in text.split(", ") if p])
        extra = 1 if "[[!]pG]" in text else 0
        assert count == len(d.operands) + extra, d.mnemonic


def test_generator_check_mode(tmp_path: Path) -> None:
    out = tmp_path / "instructions.md"
    assert gen.main(["--check", "--output", str(out)]) == 1  # missing file is stale
    assert gen.main(["--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == gen.render()
    assert gen.main(["--check", "--output", str(out)]) == 0
    out.write_text(out.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert gen.main(["--check", "--output", str(out)]) == 1


def test_markdown_cells_are_escaped(reference_text: str) -> None:
    rows = _reference_rows(reference_text)
    header_cells = 9
    for mnemonic, cells in rows.items():
        assert len(cells) == header_cells, mnemonic
    assert r"a \| b" in rows["or.b32"][8]


# ------------------------------------------------------------------ spec.md

@pytest.mark.parametrize("reg", list(SpecialRegister), ids=lambda r: r.spelling)
def test_spec_defines_every_special_register(spec_text: str, reg: SpecialRegister) -> None:
    # the special-register table row: | number | `spelling` | definition |
    assert re.search(rf"^\| {int(reg)} \| `{reg.spelling}` \| \S", spec_text, re.M), reg.spelling


@pytest.mark.parametrize("name", list(Capability.names()))
def test_spec_defines_every_capability(spec_text: str, name: str) -> None:
    bit = int(Capability.names()[name]).bit_length() - 1
    assert re.search(rf"^\| `{name}` \| {bit} \| \S", spec_text, re.M), name


@pytest.mark.parametrize("scope", list(Scope), ids=lambda s: s.spelling)
def test_spec_mentions_every_scope(spec_text: str, scope: Scope) -> None:
    assert _mentions(spec_text, scope.spelling)
    assert f"`{scope.spelling}` {int(scope)}" in spec_text  # the encoding value, §14.1


@pytest.mark.parametrize("order", list(MemoryOrder), ids=lambda o: o.spelling)
def test_spec_mentions_every_memory_order(spec_text: str, order: MemoryOrder) -> None:
    assert _mentions(spec_text, order.spelling)
    assert f"`{order.spelling}` {int(order)}" in spec_text


@pytest.mark.parametrize("cls", list(Determinism), ids=lambda c: c.value)
def test_spec_defines_every_determinism_class(spec_text: str, cls: Determinism) -> None:
    assert re.search(rf"^\| `{re.escape(cls.value)}` \| \S", spec_text, re.M), cls.value


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(LIMITS)])
def test_spec_states_limits_with_their_values(spec_text: str, field: str) -> None:
    value = getattr(LIMITS, field)
    shown = str(tuple(value)).replace(",)", ")") if isinstance(value, tuple) else str(value)
    assert f"| `{field}` | {shown} |" in spec_text, f"limit {field} = {shown} missing from spec §11.2"


@pytest.mark.parametrize("cat", list(Category), ids=lambda c: c.name)
def test_spec_gives_category_numbers(spec_text: str, cat: Category) -> None:
    assert f"| `{cat.name}` | {int(cat)} | 0x{int(cat):02X}xx |" in spec_text


def test_spec_instruction_word_layout_matches_encoder(spec_text: str) -> None:
    # the bit positions written in §14.1 are the ones the encoder uses
    assert encoding.GUARD_PRESENT == 1 << 23 and "bit 23 guard present" in spec_text
    assert encoding.GUARD_NEGATED == 1 << 19 and "bit 19 guard negated" in spec_text
    assert "bits 16–18 guard predicate index" in spec_text


def test_spec_has_all_numbered_sections(spec_text: str) -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", spec_text, re.M)]
    assert numbers == list(range(1, 16))
