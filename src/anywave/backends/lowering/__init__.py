"""The lowering shared by the backends that write text (PTX and the C family).

What is decided once here, so a backend only spells the result:

* :mod:`.control` -- per-thread vs mask-stack control flow, ``call`` inlining, the frames of
  the mask-stack machine (spec §7.4) and every mask update; a backend implements a
  :class:`~.control.Spelling`.
* :mod:`.collectives` -- the butterfly (``wred``) and Kogge–Stone (``wscan``) step lists
  (spec §8.8); the identities inactive lanes contribute come from :mod:`anywave.isa.semantics`.
* :mod:`.arith` -- the integer division edge cases (safe divisor, b = 0 results) and the
  round-to-odd paths of narrowing conversions (spec §8.11).
* :mod:`.bodies` -- an instruction's body (:mod:`anywave.isa.bodies`) spelt with a backend's
  primitive table (:class:`~.bodies.BodySpelling`, every backend's, SPIR-V's included), missing
  primitives expanded by the shared legaliser.
"""

from anywave.backends.lowering.arith import DivRule, Step, div_rule, narrowing_steps, needs_f64, shift_limit
from anywave.backends.lowering.collectives import butterfly_steps, exclusive_first, identity, kogge_stone_steps
from anywave.backends.lowering.control import FALSE, A, ControlWalk, Frame, Mask, Spelling, X, of_pred, uses_wave_ops

__all__ = [
    "A", "FALSE", "X", "ControlWalk", "DivRule", "Frame", "Mask", "Spelling", "Step",
    "butterfly_steps", "div_rule", "exclusive_first", "kogge_stone_steps", "narrowing_steps", "needs_f64",
    "identity", "of_pred", "shift_limit", "uses_wave_ops",
]
