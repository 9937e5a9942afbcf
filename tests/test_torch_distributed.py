"""Data-parallel training with WAVE ops under torch.distributed (gloo, CPU processes).

The determinism statement of :mod:`anywave.torch.distributed`: every rank ends with the same
weights; an N-rank run equals the single-process N-shard accumulation bit for bit, at any
wave width and on any CPU target; run to run the bits repeat; the full-batch single-process
run differs only by rounding."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from anywave.runtime.targets import available_targets  # noqa: E402
from anywave.torch import distributed as D  # noqa: E402
from anywave.torch import ops  # noqa: E402
from anywave.torch import train as T  # noqa: E402

CFG = T.TrainConfig(steps=5, batch=64, lr=0.5, seed=3)

#: every test that starts ranks (processes) is in the slow tier: the default tier runs no
#: multi-rank run (issue 30); .ci/run runs them all
multi_rank = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ANYWAVE_CACHE_DIR", str(tmp_path_factory.mktemp("awcache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def data():
    return T.load_data(CFG.seed)


@pytest.fixture(scope="module")
def two_ranks():
    return D.run_distributed(CFG, D.DistributedConfig(2, "gloo", "emulator", wave_width=16))


def _cpu_targets() -> list[str]:
    return [st.name for st in available_targets() if st.available and st.name in ("opencl", "sycl")]


def test_ordered_mean_sums_in_rank_order():
    # ((1e8 + 1) - 1e8) + 1 = 1 in f32 (1e8 + 1 rounds to 1e8); a pairwise or reversed order gives 0 or 2
    parts = torch.tensor([[1e8, 3.0], [1.0, 5.0], [-1e8, 7.0], [1.0, 9.0]], dtype=torch.float32)
    want = np.float32(0.0)
    for r in range(4):
        want = np.float32(want + parts[r, 0].item()) if r else np.float32(parts[0, 0].item())
    out = D.ordered_mean(parts)
    assert out.shape == (2,)
    assert out[0].item() == np.float32(want * np.float32(0.25)) == 0.25
    assert out[1].item() == 6.0


def test_ordered_mean_random_against_numpy_loop():
    rng = np.random.default_rng(0)
    for ranks in (1, 2, 3, 5):
        p = rng.standard_normal((ranks, 300)).astype(np.float32) * np.float32(1e3)
        acc = p[0].copy()
        for r in range(1, ranks):
            acc = (acc + p[r]).astype(np.float32)
        want = (acc * (np.float32(1) / np.float32(ranks))).astype(np.float32)
        got = D.ordered_mean(torch.from_numpy(p)).numpy()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), ranks


def test_ordered_mean_opcheck_and_errors():
    torch.library.opcheck(torch.ops.anywave.ordered_mean.default, (torch.randn(3, 7),))
    with pytest.raises(ops.OpDtypeError, match="float32"):
        D.ordered_mean(torch.zeros(2, 3, dtype=torch.float64))


@multi_rank
def test_every_rank_holds_the_same_weights(two_ranks):
    assert [r.info["rank"] for r in two_ranks] == [0, 1]
    T.assert_identical(two_ranks)
    # the ranks saw different shards: their own losses differ, the global loss agrees
    assert not np.array_equal(two_ranks[0].info["rank_losses"], two_ranks[1].info["rank_losses"])
    assert two_ranks[0].losses.shape == (CFG.steps,)


@multi_rank
def test_ranks_equal_single_process_accumulation_at_another_width(data, two_ranks):
    # the ranks ran at W = 16; the single-process reference at W = 64 and W = 8
    for w in (64, 8):
        with ops.cpu_target("emulator", wave_width=w):
            acc = D.train_accumulated(data, CFG, 2)
        T.assert_identical([two_ranks[0], acc])


@multi_rank
def test_full_batch_run_differs_only_by_rounding(data, two_ranks):
    with ops.cpu_target("emulator", wave_width=32):
        full = T.train(data, CFG, label="full")
    d = T.max_abs_diff(two_ranks[0], full)
    assert d["losses"] < 1e-5 and max(d[n] for n in T.PARAM_NAMES) < 1e-5
    # and the losses fall as in the single-process run
    assert two_ranks[0].losses[-1] < two_ranks[0].losses[0]


@multi_rank
@pytest.mark.parametrize("name", _cpu_targets())
def test_ranks_on_other_cpu_targets_same_bits(name, two_ranks):
    # run to run and target to target: a second 2-rank run, on OpenCL / SYCL
    again = D.run_distributed(CFG, D.DistributedConfig(2, "gloo", name))
    T.assert_identical([two_ranks[0], *again])


@multi_rank
def test_four_ranks_equal_accumulation(data):
    cfg = T.TrainConfig(steps=1, batch=64, lr=0.5, seed=1)
    runs = D.run_distributed(cfg, D.DistributedConfig(4, "gloo", "emulator", wave_width=32))
    with ops.cpu_target("emulator", wave_width=8):
        acc = D.train_accumulated(T.load_data(cfg.seed), cfg, 4)
    T.assert_identical([*runs, acc])


def test_bad_configurations():
    with pytest.raises(D.DistributedError, match="multiple of 3"):
        D.run_distributed(T.TrainConfig(steps=1, batch=64), D.DistributedConfig(3))
    with pytest.raises(D.DistributedError, match="gloo"):
        D.run_distributed(T.TrainConfig(steps=1, batch=64), D.DistributedConfig(2, backend="mpi"))
    if torch.cuda.device_count() < 2:
        with pytest.raises(D.DistributedError, match="GPUs"):
            D.run_distributed(T.TrainConfig(steps=1, batch=64), D.DistributedConfig(2, backend="nccl"))


@multi_rank
def test_cli_nproc(tmp_path, capsys):
    png, js = tmp_path / "ddp.png", tmp_path / "ddp.json"
    from anywave.torch import cli_train

    rc = cli_train.main(["--steps", "1", "--nproc", "2", "--plot", str(png), "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "bit-identical" in out and png.stat().st_size > 1000
    import json

    rec = json.loads(js.read_text())
    assert rec["world_size"] == 2 and rec["identical_to_accumulated"] and len(rec["global_losses"]) == 1
    assert cli_train.main(["--steps", "1", "--nproc", "0"]) == 1
    assert T.main(["--steps", "1", "--nproc", "2"]) == 1  # one process only: it names the command that runs ranks


_COMPILE_RACE = textwrap.dedent("""
    import sys
    import numpy as np
    import anywave as aw

    def make(c):
        @aw.kernel
        def add_c(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32, *, k: int = 0):
            i = aw.global_id(0)
            if i < n:
                y[i] = x[i] + float(k)
        return add_c

    kern = make(0)
    x = np.arange(64, dtype=np.float32)
    for k in range(4):
        y = np.zeros(64, np.float32)
        kern(x, y, 64, k=k, grid=1, workgroup=64, target="emulator")
        assert np.array_equal(y, x + np.float32(k)), (k, y[:4])
    print("ok", sys.argv[1])
""")


def test_two_processes_compiling_at_once_share_the_cache(tmp_path):
    # two ranks compiling the same kernels into one fresh disk cache must not corrupt it
    script = tmp_path / "race.py"
    script.write_text(_COMPILE_RACE)
    env = {**__import__("os").environ, "ANYWAVE_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": __import__("os").pathsep.join(sys.path)}
    for _round in range(2):  # first round: both write; second: both read what was written
        procs = [subprocess.Popen([sys.executable, str(script), str(i)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(2)]
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=600)  # hang guard, not a budget
            assert p.returncode == 0 and f"ok {i}" in out, err[-2000:]
    assert any((tmp_path / "cache").rglob("*.wbin"))


def _sleepy_rank(rank: int, seconds: float, out_dir: str) -> None:
    # rank 1 stalls (a rank stuck in a data loader or a driver call, say); rank 0 ends at once
    import os
    import time
    from pathlib import Path

    Path(out_dir, f"pid{rank}").write_text(str(os.getpid()))
    if rank == 1:
        time.sleep(seconds)


@multi_rank
def test_a_stalled_rank_times_out_and_every_rank_is_stopped(tmp_path):
    import os

    # (rank 0 is listed too when it had not finished starting by the deadline on a loaded machine)
    with pytest.raises(TimeoutError, match=r"ranks? (0, )?1 of the 2-process run did not finish within 6 s") as e:
        D._spawn_ranks(_sleepy_rank, (3600.0, str(tmp_path)), 2, timeout=6.0)
    assert "stopped" in str(e.value)
    for f in tmp_path.glob("pid*"):  # every rank that started was killed (and reaped), none left running
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.read_text()), 0)


def test_run_distributed_passes_its_timeout_and_checks_it(monkeypatch):
    for bad in (0, -1.0, float("inf"), float("nan"), "10", True):
        with pytest.raises(ValueError, match="timeout must be a finite number"):
            D.run_distributed(CFG, D.DistributedConfig(2, "gloo", "emulator"), timeout=bad)
    seen = {}

    def stalled(fn, args, nprocs, timeout):
        seen.update(nprocs=nprocs, timeout=timeout)
        raise TimeoutError("rank 1 of the 2-process run did not finish")

    monkeypatch.setattr(D, "_spawn_ranks", stalled)
    with pytest.raises(TimeoutError, match="rank 1"):  # not swallowed into a DistributedError
        D.run_distributed(CFG, D.DistributedConfig(2, "gloo", "emulator"), timeout=7.5)
    assert seen == {"nprocs": 2, "timeout": 7.5}
