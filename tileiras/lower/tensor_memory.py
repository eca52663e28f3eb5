"""Which matrix multiplies run on ``tcgen05.mma`` (sm_100 family), and their tensor memory.

``tcgen05.mma`` is issued by one thread; it reads A and B from shared memory through
matrix descriptors and accumulates into tensor memory (TMEM: 128 lanes x 512 columns of 32
bits per SM), which the warps read back with ``tcgen05.ld``.  Two shapes of use:

* a K loop whose body loads A and B and multiplies them into an accumulator it carries
  unchanged (a GEMM's main loop) becomes a TMA ring (``tma_ring.plan_ring``): the
  accumulator stays in tensor memory for the whole loop, each stage is released by the
  MMAs' own commit, and the warps read the result once, after the loop
  (``codegen.emit_tcgen05``); a second multiply of the same A (a LoRA layer's x @ A beside
  x @ W) rides in the same ring with its own accumulator;
* flash attention's K/V loop (``attention_tma.tcgen05_attention_reason``: two multiplies,
  Q @ K^T and P @ V, K and V copied by TMA) becomes the attention TMA ring
  (``attention_tma.plan_attention_ring``): both multiplies read their B where the boxes
  landed, S and O live in tensor memory for one multiply each, read back into registers
  for the softmax and the rescaling; Q @ K^T of the next iteration is issued into a
  second S buffer before the softmax (``AttentionRingPlan.s_ahead``, where it fits);
* a multiply anywhere else outside loops stores its operands to shared memory, its
  accumulator to tensor memory, multiplies and reads it back.

Multiplies inside other loops keep ``mma.sync`` (a loop whose loads are not TMA's, an
accumulator touched every iteration outside attention's shape), as do those whose
accumulator's columns would not fit beside the others (``TMEM_COLUMNS``).

Decided once here (``choose_tensor_cores`` asks ``tcgen05_reason``); ``allocate`` gives
each tcgen05 multiply its columns (``TileAS.tmem_columns``), the kernel's allocation
(``TileAS.tmem_alloc``, a power of two from 32) and the shared-memory slot where the
allocation's address and the multiplies' mbarrier live (``TileAS.tmem_slot``).
"""
from __future__ import annotations

from typing import Optional

from ..knobs import knobs
from ..ir.core import Operation
from ..tile import ops_control as CF
from .cta_size import TCGEN05_ARCHS
from ..target import smem_limit
from .mma_forms import TMEM_COLUMNS, tcgen05_columns, tcgen05_form, tcgen05_ring_staging, tensor_core_mma
from .k_loop_body import columns_contiguous, second_of, zeros_before
from .software_pipeline import k_loop, wgmma_in_flight
from .tma import tma_spec
from .tma_ring import MAX_BOX, RingPlan, matrix_box

#: bytes of the tensor-memory slot in shared memory: the multiplies' mbarrier (8), then
#: the allocation's address that ``tcgen05.alloc`` writes (4), padded
SLOT_BYTES = 16
#: the fewest columns ``tcgen05.alloc`` takes
MIN_ALLOC = 32


def tcgen05_reason(tas, op: Operation, arch: int) -> Optional[str]:
    """Why the multiply ``op`` (which has a ``tcgen05`` form) keeps ``mma.sync``, or None."""
    if arch not in TCGEN05_ARCHS or not knobs.tcgen05:
        return "not a tcgen05 target"
    region = op.parent.parent if op.parent is not None else None
    parent = region.parent if region is not None else None
    if not isinstance(parent, Operation):       # the function's own body
        return None
    if not isinstance(parent, CF.ForOp):
        return "inside control flow other than a K loop"
    from .attention_tma import tcgen05_attention_reason  # noqa: PLC0415  (it builds on this module's users)

    attention = tcgen05_attention_reason(tas, parent, arch)
    if attention is None:
        return None
    if attention is not NOT_ATTENTION:
        return attention
    return _k_loop_reason(tas, parent, arch)


#: ``attention_tma.tcgen05_attention_reason``'s answer for a loop that is not flash
#: attention's (not two multiplies): the K loop's rules apply
NOT_ATTENTION = "not a flash-attention loop"


def _k_loop_reason(tas, loop: CF.ForOp, arch: int) -> Optional[str]:
    """Why ``loop`` is not a K loop a tcgen05 ring takes: two loads that TMA can copy, B
    perhaps transposed, multiplied into an accumulator carried straight through, or from
    zeros into a product the body reads back every trip (``RingPlan.readback``: a
    block-scaled GEMM scales each K tile's product before adding it); perhaps a second
    multiply of A by a third such load (``k_loop_body.second_multiply``: a LoRA layer's),
    into its own accumulator carried so too (both or neither run on tcgen05).  The rest of
    the body may do what ``k_loop_body.extra_reason`` allows beside a ring."""
    shape = k_loop(tas, loop, laid_out=False, reshapes_ok=True, second_ok=True, extras_ok=True)
    if isinstance(shape, str):
        return shape
    first, a, b, permute = shape
    second = second_of(loop)
    b_columns = permute is None and columns_contiguous(b)
    parts = [(first, b, b_columns, permute is not None or b_columns)]       # (multiply, B, swapped, K-major)
    if second is not None:
        swapped = columns_contiguous(second.rhs.owner)
        parts.append((second, second.rhs.owner, swapped, swapped))
    if not all(matrix_box(ld) for ld in (a, *(ld for _, ld, _, _ in parts))):
        return "a loaded tile cannot be copied by TMA (alignment, padding or rank)"
    gpu = f"sm_{arch}"
    a_columns = columns_contiguous(a)
    device = bool(knobs.device_tensor_maps)     # views the kernel makes: maps it builds
    if tma_spec(tas.aa, a, gpu, columns_ok=a_columns, device=device) is None:
        return "a loaded tile cannot be copied by TMA"
    if a.results[0].type.shape[-1 if a_columns else -2] > MAX_BOX:
        return "a loaded tile has more than 256 rows (one TMA box)"
    nbytes = 0
    for op, ld, swapped, k_major in parts:
        serial = wgmma_in_flight(tas, loop, op)[1]      # the accumulator carried straight through
        if serial and (second is not None or not zeros_before(op.acc, loop)):     # (else read back each trip)
            return serial
        if tcgen05_form(op, tensor_core_mma(op, arch, tas.num_warps, tas.extra_warps), tas.num_warps) is None:
            return "a multiply of the loop has no tcgen05 form"
        if tma_spec(tas.aa, ld, gpu, columns_ok=swapped, device=device) is None:
            return "a loaded tile cannot be copied by TMA"
        staging = tcgen05_ring_staging(op, k_major, a_k_major=not a_columns)
        if staging is None:
            return "no swizzled form TMA lands the operands in is one tcgen05 reads (tf32 ones K-major only)"
        if ld.results[0].type.shape[-1 if swapped else -2] > MAX_BOX:
            return "a loaded tile has more than 256 rows (one TMA box)"
        nbytes += staging.nbytes if op is first else staging.b.nbytes
    if 2 * nbytes > smem_limit(gpu):
        return "two stages of the ring would not fit in shared memory"
    return None


def fits(tas, op: Operation) -> bool:
    """Do ``op``'s accumulator columns fit beside the tcgen05 multiplies chosen so far?
    (Asked, once all are chosen, of attention's S for a second buffer too:
    ``AttentionRingPlan.s_ahead``.)"""
    taken = sum(tcgen05_columns(o) for o, form in tas.tensor_cores.items() if form.tcgen05)
    return taken + tcgen05_columns(op) <= TMEM_COLUMNS


def allocate(tas) -> None:
    """Columns of each tcgen05 multiply (one after another; two buffers of attention's S
    where its ring issues Q @ K^T an iteration ahead, ``AttentionRingPlan.s_ahead``, and of
    a read-back product issued so, ``RingPlan.ahead``), the
    allocation (a power of two of at least ``MIN_ALLOC``) and the shared-memory slot after
    everything else."""
    from .attention_tma import AttentionRingPlan  # noqa: PLC0415  (it builds on this module)

    doubled = {p.mma for p in tas.pipelines.values()
               if (isinstance(p, AttentionRingPlan) and p.s_ahead) or (isinstance(p, RingPlan) and p.ahead)}
    at = 0
    for op, form in tas.tensor_cores.items():
        if form.tcgen05:
            tas.tmem_columns[op] = at
            at += tcgen05_columns(op) * (2 if op in doubled else 1)
    if not at:
        return
    alloc = MIN_ALLOC
    while alloc < at:
        alloc *= 2
    tas.tmem_alloc = alloc
    tas.tmem_slot = -(-max(tas.scratch_bytes, tas.tma_end) // 8) * 8
    tas.tma_end = tas.tmem_slot + SLOT_BYTES
