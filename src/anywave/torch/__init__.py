"""PyTorch integration (issue 8): WAVE kernels as ``torch.ops.anywave`` operators and a
training demo that is bit-identical on every target.

* :mod:`anywave.torch.ops` — the custom ops (``mm``, ``linear``, ``sum_dim0``, ``relu``,
  ``relu_backward``, ``cross_entropy``, ``cross_entropy_backward``, ``sgd_``, and from
  :mod:`anywave.torch.mma_ops` the bf16/f16 tensor-core GEMM ``gemm_mma``, from
  :mod:`anywave.torch.attention` ``attention`` (docs/spec.md §8.17): ``import
  anywave.torch.ops`` registers them all) and the CPU
  target selection (:func:`~anywave.torch.ops.set_cpu_target`, :func:`~anywave.torch.ops.cpu_target`);
* :mod:`anywave.torch.kernels` — the WAVE kernels behind them and their fixed arithmetic order;
* :mod:`anywave.torch.train` — the MLP-on-digits training, bit-identity check, plot
  (``python -m anywave.torch.train``); :mod:`anywave.torch.cli_train` — its ``anywave train`` provider;
* :mod:`anywave.torch.checks` — opcheck / graph-break self-checks for any device;
* :func:`custom_op` (:mod:`anywave.torch.custom_ops`) — a user's ``@aw.kernel`` as a
  ``torch.library`` operator (what the ops above are built with).

Importing this package does not import PyTorch; the submodules above (except
``cli_train``) do.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # lazy, so that importing the package does not import PyTorch
    if name in ("custom_op", "CustomOpError"):
        from anywave.torch import custom_ops

        return getattr(custom_ops, name)
    raise AttributeError(f"module 'anywave.torch' has no attribute {name!r}")

