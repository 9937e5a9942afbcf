"""Loading, grouping and running the conformance suite."""

from __future__ import annotations

import functools
import json
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from anywave.conformance.case import Case, compare
from anywave.errors import WaveError


class Runner(Protocol):
    """Runs one kernel: ``runner(module, kernel, grid, workgroup, args, wave_width)``.

    ``args`` maps argument names to NumPy arrays (written in place) or NumPy scalars.
    Optional attributes: ``serial_atomics`` (True when atomics are serialised in the documented
    order, as the emulator does), ``accepts_check`` (True when it takes ``check=`` for the
    emulator's checked mode) and ``batch_bytes`` (:func:`run_suite`'s default for this runner:
    how much ``.wave`` source to build as one module, for targets with a fixed cost per build)."""

    def __call__(
        self,
        module: Any,
        kernel: str,
        grid: tuple[int, int, int],
        workgroup: tuple[int, int, int],
        args: dict[str, Any],
        wave_width: int,
    ) -> Any: ...


@functools.lru_cache(maxsize=1)
def _all_cases() -> tuple[Case, ...]:
    from anywave.conformance import (
        gen_alu,
        gen_async,
        gen_collectives,
        gen_compiled,
        gen_control,
        gen_language,
        gen_limits,
        gen_literal,
        gen_mem,
        gen_mma,
        gen_perf,
        gen_wave,
        gen_wave_barrier,
    )

    cases = (gen_alu.cases() + gen_mem.cases() + gen_wave.cases() + gen_control.cases() + gen_mma.cases()
             + gen_collectives.cases() + list(gen_perf.cases()) + gen_compiled.cases()
             + gen_limits.cases() + gen_async.cases() + gen_literal.cases() + gen_wave_barrier.cases()
             + gen_wave_barrier.constant_cases() + gen_language.cases())
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise AssertionError(f"duplicate conformance case names: {dup}")
    return tuple(cases)


def load_cases(groups: Iterable[str] | None = None, *, names: Iterable[str] | None = None) -> list[Case]:
    """All conformance cases, optionally only those of the given groups and/or names.

    Raises:
        ValueError: an unknown group or case name (the message lists the valid ones).
    """
    cases = list(_all_cases())
    if groups is not None:
        groups = list(groups)
        valid = sorted({c.group for c in cases})
        bad = [g for g in groups if g not in valid]
        if bad:
            raise ValueError(f"unknown conformance group(s) {bad}; valid groups: {valid}")
        cases = [c for c in cases if c.group in groups]
    if names is not None:
        names = list(names)
        known = {c.name for c in cases}
        bad = [n for n in names if n not in known]
        if bad:
            raise ValueError(f"unknown conformance case(s) {bad[:5]}")
        cases = [c for c in cases if c.name in names]
    return cases


def group_names() -> list[str]:
    """Names of all groups, sorted."""
    return sorted({c.group for c in _all_cases()})


def kernel_name(case: Case) -> str:
    """The kernel a case launches: the first `.kernel` of its source."""
    for line in case.source.splitlines():
        if line.startswith(".kernel"):
            return line.split()[1]
    raise ValueError(f"case {case.name!r} has no .kernel in its source")


def group_source(group: str) -> str:
    """The `.wave` module text of one group: every distinct kernel (and function) of its cases.

    Raises:
        ValueError: unknown group.
    """
    cases = load_cases([group])
    seen: dict[str, str] = {}
    for c in cases:
        k = kernel_name(c)
        if k in seen:
            if seen[k] != c.source:
                raise AssertionError(f"kernel {k!r} has two different sources in group {group!r}")
            continue
        seen[k] = c.source
    return "\n".join(seen.values())


def group_requires(group: str) -> tuple[str, ...]:
    """Union of the capabilities the group's cases need."""
    return tuple(sorted({r for c in load_cases([group]) for r in c.requires}))


@functools.cache
def assemble_group(group: str) -> Any:
    """The group's module, assembled once (assembly does not depend on W)."""
    from anywave.asm import assemble

    return assemble(group_source(group), f"<conformance:{group}>")


def assemble_groups(groups: Iterable[str]) -> Any:
    """One module holding every kernel of several groups, each once (a target that builds a
    module at a fixed cost builds them once: :func:`run_batch`, the HIP compile checks).

    Raises:
        ValueError: an unknown group, or two groups with a kernel of one name and two sources.
        AsmError: as :func:`assemble_group`."""
    from anywave.asm import assemble

    groups = list(groups)
    seen: dict[str, tuple[str, str]] = {}
    for g in groups:
        for c in load_cases([g]):
            k = kernel_name(c)
            first = seen.setdefault(k, (g, c.source))
            if first[1] != c.source:
                raise ValueError(f"kernel {k!r} has different sources in groups {first[0]!r} and {g!r}")
    # a kernel two groups share (the same source) is in the module once
    return assemble("\n".join(src for _g, src in seen.values()), f"<conformance:{'+'.join(groups)}>")


@dataclass
class CaseResult:
    """Outcome of one case at one wave width: ``status`` is pass, fail, error or skip."""

    case: str
    group: str
    wave_width: int
    status: str
    message: str = ""
    seconds: float = 0.0
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "skip")


def _copy_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _output(args: Mapping[str, Any], name: str) -> np.ndarray:
    """An output by name; ``"a+b"`` is the concatenation of outputs a and b (flattened)."""
    if "+" in name:
        return np.concatenate([np.asarray(args[p]).reshape(-1) for p in name.split("+")])
    return np.asarray(args[name])


def run_case(case: Case, runner: Runner, wave_width: int, *, module: Any = None) -> CaseResult:
    """Run one case on ``runner`` at ``wave_width`` and compare every expected output.

    Args:
        case: the case.
        runner: see :class:`Runner`.
        wave_width: W; a case that does not apply to it is reported as ``skip``.
        module: the group's module (assembled on demand when None).

    Returns:
        :class:`CaseResult`. Errors raised by the runner become status ``error`` with the
        message (a WaveError's text, or the traceback's last lines for anything else).
    """
    t0 = time.perf_counter()
    res = CaseResult(case.name, case.group, wave_width, "pass")
    if wave_width not in case.wave_widths:
        res.status, res.message = "skip", f"case applies to W in {case.wave_widths}"
        return res
    mod = None
    try:
        mod = module if module is not None else assemble_group(case.group)
        args = _copy_args(case.args)
        kwargs: dict[str, Any] = {}
        if getattr(runner, "accepts_check", False):
            kwargs["check"] = case.race_free
        runner(mod, kernel_name(case), case.grid, case.workgroup, args, wave_width, **kwargs)
        if case.expect_refusal:
            res.status, res.message = "fail", (f"the launch ran; it must be refused (grid {case.grid}, "
                                               f"workgroup {case.workgroup})")
            res.seconds = time.perf_counter() - t0
            return res
    except WaveError as e:
        text = f"{type(e).__name__}: {e}"
        if not case.expect_refusal or mod is None:
            res.status, res.message = "error", text
            res.seconds = time.perf_counter() - t0
            return res
        if not re.search(case.expect_refusal, text):
            res.status, res.message = "fail", f"refused, but not as expected ({case.expect_refusal!r}): {text}"
            res.seconds = time.perf_counter() - t0
            return res
    except Exception as e:  # noqa: BLE001 - a target's crash is a reportable result, not a suite crash
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        res.status, res.message = "error", f"{type(e).__name__}: {e}\n" + "".join(tb[-3:])
        res.seconds = time.perf_counter() - t0
        return res
    expectations = [(n, e, case.compare_for(n)) for n, e in case.expected_for(wave_width).items()]
    if getattr(runner, "serial_atomics", False):
        from anywave.conformance.case import EXACT

        expectations += [(n, e, EXACT) for n, e in case.serial_expected_for(wave_width).items()]
    messages = []
    for name, exp, how in expectations:
        r = compare(exp, _output(args, name), how, name=name)
        res.checked.append(name)
        if not r.ok:
            messages.append(r.message)
    if messages:
        res.status, res.message = "fail", "\n".join(messages)
    res.seconds = time.perf_counter() - t0
    return res


def run_group(group: str, runner: Runner, wave_width: int) -> list[CaseResult]:
    """Every case of a group at one W, building the group's module once."""
    cases = load_cases([group])
    try:
        mod = assemble_group(group)
    except Exception as e:  # noqa: BLE001
        return [
            CaseResult(c.name, group, wave_width, "error", f"group failed to assemble: {e}") for c in cases
        ]
    return [run_case(c, runner, wave_width, module=mod) for c in cases]


@dataclass
class SuiteReport:
    """Per-case results of a suite run; ``to_json()`` gives a dump for CI artefacts."""

    results: list[CaseResult]
    seconds: float

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if not r.ok]

    def to_json(self) -> str:
        return json.dumps(
            {
                "counts": self.counts(),
                "seconds": round(self.seconds, 3),
                "results": [asdict(r) for r in self.results],
            },
            indent=1,
        )


def run_batch(groups: Iterable[str], runner: Runner, wave_width: int) -> list[CaseResult]:
    """Every case of several groups at one W, from **one** module holding every group's kernels,
    so that a target with a fixed cost per build (a runtime compiler's start-up: ~1.5 s a module
    for SYCL on the Intel OpenCL CPU runtime) pays it once rather than once a group.

    A group whose cases end in ``error`` (a build error fails every kernel of the module) is run
    again alone by :func:`run_group`, and its results replace the batch's, so an error is reported
    against the group that causes it. Falls back to :func:`run_group` for each group when
    :func:`assemble_groups` refuses them (a kernel name with two sources, an assembly error).

    Returns:
        the results in the order of ``groups``, then of each group's cases."""
    groups = list(groups)
    try:
        mod = assemble_groups(groups)
    except Exception:  # noqa: BLE001 - a clash or an assembly error: reported per group below
        return [r for g in groups for r in run_group(g, runner, wave_width)]
    out: list[CaseResult] = []
    for g in groups:
        rs = [run_case(c, runner, wave_width, module=mod) for c in load_cases([g])]
        if any(r.status == "error" for r in rs):
            rs = run_group(g, runner, wave_width)
        out += rs
    return out


def run_suite(
    runner: Runner,
    wave_widths: Iterable[int] = (8, 16, 32, 64),
    progress: bool = True,
    *,
    groups: Iterable[str] | None = None,
    capabilities: Iterable[str] | None = None,
    stream: Any = None,
    batch_bytes: int | None | str = "auto",
) -> SuiteReport:
    """Run the suite (or some groups) on ``runner`` at each wave width.

    Args:
        runner: see :class:`Runner`.
        wave_widths: the W values to run.
        progress: print one line per group and W (to ``stream``, default stderr).
        groups: restrict to these groups.
        capabilities: the target's capabilities; groups needing others are skipped.
        batch_bytes: None: one module per group (:func:`run_group`). A number: consecutive groups
            share one module of up to that many bytes of ``.wave`` source (:func:`run_batch`; a
            group larger than it is a batch alone); the results are the same, built fewer times.
            ``"auto"`` (default): the runner's ``batch_bytes`` attribute, else None.

    Returns:
        :class:`SuiteReport`.

    Raises:
        ValueError: an unknown group, or ``batch_bytes`` not positive.
    """
    if batch_bytes == "auto":
        batch_bytes = getattr(runner, "batch_bytes", None)
    if batch_bytes is not None and (isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int)
                                    or batch_bytes <= 0):
        raise ValueError(f"batch_bytes must be a positive int, None or 'auto', not {batch_bytes!r}")
    out = stream or sys.stderr
    t0 = time.perf_counter()
    caps = set(capabilities) if capabilities is not None else None
    names = list(groups) if groups is not None else group_names()
    load_cases(names)  # an unknown group raises here, before anything runs
    results: list[CaseResult] = []

    def report(rs: list[CaseResult]) -> None:
        for g in dict.fromkeys(r.group for r in rs):
            mine = [r for r in rs if r.group == g]
            bad = [r for r in mine if not r.ok]
            if progress:
                print(
                    f"{g:>20} W={mine[0].wave_width:<2} {len(mine) - len(bad)}/{len(mine)} ok"
                    + (f"  failing: {', '.join(r.case for r in bad[:4])}" if bad else ""),
                    file=out,
                )

    for w in wave_widths:
        batch: list[str] = []
        size = 0

        def flush(w: int = w) -> None:
            nonlocal batch, size
            if batch:
                rs = run_batch(batch, runner, w) if len(batch) > 1 else run_group(batch[0], runner, w)
                results.extend(rs)
                report(rs)
            batch, size = [], 0

        for g in names:
            need = set(group_requires(g))
            if caps is not None and not need <= caps:
                skipped = [CaseResult(c.name, g, w, "skip", f"needs {sorted(need - caps)}") for c in load_cases([g])]
                results.extend(skipped)
                continue
            if batch_bytes is None:
                rs = run_group(g, runner, w)
                results.extend(rs)
                report(rs)
                continue
            n = len(group_source(g))
            if batch and size + n > batch_bytes:
                flush()
            batch.append(g)
            size += n
        flush()
    return SuiteReport(results, time.perf_counter() - t0)


def emulator_runner(check: bool = True) -> Callable[..., Any]:
    """A :class:`Runner` backed by :func:`anywave.emu.emulate` (serial atomics, checked mode
    for race-free cases when ``check`` is True)."""
    from anywave.emu import emulate

    def run(
        module: Any,
        kernel: str,
        grid: tuple[int, int, int],
        workgroup: tuple[int, int, int],
        args: dict[str, Any],
        wave_width: int,
        check: bool = False,
    ) -> Any:
        return emulate(
            module,
            kernel,
            grid=grid,
            workgroup=workgroup,
            args=args,
            wave_width=wave_width,
            check=check and use_check,
        )

    use_check = check
    run.serial_atomics = True  # type: ignore[attr-defined]
    run.accepts_check = True  # type: ignore[attr-defined]
    return run
