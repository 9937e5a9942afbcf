"""Stand-in for :mod:`anywave.binary.structure` until that module is on main (same node
classes and ``parse`` for verified code only). Removed once the shared parser lands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_ROLES = {"if", "else", "endif", "loop", "endloop", "break", "continue", "call", "ret", "halt"}


class Op:
    def __init__(self, index: int, ins: Any, role: str | None) -> None:
        self.index, self.ins, self.role = index, ins, role


class If:
    def __init__(self, index: int, ins: Any) -> None:
        self.index, self.ins = index, ins
        self.then: list[Any] = []
        self.orelse: list[Any] = []
        self.else_index: int | None = None
        self.end_index: int | None = None


class Loop:
    def __init__(self, index: int, ins: Any) -> None:
        self.index, self.ins = index, ins
        self.body: list[Any] = []
        self.end_index: int | None = None


class _Body:
    def __init__(self) -> None:
        self.nodes: list[Any] = []


def parse(code: Sequence[Any]) -> _Body:
    body = _Body()
    open_: list[tuple[Any, list[Any]]] = []
    cur = body.nodes
    for i, ins in enumerate(code):
        role = ins.defn.op if ins.defn.op in _ROLES else None
        if role in ("if", "loop"):
            node = If(i, ins) if role == "if" else Loop(i, ins)
            cur.append(node)
            open_.append((node, cur))
            cur = node.then if role == "if" else node.body
        elif role == "else":
            node = open_[-1][0]
            node.else_index = i
            cur = node.orelse
        elif role in ("endif", "endloop"):
            node, cur = open_.pop()
            node.end_index = i
        else:
            cur.append(Op(i, ins, role))
    return body
