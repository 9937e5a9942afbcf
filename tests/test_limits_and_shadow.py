"""Huge CLI buffers are refused with a clear message, and checked mode's shadow memory grows
with what a launch touches, not with the buffer size (issue 11, item 20)."""

from __future__ import annotations

import numpy as np
import pytest

from anywave import cli
from anywave.asm import assemble
from anywave.emu import emulate
from anywave.emu.memory import RaceShadow

TOUCH = """.version 1.0
.kernel touch
.arg y buffer u32 readwrite
.registers 6
    mov.sr r0, sr_thread_linear_id
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, y[r2]
    add.i32 r3, r3, r1
    st.device.b32 y[r2], r3
    halt
.end
"""


def test_cli_refuses_a_huge_zeros_buffer(tmp_path, capsys) -> None:
    src = tmp_path / "touch.wave"
    src.write_text(TOUCH)
    rc = cli.main(["run", str(src), "--grid", "1", "--workgroup", "8", "--arg", "y=zeros:99999999999999:u32"])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "399999999999996 bytes" in err and "at most" in err and "Traceback" not in err


@pytest.mark.parametrize("mb", [8, 64])
def test_checked_shadow_is_proportional_to_what_is_touched(mb: int) -> None:
    m = assemble(TOUCH, "touch.wave")
    y = np.ones((mb << 20) // 4, np.uint32)
    seen: list[RaceShadow] = []
    real_init = RaceShadow.__init__

    def spy(self, *a, **k):
        real_init(self, *a, **k)
        seen.append(self)

    try:
        RaceShadow.__init__ = spy  # type: ignore[method-assign]
        emulate(m, "touch", grid=1, workgroup=64, args={"y": y}, wave_width=32, check=True)
    finally:
        RaceShadow.__init__ = real_init  # type: ignore[method-assign]
    assert np.all(y[:64] == 3) and np.all(y[64:] == 1)
    (sh,) = [s for s in seen if s.space == "device memory"]
    # 64 threads x 4 bytes touch one 4 KiB page: shadow for at most a few pages, never the buffer
    assert sh.pages == 1
    assert sh.writer.size <= 4 * RaceShadow.PAGE


def test_paged_shadow_still_finds_races_across_pages() -> None:
    src = TOUCH.replace("    mov.sr r0, sr_thread_linear_id\n", "    movi.b32 r0, 1024\n")  # all threads: y[4096]
    m = assemble(src, "race.wave")
    from anywave.errors import EmulationError

    with pytest.raises(EmulationError, match="data race"):
        emulate(m, "touch", grid=1, workgroup=2, args={"y": np.zeros(4096, np.uint32)}, wave_width=8, check=True)
