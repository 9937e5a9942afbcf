"""The assembler refuses malformed input the spec forbids (orders, immediates, labels, huge
literals) and infers ``.registers`` as documented.

Found by the fresh-eyes review of issues 2 (ISA) and 3 (EMU); each test states what
docs/spec.md requires, taken from the spec text quoted above it, not from the code. The
review's findings about the ``.wbin`` reader and launch limits are in tests/test_wbin.py and
tests/test_emu_launch.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.errors import WaveError


def _kernel(body: str, header: str = ".arg x buffer u32 readwrite\n.registers 8\n") -> str:
    return ".kernel k\n" + header + body + "\n.end\n"


# Was a bug (review): spec §6.1 'The order of a red.device.* shall be .relaxed or .release ... any other
# order makes the module invalid' - assembler and verifier accept it
@pytest.mark.parametrize("order", [".acquire", ".acq_rel", ".seq_cst"])
def test_red_device_with_acquire_order_is_rejected(order: str) -> None:
    with pytest.raises(WaveError):
        assemble(_kernel(f"    red.device.add.u32 x[r0], r1, .device, {order}"), "red.wave")


# Was a bug (review): spec §13.4 raw float bits are 'at most the type's width: 4 hex digits for 16-bit
# types'; movi.f16 r0, 0x12345 is accepted and stored as 0x12345
@pytest.mark.parametrize("mn", ["movi.f16", "movi.bf16"])
def test_raw_16bit_float_immediate_wider_than_16_bits_is_rejected(mn: str) -> None:
    with pytest.raises(WaveError):
        assemble(_kernel(f"    {mn} r0, 0x12345"), "f16.wave")


# Review finding: spec §13.2 said '.registers N ; 1..255, required' but the assembler inferred it.
# Decision: keep the inference and document it (spec §13.2 now says so).
def test_missing_registers_directive_is_inferred_from_the_highest_register_used() -> None:
    """Decision (issue 2 review): .registers is optional; without it the count is 1 + the
    highest register the kernel names, including every function it calls (spec §13.2)."""
    m = assemble(".kernel k\n    movi.b32 r7, 1\n.end\n", "noregs.wave")
    assert m.kernel("k").registers == 8
    src = (".kernel k\n    movi.b32 r7, 1\n    call f\n.end\n"
           ".func f\n    call g\n    ret\n.end\n"
           ".func g\n    add.i32 r12, r1, r2\n    ret\n.end\n")
    assert assemble(src, "calls.wave").kernel("k").registers == 13   # r12 in g, reached through f
    assert assemble(".kernel k\n    halt\n.end\n", "noregs.wave").kernel("k").registers == 1
    # a pair counts both registers; an explicit directive wins
    assert assemble(".kernel k\n.capabilities int64\n    movi.u64 r8:r9, 1\n.end\n", "p.wave") \
        .kernel("k").registers == 10
    assert assemble(".kernel k\n.registers 200\n    movi.b32 r7, 1\n.end\n", "r.wave") \
        .kernel("k").registers == 200


# Was a bug (review): labels are reference-dialect only (spec §1.1 'no labels', §13.6); in a native kernel
# (has .arg) 'foo:' silently moves the rest of the body into a new .func foo and the kernel becomes empty
# (.func blocks already reject labels)
def test_label_in_native_kernel_is_rejected() -> None:
    src = _kernel("foo:\n    movi.b32 r0, 1")
    with pytest.raises(WaveError):
        assemble(src, "label.wave")


# Was a bug (review): an integer literal with > 4300 digits raises a bare ValueError (Python's int-digit
# limit) from assemble(), not an AsmError with file:line:column
@pytest.mark.parametrize("mn, lit", [("movi.b32", "1" + "0" * 5000), ("movi.f32", "1" + "0" * 5000 + "e-5000")],
                         ids=["int", "float"])
def test_huge_decimal_literal_gives_asm_error(mn: str, lit: str) -> None:
    try:
        assemble(_kernel(f"    {mn} r0, {lit}"), "big.wave")
    except WaveError as e:
        assert "big.wave:" in str(e)
    # any non-WaveError escapes and fails the test


def test_reference_checks_of_this_file_are_independent() -> None:
    """Sanity: the precondition data used above is what the spec says (not a product bug)."""
    assert np.float16(65504.0).view(np.uint16) == 0x7BFF
