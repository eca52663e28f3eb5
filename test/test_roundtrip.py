"""Reading then writing a real bytecode file reproduces it byte for byte."""
from __future__ import annotations

import pytest


def first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def test_roundtrip_identical(tileir_file):
    from tileiras.reader import read_bytecode
    from tileiras.writer import write_bytecode

    data = tileir_file.read_bytes()
    out = write_bytecode(read_bytecode(data))
    if out != data:
        at = first_difference(data, out)
        pytest.fail(f"{tileir_file.id}: {len(data)} bytes in, {len(out)} out; first difference at "
                    f"offset {at}: {data[at:at + 16].hex()} vs {out[at:at + 16].hex()}", pytrace=False)


def test_roundtrip_same_version_explicit(tileir_files):
    """Writing at the file's own version, named explicitly, is the same as the default."""
    from tileiras.reader import read_bytecode
    from tileiras.writer import write_bytecode

    for f in tileir_files[:: max(1, len(tileir_files) // 16)]:
        module = read_bytecode(f.read_bytes())
        assert write_bytecode(module, version=module.version) == f.read_bytes(), f.id
