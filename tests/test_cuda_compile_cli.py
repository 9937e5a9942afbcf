"""``anywave compile kernel.cu`` (issue 28): the ``.wbin`` of a CUDA C++ file, with template
instances named by ``--kernel 'reduce<float, 256>'``, ``extern __shared__`` memory fixed by
``--shared-bytes [KERNEL=]N`` (a ``.wbin`` declares one local-memory size per kernel, spec §12,
§14.3), and ``-D``/``-I`` passed to clang as ``aw.cuda_kernel(..., clang_args=...)`` does.

Every file of the CUDA suite (tests/cuda_suite) compiles with the command, kernel for kernel
the same bytes as ``aw.cuda_kernel`` gives; the written file runs the suite's launches on the
emulator with the same bits as the suite's independent NumPy reference (two cases at W = 8 and
64 in the default tier, every case at both in the sweep tier). Every refusal of the command has
a test of its message (the kernel and the option named)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anywave as aw
from anywave import cli
from anywave.binary.wbin import read_wbin, write_wbin

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

SUITE = Path(__file__).resolve().parent / "cuda_suite"
sys.path.insert(0, str(SUITE))
from cases import CASES, HostArrays  # noqa: E402

#: what the suite's host code launches that the command must be told: the instances of
#: template kernels (--kernel) and the bytes of extern __shared__ memory (--shared-bytes),
#: as tests/cuda_suite/cases.py gives them (scan: 2 * 256 floats)
INSTANCES = {"reduce.cu": ["reduce<float, 256>", "reduce<int, 128>"]}
SHARED = {"scan.cu": {"scan_blocks": 2 * 256 * 4}}


def compile_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """``anywave compile ARGV`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    rc = cli.main(["compile", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype.fields is not None:
        return a.view(np.uint8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


# ----------------------------------------------------------------------------- every suite file

@pytest.mark.parametrize("file", sorted(p.name for p in SUITE.glob("*.cu")))
def test_suite_file_compiles_to_the_modules_of_cuda_kernel(file, tmp_path, capsys):
    """The .wbin the command writes holds, for each kernel, the bytes aw.cuda_kernel compiles
    (debug paths absolute on both sides, so the comparison includes the debug table)."""
    path = str(SUITE / file)
    out = tmp_path / "k.wbin"
    argv = [path, "-o", str(out), "--debug-paths", "absolute"]
    for inst in INSTANCES.get(file, []):
        argv += ["--kernel", inst]
    for name, n in SHARED.get(file, {}).items():
        argv += ["--shared-bytes", f"{name}={n}"]
    rc, stdout, err = compile_cli(capsys, *argv)
    assert rc == 0, err
    m = read_wbin(out.read_bytes())
    assert stdout.startswith(f"{out}: {len(m.kernels)} kernel(s): ")
    from anywave.compiler.cuda_frontend import global_functions

    plain, _ = global_functions((SUITE / file).read_text(), path)
    names = INSTANCES.get(file) or plain
    assert len(m.kernels) == len(names) >= 1
    for name, got in zip(names, m.kernels, strict=True):
        k = aw.cuda_kernel(path, name)
        want = k.compile(shared_bytes=SHARED.get(file, {}).get(name, 0))
        assert write_wbin(want) == write_wbin(aw.binary.module.Module(kernels=[got], version=want.version)), name


# ----------------------------------------------------------------------------- running the .wbin

class WbinRunner(HostArrays):
    """The suite's runner (tests/cuda_suite/cases.py) on modules written by ``anywave compile``:
    each kernel compiled by the command at its first launch (with that launch's shared-memory
    size), read back from the file and run by :func:`anywave.emulate` with the arguments in the
    ABI's order (the CUDA parameters, then the ``__constant__`` variables by name)."""

    def __init__(self, tmp: Path, capsys: Any, w: int) -> None:
        self.tmp, self.capsys, self.w = tmp, capsys, w
        self.modules: dict[tuple[str, str, int], Any] = {}

    def kernel(self, file: str, name: str) -> tuple[str, str]:
        return file, name

    def _module(self, file: str, name: str, shared: int) -> Any:
        key = (file, name, shared)
        if key not in self.modules:
            out = self.tmp / f"m{len(self.modules)}.wbin"
            argv = [str(SUITE / file), "--kernel", name, "-o", str(out)]
            if shared:
                argv += ["--shared-bytes", f"{name}={shared}"]
            rc, _, err = compile_cli(self.capsys, *argv)
            assert rc == 0, err
            self.modules[key] = read_wbin(out.read_bytes())
        return self.modules[key]

    def launch(self, k: tuple[str, str], grid: Any, block: Any, *args: Any, shared: int = 0, **constants: Any) -> None:
        m = self._module(*k, shared)
        (kern,) = m.kernels
        values = dict(zip([a.name for a in kern.args], args, strict=False))
        values.update(constants)
        assert len(values) == len(kern.args), f"{k}: {sorted(values)} for the ABI {[a.name for a in kern.args]}"
        aw.emulate(m, kern.name, grid=grid, workgroup=block, args=values, wave_width=self.w)


def _run_case(case: Any, w: int, tmp: Path, capsys: Any) -> None:
    rng = np.random.default_rng(sum(map(ord, case.name)))
    inputs = case.make(rng, "test")
    r = WbinRunner(tmp, capsys, w)
    got = case.execute(r, inputs)
    exp = case.reference(inputs, w)
    assert set(got) == set(exp)
    for name, e in exp.items():
        g = r.numpy(got[name])
        assert g.dtype == e.dtype and g.shape == e.shape, name
        same = _bits(g) == _bits(e)
        assert same.all(), f"{case.name}: output {name!r} differs in {int((~same).sum())} of {same.size} words"


#: the default tier's cases: the two the command needs options for (extern __shared__, template)
_DEFAULT = ("scan", "reduce_i32")


def _case_params() -> list[Any]:
    out = []
    for case in CASES:
        for w in (8, 64):
            marks = () if case.name in _DEFAULT else pytest.mark.sweep
            out.append(pytest.param(case, w, id=f"{case.name}-W{w}", marks=marks))
    return out


@pytest.mark.parametrize(("case", "w"), _case_params())
def test_written_wbin_runs_the_suite_case(case, w, tmp_path, capsys):
    _run_case(case, w, tmp_path, capsys)


# ----------------------------------------------------------------------------- options and errors

DYN = r"""
template <typename T>
__global__ void rev(T* o, const T* x) {
    extern __shared__ T buf[];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    o[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x] * SCALE;
}
__global__ void fill(int* o) { o[threadIdx.x] = FILL_VALUE; }
"""


@pytest.fixture
def dyn(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "fill.h").write_text("#define FILL_VALUE (7 * SCALE)\n")
    p = tmp_path / "dyn.cu"
    p.write_text('#include "fill.h"\n' + DYN)
    return p


def test_template_instance_with_shared_bytes_and_clang_options(dyn, tmp_path, capsys):
    """-I finds the header, -D defines the macro, the instance is named by --kernel, and
    --shared-bytes takes either the CUDA name or the WAVE name; the module is aw.cuda_kernel's."""
    out = tmp_path / "o.wbin"
    opts = ["-I", str(tmp_path / "inc"), "-D", "SCALE=3"]
    for key in ("rev<float>", "rev_float", "rev< float >"):
        rc, stdout, err = compile_cli(capsys, str(dyn), "--kernel", "rev<float>", "--kernel", "fill", *opts,
                                      "--shared-bytes", f"{key}=256", "-o", str(out))
        assert rc == 0, err
        assert "rev_float (" in stdout and "256 bytes of local memory" in stdout
    m = read_wbin(out.read_bytes())
    assert [k.name for k in m.kernels] == ["rev_float", "fill"]
    assert m.kernels[0].local_memory == 256
    k = aw.cuda_kernel(dyn, "rev<float>", clang_args=["-I", str(tmp_path / "inc"), "-DSCALE=3"])
    assert m.kernels[0].code == k.compile(shared_bytes=256).kernels[0].code
    for w in (8, 64):
        x = np.arange(64, dtype=np.float32) * np.float32(0.5)
        o = np.zeros(64, np.float32)
        aw.emulate(m, "rev_float", grid=1, workgroup=64, args=[o, x], wave_width=w)
        assert np.array_equal(o, x[::-1] * np.float32(3))
        f = np.zeros(8, np.int32)
        aw.emulate(m, "fill", grid=1, workgroup=8, args=[f], wave_width=w)
        assert np.array_equal(f, np.full(8, 21, np.int32))


def test_a_plain_shared_bytes_applies_to_every_kernel_that_needs_it(dyn, tmp_path, capsys):
    out = tmp_path / "o.wbin"
    rc, _, err = compile_cli(capsys, str(dyn), "--kernel", "rev<float>", "--kernel", "rev<double>", "--kernel",
                             "fill", "-I", str(tmp_path / "inc"), "-D", "SCALE=1", "--shared-bytes", "512",
                             "-o", str(out))
    assert rc == 0, err
    m = read_wbin(out.read_bytes())
    assert [(k.name, k.local_memory) for k in m.kernels] == [("rev_float", 512), ("rev_double", 512), ("fill", 0)]


def test_extern_shared_without_a_size_names_the_kernel_and_the_option(capsys):
    rc, _, err = compile_cli(capsys, str(SUITE / "scan.cu"))
    assert rc == 1
    assert "kernel 'scan_blocks' uses extern __shared__ memory" in err
    assert "--shared-bytes scan_blocks=N" in err
    assert "invalid module" not in err and "Traceback" not in err


def test_template_only_file_names_its_templates_and_how_to_instantiate(capsys):
    rc, _, err = compile_cli(capsys, str(SUITE / "reduce.cu"))
    assert rc == 1
    assert "defines only template __global__ functions (reduce<typename T, unsigned int BLOCK>)" in err
    assert "--kernel 'reduce<float, 256>'" in err
    rc, _, err = compile_cli(capsys, str(SUITE / "reduce.cu"), "--kernel", "reduce")
    assert rc == 1
    assert "'reduce' in" in err and "is a template kernel (reduce<typename T, unsigned int BLOCK>)" in err
    assert "--kernel 'reduce<float, 256>'" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--kernel", "nope"], "no kernel named 'nope' in"),
    (["--kernel", "rev<float>"], "kernel 'rev<float>' uses extern __shared__ memory"),
    (["--kernel", "rev<float>"], "--shared-bytes 'rev<float>=N'"),
    (["--kernel", "fill", "--shared-bytes", "fill=64"], "--shared-bytes fill=...: kernel 'fill' has no extern "
                                                         "__shared__ memory"),
    (["--shared-bytes", "nope=64"], "--shared-bytes nope=...: no kernel of that name is compiled; the kernels: fill"),
    (["--shared-bytes", "x"], "--shared-bytes 'x': expected N or KERNEL=N"),
    (["--shared-bytes", "0"], "--shared-bytes '0': expected N or KERNEL=N, N a positive number"),
    (["--shared-bytes", "4294967296"], "4294967296 bytes (rounded up to a multiple of 16: 4294967296) is more than "
                                       "a kernel's local memory can declare"),
    # rounding up to 16 bytes takes these past the u32 field: the option's message, not the verifier's
    (["--shared-bytes", "4294967295"], "4294967295 bytes (rounded up to a multiple of 16: 4294967296) is more than "
                                       "a kernel's local memory can declare (at most 4294967295 bytes, spec §14.3, "
                                       "so at most 4294967280 here"),
    (["--shared-bytes", "rev<float>=4294967281"], "(rounded up to a multiple of 16: 4294967296) is more than"),
    # one kernel given two sizes (the same spelling, another spacing, or its WAVE name): refused
    (["--kernel", "rev<float>", "--shared-bytes", "rev<float>=16", "--shared-bytes", "rev<float>=32"],
     "--shared-bytes 'rev<float>=32': kernel 'rev<float>' is given a size twice ('rev<float>=16' and "
     "'rev<float>=32'): give each kernel's size once"),
    (["--kernel", "rev<float>", "--shared-bytes", "rev< float>=16", "--shared-bytes", "rev <float >=32"],
     "kernel 'rev <float >' is given a size twice ('rev< float>=16' and 'rev <float >=32')"),
    (["--kernel", "rev<float>", "--shared-bytes", "rev_float=16", "--shared-bytes", "rev<float>=32"],
     "both name kernel 'rev<float>': give each kernel's size once"),
    (["--kernel", "rev<float>", "--shared-bytes", "16", "--shared-bytes", "32"],
     "--shared-bytes '32': a size for every kernel is given twice (16 and 32): give it once"),
    (["--kernel", "rev<float>", "--kernel", "rev< float >"], "both give the WAVE kernel 'rev_float'"),
    (["-D", "=3"], "-D '=3': expected NAME or NAME=VALUE"),
    (["-I", "/no/such/folder"], "-I '/no/such/folder': no such folder"),
    (["--kernel", "fill<int>"], "cannot instantiate the kernel 'fill<int>'"),
])
def test_cuda_option_errors(dyn, tmp_path, capsys, argv, message):
    rc, _, err = compile_cli(capsys, str(dyn), "-I", str(tmp_path / "inc"), "-D", "SCALE=1", *argv)
    assert rc == 1
    assert message in err
    assert "Traceback" not in err
    assert err.startswith("anywave: error: ") and err.count("error: ") == 1, err  # one prefix, not two


def test_shared_bytes_at_the_limit_and_a_kernel_named_with_other_spacing(dyn, tmp_path, capsys):
    """The largest size that rounds to a u32 (2**32 - 16) is taken; a KERNEL= spelled with
    other spacing than --kernel names the same kernel."""
    out = tmp_path / "o.wbin"
    rc, _, err = compile_cli(capsys, str(dyn), "-I", str(tmp_path / "inc"), "-D", "SCALE=1", "--kernel",
                             "rev<float>", "--shared-bytes", str(2**32 - 16), "-o", str(out))
    assert rc == 0, err
    assert read_wbin(out.read_bytes()).kernels[0].local_memory == 2**32 - 16
    rc, _, err = compile_cli(capsys, str(dyn), "-I", str(tmp_path / "inc"), "-D", "SCALE=1", "--kernel",
                             "rev< float >", "--shared-bytes", "rev<float>=64", "-o", str(out))
    assert rc == 0, err
    assert read_wbin(out.read_bytes()).kernels[0].local_memory == 64


NEG = r"""
template <int N>
__global__ void k(int* o, const int* x) { o[threadIdx.x] = x[threadIdx.x] * N + (N < 0 ? 1000 : 0); }
"""


def test_a_negative_template_argument_gets_a_wave_name_of_its_own(tmp_path, capsys):
    """k<-4> and k<4> are two kernels: the minus sign is kept in the WAVE name (k_m4), and each
    runs as its instance; names without a minus are as before (the suite's reduce_float_256)."""
    from anywave.compiler.cuda_frontend import kernel_symbol

    src = tmp_path / "neg.cu"
    src.write_text(NEG)
    out = tmp_path / "o.wbin"
    rc, stdout, err = compile_cli(capsys, str(src), "--kernel", "k<-4>", "--kernel", "k< 4 >", "--kernel",
                                  "k<(-3)>", "-o", str(out))
    assert rc == 0, err
    m = read_wbin(out.read_bytes())
    assert [k.name for k in m.kernels] == ["k_m4", "k_4", "k_m3"]
    x = np.arange(-32, 32, dtype=np.int32)
    for w in (8, 64):
        for name, n in (("k_m4", -4), ("k_4", 4), ("k_m3", -3)):
            o = np.zeros(64, np.int32)
            aw.emulate(m, name, grid=1, workgroup=64, args=[o, x], wave_width=w)
            np.testing.assert_array_equal(o, x * n + (1000 if n < 0 else 0))
    assert kernel_symbol("reduce<float, 256>") == "reduce_float_256"
    assert kernel_symbol("k<4 - 1>") == "k_4_1"  # a binary minus: unchanged


def test_unknown_kernel_lists_plain_and_template_kernels(dyn, tmp_path, capsys):
    rc, _, err = compile_cli(capsys, str(dyn), "-I", str(tmp_path / "inc"), "-D", "SCALE=1", "--kernel", "nope")
    assert rc == 1
    assert "its __global__ functions: fill; template kernels: rev<typename T>" in err


def test_a_missing_macro_is_clangs_error(dyn, tmp_path, capsys):
    """Without -D SCALE the header's macro does not compile: clang's message, at its line."""
    rc, _, err = compile_cli(capsys, str(dyn), "-I", str(tmp_path / "inc"))
    assert rc == 1
    assert "use of undeclared identifier 'SCALE'" in err


PY_DYN = """\
import anywave as aw


@aw.kernel
def rev(x: aw.Buffer[aw.f32]):
    s = aw.local_array(aw.f32, aw.dynamic)
    t = aw.local_id(0)
    s[t] = x[t]
    aw.barrier()
    x[t] = s[s.shape[0] - 1 - t]


@aw.kernel
def plain(x: aw.Buffer[aw.f32]):
    x[aw.global_id(0)] = 2.0
"""


def test_python_local_memory_sized_at_launch(tmp_path, capsys):
    """The Python language's aw.local_array(T, aw.dynamic): --local-bytes fixes local_bytes in
    the .wbin, as kernel.compile(local_bytes=N) does; missing, a message naming the option."""
    src = tmp_path / "k.py"
    src.write_text(PY_DYN)
    out = tmp_path / "k.wbin"
    rc, _, err = compile_cli(capsys, str(src), "-o", str(out))
    assert rc == 1
    assert "kernel 'rev' has local memory sized at launch" in err and "--local-bytes rev=N" in err
    rc, _, err = compile_cli(capsys, str(src), "-o", str(out), "--local-bytes", "plain=64", "--local-bytes", "rev=64")
    assert rc == 1 and "kernel 'plain' has no local memory sized at launch" in err
    rc, _, err = compile_cli(capsys, str(src), "-o", str(out), "-I", str(tmp_path))
    assert rc == 1 and "-I applies to CUDA C++ sources" in err
    for opt in (["--local-bytes", "64"], ["--local-bytes", "rev=64"], ["--shared-bytes", "rev=64"],
                ["-D", "local_bytes=64"]):
        rc, _, err = compile_cli(capsys, str(src), "-o", str(out), *opt)
        assert rc == 0, err
        m = read_wbin(out.read_bytes())
        assert m.kernels[0].local_memory == 64
    import importlib.util

    spec = importlib.util.spec_from_file_location("_cli_py_dyn", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert m.kernels[0].code == mod.rev.compile(local_bytes=64).kernels[0].code
    for w in (8, 64):
        x = np.arange(16, dtype=np.float32)
        aw.emulate(m, "rev", grid=1, workgroup=16, args=[x], wave_width=w)
        assert np.array_equal(x, np.arange(16, dtype=np.float32)[::-1])


def test_help_describes_the_cuda_options(capsys):
    assert cli.main(["compile", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in ("--shared-bytes", "--local-bytes", "-I DIR", "--kernel 'reduce<float, 256>'", "extern __shared__",
                   "a .wbin declares a fixed size of local memory per kernel"):
        assert needle in text, needle
