"""SHA-256 of the PTX and C-family text of every conformance group and example, to show a
backend refactor keeps (or knowingly changes) the generated programs.

Usage: python tools/backend_text_digests.py --write FILE    (record the digests of this tree)
       python tools/backend_text_digests.py --check FILE    (compare; exit 1 on any difference)
       python tools/backend_text_digests.py --check FILE --only ptx

Translates each conformance group (``anywave.conformance.assemble_group``) and each bundled
example with the PTX backend (sm_75 and sm_90, plain and bounds-checked) and renders it with the
OpenCL (W = 8, 16, 32, 64), SYCL (16), HIP (64) and Metal (32) dialects, plain and checked.
With ``--library`` also every library kernel bench/bench_compile.py compiles (GEMM configs
among them). Identical PTX digests on two trees mean identical PTX text, so results measured on a GPU for
one hold for the other.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path


def texts(library: bool = False) -> dict[str, str]:
    from anywave.asm import assemble
    from anywave.backends import cfamily, ptx
    from anywave.backends.hip import HIP
    from anywave.backends.metal import METAL, METAL_FEATURES
    from anywave.backends.opencl import OPENCL
    from anywave.backends.sycl import SYCL
    from anywave.conformance import assemble_group, group_names

    mods = {g: assemble_group(g) for g in group_names()}
    root = Path(ptx.__file__).resolve().parents[1] / "examples"
    for p in sorted(root.glob("*.wave")):
        mods["example:" + p.stem] = assemble(p.read_text())
    if library:  # every @aw.kernel of anywave.kernels that bench/bench_compile.py times
        import os

        from anywave.binary.module import Module

        os.environ["ANYWAVE_NO_DISK_CACHE"] = "1"
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
        from bench_compile import _library_jobs

        for name, kf, consts in _library_jobs():
            mods["kernel:" + name] = Module(kernels=[kf.compile_kernel(kf._consts_from(consts))])
    out: dict[str, str] = {}
    for name, m in mods.items():
        for arch in ("sm_75", "sm_90"):
            for chk in (False, True):
                try:
                    out[f"ptx/{arch}/{'checked' if chk else 'plain'}/{name}"] = ptx.translate(m, arch, checked=chk).text
                except Exception as e:  # noqa: BLE001 - a refusal is part of the output
                    out[f"ptx/{arch}/{'checked' if chk else 'plain'}/{name}"] = f"{type(e).__name__}: {e}"
        for dn, d, f, widths in (("opencl", OPENCL, cfamily.FULL_FEATURES, (8, 16, 32, 64)),
                                 ("sycl", SYCL, cfamily.FULL_FEATURES, (16,)),
                                 ("hip", HIP, cfamily.FULL_FEATURES, (64,)),
                                 ("metal", METAL, METAL_FEATURES, (32,))):
            for W in widths:
                for chk in (False, True):
                    try:
                        pr = cfamily.render(m, d, W, f, checked=chk)
                        t = pr.text + json.dumps(pr.refused, sort_keys=True)
                    except Exception as e:  # noqa: BLE001
                        t = f"{type(e).__name__}: {e}"
                    out[f"{dn}/W{W}/{'checked' if chk else 'plain'}/{name}"] = t
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    ap.add_argument("--library", action="store_true", help="also every library kernel (compiles them: slow)")
    ap.add_argument("--only", help="compare only keys starting with this backend name (ptx, opencl, ...)")
    a = ap.parse_args(argv)
    import anywave

    root = str(Path(anywave.__file__).resolve().parent.parent) + "/"  # source paths in comments differ per checkout
    got = {k: hashlib.sha256(v.replace(root, "").encode()).hexdigest() for k, v in texts(a.library).items()}
    if a.write:
        Path(a.write).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"{len(got)} digests written to {a.write}")
        return 0
    want = json.loads(Path(a.check).read_text())
    keys = sorted(set(got) | set(want))
    if a.only:
        keys = [k for k in keys if k.startswith(a.only + "/")]
    diff = [k for k in keys if got.get(k) != want.get(k)]
    for k in diff:
        print("differs:" if k in got and k in want else "only one side:", k)
    print(f"{len(keys) - len(diff)} of {len(keys)} identical")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
