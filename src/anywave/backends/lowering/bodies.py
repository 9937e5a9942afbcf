"""Rendering an instruction's body (:mod:`anywave.isa.bodies`) with a backend's spelling table.

A backend describes itself as a :class:`BodySpelling`: for each primitive of
:data:`anywave.isa.expr.PRIMITIVES` it spells, a function ``(ctx, node, operand values) -> value``
(a PTX register name, a C expression, a SPIR-V result id), and how to spell a constant. A
primitive it lacks is expanded by the one legaliser every backend shares
(:func:`anywave.isa.expr.legalise`); a whole body may be overridden with a native instruction by
registering a handler for the record's ``sem`` or mnemonic in the backend's dispatch instead.

:func:`render` walks the legalised expression bottom-up and spells each distinct node once
(nodes compare by structure), so ``b & 31`` of ``rotl`` is computed once.

A backend registers its native overrides by ``sem`` (or mnemonic) and its body handler for
every other key of :data:`anywave.isa.bodies.BODIES` (:func:`body_keys`): a new ALU record with a
body reaches every backend without a line there, and ``tests/test_isa_dispatch.py`` checks that
each body a backend renders legalises with its spelling (a new primitive no backend spells, and
no expansion covers, fails that test instead of a translation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anywave.isa.bodies import BODIES, body
from anywave.isa.expr import Expr, legalise
from anywave.isa.table import InstrDef

__all__ = ["BodySpelling", "body_keys", "render", "render_record"]


@dataclass
class BodySpelling:
    """How one backend spells the expression vocabulary.

    Attributes:
        name: the backend (for error messages and the legalised-body cache).
        prims: primitive name -> ``fn(ctx, node, values) -> value`` (``ctx``: what the backend
            passes to :func:`render`, its per-instruction emitter).
        const: ``fn(ctx, bits, type) -> value``.
        has: optional refinement ``fn(node) -> bool`` for primitives spelled for some types
            only; default: the node's primitive is in ``prims``.
    """

    name: str
    prims: Mapping[str, Callable[[Any, Expr, list[Any]], Any]]
    const: Callable[[Any, int, str], Any]
    has: Callable[[Expr], bool] | None = None
    _legal: dict[Expr, Expr] = field(default_factory=dict, repr=False)

    def spells(self, node: Expr) -> bool:
        """True when the backend spells ``node``'s primitive (for its types)."""
        if node.op not in self.prims:
            return False
        return self.has(node) if self.has is not None else True

    def legal(self, e: Expr) -> Expr:
        """``e`` legalised for this backend (cached)."""
        out = self._legal.get(e)
        if out is None:
            out = self._legal[e] = legalise(e, self.spells)
        return out


def render(e: Expr, leaves: Sequence[Any], spell: BodySpelling, ctx: Any = None) -> Any:
    """Spell expression ``e`` with the source operands' values ``leaves`` (in operand order)
    through ``ctx`` (the backend's per-instruction emitter); returns the value of the root.

    Raises:
        ValueError: a primitive the backend neither spells nor can have expanded."""
    memo: dict[Expr, Any] = {}

    def go(n: Expr) -> Any:
        if n in memo:
            return memo[n]
        if n.op == "arg":
            v = leaves[n.value]
        elif n.op == "const":
            v = spell.const(ctx, n.value, n.ty)
        else:
            v = spell.prims[n.op](ctx, n, [go(a) for a in n.args])
        memo[n] = v
        return v
    return go(spell.legal(e))


def render_record(rec: InstrDef, leaves: Sequence[Any], spell: BodySpelling, ctx: Any = None) -> Any:
    """:func:`render` of ``rec``'s body (:func:`anywave.isa.bodies.body`)."""
    return render(body(rec), leaves, spell, ctx)


def body_keys(overrides: Mapping[str, Any]) -> list[str]:
    """The semantic keys with a body (:data:`anywave.isa.bodies.BODIES`) that ``overrides``
    (a backend's native handlers, by sem) does not cover: the keys to render from the body."""
    return sorted(k for k in BODIES if k not in overrides)
