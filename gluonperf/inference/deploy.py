"""What to deploy: of the server scenario's configurations (rung, layout, batching) whose rung
is deployable, the one with the highest rate whose p99 LoadGen found within the bound (its run
VALID), with the bracket its search closed, the accuracy it costs and the command that measures
it again; or, when no configuration met the bound at any rate tried, "nothing meets the bound"
and the configuration that came closest. Derived from the records alone, so that the report
says the same as the command.

A rung is deployable by MLPerf Inference's rule, with the evidence the run has (`gate`): a
float32 rung (fp32, static, fused) always; a rung below it (bf16, int8) only when the lower end
of its paired 95% interval on accuracy clears `accuracy_target` (default 0.99) times fp32
static's accuracy. Without that interval (no labels, random weights) it is not deployable: the
line names the configuration that would win if its accuracy held and the command that measures
it.
"""
import shlex
from dataclasses import dataclass
from typing import Optional

from ..records import Result, format_value, level_text


FLOAT32 = ("fp32", "static", "fused")   # rungs that compute in float32: no accuracy gate
ACCURACY_TARGET = 0.99                  # MLPerf Inference: 99% of the fp32 reference's accuracy


def gate(m):
    """(deployable, why) of a rung from its record's fields `m`: True for a float32 rung; for one
    below it, whether the lower end of its paired interval on accuracy clears the target (None
    when its accuracy was not measured)."""
    if m.get("precision") in FLOAT32:
        return True, "float32"
    target = m.get("accuracy_target") or ACCURACY_TARGET
    ref, low = m.get("accuracy_ref"), m.get("accuracy_change_ci_low")
    if ref is None or low is None:
        return None, m.get("accuracy_note") or "accuracy not measured: no labelled samples"
    floor, lowest = target * ref, ref + low
    level = level_text(m.get("accuracy_level") or 0.95)
    return lowest >= floor, "its accuracy is at least %.4f (the %s interval's lower end, %s samples) %s the target " \
        "%.4f, %s of fp32 static's %.4f" % (lowest, level, m.get("accuracy_n", "?"),
                                             "against" if lowest >= floor else "below", floor,
                                             "{:g}%".format(100 * target), ref)


@dataclass(frozen=True)
class Recommendation:
    meets: bool                 # some configuration met the bound
    record: Optional[Result]    # the configuration to deploy, the closest when none meets it, None: none deployable
    command: Optional[str]      # the command that measures it again
    held: Optional[Result] = None     # a faster configuration whose rung is not deployable (yet)
    measure: Optional[str] = None     # the command that measures its accuracy

    def text(self):
        if not self.meets:
            m = self.record.metrics
            return ("nothing meets the bound (p99 within %s) at any rate tried: closest %s, p99 %s at %s (LoadGen: %s)"
                    % (_ms(m.get("latency_bound_s")), self.record.name, _ms(m.get("p99_s")),
                       _rate(m.get("closest_rate_per_s")), m.get("loadgen_invalid_reason") or "invalid"))
        out = [_deploy_text(self.record, self.command) if self.record is not None else
               "nothing deployable meets the bound: every configuration within it runs a rung below fp32"]
        if self.held is not None:
            deployable, why = gate(self.held.metrics)
            out.append("%s would %s at %s %s: %s%s" % (
                self.held.name, "win" if self.record is not None else "meet it", _rate(
                    self.held.metrics["rate_at_bound_per_s"]), "if its accuracy holds" if deployable is None else
                "but is not deployable", why, "; measure it: " + self.measure if self.measure else ""))
        return ". ".join(out)


def _deploy_text(record, command):
    m = record.metrics
    above = m.get("rate_invalid_per_s")
    bracket = ("; %s was not, so the most lies in between" % _rate(above) if above is not None
               else "; every rate tried was valid, so it may take more")
    return "deploy %s: %s with p99 within %s (p99 %s, valid by LoadGen%s); %s; %s" % (
        record.name, _rate(m["rate_at_bound_per_s"]), _ms(m.get("latency_bound_s")), _ms(m.get("p99_s")), bracket,
        accuracy_text(m), command)


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


def measuring(model_flags, m):
    """The command that measures the accuracy of configuration `m`'s rung against fp32 static:
    labelled samples (--calib-data) and trained weights (--params), with placeholders for what
    the run lacked."""
    flags = list(model_flags)
    if "--params" not in flags and not any(str(f).endswith("-symbol.json") for f in flags):
        flags += ["--params", "TRAINED.params"]
    if "--calib-data" not in flags:
        flags += ["--calib-data", "LABELLED_DATA"]
    return command(flags, dict(m, precision="static,%s" % m["precision"]))


def recommend(records, model_flags=()):
    """The Recommendation from `records` (inference records of any scenarios), or None when
    they hold no server run."""
    servers = [r for r in records if r.bench == "inference" and r.metrics.get("scenario") == "server"
               and not r.metrics.get("error")]
    if not servers:
        return None
    valid = [r for r in servers if r.metrics.get("rate_at_bound_per_s") is not None]
    if valid:
        fastest = max(valid, key=lambda r: r.metrics["rate_at_bound_per_s"])
        allowed = [r for r in valid if gate(r.metrics)[0]]
        best = max(allowed, key=lambda r: r.metrics["rate_at_bound_per_s"]) if allowed else None
        held = fastest if fastest is not best else None
        unmeasured = held is not None and gate(held.metrics)[0] is None
        return Recommendation(True, best, command(model_flags, best.metrics) if best else None, held,
                              measuring(model_flags, held.metrics) if unmeasured else None)
    timed = [r for r in servers if r.metrics.get("p99_s") is not None] or servers
    closest = min(timed, key=lambda r: r.metrics.get("p99_s") or float("inf"))
    return Recommendation(False, closest, command(model_flags, closest.metrics))
