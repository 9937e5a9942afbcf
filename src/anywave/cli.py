"""The ``anywave`` command line (also ``python -m anywave``).

Subcommands come from :data:`COMMANDS`, a registry of *providers*: objects or modules
(given as a dotted module path, imported only when the CLI starts) with

* ``add_parser(subparsers) -> argparse.ArgumentParser`` — add the subcommand's parser to
  the ``subparsers`` action and return it;
* ``run(args: argparse.Namespace) -> int`` — do the work, return the exit status.

Exit statuses: 0 success, 1 user error (bad input: the message goes to stderr, no
traceback), 2 usage error (argparse, a missing option, or no subcommand: the help goes to
stderr). Every :class:`~anywave.errors.WaveError` and
``OSError`` a subcommand raises is reported as a user error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from anywave import __version__
from anywave.binary.module import (
    KERNEL_FLAG_FLAT,
    KERNEL_FLAG_W_INVARIANT,
    Module,
    reachable_functions,
    w_dependent_uses,
)
from anywave.errors import AsmError, WaveError
from anywave.isa.table import Category

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_USAGE = 2


class Provider(Protocol):
    def add_parser(self, subparsers: Any) -> argparse.ArgumentParser: ...

    def run(self, args: argparse.Namespace) -> int: ...


class UserError(WaveError):
    """A command-line mistake that is not a usage error (unknown file type ...)."""


class UsageError(UserError):
    """A missing or inconsistent command-line option found after parsing (exit status 2)."""


def _output_path(out: Path, default_name: str) -> Path:
    """``out`` unless it is an existing directory or its directory does not exist
    (UserError naming the user's path)."""
    if out.is_dir():
        raise UserError(f"{out}: is a directory; -o takes the output file's path "
                        f"(e.g. {out / default_name})")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"{out}: cannot write it: directory {str(parent)!r} does not exist")
    return out


# ----------------------------------------------------------------------------- loading

def load_module(path: str | Path, *, verify: bool = True) -> Module:
    """Load a ``.wave`` (assembled) or ``.wbin`` (read) file by its suffix; ``"-"`` reads standard
    input (a ``.wbin`` by its magic bytes ``WBIN``, else ``.wave`` text).

    Raises AsmError, BinaryFormatError, VerifyError (``verify=True``), UserError for another
    suffix, OSError for I/O problems.
    """
    if str(path) == "-":
        from anywave.binary.wbin import MAGIC, _with_path, read_wbin

        data = read_stdin()
        if data.startswith(MAGIC):
            return _with_path(STDIN, lambda: read_wbin(data, verify=verify))
        return _assemble_text(_decode(data, STDIN), STDIN, verify)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".wbin":
        from anywave.binary.wbin import load

        return load(p, verify=verify)
    if suffix == ".wave":
        return _assemble_text(_read_text(p), str(p), verify)
    raise UserError(f"{p}: unknown file type {p.suffix or '(none)'!r}; expected .wave or .wbin")


#: the name standard input goes by in messages
STDIN = "<stdin>"


def read_stdin() -> bytes:
    """All of standard input as bytes. Raises UserError when it is closed or cannot be read."""
    stream = sys.stdin
    if stream is None:
        raise UserError(f"{STDIN}: standard input is closed")
    try:
        return getattr(stream, "buffer", stream).read()
    except (OSError, ValueError) as e:  # ValueError: read of a closed file object
        raise UserError(f"{STDIN}: cannot read it ({getattr(e, 'strerror', None) or e})") from None


def _assemble_text(text: str, name: str, verify: bool) -> Module:
    from anywave.asm import assemble  # type: ignore[attr-defined]

    module = assemble(text, name)
    if verify:
        from anywave.binary.verify import verify as _verify

        _verify(module)
    return module


def _decode(data: bytes, name: object) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{name}: not UTF-8 text (invalid byte at offset {e.start})") from None


def _read_text(p: Path) -> str:
    return _decode(p.read_bytes(), p)


# ----------------------------------------------------------------------------- asm

class AsmCommand:
    """``anywave asm IN.wave [-o OUT.wbin]``"""

    @staticmethod
    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        p = subparsers.add_parser("asm", help="assemble a .wave text into a .wbin binary",
                                  description="Assemble a .wave text, verify it and write a .wbin binary.")
        p.add_argument("input", help="the .wave file ('-': .wave text on standard input, with -o)")
        p.add_argument("-o", "--output", help="output path (default: the input with suffix .wbin; '-': standard "
                                                "output)")
        return p

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from anywave.binary.wbin import save

        if args.input == "-":  # .wave text on standard input; it has no name to derive the output's from
            if not args.output:
                raise UsageError("reading standard input ('-') needs -o OUT.wbin (or -o - for standard output)")
            from anywave.binary.wbin import MAGIC

            data = read_stdin()
            if data.startswith(MAGIC):
                raise UserError(f"{STDIN}: expected .wave text, got a .wbin binary")
            src = Path(STDIN)
            module = _assemble_text(_decode(data, STDIN), STDIN, True)
        else:
            src = Path(args.input)
            if src.suffix.lower() != ".wave":
                raise UserError(f"{src}: expected a .wave file")
            module = load_module(src)
        if not module.kernels:
            raise UsageError(f"{src}: no kernel to assemble (the file has no .kernel ... .end block)")
        if args.output == "-":
            from anywave.binary.wbin import write_wbin

            sys.stdout.buffer.write(write_wbin(module))
            sys.stdout.flush()
            return EXIT_OK
        out = _output_path(Path(args.output), src.with_suffix(".wbin").name) if args.output \
            else src.with_suffix(".wbin")
        try:
            save(module, out)
        except OSError as e:
            raise UserError(f"{out}: cannot write it ({e.strerror or e})") from None
        return EXIT_OK


# ----------------------------------------------------------------------------- dis

class DisCommand:
    """``anywave dis IN.wbin [-o OUT.wave]``"""

    @staticmethod
    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        p = subparsers.add_parser("dis", help="disassemble a .wbin binary into .wave text",
                                  description="Read (and verify) a .wbin binary and print its .wave text.")
        p.add_argument("input", help="the .wbin file")
        p.add_argument("-o", "--output", help="write the text here ('-' or none: standard output)")
        p.add_argument("-g", "--loc", action="store_true",
                       help="print the debug table as .loc lines (source file, line, column) before the "
                            "instructions they belong to")
        return p

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from anywave.asm import disassemble  # type: ignore[attr-defined]
        from anywave.binary.wbin import load

        out = _output_path(Path(args.output), Path(args.input).with_suffix(".wave").name) \
            if args.output and args.output != "-" else None
        module = load(args.input)
        text = disassemble(module, locations=args.loc)
        if out is not None:
            out.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return EXIT_OK


# ----------------------------------------------------------------------------- validate

class ValidateCommand:
    """``anywave validate FILE...``"""

    @staticmethod
    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        p = subparsers.add_parser("validate", help="check .wave/.wbin files and list every problem",
                                  description="Assemble or read each file and run the verifier. Prints "
                                              "'FILE: ok' on standard output, or every problem as "
                                              "'FILE: error: ...' on standard error; exit status 1 if "
                                              "any file fails.")
        p.add_argument("files", nargs="+", metavar="FILE", help=".wave or .wbin files")
        return p

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from anywave.binary.verify import check

        if args.files.count("-") > 1:
            raise UsageError("standard input ('-') can be read only once")
        status = EXIT_OK
        for name in args.files:
            try:
                problems = check(load_module(name, verify=False))
            except (WaveError, OSError) as e:
                problems = [_message(e)]
            if problems:
                status = EXIT_USER_ERROR
                for prob in problems:
                    print(f"{name}: error: {prob}", file=sys.stderr)
            else:
                print(f"{name}: ok")
        return status


# ----------------------------------------------------------------------------- info

def module_info(module: Module) -> dict[str, Any]:
    """A JSON-ready summary of a module: per kernel its ABI, resources, capabilities and
    instruction counts per category (the kernel's own code plus every function it calls)."""
    funcs = module.functions

    def counts(code: list) -> dict[str, int]:
        c = Counter(ins.defn.category.name.lower() for ins in code)
        return {cat.name.lower(): c[cat.name.lower()] for cat in Category if c[cat.name.lower()]}

    kernels = []
    for k in module.kernels:
        called = sorted(reachable_functions(funcs, k.code))
        code = list(k.code) + [ins for fi in called for ins in funcs[fi].code]
        kernels.append({
            "name": k.name,
            "args": [{"index": i, "name": a.name, "kind": a.kind.name.lower(), "type": a.type.spelling,
                      "access": a.access.spelling} for i, a in enumerate(k.args)],
            "registers": k.registers,
            "local_memory": k.local_memory,
            "workgroup_size": list(k.workgroup_size) if k.workgroup_size else None,
            "max_workgroup_size": k.max_workgroup_size,
            "capabilities": k.capabilities.spellings(),
            "flags": [n for bit, n in ((KERNEL_FLAG_FLAT, "flat"), (KERNEL_FLAG_W_INVARIANT, "w_invariant"))
                      if k.flags & bit],
            "wave_width_dependence": _w_dependence(module, k),
            "calls": [funcs[fi].name for fi in called],
            "instructions": len(code),
            "instructions_by_category": counts(code),
            "prints": [{"format": pf.format, "types": [t.spelling for t in pf.types], "where": pf.where}
                       for pf in getattr(k, "prints", ())],
        })
    return {
        "version": f"{module.version[0]}.{module.version[1]}",
        "kernels": kernels,
        "functions": [{"name": f.name, "instructions": len(f.code),
                       "instructions_by_category": counts(f.code)} for f in funcs],
    }


def _w_dependence(module: Module, k: Any) -> dict[str, Any]:
    """The kernel's W-dependence (docs/spec.md §14.3) for :func:`module_info`: ``invariant``
    (bool), ``declared`` (the kernel-table flag is set), ``uses`` (W-observing instructions),
    ``summary`` (one line)."""
    uses = w_dependent_uses(module, k)
    declared = bool(k.flags & KERNEL_FLAG_W_INVARIANT)
    if declared:
        summary = "invariant (flag w_invariant: same results at every W" + \
            (", through the W-invariant library collectives)" if uses else ")")
    elif not uses:
        summary = "invariant (no instruction observes W)"
    else:
        summary = "may depend on W (compare its results only at equal W); W is observed by:"
    return {"invariant": declared or not uses, "declared": declared, "uses": [] if declared else uses,
            "summary": summary}


def format_info(info: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`module_info`."""
    lines: list[str] = [f"WAVE module, format {info['version']}: {len(info['kernels'])} kernel(s), "
                        f"{len(info['functions'])} function(s)"]
    for k in info["kernels"]:
        lines.append("")
        lines.append(f"kernel {k['name']}" + (f"  [{', '.join(k['flags'])}]" if k["flags"] else ""))
        lines.append("  arguments:")
        if not k["args"]:
            lines.append("    (none)")
        else:
            rows = [("#", "name", "kind", "type", "access")] + [
                (str(a["index"]), a["name"], a["kind"], a["type"], a["access"]) for a in k["args"]]
            widths = [max(len(r[c]) for r in rows) for c in range(5)]
            for r in rows:
                cells = (cell.ljust(w) for cell, w in zip(r, widths, strict=True))
                lines.append(("    " + "  ".join(cells)).rstrip())
        wg = k["workgroup_size"]
        lines.append(f"  registers:          {k['registers']}")
        lines.append(f"  local memory:       {k['local_memory']} bytes")
        lines.append(f"  workgroup size:     {'x'.join(map(str, wg)) if wg else 'any'}")
        mx = k["max_workgroup_size"]
        lines.append(f"  max workgroup size: {mx if mx is not None else 'not declared'}")
        lines.append(f"  capabilities:       {', '.join(k['capabilities']) or 'none'}")
        wd = k["wave_width_dependence"]
        lines.append(f"  wave width (W):     {wd['summary']}")
        for u in wd["uses"][:4]:
            lines.append(f"    {u}")
        if len(wd["uses"]) > 4:
            lines.append(f"    ... {len(wd['uses']) - 4} more")
        if k["calls"]:
            lines.append(f"  calls:              {', '.join(k['calls'])}")
        cats = ", ".join(f"{n} {c}" for c, n in k["instructions_by_category"].items())
        lines.append(f"  instructions:       {k['instructions']}" + (f" ({cats})" if cats else ""))
        for i, pf in enumerate(k.get("prints", ())):
            lines.append(f"  aw.print site {i}:   {pf['format']!r} ({', '.join(pf['types'])})"
                         + (f" at {pf['where']}" if pf["where"] else ""))
    for f in info["functions"]:
        lines.append("")
        cats = ", ".join(f"{n} {c}" for c, n in f["instructions_by_category"].items())
        lines.append(f"function {f['name']}: {f['instructions']} instructions"
                     + (f" ({cats})" if cats else ""))
    return "\n".join(lines) + "\n"


class InfoCommand:
    """``anywave info FILE [--json]``"""

    @staticmethod
    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        p = subparsers.add_parser("info", help="show kernels, ABI, resources and instruction counts",
                                  description="Summarise a .wave or .wbin module: each kernel's arguments, "
                                              "registers, local memory, workgroup size, capabilities and "
                                              "instruction counts per category.")
        p.add_argument("file", help=".wave or .wbin file (- reads standard input)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        return p

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        info = module_info(load_module(args.file))
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            sys.stdout.write(format_info(info))
        return EXIT_OK


# ----------------------------------------------------------------------------- registry

#: subcommand providers in help order: objects, or dotted paths of modules, each with
#: ``add_parser(subparsers)`` and ``run(args) -> int``
COMMANDS: list[Provider | str] = [
    AsmCommand, DisCommand, ValidateCommand, InfoCommand, "anywave.jit.cli_run", "anywave.compiler.cli_compile",
    "anywave.backends.cli_translate", "anywave.runtime.cli_devices", "anywave.models.cli_train", "anywave.demo",
    "anywave.conformance.report", "anywave.explore",
]


def register(provider: Provider | str) -> None:
    """Add a subcommand provider (an object or a dotted module path) to :data:`COMMANDS`."""
    if provider not in COMMANDS:
        COMMANDS.append(provider)


def _resolve(provider: Provider | str) -> Provider:
    return importlib.import_module(provider) if isinstance(provider, str) else provider  # type: ignore[return-value]


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="anywave",
        description="WAVE toolchain: compile, assemble, inspect, translate and run WAVE kernels.")
    parser.add_argument("--version", action="version", version=f"anywave {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for provider in COMMANDS:
        prov = _resolve(provider)
        p = prov.add_parser(sub)
        if p.description:  # descriptions taken from docstrings: show plain text, not reST markup
            p.description = plain_text(p.description)
        p.set_defaults(_run=prov.run)
    return parser


_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?([^`]+)`")


def plain_text(text: str) -> str:
    """``text`` with reST inline markup removed: roles (:mod:`x` → x), ``literals``, **bold**."""
    text = _ROLE.sub(lambda m: m.group(1), text)
    return text.replace("``", "").replace("**", "")


def _message(e: BaseException) -> str:
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror or e}"
    return str(e)


#: the head of an error that already names its place, ``file:line[:col]: error: `` (compile
#: errors, as a C compiler prints them)
_LOCATED = re.compile(r"[^\n]*?:\d+(?::\d+)?: error: ")


def _error_text(e: BaseException) -> str:
    """What the CLI prints for a user error: one ``error:`` prefix. An error that starts with
    its own place (``kernel.py:6:18: error: ...``, a compile error) is printed as it is; one
    that starts with a bare ``error: `` (a compile error with no place) gets ``anywave: ``
    before it; any other gets ``anywave: error: ``."""
    text = _message(e)
    if _LOCATED.match(text):
        return text
    if text.startswith("error: "):
        return "anywave: " + text
    return f"anywave: error: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and usage errors (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    run = getattr(args, "_run", None)
    if run is None:  # no subcommand: a usage error
        parser.print_help(file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(run(args))
    except UsageError as e:
        print(f"anywave {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except AsmError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USER_ERROR
    except (WaveError, OSError, ValueError, TypeError) as e:
        # ValueError/TypeError: bad launch arguments (shapes, dtypes, ranges) from the API.
        if os.environ.get("ANYWAVE_DEBUG"):
            raise
        print(_error_text(e), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
