"""The consumers' dispatch (anywave.isa.dispatch): every registered consumer handles or
explicitly refuses every record of the table, and the check names what is missing."""

from __future__ import annotations

import pytest

from anywave.isa import dispatch
from anywave.isa.dispatch import CONSUMERS, Dispatch, IncompleteDispatch, UnsupportedInstruction
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, Category, Determinism, Flag, InstrDef, Operand
from anywave.isa.types import Capability
from anywave.isa.types import ScalarType as T


@pytest.mark.parametrize("name", sorted(CONSUMERS))
def test_every_consumer_handles_or_refuses_every_record(name):
    consumers = dispatch.load_consumers()
    consumers[name].check()  # IncompleteDispatch names the records and keys missing


#: modules that hold (or may come to hold) a consumer's dispatch: imported here so that one
#: registered without an entry in CONSUMERS is caught whatever else the test run imported
_CANDIDATE_MODULES = ("anywave.emu.machine", "anywave.backends.ptx", "anywave.backends.cfamily",
                      "anywave.backends.spirv_ops", "anywave.backends.spirv", "anywave.compiler.passes")


def test_every_registered_consumer_is_listed():
    """A consumer made without an entry in CONSUMERS would escape the completeness test."""
    import importlib

    for m in _CANDIDATE_MODULES:
        importlib.import_module(m)
    unlisted = set(dispatch.load_consumers()) - set(CONSUMERS)
    assert not unlisted, f"consumers registered but not listed in anywave.isa.dispatch.CONSUMERS: {sorted(unlisted)}"


def _new_record() -> InstrDef:
    # what appending a record to the table looks like to a consumer
    free = next(op for op in range(0x0C00, 0x0D00) if op not in {d.opcode for d in INSTRUCTIONS})
    return InstrDef("frob.b32", free, Category.MOVE, "frob", (Operand.RD, Operand.RS), T.B32, Determinism.EXACT,
                    Capability.NONE, Flag.NONE, "d = frob(a)")


def test_a_new_record_is_missing_from_every_consumer(monkeypatch):
    new = _new_record()
    assert new.sem == "move.frob"
    monkeypatch.setattr(dispatch, "INSTRUCTIONS", INSTRUCTIONS + (new,))
    for name, d in dispatch.load_consumers().items():
        d._cache.clear()
        try:
            assert d.missing() == [new], name
            with pytest.raises(IncompleteDispatch, match=rf"{name}.*move\.frob.*frob\.b32"):
                d.check()
        finally:
            d._cache.clear()


def _full(name: str = "test") -> Dispatch:
    d = Dispatch(name)
    d.register({s: s for s in {r.sem for r in INSTRUCTIONS}})
    return d


def test_check_names_missing_records_and_unused_keys():
    d = Dispatch("toy")
    d.register({s: s for s in {r.sem for r in INSTRUCTIONS} if s != "float.min"})
    assert [r.mnemonic for r in d.missing()] == [r.mnemonic for r in INSTRUCTIONS if r.sem == "float.min"]
    with pytest.raises(IncompleteDispatch, match=r"'toy'.*float\.min.*min\.f32"):
        d.check()
    d.refuse("float.min", "no minimumNumber here")
    d.check()  # a refusal counts as handled
    d.register("float.mni", 1)  # a typo matches no record
    with pytest.raises(IncompleteDispatch, match=r"match no record.*float\.mni"):
        d.check()


def test_resolution_order_and_refusals():
    d = _full()
    d.register("add.f32", "exact")
    d.register("ctl.*", "walk")
    assert d.handler(BY_MNEMONIC["add.f32"]) == "exact"  # mnemonic before sem
    assert d.handler(BY_MNEMONIC["add.f64"]) == "float.add"
    assert d.handler(BY_MNEMONIC["and.pred"]) == "pred.and" and d.handler(BY_MNEMONIC["and.b32"]) == "bit.and"
    assert d.handler(BY_MNEMONIC["if"]) == "ctl.if"  # sem before the domain wildcard
    e = Dispatch("partial")
    e.register("ctl.*", None)  # None: handled by the consumer's walk
    e.refuse("mma.fmma", "no fragments on this target")
    assert e.handler(BY_MNEMONIC["endif"]) is None and e.handles(BY_MNEMONIC["endif"])
    fmma = BY_MNEMONIC["mma.mma.m4n4k4.f32.f32"]
    assert e.refusal(fmma) == "no fragments on this target" and not e.handles(fmma)
    with pytest.raises(UnsupportedInstruction, match=r"partial: mma\.mma\.m4n4k4\.f32\.f32 .*refused: no fragments"):
        e.handler(fmma)
    with pytest.raises(UnsupportedInstruction, match=r"add\.i32 \(sem 'int\.add'\).*no handler"):
        e.handler(BY_MNEMONIC["add.i32"])


def test_registration_errors_and_error_type():
    d = Dispatch("x", error=RuntimeError)
    d.register("int.add", 1)
    with pytest.raises(ValueError, match="twice"):
        d.register("int.add", 2)
    with pytest.raises(ValueError, match="twice"):
        d.refuse("int.add", "no")
    with pytest.raises(ValueError, match="reason"):
        d.refuse("int.sub", "")
    with pytest.raises(TypeError):
        d.register("int.sub")
    with pytest.raises(RuntimeError, match="x: sub.i32"):
        d.handler(BY_MNEMONIC["sub.i32"])

    @d.on("int.mul", "int.mad")
    def h():
        return None
    assert d.handler(BY_MNEMONIC["mad.i32"]) is h


def test_emulator_missing_semantics_is_an_emulation_error(monkeypatch):
    from anywave.binary.module import Instruction
    from anywave.emu import machine
    from anywave.errors import EmulationError

    new = _new_record()
    with pytest.raises(EmulationError, match=r"emulator: frob\.b32 \(sem 'move\.frob'\)"):
        machine.compile_instruction(Instruction(new, (1, 2)))
