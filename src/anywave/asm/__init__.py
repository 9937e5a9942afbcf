"""The .wave text form: assembler and disassembler.

``assemble(text, filename)`` reads native syntax (docs/decisions.md, "Assembly text") and
the reference toolchain's dialect (:mod:`anywave.asm.dialect`); ``disassemble(module)``
prints canonical native text that assembles back to an equal module.
"""

from anywave.asm.assembler import assemble
from anywave.asm.disassembler import disassemble
from anywave.errors import AsmError

__all__ = ["AsmError", "assemble", "disassemble"]
