"""binary.structure: the region tree of a body, checked against trees built independently."""

from __future__ import annotations

import random

import pytest

from anywave.binary.module import Instruction, Pred
from anywave.binary.structure import CONTROL_ROLES, If, Loop, Op, Visitor, parse, role_of, walk
from anywave.isa.table import INSTRUCTIONS, Flag

I = Instruction.make  # noqa: E741


# ----------------------------------------------------------------------------- generator

def _gen(rng: random.Random, depth: int, in_loop: bool, budget: list[int]) -> list:
    """A random tree as nested tuples: ("op", mnemonic) / ("if", then, orelse or None) / ("loop", body)."""
    out: list = []
    for _ in range(rng.randint(0, 4)):
        if budget[0] <= 0:
            break
        budget[0] -= 1
        r = rng.random()
        if r < 0.2 and depth < 6:
            then = _gen(rng, depth + 1, in_loop, budget)
            orelse = _gen(rng, depth + 1, in_loop, budget) if rng.random() < 0.5 else None
            out.append(("if", then, orelse))
        elif r < 0.35 and depth < 6:
            out.append(("loop", _gen(rng, depth + 1, True, budget)))
        elif r < 0.5 and in_loop:
            out.append(("op", rng.choice(["break", "continue"])))
        else:
            out.append(("op", rng.choice(["nop", "add.i32", "call", "ret", "barrier"])))
    return out


def _flatten(tree: list, code: list, expect: list, depth: int, loop_at: int | None) -> None:
    """Append the tree's instructions to ``code``; ``expect`` gets, per node, a description
    (kind, index, else index, end index, depth, loop index) written down while emitting."""
    for item in tree:
        if item[0] == "op":
            mn = item[1]
            i = len(code)
            if mn == "add.i32":
                code.append(I(mn, 0, 1, 2))
            elif mn == "call":
                code.append(I(mn, 3))
            else:
                code.append(I(mn))
            expect.append(("op", i, None, i, depth, loop_at if mn in ("break", "continue") else None))
        elif item[0] == "if":
            i = len(code)
            code.append(I("if", Pred(i % 8, bool(i & 1))))
            slot = len(expect)
            expect.append(None)
            _flatten(item[1], code, expect, depth + 1, loop_at)
            e = None
            if item[2] is not None:
                e = len(code)
                code.append(I("else"))
                _flatten(item[2], code, expect, depth + 1, loop_at)
            end = len(code)
            code.append(I("endif"))
            expect[slot] = ("if", i, e, end, depth, None)
        else:
            i = len(code)
            code.append(I("loop"))
            slot = len(expect)
            expect.append(None)
            _flatten(item[1], code, expect, depth + 1, i)
            end = len(code)
            code.append(I("endloop"))
            expect[slot] = ("loop", i, None, end, depth, None)


def _describe(n) -> tuple:
    if isinstance(n, If):
        return ("if", n.index, n.else_index, n.end_index, n.depth, None)
    if isinstance(n, Loop):
        return ("loop", n.index, None, n.end_index, n.depth, None)
    return ("op", n.index, None, n.end_index, n.depth, n.loop.index if n.loop is not None else None)


@pytest.mark.parametrize("seed", range(40))
def test_random_trees(seed):
    rng = random.Random(seed)
    tree = _gen(rng, 0, False, [60])
    code: list = []
    expect: list = []
    _flatten(tree, code, expect, 0, None)
    body = parse(code)
    assert body.problems == []
    assert [_describe(n) for n in body.walk()] == expect
    # every instruction maps to its node; markers to their region
    for n in body.walk():
        assert body.node_at(n.index) is n
        assert n.ins is code[n.index]
        if isinstance(n, If):
            assert n.pred == code[n.index].operands[0]
            for j in (n.else_index, n.end_index):
                if j is not None:
                    assert body.node_at(j) is n
        if isinstance(n, Loop):
            assert body.node_at(n.end_index) is n
        for c in getattr(n, "children", []):
            assert c.parent is n and body.region_of(c.index) is n
    # the tree's shape: children lists hold exactly the nested items
    def shape(nodes):
        return [("if", shape(x.then), shape(x.orelse) if x.else_index is not None else None) if isinstance(x, If)
                else ("loop", shape(x.body)) if isinstance(x, Loop) else ("op", x.ins.mnemonic) for x in nodes]
    assert shape(body.nodes) == tree
    assert [c.index for c in body.calls()] == [i for i, ins in enumerate(code) if ins.mnemonic == "call"]
    assert all(c.callee == 3 for c in body.calls())


def test_visitor_order_and_dispatch():
    code = [I("loop"), I("if", Pred(1)), I("break"), I("else"), I("nop"), I("endif"), I("endloop"), I("ret")]
    seen = []

    class V(Visitor):
        def visit_if(self, node):
            seen.append(("if", node.index))
            self.visit_body(node.then)
            seen.append(("else", node.else_index))
            self.visit_body(node.orelse)
            seen.append(("endif", node.end_index))

        def visit_loop(self, node):
            seen.append(("loop", node.index))
            super().visit_loop(node)
            seen.append(("endloop", node.end_index))

        def visit_op(self, node):
            seen.append((node.ins.mnemonic, node.index))

    body = parse(code)
    V().visit_body(body.nodes)
    assert seen == [(ins.mnemonic, i) for i, ins in enumerate(code)]
    brk = body.node_at(2)
    assert isinstance(brk, Op) and brk.role == "break" and brk.loop is body.node_at(0)
    assert brk.loop_parent is body.node_at(0)
    assert body.node_at(7).role == "ret" and body.node_at(4).role is None
    assert body.max_depth == 2
    with pytest.raises(AttributeError):
        _ = body.node_at(4).callee


def _kinds(code, **kw):
    return [(p.kind, p.index, p.other) for p in parse(code, **kw).problems]


def test_problems():
    p = Pred(0)
    assert _kinds([I("if", p), I("nop")]) == [("unclosed", 0, None)]
    assert _kinds([I("endif")]) == [("unmatched-close", 0, None)]
    assert _kinds([I("else")]) == [("else-without-if", 0, None)]
    assert _kinds([I("loop"), I("else"), I("endloop")]) == [("else-without-if", 1, 0)]
    assert _kinds([I("if", p), I("else"), I("else"), I("endif")]) == [("second-else", 2, 0)]
    assert _kinds([I("loop")]) == [("unclosed", 0, None)]
    assert _kinds([I("endloop")]) == [("unmatched-close", 0, None)]
    # an endloop closing an if inside the loop: reported, and nothing is popped
    assert _kinds([I("loop"), I("if", p), I("endloop"), I("endif")]) == [
        ("unmatched-close", 2, 1), ("unclosed", 0, None)]
    assert _kinds([I("break")]) == [("jump-outside-loop", 0, None)]
    assert _kinds([I("if", p), I("continue"), I("endif")]) == [("jump-outside-loop", 1, None)]
    # unclosed regions: outermost first
    assert _kinds([I("loop"), I("if", p), I("loop")]) == [("unclosed", 0, None), ("unclosed", 1, None),
                                                          ("unclosed", 2, None)]
    msgs = [x.message for x in parse([I("loop"), I("if", p), I("endloop"), I("endif")]).problems]
    assert "endloop without a matching loop (the innermost open region is the if at instruction 1)" in msgs
    assert "loop at instruction 0 is never closed (missing endloop)" in msgs
    # an unmatched marker stays in the tree as a leaf with its role
    body = parse([I("endif"), I("nop")])
    assert [(type(n).__name__, getattr(n, "role", None)) for n in body.nodes] == [("Op", "endif"), ("Op", None)]


@pytest.mark.parametrize("limit", [1, 3, 8])
def test_depth_limit_reported_once(limit):
    code = [I("loop")] * (limit + 2) + [I("endloop")] * (limit + 2)
    assert _kinds(code, max_depth=limit) == [("too-deep", limit, None)]
    assert _kinds(code, max_depth=limit + 2) == []


def test_unusable_instructions_are_ordinary():
    code = [I("if", Pred(0)), "garbage", I("endif")]
    body = parse(code, usable=[True, False, True])
    assert body.problems == [] and isinstance(body.node_at(1), Op) and body.node_at(1).role is None
    # an unusable endif does not close the if
    assert _kinds([I("if", Pred(0)), I("endif")], usable=[True, False]) == [("unclosed", 0, None)]


def test_roles_follow_the_table():
    for d in INSTRUCTIONS:
        r = role_of(d)
        assert r in CONTROL_ROLES or r is None
        if d.flags & Flag.STRUCTURED:
            assert r == d.mnemonic
        elif d.mnemonic in ("call", "ret", "halt"):
            assert r == d.mnemonic
        else:
            assert r is None, d.mnemonic


def test_walk_deep_nesting_is_iterative():
    n = 5000
    code = [I("loop")] * n + [I("nop")] + [I("endloop")] * n
    body = parse(code, max_depth=n)
    assert body.problems == []
    assert [x.index for x in walk(body.nodes)] == list(range(n + 1))


# ----------------------------------------------------------------------------- reachable functions

@pytest.mark.parametrize("seed", range(20))
def test_reachable_functions_random_call_graphs(seed):
    from anywave.binary.module import Function, Kernel, Module, kernel_bodies, reachable_functions

    rng = random.Random(seed)
    nf = rng.randint(0, 8)
    edges = {f: {rng.randrange(nf + 2) for _ in range(rng.randint(0, 3))} for f in range(nf)}  # may be out of range
    funcs = [Function(f"f{f}", [I("nop")] + [I("call", c) for c in sorted(edges[f])]) for f in range(nf)]
    roots = {rng.randrange(nf + 2) for _ in range(rng.randint(0, 3))}
    kernel = Kernel("k", code=[I("call", c) for c in sorted(roots)] + [Instruction(I("call", 0).defn, (0, 1))])
    # the closure, by repeated relaxation over the edge sets (in-range targets only)
    want = {c for c in roots if c < nf}
    while True:
        more = want | {c for f in want for c in edges[f] if c < nf}
        if more == want:
            break
        want = more
    got = reachable_functions(funcs, kernel.code)
    assert len(got) == len(set(got)) and set(got) == want
    bodies = kernel_bodies(Module([kernel], funcs), kernel)
    assert bodies[0] == ("kernel 'k'", kernel.code)
    assert [b[0] for b in bodies[1:]] == [f"function 'f{f}'" for f in got]
