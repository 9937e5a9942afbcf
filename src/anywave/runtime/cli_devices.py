"""``anywave devices``: list the execution targets present on this machine (provider for
:mod:`anywave.cli`: ``add_parser``/``run``)."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``devices`` subcommand."""
    p = subparsers.add_parser("devices", help="list available targets and devices",
                              description="List every registered execution target, whether it is usable on "
                                          "this machine (and why not), and its devices with wave width and limits.")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def run(args: argparse.Namespace) -> int:
    """Print one line per target (available or not, with the reason) and per device, with
    the wave widths each runs and the default W (the one rule of
    :func:`anywave.runtime.targets.default_wave_width`)."""
    import os

    from anywave.runtime.targets import DEFAULT_WAVE_WIDTH, HOST, available_targets, default_wave_width, preferred_names

    statuses = available_targets()
    order = preferred_names()

    def widths(i) -> tuple[int, ...]:  # noqa: ANN001
        return tuple(i.wave_widths)

    if args.json:
        out = []
        for s in statuses:
            out.append({"target": s.name, "available": s.available, "reason": s.reason,
                        "default_rank": order.index(s.name) if s.name in order else None,
                        "default_wave_width_rule": DEFAULT_WAVE_WIDTH,
                        "devices": [{"device": i.device, "wave_width": default_wave_width(widths(i)),
                                     "wave_widths": list(widths(i)),
                                     "capabilities": i.capabilities.spellings(),
                                     "local_memory": i.local_memory,
                                     "max_workgroup_size": i.max_workgroup_size,
                                     **{k: v for k, v in i.details.items()}} for i in s.infos]})
        print(json.dumps(out, indent=2))
        return 0
    print(f"default wave width: W = {DEFAULT_WAVE_WIDTH} on every target that can run it (else its only W); "
          "W-invariant kernels give the same bits at every W")
    for s in statuses:
        if not s.available:
            print(f"{s.name:<10} unavailable: {s.reason}")
            continue
        for i in s.infos:
            extra = ", ".join(f"{k}={v}" for k, v in i.details.items()
                              if k in ("compute_capability", "multiprocessors", "total_memory", "driver_version"))
            ws = widths(i)
            runs = f"W={default_wave_width(ws)} by default"
            if len(ws) > 1:
                runs += f" (runs {'/'.join(map(str, ws))})"
            print(f"{s.name:<10} {i.device}: {runs}, local memory {i.local_memory} B, "
                  f"max workgroup {i.max_workgroup_size}, capabilities {','.join(i.capabilities.spellings())}"
                  + (f"; {extra}" if extra else ""))
    env = os.environ.get("ANYWAVE_TARGET")
    print(f"a launch without target= runs on the first of {', '.join(order)} that runs its kernel"
          + (" (ANYWAVE_TARGET overrides)" if not env else ""))
    if env:
        base = env.partition(":")[0]
        if env == HOST or base in order:
            print(f"ANYWAVE_TARGET={env} overrides that here")
        else:
            known = {s.name for s in statuses}
            why = "is not available here" if base in known else "names no target"
            print(f"ANYWAVE_TARGET={env} {why}: a launch without target= will fail (available: "
                  f"{', '.join(order)}, or {HOST})")
    return 0
