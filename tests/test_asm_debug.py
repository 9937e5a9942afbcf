"""Debug locations recorded by the assembler, and their round trip through text and .wbin."""

from __future__ import annotations

import numpy as np
import pytest

from anywave.asm import AsmError, assemble, disassemble
from anywave.binary.wbin import read_wbin, write_wbin
from anywave.emu import emulate
from anywave.errors import EmulationError

SRC = """\
.kernel k
.arg out buffer u32 write
.registers 4
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
      st.device.b32 out[r2], r0
    halt
.end
"""


def _locs(module):
    return [(i.loc.file, i.loc.line, i.loc.col) if i.loc else None for i in module.kernels[0].code]


def test_instructions_get_their_own_lines_by_default():
    m = assemble(SRC, "k.wave")
    assert _locs(m) == [("k.wave", 4, 5), ("k.wave", 5, 5), ("k.wave", 6, 5), ("k.wave", 7, 7),
                        ("k.wave", 8, 5)]


def test_debug_false_and_nodebug_record_nothing():
    assert _locs(assemble(SRC, "k.wave", debug=False)) == [None] * 5
    assert _locs(assemble(".nodebug\n" + SRC, "k.wave")) == [None] * 5


def test_explicit_loc_wins_over_automatic_lines():
    text = SRC.replace("    halt\n", '    .loc "kernel.py" 42 9\n    halt\n')
    assert _locs(assemble(text, "k.wave")) == [None, None, None, None, ("kernel.py", 42, 9)]


@pytest.mark.parametrize("debug", [True, False])
def test_round_trip_is_byte_identical_with_and_without_debug_info(debug):
    data = write_wbin(assemble(SRC, "k.wave", debug=debug))
    text = disassemble(read_wbin(data))
    assert (".nodebug" in text) is (not debug)
    assert write_wbin(assemble(text, "other.wave")) == data


def test_only_format_versions_1_0_and_1_1_are_accepted():
    with pytest.raises(AsmError, match=r"unsupported \.version 1\.2; this assembler reads 1\.0, 1\.1"):
        assemble(".version 1.2\n" + SRC)
    assert assemble(".version 1.1\n" + SRC).version == (1, 1)  # a 1.1 module may use 1.0 instructions only


def test_emulator_error_names_the_wave_source_line():
    m = assemble(SRC, "k.wave")
    out = np.zeros(4, np.uint32)  # 8 threads write 8 elements: thread 4 is out of bounds
    with pytest.raises(EmulationError, match=r"k\.wave:7"):
        emulate(m, "k", grid=1, workgroup=8, args={"out": out}, wave_width=8)
