"""Tensor maps built on the device (NVIDIA's grouped GEMM on sm_90): the emulator copies a
128-byte map from shared to global memory with tensormap.cp_fenceproxy, and the
``%perctamemoryoffset`` register reads 0 (no per-CTA area: kernels use their workspace)."""
from __future__ import annotations

import numpy as np
from test_emulate_ptx import kernel

from tileiras.emulate import launch

COPY = """
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, map;
shl.b32 %r3, %r1, 2;
add.s32 %r4, %r2, %r3;
mad.lo.s32 %r5, %r1, 3, 7;
st.shared.u32 [%r4], %r5;
bar.sync 0;
add.s64 %rd2, %rd1, 64;
tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [map], 128;
fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
mov.u64 %rd3, %perctamemoryoffset;
st.global.u64 [%rd1], %rd3;
"""


def test_cp_fenceproxy_copies_the_map_to_global_memory():
    """32 threads fill the 128-byte map word by word; the warp publishes it at out + 64."""
    ptx = kernel(COPY, ".param .u64 k_out", extra=".shared .align 128 .b8 map[128];\n")
    out = np.full(64, -1, np.int32)
    result = launch(ptx, "k", 1, [out])
    assert result.ok, result.trap
    np.testing.assert_array_equal(out[16:48], 3 * np.arange(32) + 7)
    np.testing.assert_array_equal(out[:2], [0, 0])          # %perctamemoryoffset
    assert (out[2:16] == -1).all() and (out[48:] == -1).all()
