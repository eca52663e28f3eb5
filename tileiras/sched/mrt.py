"""The modulo reservation table: ``ii`` rows by pipes, each cell with a capacity.

An op issued at cycle ``t`` that holds pipe ``p`` for ``n`` cycles uses one unit
of the cells ``((t + k) mod ii, p)`` for ``k`` in ``0..n-1``: in the steady state
of a software pipeline, iteration ``i`` issues it at ``t + i*ii``, so all
iterations share the row ``t mod ii``.  A cell holds at most
``capacity[p]`` units.  An op held longer than ``ii`` wraps and uses a row
several times.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from .latency import Pipe

Occupancy = Sequence[tuple[Pipe, int]]
Cell = tuple[int, Pipe]


class ReservationConflict(ValueError):
    """``reserve`` of an op that does not fit."""


class ModuloReservationTable:
    def __init__(self, ii: int, capacity: Mapping[Pipe, int]):
        if ii < 1:
            raise ValueError(f"the initiation interval must be >= 1, found {ii}")
        self.ii = ii
        self.capacity = capacity
        self._cells: dict[Cell, list[Hashable]] = {}
        self._held: dict[Hashable, list[Cell]] = {}

    def cells_of(self, occupancy: Occupancy, cycle: int) -> list[Cell]:
        """The cells (with repeats) an op issued at ``cycle`` uses."""
        return [((cycle + k) % self.ii, pipe) for pipe, n in occupancy for k in range(n)]

    def capacity_of(self, pipe: Pipe) -> int:
        return self.capacity.get(pipe, 1)

    def usage(self, row: int, pipe: Pipe) -> int:
        return len(self._cells.get((row, pipe), ()))

    def holders(self, row: int, pipe: Pipe) -> tuple[Hashable, ...]:
        return tuple(self._cells.get((row, pipe), ()))

    def _need(self, occupancy: Occupancy, cycle: int) -> dict[Cell, int]:
        need: dict[Cell, int] = {}
        for cell in self.cells_of(occupancy, cycle):
            need[cell] = need.get(cell, 0) + 1
        return need

    def fits_alone(self, occupancy: Occupancy) -> bool:
        """Could the op fit in an empty table (no cell needed more than its capacity)?"""
        return all(n <= self.capacity_of(p) for (_, p), n in self._need(occupancy, 0).items())

    def fits(self, occupancy: Occupancy, cycle: int) -> bool:
        return all(self.usage(r, p) + n <= self.capacity_of(p)
                   for (r, p), n in self._need(occupancy, cycle).items())

    def conflicts(self, occupancy: Occupancy, cycle: int) -> tuple[Hashable, ...] | None:
        """The ops to release so that the op fits at ``cycle`` (oldest reservation first,
        as few per cell as needed), ``()`` if it fits, None if it cannot fit at all."""
        if not self.fits_alone(occupancy):
            return None
        evict: dict[Hashable, None] = {}
        for (r, p), n in sorted(self._need(occupancy, cycle).items(), key=lambda c: (c[0][0], c[0][1].value)):
            holders = [h for h in self._cells.get((r, p), ()) if h not in evict]
            excess = len(holders) + n - self.capacity_of(p)
            for h in holders:
                if excess <= 0:
                    break
                if h not in evict:
                    evict[h] = None
                    excess -= sum(1 for x in holders if x == h)
        return tuple(evict)

    def reserve(self, op: Hashable, occupancy: Occupancy, cycle: int) -> None:
        if op in self._held:
            raise ReservationConflict(f"{op!r} already holds reservations")
        if not self.fits(occupancy, cycle):
            raise ReservationConflict(f"{op!r} does not fit at cycle {cycle} (ii {self.ii})")
        cells = self.cells_of(occupancy, cycle)
        for cell in cells:
            self._cells.setdefault(cell, []).append(op)
        self._held[op] = cells

    def release(self, op: Hashable) -> None:
        for cell in self._held.pop(op, ()):
            self._cells[cell].remove(op)

    def holds(self, op: Hashable) -> bool:
        return op in self._held

    def rows(self) -> list[dict[Pipe, tuple[Hashable, ...]]]:
        """Per row, the holders of every non-empty cell (for dumps)."""
        out: list[dict[Pipe, tuple[Hashable, ...]]] = [{} for _ in range(self.ii)]
        for (r, p), holders in sorted(self._cells.items(), key=lambda c: (c[0][0], c[0][1].value)):
            if holders:
                out[r][p] = tuple(holders)
        return out
