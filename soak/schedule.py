"""The fault schedule: seeded, printed, replayable (the same seed and minutes give the same
schedule; the run prints it first and writes it into the report).

Faults start after a warm-up and end before a quiet tail (so the checker sees the system
settle); the gap between faults is drawn from ``gap_s``. Scaling alternates: a
``scale_up`` (2 -> 3 workers, sometimes with the newcomer's state directory deleted while
it was stopped) is followed later by a ``scale_down`` (SIGTERM, 3 -> 2).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

#: kind -> weight; ``target`` is an application name and, for worker faults, a worker
KINDS: dict[str, int] = {
    "kill9": 4,  # SIGKILL a supervised worker (the supervisor restarts it)
    "sigstop": 2,  # SIGSTOP a worker past the session timeout, then SIGCONT
    "state_delete": 1,  # SIGSTOP a worker, delete its state directory, SIGKILL it
    "scale": 2,  # scale_up / scale_down the exactly-once application
    "broker_pause": 2,  # SIGSTOP / SIGCONT the embedded broker
    "poison": 2,  # a record the application cannot process (dead-lettered)
    "http_burst": 2,  # bursts of queries and bad requests at the endpoints
}
APPS = ("eos", "alos")


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str
    app: str = ""
    worker: str = ""
    wipe: bool = False

    def describe(self) -> str:
        target = f" {self.app}" + (f"/{self.worker}" if self.worker else "") if self.app else ""
        return f"t=+{self.at_s:7.1f}s {self.kind}{target}{' (state dir deleted)' if self.wipe else ''}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def make_schedule(
    seed: int,
    minutes: float,
    *,
    warmup_s: float = 45.0,
    tail_s: float = 30.0,
    gap_s: tuple[float, float] = (15.0, 40.0),
    broker_faults: bool = True,
    workers: int = 2,
) -> list[Fault]:
    """The faults of a run of ``minutes``, drawn from ``seed``."""
    rng = random.Random(seed)
    kinds = [k for k in KINDS if broker_faults or k != "broker_pause"]
    weights = [KINDS[k] for k in kinds]
    end = minutes * 60 - tail_s
    faults: list[Fault] = []
    scaled_up = False
    at = warmup_s
    while True:
        at += rng.uniform(*gap_s)
        if at >= end:
            break
        kind = rng.choices(kinds, weights)[0]
        app = rng.choice(APPS)
        worker = f"w{rng.randrange(workers)}"
        if kind == "scale":
            faults.append(
                Fault(
                    round(at, 1),
                    "scale_down" if scaled_up else "scale_up",
                    "eos",
                    wipe=not scaled_up and rng.random() < 0.5,
                )
            )
            scaled_up = not scaled_up
        elif kind in ("kill9", "sigstop", "state_delete"):
            if kind == "sigstop" and scaled_up and app == "eos" and rng.random() < 0.3:
                worker = "extra"
            faults.append(Fault(round(at, 1), kind, app, worker))
        elif kind in ("poison", "http_burst"):
            faults.append(Fault(round(at, 1), kind, app if kind == "http_burst" else ""))
        else:
            faults.append(Fault(round(at, 1), kind))
    if scaled_up:  # end as the run started: two workers
        faults.append(Fault(round(end, 1), "scale_down", "eos"))
    return faults
