"""A candidate: one setting to try against a baseline.

A candidate is environment variables (read once, when a fresh process starts) and flags
(what the runner makes of them: a command's flags, or the changes a user's script gets
through its hooks), by name. Levers build candidates from the best so far through its own
methods (`with_env`, `with_flags`), so that the code that makes them never needs this module.
"""
from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class Candidate:
    """One setting to try: environment variables plus the runner's flags."""
    name: str
    env: Tuple[Tuple[str, str], ...] = ()
    flags: Tuple[Tuple[str, str], ...] = ()
    runner: Optional[object] = None  # None: the sweep's runner (see tuning.runner)

    def with_env(self, name, **env):
        merged = dict(self.env)
        for k, v in env.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = str(v)
        return Candidate(name, tuple(sorted(merged.items())), self.flags, self.runner)

    def with_flags(self, name, **flags):
        merged = dict(self.flags)
        merged.update({k: str(v) for k, v in flags.items()})
        return Candidate(name, self.env, tuple(sorted(merged.items())), self.runner)

    def flag(self, key, default=None):
        return dict(self.flags).get(key, default)


def unique(cands):
    """`cands` without a candidate whose settings an earlier one has already (the first kept)."""
    seen, out = set(), []
    for c in cands:
        k = (c.env, c.flags)
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out
