"""How an experiment times its code: the repeats, the calls in each and the warm-up that
`harness.measure_interleaved` takes, and whom to tell when a repeat is done. The experiments
(and the script's Blocks table) take one `Timing` instead of the four, each with its own default.

Nothing here parses arguments or prints.
"""
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Timing:
    """`repeat` timed repeats of each variant (interleaved where there are several), each of
    `number` calls (None: as many as the experiment chooses), after `warmup` untimed calls;
    `progress()`, when given, is called after each timed repeat (a progress bar's update)."""
    repeat: int = 5
    warmup: int = 1
    number: Optional[int] = 1
    progress: Optional[Callable[[], None]] = None
