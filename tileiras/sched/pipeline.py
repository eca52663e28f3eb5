"""The dependence graph of a software-pipelined tensor-core K loop, in the operations the
pipeline issues, and the stage count its modulo schedule needs.

One iteration of the pipelined loop (``codegen.emit_async``) issues the ``cp.async``
copies of A's and B's tiles, waits for them (``cp.async.wait_group`` then ``bar.sync``)
and multiplies (``ldmatrix`` + ``mma.sync``, folded into one MMA node: the fragment
loads are a few shared-memory reads per step), the multiply depending on the previous
iteration's through the accumulators.  A copy's data lands a DRAM latency after its
issue (``OpClass.ASYNC_COPY``), so the multiply of an iteration can run no earlier than
that; the modulo schedule places each iteration's copies that many initiation intervals
ahead, and its stage count is the number of iterations in flight, which is the number
of shared-memory stages the ring needs (a stage is busy from its copy's issue to the
end of the multiply that reads it).

A flash-attention K/V loop (``lower.attention_pipeline``) has its own graph
(``attention_ddg``): K's and V's copies, each waited for before the multiply that reads
it, with the online softmax between the two multiplies; so does a SIMT loop streaming view
tiles (``lower.stream_pipeline``, ``stream_ddg``): the copies, their wait, and the body.
"""
from __future__ import annotations

from .ddg import DDG, DepKind, Edge, Node
from .latency import LatencyModel, OpClass
from .modulo import Schedule, modulo_schedule

#: node indices of ``copy_pipeline_ddg``
COPY_A, COPY_B, WAIT, BARRIER, MMA = range(5)


def copy_pipeline_ddg(copies: tuple[int, int], mma_steps: int, model: LatencyModel) -> DDG:
    """``copies``: the ``cp.async`` instructions a thread issues for A and B per
    iteration; ``mma_steps``: the ``mma.sync`` instructions a warp issues per iteration."""
    nodes = (Node("cp.async A", OpClass.ASYNC_COPY, max(1, copies[0])),
             Node("cp.async B", OpClass.ASYNC_COPY, max(1, copies[1])),
             Node("cp.async.wait_group", OpClass.ASYNC_WAIT),
             Node("bar.sync", OpClass.BARRIER),
             Node("ldmatrix + mma.sync", OpClass.MMA, max(1, mma_steps)))
    latency = [n.cost(model).latency for n in nodes]
    edges = (Edge(COPY_A, WAIT, latency[COPY_A]), Edge(COPY_B, WAIT, latency[COPY_B]),
             Edge(WAIT, BARRIER, latency[WAIT]), Edge(BARRIER, MMA, latency[BARRIER]),
             Edge(MMA, MMA, latency[MMA], 1, DepKind.CARRIED))
    return DDG(nodes, edges)


def pipeline_schedule(copies: tuple[int, int], mma_steps: int, model: LatencyModel) -> Schedule:
    """The modulo schedule of ``copy_pipeline_ddg``; its ``num_stages`` is the ring's depth."""
    return modulo_schedule(copy_pipeline_ddg(copies, mma_steps, model), model)


#: node indices of ``tma_ring_ddg``
TMA_COPY, FULL_WAIT, WGMMA, RELEASE = range(4)


def tma_ring_ddg(copies: int, wgmmas: int, model: LatencyModel) -> DDG:
    """One iteration of an sm_90 TMA ring (``codegen.emit_ring``, ``RingPlan``): one
    thread issues ``copies`` ``cp.async.bulk.tensor`` boxes, every thread waits on the
    stage's "full" mbarrier, each warpgroup issues ``wgmmas`` ``wgmma.mma_async``
    (chained through the accumulators to the next iteration's), and a CTA barrier
    releases the stage the previous iteration's multiply read.  A box lands a DRAM
    latency after its issue, so the schedule places the copies that many initiation
    intervals ahead: its stage count is the ring's depth."""
    nodes = (Node("cp.async.bulk.tensor", OpClass.ASYNC_COPY, max(1, copies)),
             Node("mbarrier.try_wait.parity", OpClass.ASYNC_WAIT),
             Node("wgmma.mma_async", OpClass.WGMMA, max(1, wgmmas)),
             Node("bar.sync", OpClass.BARRIER))
    latency = [n.cost(model).latency for n in nodes]
    edges = (Edge(TMA_COPY, FULL_WAIT, latency[TMA_COPY]), Edge(FULL_WAIT, WGMMA, latency[FULL_WAIT]),
             Edge(WGMMA, RELEASE, 1), Edge(WGMMA, WGMMA, latency[WGMMA], 1, DepKind.CARRIED))
    return DDG(nodes, edges)


def tma_ring_schedule(copies: int, wgmmas: int, model: LatencyModel) -> Schedule:
    """The modulo schedule of ``tma_ring_ddg``; its ``num_stages`` is the ring's depth."""
    return modulo_schedule(tma_ring_ddg(copies, wgmmas, model), model)


#: node indices of ``attention_ddg``
ATT_COPY_K, ATT_COPY_V, ATT_WAIT_K, ATT_QK, ATT_SOFTMAX, ATT_WAIT_V, ATT_PV = range(7)


def attention_ddg(copies: tuple[int, int], mma_steps: tuple[int, int],
                  softmax: tuple[tuple[OpClass, int, int], ...], model: LatencyModel) -> DDG:
    """One iteration of a pipelined flash-attention loop (``codegen.emit_attention``):
    ``copies`` (K's, V's) ``cp.async`` a thread issues, each tile its own commit group;
    the wait for K (with its barrier) before S = Q @ K^T (``mma_steps[0]`` ``mma.sync``
    a warp), the online softmax on S (``softmax``: the body's other ops as
    ``(class, work, times)``, their running maximum and sum carried to the next
    iteration), the wait for V before O += P @ V (``mma_steps[1]``, O carried).  Each
    copy lands a DRAM latency after its issue, so the schedule issues the copies that
    many initiation intervals ahead: its stage count is the ring's depth."""
    nodes = (Node("cp.async K", OpClass.ASYNC_COPY, max(1, copies[0])),
             Node("cp.async V", OpClass.ASYNC_COPY, max(1, copies[1])),
             Node("cp.async.wait_group + bar.sync (K)", OpClass.ASYNC_WAIT),
             Node("ldmatrix + mma.sync (Q K^T)", OpClass.MMA, max(1, mma_steps[0])),
             Node("online softmax", OpClass.CONTROL, 1, softmax),
             Node("cp.async.wait_group + bar.sync (V)", OpClass.ASYNC_WAIT),
             Node("ldmatrix + mma.sync (P V)", OpClass.MMA, max(1, mma_steps[1])))
    latency = [n.cost(model).latency for n in nodes]
    edges = (Edge(ATT_COPY_K, ATT_WAIT_K, latency[ATT_COPY_K]), Edge(ATT_WAIT_K, ATT_QK, latency[ATT_WAIT_K]),
             Edge(ATT_QK, ATT_SOFTMAX, latency[ATT_QK]), Edge(ATT_SOFTMAX, ATT_WAIT_V, latency[ATT_SOFTMAX]),
             Edge(ATT_COPY_V, ATT_WAIT_V, latency[ATT_COPY_V]), Edge(ATT_WAIT_V, ATT_PV, latency[ATT_WAIT_V]),
             Edge(ATT_SOFTMAX, ATT_SOFTMAX, latency[ATT_SOFTMAX], 1, DepKind.CARRIED),
             Edge(ATT_PV, ATT_PV, latency[ATT_PV], 1, DepKind.CARRIED))
    return DDG(nodes, edges)


def attention_schedule(copies: tuple[int, int], mma_steps: tuple[int, int],
                       softmax: tuple[tuple[OpClass, int, int], ...], model: LatencyModel) -> Schedule:
    """The modulo schedule of ``attention_ddg``; its ``num_stages`` is the ring's depth."""
    return modulo_schedule(attention_ddg(copies, mma_steps, softmax, model), model)


def stream_ddg(copies: int, work: tuple, model: LatencyModel) -> DDG:
    """One trip of a streamed SIMT loop (``codegen.emit_stream``): each thread issues
    ``copies`` ``cp.async`` for the next trips' tiles, waits for this trip's, then reads them
    from shared memory and runs the body (``work``: ``Node.work`` of the body's ops), whose
    values carry to the next trip."""
    nodes = (Node("cp.async", OpClass.ASYNC_COPY, max(1, copies)),
             Node("cp.async.wait_group", OpClass.ASYNC_WAIT),
             Node("ld.shared + body", OpClass.CONTROL, 1, work))
    latency = [n.cost(model).latency for n in nodes]
    return DDG(nodes, (Edge(0, 1, latency[0]), Edge(1, 2, latency[1]),
                       Edge(2, 2, latency[2], 1, DepKind.CARRIED)))


def stream_schedule(copies: int, work: tuple, model: LatencyModel) -> Schedule:
    """The modulo schedule of ``stream_ddg``; its ``num_stages`` is the ring's depth."""
    return modulo_schedule(stream_ddg(copies, work, model), model)
