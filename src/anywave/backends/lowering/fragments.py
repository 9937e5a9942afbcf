"""Fragment slots a kernel uses (spec §8.14), shared by the backends that declare them."""

from __future__ import annotations

from collections.abc import Iterable

from anywave.binary.module import Instruction, Module, reachable_functions
from anywave.isa.mma import FragKind, group_bt, operand_slots
from anywave.isa.table import INSTRUCTIONS, Category


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


#: semantic keys of the accumulator row and element operations (spec §8.14) that the SPIR-V
#: backend refuses (no lowering yet)
ACC_OP_KEYS = tuple(f"mma.{op}" for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask", "fcvt"))
ACC_OP_REFUSAL = ("the accumulator row/element operations (mma.rowmax, rowsum, exp2, mul, div, mask, cvt.a) "
                  "have no SPIR-V lowering yet (the emulator, PTX and the C-family backends have one)")
#: the mnemonics of ``mma.group.bt`` (B given transposed), refused by the same backend
GROUP_BT_MNEMONICS = tuple(d.mnemonic for d in INSTRUCTIONS if d.op == "fgmma" and group_bt(d))
GROUP_BT_REFUSAL = "mma.group.bt (B given transposed) has no SPIR-V lowering yet"
