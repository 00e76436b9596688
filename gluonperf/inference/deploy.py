"""What to deploy: of the server scenario's configurations (rung, layout, batching), the one
with the highest rate whose p99 LoadGen found within the bound (its run VALID), with the
bracket its search closed, the accuracy it costs and the command that measures it again; or,
when no configuration met the bound at any rate tried, "nothing meets the bound" and the
configuration that came closest. Derived from the records alone, so that the report says
the same as the command.
"""
import shlex
from dataclasses import dataclass
from typing import Optional

from ..records import Result, format_value, level_text


@dataclass(frozen=True)
class Recommendation:
    meets: bool                 # some configuration met the bound
    record: Result              # the configuration to deploy, or the closest when none meets it
    command: Optional[str]      # the command that measures it again

    def text(self):
        m = self.record.metrics
        bound = "p99 within %s" % _ms(m.get("latency_bound_s"))
        if not self.meets:
            return ("nothing meets the bound (%s) at any rate tried: closest %s, p99 %s at %s (LoadGen: %s)"
                    % (bound, self.record.name, _ms(m.get("p99_s")), _rate(m.get("closest_rate_per_s")),
                       m.get("loadgen_invalid_reason") or "invalid"))
        above = m.get("rate_invalid_per_s")
        bracket = ("; %s was not, so the most lies in between" % _rate(above) if above is not None
                   else "; every rate tried was valid, so it may take more")
        return "deploy %s: %s with %s (p99 %s, valid by LoadGen%s); %s; %s" % (
            self.record.name, _rate(m["rate_at_bound_per_s"]), bound, _ms(m.get("p99_s")), bracket,
            accuracy_text(m), self.command)


def _ms(seconds):
    return "-" if seconds is None else "%.3g ms" % (seconds * 1e3)


def _rate(value):
    return "-" if value is None else format_value("_per_s", value)


def accuracy_text(m):
    """What the rung costs in accuracy, as its record says (the ladder's fields)."""
    if m.get("accuracy_change") is not None:
        low, high = m.get("accuracy_change_ci_low"), m.get("accuracy_change_ci_high")
        interval = " (%s CI %+.2f to %+.2f points)" % (level_text(m.get("accuracy_level") or 0.95), 100 * low,
                                                          100 * high) if low is not None and high is not None else ""
        return "accuracy %+.2f points against fp32 static%s on %s held-out samples" % (
            100 * m["accuracy_change"], interval, m.get("accuracy_n", "?"))
    if m.get("top1_agreement") is not None:
        return "top-1 agreement with fp32 static %.1f%% on %s samples (%s)" % (
            100 * m["top1_agreement"], m.get("agreement_n", "?"), m.get("accuracy_note") or "accuracy not measured")
    if m.get("precision") in ("fp32", "static"):
        return "no accuracy cost (fp32)"
    if m.get("accuracy") is not None:
        return "accuracy %.4f on %s held-out samples (fp32 static not run: no change measured)" % (
            m["accuracy"], m.get("evaluated_n", "?"))
    return "accuracy not measured"


def command(model_flags, m):
    """The command that measures configuration `m` (a record's fields) again."""
    argv = ["python", "-m", "gluonperf.infer", *model_flags, "--precision", m["precision"], "--layouts", m["layout"],
            "--scenario", "server", "--latency-bound", "%gms" % (m["latency_bound_s"] * 1e3),
            "--batch-window", "%gms" % ((m.get("batch_window_s") or 0) * 1e3)]
    if m.get("batch_window_s"):
        argv += ["--max-batch", str(m["max_batch"])]
    return shlex.join(argv)


def recommend(records, model_flags=()):
    """The Recommendation from `records` (inference records of any scenarios), or None when
    they hold no server run."""
    servers = [r for r in records if r.bench == "inference" and r.metrics.get("scenario") == "server"
               and not r.metrics.get("error")]
    if not servers:
        return None
    valid = [r for r in servers if r.metrics.get("rate_at_bound_per_s") is not None]
    if valid:
        best = max(valid, key=lambda r: r.metrics["rate_at_bound_per_s"])
        return Recommendation(True, best, command(model_flags, best.metrics))
    timed = [r for r in servers if r.metrics.get("p99_s") is not None] or servers
    closest = min(timed, key=lambda r: r.metrics.get("p99_s") or float("inf"))
    return Recommendation(False, closest, command(model_flags, closest.metrics))
