"""CUDA graphs from the kernel language: ``with aw.graph(target="cuda") as g: ...`` records the
launches of the block (stream capture) and ``g.replay()`` / ``g()`` runs them again with one
driver call.

Inside the block every kernel call that names no ``stream=`` is enqueued on the capture's
stream and recorded, not run. What is recorded is fixed: the kernels, their geometry and their
argument words (buffer addresses and scalar values as they were at capture), so a replay reads
and writes the same memory, which must stay alive (keep the arrays/tensors) as long as the
graph. Only device memory may be passed inside the block (a NumPy array would need a copy that
runs at capture time, not at replay), and bounds-checked launches (``check=True``) are refused
(they wait for the device). The first launch of a kernel compiles and loads it: do that once
before the block (a warm-up call), as with ``torch.cuda.graphs``.

PyTorch's own capture (``torch.cuda.graph``) needs nothing from here: the kernel call and the
torch ops launch on PyTorch's current stream, which is the capturing one.
"""

from __future__ import annotations

import threading
from typing import Any

#: open captures in the process (any thread): a kernel call reads this one global first
ACTIVE = 0
_LOCAL = threading.local()
_COUNT_LOCK = threading.Lock()


def current() -> Any:
    """The capture open on this thread (a :class:`anywave.runtime.cuda.CudaCapture`), or None."""
    return getattr(_LOCAL, "capture", None)


class Graph:
    """A recorded sequence of launches on one CUDA device (see the module docstring).

    Attributes:
        target: ``"cuda"`` or ``"cuda:N"`` as given.
        kernels: the number of kernel launches recorded (after the block).
    """

    def __init__(self, target: str = "cuda") -> None:
        name, _, dev = str(target).partition(":")
        if name != "cuda":
            from anywave.jit.targets import TargetError

            raise TargetError(f"aw.graph(target={target!r}): graphs are captured on the cuda target "
                              "('cuda' or 'cuda:N')")
        try:
            self.device = int(dev) if dev else 0
        except ValueError:
            from anywave.jit.targets import TargetError

            raise TargetError(f"aw.graph(target={target!r}): write 'cuda' or 'cuda:N'") from None
        self.target = target
        self.kernels = 0
        self._capture: Any = None
        self._graph: Any = None
        self._target: Any = None

    def __enter__(self) -> Graph:
        global ACTIVE
        if current() is not None:
            raise RuntimeError("aw.graph: a capture is already open on this thread (graphs do not nest)")
        if self._graph is not None:
            raise RuntimeError("aw.graph: this graph was already captured; make a new aw.graph(...) to capture again")
        from anywave.jit.targets import get_target

        tgt = self._target = get_target("cuda").instance(None, self.device or None)
        self._capture = tgt.begin_capture()
        _LOCAL.capture = self._capture
        with _COUNT_LOCK:
            ACTIVE += 1
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        global ACTIVE
        cap, self._capture = self._capture, None
        _LOCAL.capture = None
        with _COUNT_LOCK:
            ACTIVE -= 1
        if et is not None:
            cap.abort()
            return
        self._graph = cap.end()
        self.kernels = cap.kernels

    def replay(self, stream: Any = None) -> None:
        """Enqueue the recorded launches once more (asynchronous: ``aw.synchronize()`` waits).

        Args:
            stream: a CUDA stream (handle or object with ``cuda_stream``/``ptr``); None: the
                capture's own stream.

        Raises:
            RuntimeError: the graph has not been captured (replay after the ``with`` block).
            CudaError: the driver refuses the launch."""
        g = self._graph
        if g is None:
            raise RuntimeError("aw.graph: replay() before the capture ended (call it after the with block)")
        if stream is not None:
            stream = self._target.stream_handle(stream)
        g.launch(stream)
        from anywave.runtime import arrays as A

        A.mark_used(A.memory_space(f"cuda:{self.device}" if self.device else "cuda"))

    __call__ = replay

    def __repr__(self) -> str:
        state = "capturing" if self._capture is not None else (f"{self.kernels} launches" if self._graph else "empty")
        return f"<aw.graph {self.target} {state}>"


def graph(target: str = "cuda") -> Graph:
    """``with aw.graph(target="cuda") as g: ...`` then ``g.replay()`` (or ``g()``): see
    :mod:`anywave.jit.capture`.

    Raises:
        TargetError: a target other than ``cuda``/``cuda:N``.
        CudaError: (on entering the block) the driver refuses the capture."""
    return Graph(target)
