"""The scripted model server's per-call delay, seeded, so provider timing can be reproduced offline."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

LATENCY_ENV = "SABOT_SCRIPTED_LATENCY"  # "FIXED" or "FIXED,JITTER", seconds per call


@dataclass(frozen=True)
class Latency:
    """Seeded per-call latency: `fixed` seconds plus a uniform draw in [0, `jitter`).

    The draw for call n depends only on (seed, n), so a run's delays are reproducible whatever
    order concurrent calls arrive in; it lets provider timing be reproduced offline.
    """

    fixed: float = 0.0
    jitter: float = 0.0
    seed: str = ""

    def __post_init__(self):
        if self.fixed < 0 or self.jitter < 0:
            raise ValueError(f"latency must be >= 0 seconds, got fixed={self.fixed} jitter={self.jitter}")

    def delay(self, n: int) -> float:
        if not self.jitter:
            return self.fixed
        return self.fixed + random.Random(f"{self.seed}:{n}").uniform(0.0, self.jitter)

    @classmethod
    def from_env(cls, seed: str = "", environ=os.environ) -> "Latency":
        """The latency SABOT_SCRIPTED_LATENCY asks for ("1.0" or "1.0,0.2"); none when unset."""
        raw = (environ.get(LATENCY_ENV) or "").strip()
        if not raw:
            return cls(seed=seed)
        try:
            parts = [float(p) for p in raw.split(",")]
            if len(parts) not in (1, 2):
                raise ValueError("expected one or two numbers")
        except ValueError as exc:
            raise ValueError(f"{LATENCY_ENV}={raw!r}: expected FIXED or FIXED,JITTER in seconds ({exc})") from None
        return cls(parts[0], parts[1] if len(parts) == 2 else 0.0, seed)
