"""Deliberately naive reference models, one module per algorithm.

Each module defines FILES: a list of (directory, file name, description,
scenarios function). Directory "" holds the vectors every runner executes
(Rust, Python, Node, wasm); "core-only" holds those only the Rust runner
executes until the bindings expose what they test; "server" holds those of
the bindings' server helpers (ip_key.py), which their server tests read.
"""
