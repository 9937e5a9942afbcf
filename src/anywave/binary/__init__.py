"""Modules in memory and on disk (.wbin), and the verifier."""
