"""One dispatch helper for every consumer of the instruction table, with a completeness check.

A *consumer* (the emulator, a backend, ...) keeps one :class:`Dispatch`: it registers a
handler per semantic key (``InstrDef.sem``: ``"int.add"``, ``"pred.and"``), or for single
records by mnemonic, or for a whole domain with a wildcard (``"ctl.*"``), and may *refuse*
records with a reason (a backend without an instruction). ``handler(rec)`` resolves a
record (exact mnemonic, then ``sem``, then the domain wildcard); :meth:`Dispatch.missing`
lists the records with neither a handler nor a refusal.

Every consumer is named in :data:`CONSUMERS` with the module that builds its dispatch;
``tests/test_isa_dispatch.py`` imports each and runs :meth:`Dispatch.check`, so adding a
record to the table fails a test naming every consumer that lacks it.

Adding a consumer: ``D = dispatch.consumer("name")`` at import time of its module, register
handlers, and add ``"name": "its.module"`` to :data:`CONSUMERS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from anywave.errors import WaveError
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, InstrDef

__all__ = ["CONSUMERS", "Dispatch", "IncompleteDispatch", "UnsupportedInstruction", "consumer", "load_consumers",
           "registered"]

#: consumer name -> the module whose import registers its handlers (import it to check it)
CONSUMERS: dict[str, str] = {
    "emulator": "anywave.emu.machine",
    "spirv": "anywave.backends.spirv_ops",
}


class UnsupportedInstruction(WaveError):
    """A consumer has no handler for a record, or refuses it; the message names the consumer,
    the mnemonic, its semantic key and the reason."""

    def __init__(self, consumer: str, rec: InstrDef, reason: str | None) -> None:
        self.consumer = consumer
        self.defn = rec
        self.reason = reason
        why = f"refused: {reason}" if reason else "no handler is registered for it"
        super().__init__(f"{consumer}: {rec.mnemonic} (sem {rec.sem!r}) is not supported ({why})")


class IncompleteDispatch(WaveError):
    """:meth:`Dispatch.check` found records with neither a handler nor a refusal (``missing``
    lists them) or registrations that match no record (``unused``)."""

    def __init__(self, consumer: str, missing: list[InstrDef], unused: list[str]) -> None:
        self.consumer = consumer
        self.missing = missing
        self.unused = unused
        parts = []
        if missing:
            sems = sorted({d.sem for d in missing})
            parts.append(f"{len(missing)} records have no handler and no refusal: semantic keys "
                         f"{', '.join(sems)} (e.g. {', '.join(d.mnemonic for d in missing[:6])})")
        if unused:
            parts.append(f"keys match no record of the table: {', '.join(unused)}")
        super().__init__(f"consumer {consumer!r}: " + "; ".join(parts))


_UNSET = object()


class Dispatch:
    """The handlers of one consumer, keyed by semantic key, mnemonic or ``"domain.*"``.

    Args:
        name: the consumer's name (``"emulator"``, ``"ptx"``, ``"c-family"`` ...).
        error: the exception type :meth:`handler` raises for a missing or refused record;
            called as ``error(message)`` unless it is :class:`UnsupportedInstruction`.

    A handler may be any object (a factory, an emitter function, a ``None`` meaning "handled
    by the consumer's own walk", e.g. structured control flow).
    """

    def __init__(self, name: str, error: type[Exception] = UnsupportedInstruction) -> None:
        self.name = name
        self.error = error
        self._handlers: dict[str, Any] = {}
        self._refusals: dict[str, str] = {}
        self._cache: dict[int, tuple[Any, str | None]] = {}

    # -- registration
    def register(self, keys: str | Iterable[str] | Mapping[str, Any], handler: Any = _UNSET) -> None:
        """Register ``handler`` under each key (a sem, a mnemonic or ``"domain.*"``), or every
        ``key: handler`` of a mapping. Re-registering a key raises ValueError (two handlers
        for one meaning is a bug)."""
        if isinstance(keys, Mapping):
            if handler is not _UNSET:
                raise TypeError("register(mapping) takes no separate handler")
            items = list(keys.items())
        else:
            if handler is _UNSET:
                raise TypeError("register(keys, handler): the handler is missing")
            items = [(k, handler) for k in ([keys] if isinstance(keys, str) else keys)]
        for k, h in items:
            self._check_key(k)
            self._handlers[k] = h
        self._cache.clear()

    def on(self, *keys: str) -> Callable[[Any], Any]:
        """Decorator form of :meth:`register`: ``@D.on("int.add", "int.sub")``."""
        def deco(fn: Any) -> Any:
            self.register(keys, fn)
            return fn
        return deco

    def refuse(self, keys: str | Iterable[str], reason: str) -> None:
        """Mark records as explicitly unsupported by this consumer, with the reason the
        user will read (``"Vulkan has no 64-bit device offsets on this driver"``)."""
        if not reason:
            raise ValueError("a refusal needs a reason")
        for k in [keys] if isinstance(keys, str) else keys:
            self._check_key(k)
            self._refusals[k] = reason
        self._cache.clear()

    def _check_key(self, k: str) -> None:
        if not isinstance(k, str) or not k:
            raise TypeError(f"{self.name}: a dispatch key is a non-empty string, got {k!r}")
        if k in self._handlers or k in self._refusals:
            raise ValueError(f"{self.name}: key {k!r} is registered twice")

    # -- resolution
    def _resolve(self, rec: InstrDef) -> tuple[Any, str | None]:
        hit = self._cache.get(rec.opcode)
        if hit is not None:
            return hit
        found: tuple[Any, str | None] = (_UNSET, None)
        for k in (rec.mnemonic, rec.sem, rec.sem.split(".", 1)[0] + ".*"):
            if k in self._handlers:
                found = (self._handlers[k], None)
                break
            if k in self._refusals:
                found = (_UNSET, self._refusals[k])
                break
        self._cache[rec.opcode] = found
        return found

    def handles(self, rec: InstrDef) -> bool:
        """True when a handler (not a refusal) is registered for ``rec``."""
        return self._resolve(rec)[0] is not _UNSET

    def refusal(self, rec: InstrDef) -> str | None:
        """The reason this consumer refuses ``rec``, or None."""
        return self._resolve(rec)[1]

    def handler(self, rec: InstrDef) -> Any:
        """The handler registered for ``rec`` (exact mnemonic, else ``rec.sem``, else the
        domain wildcard).

        Raises:
            ``self.error`` (default :class:`UnsupportedInstruction`): no handler, or refused
            (the message names the consumer, the mnemonic, the key and the reason).
        """
        h, reason = self._resolve(rec)
        if h is _UNSET:
            if self.error is UnsupportedInstruction:
                raise UnsupportedInstruction(self.name, rec, reason)
            raise self.error(str(UnsupportedInstruction(self.name, rec, reason)))
        return h

    # -- completeness
    def missing(self) -> list[InstrDef]:
        """The table's records with neither a handler nor a refusal, in table order."""
        return [d for d in INSTRUCTIONS if self._resolve(d) == (_UNSET, None)]

    def unused(self) -> list[str]:
        """Registered keys that match no record (a misspelt sem, a removed mnemonic)."""
        sems = {d.sem for d in INSTRUCTIONS}
        domains = {s.split(".", 1)[0] + ".*" for s in sems}
        return sorted(k for k in (*self._handlers, *self._refusals)
                      if k not in sems and k not in BY_MNEMONIC and k not in domains)

    def check(self) -> None:
        """Raise :class:`IncompleteDispatch` naming every record this consumer lacks and every
        key that matches nothing; return None when complete."""
        missing, unused = self.missing(), self.unused()
        if missing or unused:
            raise IncompleteDispatch(self.name, missing, unused)


_REGISTRY: dict[str, Dispatch] = {}


def consumer(name: str, error: type[Exception] = UnsupportedInstruction) -> Dispatch:
    """The :class:`Dispatch` of consumer ``name``, created on first use (ValueError if an
    existing one was made with another error type)."""
    d = _REGISTRY.get(name)
    if d is None:
        d = _REGISTRY[name] = Dispatch(name, error)
    elif d.error is not error:
        raise ValueError(f"consumer {name!r} already exists with error type {d.error.__name__}")
    return d


def registered() -> dict[str, Dispatch]:
    """Every consumer created so far (by name)."""
    return dict(_REGISTRY)


def load_consumers() -> dict[str, Dispatch]:
    """Import every module of :data:`CONSUMERS` and return all registered consumers.

    Raises:
        LookupError: a listed module registered no consumer of its name."""
    for name, module in CONSUMERS.items():
        importlib.import_module(module)
        if name not in _REGISTRY:
            raise LookupError(f"module {module} is listed for consumer {name!r} but registers no such consumer")
    return registered()
