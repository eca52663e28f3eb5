"""The one register <-> shared-memory copy (``codegen/smem_copy``): vector widths from the
composition of the two layouts, paddings (a pitch, a batch stride), and that every tile
copy goes through it (the kernels that exercise it run in the differential tests:
exchanges, cat/extract/insert at known and run-time origins, gathers, scans, matrix
multiply staging, attention's A)."""
from __future__ import annotations

import re
from pathlib import Path

from tileiras.codegen.smem_copy import SharedTile, copy_vector, element_offsets, padded, row_major
from tileiras.layout.linear import default_blocked
from tileiras.layout.shared import Padding, swizzled_shared

CODEGEN = Path(__file__).resolve().parent.parent / "tileiras" / "codegen"


def test_four_consecutive_floats_a_thread_move_in_one_16_byte_access():
    layout = default_blocked((32, 64), 4, 4)
    assert copy_vector(layout, row_major((32, 64), 4)) == 4
    assert copy_vector(layout, row_major((32, 64), 2)) == 4          # 8 bytes: still 4 registers
    assert copy_vector(layout, row_major((32, 64), 4, base=8)) == 2  # a base 8 bytes off 16
    assert copy_vector(default_blocked((32, 64), 4, 1), row_major((32, 64), 4)) == 1


def test_a_padding_keeps_vectors_whole():
    layout = default_blocked((32, 64), 4, 4)
    assert copy_vector(layout, row_major((32, 64), 4, paddings=(Padding(64, 4),))) == 4
    assert copy_vector(layout, row_major((32, 64), 4, paddings=(Padding(64, 2),))) == 2


def test_a_swizzle_of_16_byte_chunks_keeps_16_byte_accesses():
    layout = default_blocked((32, 64), 4, 8)
    shared = swizzled_shared((32, 64), 4, 1, 8)
    assert copy_vector(layout, SharedTile(shared, 4)) == 4
    # each register still reaches its own element: the composition is a bijection
    assert element_offsets(layout, SharedTile(shared, 4)).is_bijective()


def test_row_and_batch_paddings_give_pitch_and_stride():
    """mma.sync staging: rows of ``pitch`` elements, matrices ``stride`` apart."""
    batches, rows, cols, pitch, stride = 2, 16, 32, 40, 16 * 40 + 32 * 24
    paddings = (Padding(cols, pitch - cols), Padding(rows * cols, stride - rows * pitch))
    for b in range(batches):
        for r in range(rows):
            for c in range(cols):
                assert padded((b * rows + r) * cols + c, paddings) == b * stride + r * pitch + c


def test_tile_copies_go_through_smem_copy():
    """Outside ``smem_copy`` only scratch arrays indexed by thread or position address
    shared memory element by element: reductions' warp partials and scan lines, the SIMT
    multiply's inner loop and block scales, sub-byte repacking."""
    users = {p.name for p in CODEGEN.glob("*.py") if re.search(r"\.smem_slot\(", p.read_text())}
    assert users == {"smem_copy.py", "emit_reduce.py", "emit_mma.py", "simt_mma.py", "emit_shape.py"}
    shape = (CODEGEN / "emit_shape.py").read_text()
    assert [m.group(1) for m in re.finditer(r"def (\w+)\(", shape) if "smem_slot" in
            shape[m.start():shape.find("\ndef ", m.end()) if shape.find("\ndef ", m.end()) > 0 else None]] == \
        ["_packed_byte", "_unpacked_nibble"]
    assert not any(re.search(r"def (spill|fill)_tile\b", p.read_text()) for p in CODEGEN.glob("*.py"))
