"""Warp-level instructions: shfl, vote, match, redux, elect, activemask.

The threads that execute the instruction together are the threads of ``idx`` in the same
warp (the scheduler runs a warp's threads at one PC together; with the full member mask,
once every lane of the warp is there: ``program.whole_warp_sync``).  Source lanes that are
not active return their register value as it is (undefined on the GPU).  Other member
masks are accepted but not checked against the active threads.
"""
from __future__ import annotations

import numpy as np

from ..operands import reader, type_of, writer
from ..parser import Pair
from ..ptxtypes import ptx_type
from ..registry import handles, modifiers

U32 = ptx_type("u32")
PRED = ptx_type("pred")


def lanes(m, idx) -> np.ndarray:
    return m.linear_tid[idx] % 32


def split_pair(op):
    return (op.first, op.second) if isinstance(op, Pair) else (op, None)


@handles("shfl")
def compile_shfl(ctx, ins):
    mode = next(p for p in ins.parts[1:] if p in ("up", "down", "bfly", "idx"))
    ty = type_of(ins.parts)
    dst, pred = split_pair(ins.operands[0])
    write_d, write_p = writer(ctx, dst, ty), writer(ctx, pred, PRED)
    a_r = reader(ctx, ins.operands[1], ty)
    b_r, c_r = reader(ctx, ins.operands[2], U32), reader(ctx, ins.operands[3], U32)

    def run(m, idx):
        lane = lanes(m, idx).astype(np.int64)
        b = np.asarray(b_r(m, idx)).astype(np.int64) & 31
        c = np.asarray(c_r(m, idx)).astype(np.int64)
        max_lane = c & 31
        seg = (c >> 8) & 31
        min_lane = lane & seg
        max_lane = min_lane | (max_lane & ~seg)
        if mode == "up":
            j = lane - b
            ok = j >= max_lane
        elif mode == "down":
            j = lane + b
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = min_lane | (b & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = m.warp_base[idx] + j
        src = np.minimum(src, m.n - 1)
        full = np.asarray(a_r(m, slice(None)))
        value = full[src] if full.ndim else np.broadcast_to(full, src.shape)
        write_d(m, idx, value)
        write_p(m, idx, np.broadcast_to(ok, lane.shape))
    return run


def warp_groups(m, idx):
    """(warp key per thread of idx, start offsets of each warp's run in idx)."""
    idx = np.arange(m.n) if isinstance(idx, slice) else idx
    keys = m.warp_base[idx]
    starts = np.r_[0, np.flatnonzero(np.diff(keys)) + 1]
    return idx, keys, starts


def ballot(m, idx, p) -> np.ndarray:
    idx, keys, starts = warp_groups(m, idx)
    bits = np.where(np.broadcast_to(p, idx.shape), np.uint64(1) << lanes(m, idx).astype(np.uint64), np.uint64(0))
    per = np.add.reduceat(bits, starts) if idx.size else bits
    counts = np.diff(np.r_[starts, idx.size])
    return np.repeat(per, counts).astype(np.uint32)


@handles("vote")
def compile_vote(ctx, ins):
    mode = next(p for p in ins.parts[1:] if p in ("all", "any", "uni", "ballot"))
    p_r = reader(ctx, ins.operands[1], PRED)
    out_ty = U32 if mode == "ballot" else PRED
    write = writer(ctx, ins.operands[0], out_ty)

    def run(m, idx):
        p = np.asarray(p_r(m, idx))
        bits = ballot(m, idx, p)
        if mode == "ballot":
            write(m, idx, bits)
            return
        active = ballot(m, idx, True)
        if mode == "all":
            write(m, idx, bits == active)
        elif mode == "any":
            write(m, idx, bits != 0)
        else:
            write(m, idx, (bits == active) | (bits == 0))
    return run


@handles("activemask")
def compile_activemask(ctx, ins):
    write = writer(ctx, ins.operands[0], U32)
    return lambda m, idx: write(m, idx, ballot(m, idx, True))


@handles("elect")
def compile_elect(ctx, ins):
    dst, pred = split_pair(ins.operands[0])
    write_d, write_p = writer(ctx, dst, U32), writer(ctx, pred, PRED)
    mask_r = reader(ctx, ins.operands[1], U32)

    def run(m, idx):
        lane = lanes(m, idx)
        mask = np.broadcast_to(np.asarray(mask_r(m, idx)).astype(np.uint64), lane.shape)
        member = (mask >> lane.astype(np.uint64)) & np.uint64(1) != 0
        idx_arr, keys, starts = warp_groups(m, idx)
        cand = np.where(member, lane, 99)
        leader = np.minimum.reduceat(cand, starts) if lane.size else cand
        leader = np.repeat(leader, np.diff(np.r_[starts, lane.size]))
        write_d(m, idx, leader.astype(np.uint32))
        write_p(m, idx, lane == leader)
    return run


@handles("match")
def compile_match(ctx, ins):
    mode = "all" if "all" in modifiers(ins.parts) else "any"
    ty = type_of(ins.parts)
    dst, pred = split_pair(ins.operands[0])
    write_d, write_p = writer(ctx, dst, U32), writer(ctx, pred, PRED)
    a_r = reader(ctx, ins.operands[1], ty)

    def run(m, idx):
        idx_arr, keys, starts = warp_groups(m, idx)
        vals = np.broadcast_to(np.asarray(a_r(m, idx)), idx_arr.shape)
        full_val = np.zeros(m.n, vals.dtype)
        active = np.zeros(m.n, bool)
        full_val[idx_arr] = vals
        active[idx_arr] = True
        src = m.warp_base[idx_arr][:, None] + np.arange(32)[None, :]
        valid = src < m.n
        src = np.minimum(src, m.n - 1)
        same = valid & active[src] & (full_val[src] == vals[:, None])
        mask = (same.astype(np.uint64) << np.arange(32, dtype=np.uint64)[None, :]).sum(axis=1)
        if mode == "any":
            write_d(m, idx, mask.astype(np.uint32))
            return
        act = ballot(m, idx, True).astype(np.uint64)
        all_equal = mask == act
        write_d(m, idx, np.where(all_equal, act, 0).astype(np.uint32))
        write_p(m, idx, all_equal)
    return run


@handles("redux")
def compile_redux(ctx, ins):
    op = next(p for p in ins.parts[1:] if p in ("add", "min", "max", "and", "or", "xor"))
    ty = type_of(ins.parts)
    mods = modifiers(ins.parts)
    write = writer(ctx, ins.operands[0], ty)
    a_r = reader(ctx, ins.operands[1], ty)
    nan_mode, use_abs = "NaN" in mods, "abs" in mods
    ufunc = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op)
    if ty.is_float:
        ufunc = {"min": np.fmin if not nan_mode else np.minimum,
                 "max": np.fmax if not nan_mode else np.maximum}[op]
    elif ufunc is None:
        ufunc = np.minimum if op == "min" else np.maximum

    def run(m, idx):
        idx_arr, keys, starts = warp_groups(m, idx)
        vals = np.broadcast_to(np.asarray(a_r(m, idx)), idx_arr.shape)
        if use_abs:
            vals = np.abs(vals)
        red = ufunc.reduceat(vals, starts) if vals.size else vals
        write(m, idx, np.repeat(red, np.diff(np.r_[starts, vals.size])).astype(ty.dtype))
    return run
