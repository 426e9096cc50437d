"""Answers to the layer-norm exercises.

* ``rms_norm_vjp``: the backward of RMSNorm, ``y = γ ⊙ x / r`` with
  ``r = sqrt(mean(x²) + ε)``, by the same route as layer norm. With no mean
  subtracted, one projection term disappears:
  ``dx = (1/r)(g − x̂ · mean(g ⊙ x̂))``, ``g = dy ⊙ γ``, ``x̂ = x / r``.
* ``race(barrier)``: the two-program lock simulation of the tutorial, run
  with and without the barrier before the release.

``tests/layer_norm_locks/test_exercises.py`` checks both.
"""

from __future__ import annotations

import torch


# --8<-- [start:rms_norm_vjp]
def rms_norm_vjp(x: torch.Tensor, gamma: torch.Tensor, dy: torch.Tensor, eps: float = 1e-6):
    """(dx, dγ) of ``y = γ ⊙ x / sqrt(mean(x²) + eps)`` over the last dimension."""
    r = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    x_hat = x / r
    g = dy * gamma
    dx = (g - x_hat * (g * x_hat).mean(-1, keepdim=True)) / r  # no "− mean(g)": nothing was centred
    dgamma = (dy * x_hat).reshape(-1, x.shape[-1]).sum(0)
    return dx, dgamma


# --8<-- [end:rms_norm_vjp]


# --8<-- [start:race]
def race(barrier: bool, lanes: int = 4) -> list[float]:
    """Two programs add 1.0 and 10.0 to a shared 4-lane buffer under one lock.

    Each program is a list of steps run by its threads; a scheduler
    interleaves them in one fixed, legal order. Without the barrier, program
    A's release can overtake its slow lane's store, so program B reads a
    stale value from that lane and A's late store then overwrites B's.
    """
    memory = {"lock": 0, "buf": [0.0] * lanes}
    log = []

    def program(name: str, value: float, slow_lane: int | None):
        pending = {}
        while memory["lock"] == 1:  # acquire: spin, then take the lock
            yield f"{name} spins"
        memory["lock"] = 1
        yield f"{name} takes the lock"
        for lane in range(lanes):
            pending[lane] = memory["buf"][lane] + value  # every lane loads and adds
        for lane in range(lanes):
            if lane != slow_lane:
                memory["buf"][lane] = pending[lane]
        yield f"{name} stores the fast lanes"
        if barrier:  # nobody releases until every lane has stored
            if slow_lane is not None:
                memory["buf"][slow_lane] = pending[slow_lane]
            yield f"{name} barrier: the slow lane has stored"
            memory["lock"] = 0
            yield f"{name} releases"
        else:
            memory["lock"] = 0
            yield f"{name} releases (slow lane still in flight)"
            yield f"{name} waits"
            yield f"{name} waits"
            if slow_lane is not None:
                memory["buf"][slow_lane] = pending[slow_lane]
            yield f"{name} slow lane stores, late"

    a, b = program("A", 1.0, slow_lane=2), program("B", 10.0, slow_lane=None)
    order = [a, a, a, b, b, b, a, a, b, a]  # one fixed interleaving
    for step in order:
        log.append(next(step, None))
    for rest in (a, b):
        log.extend(rest)
    race.log = [entry for entry in log if entry]
    return memory["buf"]


# --8<-- [end:race]
