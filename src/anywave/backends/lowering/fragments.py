"""Fragment slots a kernel uses (spec §8.14), shared by the backends that declare them."""

from __future__ import annotations

from collections.abc import Iterable

from anywave.binary.module import Instruction, Module, reachable_functions
from anywave.isa.mma import FragKind, operand_slots
from anywave.isa.table import Category


def fragment_slots(module: Module, code: Iterable[Instruction]) -> dict[int, FragKind]:
    """Fragment slot -> kind for a kernel body and every function it reaches through ``call``
    (:func:`~anywave.binary.module.reachable_functions`); the verifier has checked that each
    slot has one kind, so the walk order does not matter."""
    code = list(code)
    bodies = [code] + [module.functions[f].code for f in reachable_functions(module.functions, code)]
    out: dict[int, FragKind] = {}
    for body in bodies:
        for ins in body:
            d = ins.defn
            if d.category is Category.MMA and d.op != "mma":
                for _, v, k in operand_slots(d, ins.operands):
                    out.setdefault(v, k)
    return out

