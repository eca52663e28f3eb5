"""Modulo scheduling of loop bodies: ``ddg`` (dependence graph), ``latency`` (costs),
``mrt`` (reservation table), ``modulo`` (Rau's iterative scheduler and the checker),
``loops`` (every for loop of a function) and ``format`` (the ``--emit=sched`` dump)."""
