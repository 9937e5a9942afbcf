"""Test-session defaults."""

import os

# Kernels launched without target= run on the reference emulator in the tests, whatever
# runtimes are installed; tests of other targets name them. ANYWAVE_TARGET=opencl (say)
# runs the compiler's and the kernel library's tests on that target instead.
os.environ.setdefault("ANYWAVE_TARGET", "emulator")
