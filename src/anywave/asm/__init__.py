"""The .wave text form: assembler and disassembler."""
