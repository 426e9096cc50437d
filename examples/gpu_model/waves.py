"""Waves: how a grid of equal blocks falls into waves over the SMs, and what the last one wastes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Waves:
    n_blocks: int
    slots: int  # blocks resident at once: SMs × blocks per SM
    full_waves: int
    tail_blocks: int  # blocks in the last, partial wave (0 when the last wave is full)

    @property
    def count(self) -> int:
        return self.full_waves + (1 if self.tail_blocks else 0)

    @property
    def last_wave_fill(self) -> float:
        return self.tail_blocks / self.slots if self.tail_blocks else 1.0

    @property
    def efficiency(self) -> float:
        """Busy slots over slots paid for, if every block takes the same time."""
        return self.n_blocks / (self.count * self.slots)


def waves(n_blocks: int, n_sms: int, blocks_per_sm: int = 1) -> Waves:
    """How ``n_blocks`` equal blocks fall into waves on ``n_sms`` SMs holding ``blocks_per_sm`` each."""
    if n_blocks < 1 or n_sms < 1 or blocks_per_sm < 1:
        raise ValueError("n_blocks, n_sms and blocks_per_sm must be positive")
    slots = n_sms * blocks_per_sm
    return Waves(n_blocks, slots, n_blocks // slots, n_blocks % slots)
