"""anywave: write a GPU kernel once, run it bit-identically on any vendor's device.

See docs/spec.md for the WAVE instruction set this package implements.
"""

__version__ = "0.1.0"
