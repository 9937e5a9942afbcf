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


def _new_record(category: Category = Category.MOVE, op: str = "frob") -> InstrDef:
    # what appending a record to the table looks like to a consumer
    base = int(category) << 8
    free = next(o for o in range(base, base + 0x100) if o not in {d.opcode for d in INSTRUCTIONS})
    return InstrDef(f"{op}.b32", free, category, op, (Operand.RD, Operand.RS), T.B32, Determinism.EXACT,
                    Capability.NONE, Flag.NONE, "d = frob(a)")


def _pred_record() -> InstrDef:
    free = next(o for o in range(0x0400, 0x0500) if o not in {d.opcode for d in INSTRUCTIONS})
    return InstrDef("frob.pred", free, Category.COMPARE, "frob", (Operand.PD, Operand.PS), T.PRED,
                    Determinism.EXACT, Capability.NONE, Flag.NONE, "p = frob(a)")


#: the domains a consumer may cover with a wildcard: control flow and synchronisation are
#: lowered by each consumer's own walk (docs/internals.md), everything else by a handler per key
WILDCARD_DOMAINS = {"ctl", "sync"}


def _probes() -> list[InstrDef]:
    """One new record per domain of the table (the ``pred`` domain too)."""
    return [_new_record(c) for c in Category] + [_pred_record()]


def test_the_probes_cover_every_domain():
    domains = {d.sem.split(".")[0] for d in INSTRUCTIONS}
    assert {p.sem.split(".")[0] for p in _probes()} == domains


@pytest.mark.parametrize("probe", _probes(), ids=lambda p: p.sem)
def test_a_new_record_is_missing_from_every_consumer(monkeypatch, probe):
    """Appending a record in any domain fails the completeness check of every consumer (a
    wildcard would make it pass whatever its handler does: the review found PTX's ``bit.*``
    spelling ``rotl.b32`` as an instruction PTX does not have)."""
    monkeypatch.setattr(dispatch, "INSTRUCTIONS", INSTRUCTIONS + (probe,))
    domain = probe.sem.split(".")[0]
    for name, d in dispatch.load_consumers().items():
        d._cache.clear()
        try:
            if domain in WILDCARD_DOMAINS and d.handles(probe):
                continue  # the consumer's walk lowers these (the wildcard is the design)
            assert d.missing() == [probe], name
            with pytest.raises(IncompleteDispatch, match=rf"{name}.*{probe.sem.replace('.', '[.]')}"):
                d.check()
        finally:
            d._cache.clear()


def test_no_consumer_registers_a_domain_wildcard_outside_control_and_synchronisation():
    for name, d in dispatch.load_consumers().items():
        wild = {k for k in (*d._handlers, *d._refusals) if k.endswith(".*")}
        assert {k[:-2] for k in wild} <= WILDCARD_DOMAINS, (name, sorted(wild))


def _body_backends():
    from anywave.backends import cfamily_ops, ptx, ptx_alu, spirv_ops

    return [(ptx.PTX_DISPATCH, ptx_alu._e_body, ptx_alu.PTX_SPELLING),
            (cfamily_ops.C_DISPATCH, cfamily_ops._body, cfamily_ops.C_SPELLING),
            (spirv_ops.SPIRV, spirv_ops._body, spirv_ops.SPIRV_SPELLING)]


def test_every_body_a_backend_renders_is_spelt_or_legalised():
    """A record a backend renders from its body must legalise with the backend's primitive
    table (a new record reaching a body handler with a primitive the backend cannot spell fails
    here, not at translation)."""
    from anywave.isa.bodies import body

    for d, handler, spelling in _body_backends():
        n = 0
        for rec in INSTRUCTIONS:
            if d.handles(rec) and d.handler(rec) is handler:
                spelling.legal(body(rec))
                n += 1
        assert n > 50, (d.name, n)


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
