"""Shared fixtures: the repository's bundled data and configs, and the
`serl` binary that `cargo test --workspace` built (for the tests that
compare with it or make a run directory)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "lean"


def serl_binary() -> Path | None:
    """`serl` as built by cargo: $SERL_BIN, else the target directory's."""
    if os.environ.get("SERL_BIN"):
        return Path(os.environ["SERL_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for p in (target / "debug" / "serl", target / "release" / "serl"):
        if p.is_file():
            return p
    found = shutil.which("serl")
    return Path(found) if found else None


@pytest.fixture
def serl_bin() -> Path:
    b = serl_binary()
    if b is None:
        pytest.skip("no `serl` binary: build it with `cargo build -p serl` (or set SERL_BIN)")
    return b


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def root() -> Path:
    return ROOT
