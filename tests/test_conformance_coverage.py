"""Every instruction of the table appears in at least one conformance case, structurally: the
group modules are assembled and the instruction records of all kernels and functions collected."""

from __future__ import annotations

from anywave.conformance import assemble_group, group_names, load_cases
from anywave.isa.table import INSTRUCTIONS


def test_every_mnemonic_is_exercised() -> None:
    used: set[str] = set()
    for g in group_names():
        mod = assemble_group(g)
        for k in mod.kernels:
            used.update(ins.defn.mnemonic for ins in k.code)
        for f in mod.functions:
            used.update(ins.defn.mnemonic for ins in f.code)
    missing = sorted(d.mnemonic for d in INSTRUCTIONS if d.mnemonic not in used)
    assert not missing, f"{len(missing)} table instructions have no conformance case: {missing}"


def test_every_group_kernel_has_a_case() -> None:
    names = {c.name for c in load_cases()}
    kernels = set()
    for g in group_names():
        kernels.update(k.name for k in assemble_group(g).kernels)
    cased = {c.source.split()[1] for c in load_cases()}
    assert kernels == cased
    assert len(names) >= 300
