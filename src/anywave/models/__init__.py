"""Models built on anywave's torch ops: :mod:`anywave.models.gpt` (a GPT-2-style decoder trained
byte-level on the standard library's source, with KV-cache generation) and
:mod:`anywave.models.cli_train` (``anywave train``, the MLP demo and ``--model gpt``). Importing
this package imports nothing heavy."""
