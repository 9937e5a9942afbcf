"""Fragment loops on CPU devices (Features.cpu_device): every loop the fragment spellings write is
kept rolled there, and left to the compiler's unrolling for GPU devices. (The bits are checked by
the conformance runs on the CPU runtimes, which render with cpu_device set.)"""

from __future__ import annotations

import re

from anywave.backends import opencl as B
from anywave.backends.cfamily import Features
from anywave.conformance import suite


def _fragment_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "awg_f" in ln and "for (" in ln]


def test_cpu_devices_keep_fragment_loops_rolled():
    m = suite.assemble_group("mma_acc")
    cpu = B.translate(m, 16, Features(cpu_device=True)).text
    gpu = B.translate(m, 16, Features()).text
    cpu_lines, gpu_lines = _fragment_lines(cpu), _fragment_lines(gpu)
    assert cpu_lines and gpu_lines
    loops = re.compile(r"\bfor \(")
    marked = re.compile(r'_Pragma\("unroll 1"\) for \(')
    for ln in cpu_lines:
        assert len(loops.findall(ln)) == len(marked.findall(ln)), ln
    # on a GPU device most fragment loops are left to the compiler (unrolled: registers)
    unmarked = sum(len(loops.findall(ln)) - len(marked.findall(ln)) for ln in gpu_lines)
    assert unmarked > len(gpu_lines) // 2
    # the rest of the program is the same text
    strip = lambda t: marked.sub("for (", t)  # noqa: E731
    assert strip(cpu) == strip(gpu)
