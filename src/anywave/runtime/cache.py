"""Moved to :mod:`anywave.cache` (below the emulator, the compiler and the runtimes, issue 24):
this name is the same module object, so imports and monkeypatches through it keep working."""

import sys

from anywave import cache as _moved

sys.modules[__name__] = _moved
