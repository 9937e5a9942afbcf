"""Conformance cases for the kernel's own workgroup-size rules (group ``workgroup_limits``).

A kernel may require an exact workgroup size (``.workgroup_size``) or cap it
(``.max_workgroup_size``); a launch that breaks either must be refused before it runs, on
every target (spec §2.1), and must leave the buffers untouched. Each rule has a case that
launches within it (the kernel writes its global ids) and one that breaks it (the case
expects the refusal, and the output still holds the sentinel it was filled with).
"""

from __future__ import annotations

import numpy as np

from anywave.conformance.build import SENTINEL
from anywave.conformance.case import Case

#: what a refusal's message must say (every target's LaunchConfigError names the rule)
REFUSAL = r"(?is)workgroup"

_BODY = """\
.arg out buffer u32 write
{rule}
.registers 4
    mov.sr        r0, sr_global_id_x
    movi.b32      r1, 2
    shl.b32       r2, r0, r1
    st.device.b32 out[r2], r0
    halt
.end
"""


def _kernel(name: str, rule: str) -> str:
    return f".kernel {name}\n" + _BODY.format(rule=rule)


def cases() -> list[Case]:
    out: list[Case] = []
    specs = (
        ("wl_required_ok", ".workgroup_size 64, 1, 1", 2, 64, False),
        ("wl_required_refused", ".workgroup_size 64, 1, 1", 4, 32, True),
        ("wl_max_ok", ".max_workgroup_size 64", 2, 64, False),
        ("wl_max_refused", ".max_workgroup_size 64", 1, 128, True),
    )
    for name, rule, grid, wg, refused in specs:
        n = grid * wg
        sent = np.full(n, SENTINEL[32], np.uint32)
        want = sent.copy() if refused else np.arange(n, dtype=np.uint32)
        out.append(Case(name, "workgroup_limits", _kernel(name, rule), (grid, 1, 1), (wg, 1, 1),
                        {"out": sent.copy()}, {"out": want}, expect_refusal=REFUSAL if refused else "",
                        description=f"{rule} launched with {wg} threads: "
                                    + ("refused, buffer untouched" if refused else "runs")))
    return out
