"""The region tree of one body of WAVE code: structured control flow parsed once.

WAVE control flow is structured (docs/spec.md §7): in each kernel body and each function
body, ``if``/``else``/``endif`` and ``loop``/``endloop`` nest properly, and ``break`` /
``continue`` leave the innermost loop. :func:`parse` turns a body's flat instruction list
into a tree of :class:`If`, :class:`Loop` and :class:`Op` nodes. Every consumer that needs
the structure (verifier, assembler, disassembler, emulator, backends) walks this tree
instead of keeping its own ``endif``/``endloop`` stack.

Example::

    body = parse(kernel.code)          # a Body; body.problems is [] for verified code
    for node in body.walk():           # every node, in code order (pre-order)
        ...

    class Printer(Visitor):            # or a visitor, one method per construct
        def visit_if(self, node):      # node.index: the `if`; node.pred: its predicate
            self.visit_body(node.then)
            if node.else_index is not None:
                self.visit_body(node.orelse)
        def visit_loop(self, node):    # node.body; node.end_index: the `endloop`
            self.visit_body(node.body)
        def visit_op(self, node):      # any other instruction; node.role says which
            ...

Nodes hold instruction *indices* into the body (``code[node.index]`` is ``node.ins``), so a
consumer can map back to the flat code, its source locations and the emulator's program
counters.

Roles: each instruction has a structural role, the spelling of the table record's ``role``
(:class:`anywave.isa.table.Role`; :func:`role_of`):

* ``"if"``, ``"else"``, ``"endif"``, ``"loop"``, ``"endloop"`` -- region markers; in a
  well-formed body they appear only as the indices of :class:`If` and :class:`Loop` nodes;
* ``"break"``, ``"continue"`` -- :class:`Op` leaves with ``.loop``, the loop they leave;
* ``"call"`` (``.callee``: function index), ``"ret"``, ``"halt"`` -- :class:`Op` leaves;
* ``None`` -- every other instruction (arithmetic, memory, barrier, nop ...).

Errors: :func:`parse` never raises for malformed structure. It records each rule of
spec §7.2 rules 1-3 that the body breaks as a :class:`Problem` (``body.problems``) and
builds a best-effort tree (an unmatched marker becomes an :class:`Op` leaf with its role; a
region never closed has ``end_index`` None). The verifier turns problems into its
messages; code that reads verified modules may assume ``body.problems == []``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from anywave.isa.types import LIMITS

__all__ = ["Body", "If", "Loop", "Node", "Op", "Problem", "Visitor", "parse", "regions", "role_of", "walk",
           "REGION_ROLES", "JUMP_ROLES", "CONTROL_ROLES"]

#: roles of the instructions that open, split or close a region
REGION_ROLES = frozenset({"if", "else", "endif", "loop", "endloop"})
#: roles of the instructions that leave the innermost loop (or go to its next iteration)
JUMP_ROLES = frozenset({"break", "continue"})
#: every structural role (:func:`role_of` returns one of these or None)
CONTROL_ROLES = REGION_ROLES | JUMP_ROLES | {"call", "ret", "halt"}

_ROLE_BY_OP = {r: r for r in CONTROL_ROLES}


def role_of(defn: Any) -> str | None:
    """The structural role of an instruction record (an ``InstrDef``) as a plain string: one
    of :data:`CONTROL_ROLES` (the spelling of the record's ``role``, an
    :class:`anywave.isa.table.Role`), or None for an ordinary instruction. A record without a
    ``role`` field is classified by its ``op``."""
    if not hasattr(defn, "role"):
        return _ROLE_BY_OP.get(defn.op)
    role = defn.role
    if role is None:
        return None
    role = getattr(role, "value", role)  # a Role member or a plain string
    return role if role in CONTROL_ROLES else None


class Node:
    """Base of the tree's nodes.

    Attributes:
        index: index in the body's code of the node's instruction (for a region: its opening
            ``if`` / ``loop``).
        ins: ``code[index]``, the instruction itself (whatever the parsed sequence holds: an
            ``Instruction``, or the assembler's parsed line).
        parent: the innermost :class:`If` or :class:`Loop` containing the node; None at the
            top of the body.
        depth: how many regions contain the node (0 at the top of the body).
    """

    __slots__ = ("index", "ins", "parent", "depth")
    #: name of the :class:`Visitor` method for this kind of node (``visit_<kind>``)
    kind = "node"

    def __init__(self, index: int, ins: Any, parent: If | Loop | None, depth: int) -> None:
        self.index = index
        self.ins = ins
        self.parent = parent
        self.depth = depth

    @property
    def loop_parent(self) -> Loop | None:
        """The innermost :class:`Loop` containing the node (None outside every loop)."""
        p = self.parent
        while p is not None and not isinstance(p, Loop):
            p = p.parent
        return p

    def __repr__(self) -> str:
        return f"{type(self).__name__}(index={self.index})"


class Op(Node):
    """A leaf: one instruction that is not a region marker.

    Attributes:
        role: the instruction's structural role (``"break"``, ``"continue"``, ``"call"``,
            ``"ret"``, ``"halt"``), or None for an ordinary instruction. In a body with problems
            an unmatched ``else``/``endif``/``endloop`` is also an Op with that role.
        loop: for ``break``/``continue``, the :class:`Loop` it leaves (the innermost one
            containing it); None otherwise (and for a jump outside every loop, a problem).
    """

    __slots__ = ("role", "loop")
    kind = "op"

    def __init__(self, index: int, ins: Any, parent: If | Loop | None, depth: int, role: str | None,
                 loop: Loop | None = None) -> None:
        self.index = index  # Node.__init__ spelled out: one Op per instruction, on the verifier's path
        self.ins = ins
        self.parent = parent
        self.depth = depth
        self.role = role
        self.loop = loop

    @property
    def callee(self) -> int:
        """For a ``call``: the index of the function it calls (``ins.operands[0]``)."""
        if self.role != "call":
            raise AttributeError(f"instruction {self.index} is not a call (role {self.role!r})")
        return int(self.ins.operands[0])

    @property
    def end_index(self) -> int:
        """The last instruction index of the node: ``index`` for a leaf."""
        return self.index


class If(Node):
    """``if p ... [else ...] endif``.

    Attributes:
        then: nodes of the then-region (between the ``if`` and the ``else`` or ``endif``).
        else_index: index of the ``else``, or None when the if has none.
        orelse: nodes of the else-region (empty without an ``else``).
        end_index: index of the ``endif`` (None only in a body with problems: never closed).
    """

    __slots__ = ("then", "else_index", "orelse", "end_index")
    kind = "if"

    def __init__(self, index: int, ins: Any, parent: If | Loop | None, depth: int) -> None:
        super().__init__(index, ins, parent, depth)
        self.then: list[Node] = []
        self.else_index: int | None = None
        self.orelse: list[Node] = []
        self.end_index: int | None = None

    @property
    def pred(self) -> Any:
        """The ``if``'s predicate operand (a ``Pred``: register index and negation)."""
        return self.ins.operands[0]

    @property
    def children(self) -> list[Node]:
        """The then-region's nodes followed by the else-region's."""
        return self.then + self.orelse


class Loop(Node):
    """``loop ... endloop``.

    Attributes:
        body: nodes of the loop body.
        end_index: index of the ``endloop`` (None only in a body with problems).
    """

    __slots__ = ("body", "end_index")
    kind = "loop"

    def __init__(self, index: int, ins: Any, parent: If | Loop | None, depth: int) -> None:
        super().__init__(index, ins, parent, depth)
        self.body: list[Node] = []
        self.end_index: int | None = None

    @property
    def children(self) -> list[Node]:
        return self.body


@dataclass(frozen=True)
class Problem:
    """One broken rule of spec §7.2 (rules 1-3), found by :func:`parse`.

    Attributes:
        kind: ``"else-without-if"``, ``"second-else"``, ``"unmatched-close"`` (an ``endif`` /
            ``endloop`` with no open region of its kind on top), ``"jump-outside-loop"``
            (``break``/``continue``), ``"unclosed"`` (a region never closed; ``index`` is its
            opener), ``"too-deep"`` (the first opener beyond ``LIMITS.max_control_nesting``;
            reported once per body).
        index: the instruction the problem is at.
        role: that instruction's role.
        other: the related instruction, or None: the innermost open region's opener for
            ``else-without-if`` / ``unmatched-close`` (None when no region is open), the
            ``if`` for ``second-else``.
        other_role: the role of ``other`` (``"if"`` or ``"loop"``), or None.
        message: the problem in words, naming instructions by index (the verifier's text).
    """

    kind: str
    index: int
    role: str
    other: int | None
    other_role: str | None
    message: str


_CLOSER = {"if": "endif", "loop": "endloop"}


class Body:
    """The parsed structure of one body of code (see :func:`parse`).

    Attributes:
        code: the parsed sequence (not copied).
        nodes: the top-level nodes, in code order.
        problems: broken structure rules, in code order (unclosed regions last, outermost
            first); empty for verified code.
        max_depth: the deepest region nesting in the body (0 without regions).
    """

    __slots__ = ("code", "nodes", "problems", "max_depth", "_at")

    def __init__(self, code: Sequence[Any]) -> None:
        self.code = code
        self.nodes: list[Node] = []
        self.problems: list[Problem] = []
        self.max_depth = 0
        self._at: list[Node | None] = [None] * len(code)

    @property
    def ok(self) -> bool:
        """Whether the body breaks no structure rule."""
        return not self.problems

    def node_at(self, index: int) -> Node:
        """The node an instruction index belongs to: the :class:`If` for its ``if``, ``else``
        and ``endif``, the :class:`Loop` for its ``loop`` and ``endloop``, else the
        :class:`Op`. Raises IndexError outside the body."""
        node = self._at[index]
        if node is None:  # pragma: no cover - every index gets a node
            raise IndexError(index)
        return node

    def region_of(self, index: int) -> If | Loop | None:
        """The innermost region *containing* instruction ``index`` (for a region marker: the
        region around it, not its own); None at the top of the body."""
        return self.node_at(index).parent

    def walk(self) -> Iterator[Node]:
        """Every node of the body, pre-order, in code order (see :func:`walk`)."""
        return walk(self.nodes)

    def calls(self) -> list[Op]:
        """The body's ``call`` leaves, in code order."""
        return [n for n in self.walk() if isinstance(n, Op) and n.role == "call"]


def parse(code: Sequence[Any], *, usable: Sequence[bool] | None = None,
          max_depth: int = LIMITS.max_control_nesting) -> Body:
    """Parse one body's flat code into its region tree.

    Args:
        code: the body's instructions: objects with a ``defn`` (an ``InstrDef`` of the
            instruction table), e.g. ``Kernel.code`` / ``Function.code``.
        usable: optional flags, one per instruction; an instruction whose flag is False is
            taken as an ordinary instruction whatever it is (the verifier passes which
            instructions passed its operand checks, so a malformed one is neither read nor
            matched).
        max_depth: the nesting limit for the ``too-deep`` problem (default
            ``LIMITS.max_control_nesting``, spec §7.2 rule 3).

    Returns:
        A :class:`Body`. Never raises for malformed structure: see ``Body.problems``.
        The work is linear in ``len(code)``.
    """
    body = Body(code)
    at = body._at
    problems = body.problems
    stack: list[Any] = []  # open If/Loop nodes, outermost first
    cur: list[Node] = body.nodes  # the node list instructions are appended to
    loops = 0  # open Loop nodes on the stack
    deepest = 0
    deep_reported = False
    role_cache: dict[int, str | None] = {}
    for i, ins in enumerate(code):
        if usable is not None and not usable[i]:
            role = None
        else:
            d = ins.defn
            key = id(d)
            try:
                role = role_cache[key]
            except KeyError:
                role = role_cache[key] = role_of(d)
        parent = stack[-1] if stack else None
        depth = len(stack)
        if role is None:
            node: Node = Op(i, ins, parent, depth, None)
            cur.append(node)
            at[i] = node
            continue
        if role == "if" or role == "loop":
            node = If(i, ins, parent, depth) if role == "if" else Loop(i, ins, parent, depth)
            cur.append(node)
            at[i] = node
            stack.append(node)
            if role == "loop":
                loops += 1
            cur = node.then if role == "if" else node.body  # type: ignore[union-attr]
            if len(stack) > deepest:
                deepest = len(stack)
                if deepest > max_depth and not deep_reported:
                    deep_reported = True
                    problems.append(Problem("too-deep", i, role, None, None,
                                            f"control-flow nesting depth {deepest} exceeds the limit {max_depth}"))
            continue
        if role == "else":
            if parent is None or not isinstance(parent, If):
                problems.append(Problem("else-without-if", i, role, _idx(parent), _kind(parent),
                                        "else without a matching if" + _open_note(parent)))
            elif parent.else_index is not None:
                problems.append(Problem("second-else", i, role, parent.index, "if",
                                        f"second else for the if at instruction {parent.index}"))
            else:
                parent.else_index = i
                at[i] = parent
                cur = parent.orelse
                continue
        elif role == "endif" or role == "endloop":
            want = "if" if role == "endif" else "loop"
            if parent is not None and parent.kind == want:
                parent.end_index = i
                at[i] = parent
                stack.pop()
                if want == "loop":
                    loops -= 1
                cur = _current(stack, body)
                continue
            problems.append(Problem("unmatched-close", i, role, _idx(parent), _kind(parent),
                                    f"{role} without a matching {want}" + _open_note(parent)))
        elif role == "break" or role == "continue":
            loop = None
            if loops:
                for r in reversed(stack):
                    if r.kind == "loop":
                        loop = r
                        break
            else:
                problems.append(Problem("jump-outside-loop", i, role, None, None,
                                        f"{role} outside a loop (break/continue must be inside a loop of the "
                                        f"same kernel or function)"))
            node = Op(i, ins, parent, depth, role, loop)
            cur.append(node)
            at[i] = node
            continue
        # call / ret / halt, and an unmatched region marker
        node = Op(i, ins, parent, depth, role)
        cur.append(node)
        at[i] = node
    for r in stack:
        closer = _CLOSER[r.kind]
        problems.append(Problem("unclosed", r.index, r.kind, None, None,
                                f"{r.kind} at instruction {r.index} is never closed (missing {closer})"))
    body.max_depth = deepest
    return body


def _current(stack: list[Any], body: Body) -> list[Node]:
    if not stack:
        return body.nodes
    top = stack[-1]
    if top.kind == "loop":
        return top.body  # type: ignore[no-any-return]
    return top.then if top.else_index is None else top.orelse  # type: ignore[no-any-return]


def _idx(region: Any) -> int | None:
    return None if region is None else int(region.index)


def _kind(region: Any) -> str | None:
    return None if region is None else str(region.kind)


def _open_note(region: Any) -> str:
    if region is None:
        return ""
    return f" (the innermost open region is the {region.kind} at instruction {region.index})"


def regions(node: Any) -> tuple[Sequence[Any], ...]:
    """The regions directly inside ``node``, in code order: ``(then, orelse)`` for an
    :class:`If`, ``(body,)`` for a :class:`Loop`, ``()`` for a leaf."""
    if isinstance(node, If):
        return (node.then, node.orelse)
    if isinstance(node, Loop):
        return (node.body,)
    return ()


def walk(nodes: Sequence[Any], regions: Any = regions) -> Iterator[Any]:
    """Every node of ``nodes`` and their descendants, pre-order in code order: a region,
    then its then-region (or loop body), then its else-region.

    The one region walker of the code base: ``regions(node)`` names the regions directly
    inside a node (default: :func:`regions`, for this module's tree). Any structured tree
    whose regions are sequences of nodes walks with it -- the compiler's IR
    (:func:`anywave.compiler.ir.walk` passes its own ``regions``). Iterative (an explicit stack
    of region iterators): a recursive generator would pass every node up through one
    generator frame per nesting level (cost O(nodes x depth))."""
    stack: list[Iterator[Any]] = [iter(nodes)]
    while stack:
        for n in stack[-1]:
            yield n
            inner = regions(n)
            if inner:
                for r in reversed(inner):
                    if r:
                        stack.append(iter(r))
                break
        else:
            stack.pop()


class Visitor:
    """Walks a tree with one method per construct, like ``ast.NodeVisitor``.

    :meth:`visit` calls ``visit_if``, ``visit_loop`` or ``visit_op`` by the node's
    ``kind``. The defaults visit the children in code order (then-region, else-region; the
    loop body) and do nothing for a leaf; override the ones you need and call
    :meth:`visit_body` to descend. Return values of the methods are passed through
    :meth:`visit`.
    """

    def visit(self, node: Node) -> Any:
        return getattr(self, "visit_" + node.kind)(node)

    def visit_body(self, nodes: Sequence[Node]) -> None:
        for n in nodes:
            self.visit(n)

    def visit_if(self, node: If) -> Any:
        self.visit_body(node.then)
        self.visit_body(node.orelse)

    def visit_loop(self, node: Loop) -> Any:
        self.visit_body(node.body)

    def visit_op(self, node: Op) -> Any:
        return None
