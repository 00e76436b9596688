"""What to deploy: of the server scenario's configurations (rung, layout, batching) whose rung
is deployable, the one with the highest rate whose p99 LoadGen found within the bound (its run
VALID), with the bracket its search closed, the accuracy it costs and the command that measures
it again, its runtime, precision and layout in words and the lines of code that serve it so
(`deploy_code`); or, when no configuration met the bound at any rate tried, "nothing meets the
bound" and the configuration that came closest. Derived from the records alone, so that the
report says the same as the command.

A rung is deployable by MLPerf Inference's rule, with the evidence the run has (`gate`): a
float32 rung (fp32, static, fused, ort-fp32, ov-fp32) always; a rung below it (bf16, int8,
ort-int8, ov-bf16, ov-int8) only when the lower end of its paired 95% interval on accuracy clears
`accuracy_target` (default 0.99) times fp32 static's accuracy. Without that interval (no
labels, random weights) it is not deployable: the line names the configuration that would win
if its accuracy held and the command that measures it.
"""
import shlex
from dataclasses import dataclass
from typing import Optional

from ..records import Result, format_value, level_text
from . import deploy_code


FLOAT32 = ("fp32", "static", "fused", "ort-fp32", "ov-fp32")   # rungs that compute in float32: no accuracy gate
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


BITS = {"fp32": 32, "static": 32, "fused": 32, "bf16": 16, "int8": 8,
        "ort-fp32": 32, "ort-int8": 8, "ov-fp32": 32, "ov-bf16": 16, "ov-int8": 8}
CONFIRM = "confirm"          # the confirmation's records' scenario
CONTENDERS = 4               # configurations confirmed at the most: the best and the 3 closest to it


def contenders(servers):
    """The server records to confirm, best first: the deployable configuration with the highest
    valid rate, and the deployable ones whose bracket overlaps it (their lowest invalid rate, or
    none, above its valid rate: the search cannot say they are slower), closest first, up to
    CONTENDERS in all. When none overlaps, the best and the runner-up (the next highest valid
    rate): the best's rate is one LoadGen run of its search, and the rounds show whether it holds
    there again. [] when fewer than two configurations are deployable."""
    valid = [r for r in servers if r.metrics.get("rate_at_bound_per_s") is not None and gate(r.metrics)[0]]
    if len(valid) < 2:
        return []
    valid.sort(key=lambda r: -r.metrics["rate_at_bound_per_s"])
    best, rate = valid[0], valid[0].metrics["rate_at_bound_per_s"]
    close = [r for r in valid[1:] if (r.metrics.get("rate_invalid_per_s") or float("inf")) > rate]
    return [best] + (close[:CONTENDERS - 1] or valid[1:2])


SIMPLER = ("fewer cores", "more bits", "no batching")


def _simpler(m):
    """The tie-break, in the order of SIMPLER: fewer cores, more bits (float32 before bf16 before
    int8), no batching."""
    return (m.get("instances", 1) * m.get("threads", 1), -BITS.get(m.get("precision"), 0),
            bool(m.get("batch_window_s")))


def _why(chosen, tied):
    """The first key of SIMPLER on which `chosen` beats the runner-up of `tied`."""
    rest = sorted(_simpler(c.metrics) for c in tied if c is not chosen)
    mine = _simpler(chosen.metrics)
    for reason, a, b in zip(SIMPLER, mine, rest[0] if rest else mine):
        if a != b:
            return reason
    return "the highest rate its search found (as simple as the others)"


def lower_rate(rate, tolerance):
    """The rate a second confirmation pass runs at when no contender held the bound in every
    round at `rate`: the search's tolerance below it (the bracket it cannot see into)."""
    return rate / (1 + tolerance)


def passes(confirms):
    """The confirmation's records by pass, highest rate first: [(rate, records)]."""
    rates = sorted({c.metrics["confirm_rate_per_s"] for c in confirms}, reverse=True)
    return [(rate, [c for c in confirms if c.metrics["confirm_rate_per_s"] == rate]) for rate in rates]


def decide(confirms, threshold=0.05):
    """settle() of the pass that decides (the first whose rounds some contender held throughout,
    else the last), with the rate it ran at and the passes before it as [(rate, dropped)]."""
    *firsts, (rate, group) = passes(confirms)
    earlier = []
    for first_rate, first in firsts:
        settled = settle(first, threshold)
        if settled[1] != "none":
            return settled, first_rate, earlier
        earlier.append((first_rate, settled[2]))
    return settle(group, threshold), rate, earlier


def settle(confirms, threshold=0.05):
    """The confirmation's answer from its records (one a configuration, run at one rate in
    interleaved rounds: `round_valid`, `round_p99_s`): (the chosen record or None, 'lower' | 'tie'
    | 'none', {name: p99 ratio fields against the chosen}, why it was chosen). Of those that held the
    bound in every round, the one with the lowest p99 when every other's per-round p99 ratio to it
    is higher beyond the noise (stats.verdict at `threshold`); otherwise they tie, and the simplest
    of those not higher beyond the noise is chosen (`_simpler`; equally simple: the first in
    `confirms`, which `contenders` orders by the search's rate)."""
    from ..measure import stats
    holders = [c for c in confirms if c.metrics.get("round_valid") and all(c.metrics["round_valid"])]
    dropped = {c.name: {"held_rounds": sum(map(bool, c.metrics.get("round_valid") or [])),
                        "rounds": len(c.metrics.get("round_valid") or [])} for c in confirms if c not in holders}
    if not holders:
        return None, "none", dropped, ""
    lowest = min(holders, key=lambda c: c.metrics["p99_s"])

    def against(chosen):
        out = {}
        for c in holders:
            if c is not chosen:
                ratios = [a / b for a, b in zip(c.metrics["round_p99_s"], chosen.metrics["round_p99_s"]) if a and b]
                interval = stats.ratio_interval(ratios)
                said = stats.verdict(interval, threshold, words=("higher", "lower"), what="rounds").fields()
                out[c.name] = dict(interval.fields("p99_ratio"), **{"p99_" + k: v for k, v in said.items()})
        return out
    judged = against(lowest)
    if all(v.get("p99_verdict") == "higher" for v in judged.values()):
        return lowest, "lower", dict(judged, **dropped), "the lowest p99"
    tied = [c for c in holders if c is lowest or judged[c.name].get("p99_verdict") != "higher"]
    chosen = min(tied, key=lambda c: _simpler(c.metrics))
    return chosen, "tie", dict(against(chosen), **dropped), _why(chosen, tied)


@dataclass(frozen=True)
class Recommendation:
    meets: bool                 # some configuration met the bound
    record: Optional[Result]    # the configuration to deploy, the closest when none meets it, None: none deployable
    command: Optional[str]      # the command that measures it again
    held: Optional[Result] = None     # a faster configuration whose rung is not deployable (yet)
    measure: Optional[str] = None     # the command that measures its accuracy
    confirmed: Optional[tuple] = None  # settle's (chosen, how, {name: p99 ratio fields}, why) of the deciding pass
    code: Optional[str] = None        # the lines that serve `record` as measured (deploy_code.code)
    earlier: tuple = ()               # decide's passes at higher rates that no contender held: ((rate, dropped), ...)

    def text(self):
        if not self.meets:
            m = self.record.metrics
            return ("nothing meets the bound (p99 within %s) at any rate tried: closest %s, p99 %s at %s (LoadGen: %s)"
                    % (_ms(m.get("latency_bound_s")), self.record.name, _ms(m.get("p99_s")),
                       _rate(m.get("closest_rate_per_s")), m.get("loadgen_invalid_reason") or "invalid"))
        out = [_deploy_text(self.record, self.command) if self.record is not None else
               "nothing deployable meets the bound: every configuration within it runs a rung below fp32"]
        if self.confirmed is not None:
            out.append(_confirmed_text(self.record, *self.confirmed, earlier=self.earlier))
        if self.held is not None:
            deployable, why = gate(self.held.metrics)
            out.append("%s would %s at %s %s: %s%s" % (
                self.held.name, "win" if self.record is not None else "meet it", _rate(
                    self.held.metrics["rate_at_bound_per_s"]), "if its accuracy holds" if deployable is None else
                "but is not deployable", why, "; measure it: " + self.measure if self.measure else ""))
        return ". ".join(out)


def held_text(judged):
    """'A held it in 2 of 3; B held it in 0 of 3': the contenders that missed rounds (no p99 ratio)."""
    return "; ".join("%s held it in %s of %s" % (name, f["held_rounds"], f["rounds"])
                     for name, f in sorted(judged.items()) if "p99_ratio" not in f)


def _confirmed_text(record, chosen, how, judged, why, earlier=()):
    """What the interleaved rounds at one rate say of the choice (after the passes at higher
    rates, `earlier`, that no contender held throughout)."""
    m = record.metrics
    rate, n = _rate(m.get("confirm_rate_per_s")), m.get("confirm_rounds")
    before = "".join("at %s no configuration held the bound in every one of %s interleaved rounds (%s), so they ran "
                     "again at %s, the search's tolerance (%.0f%%) below it; " % (
                         _rate(r), n, held_text(d), rate, 100 * (r / m["confirm_rate_per_s"] - 1)) for r, d in earlier)
    plan = "; plan for %s, not the best search's %s" % (rate, _rate(earlier[0][0])) if earlier else ""
    if how == "none":
        return before + "unconfirmed: no configuration held the bound in every one of %s interleaved rounds at %s " \
            "(%s): that rate is the edge of what they serve within the bound, so plan below it" % (n, rate, held_text(judged))
    return before + _settled_text(how, judged, why, rate, n) + plan


def _settled_text(how, judged, why, rate, n):
    others = "; ".join("%s's p99 %s" % (name, _ratio_text(f)) if "p99_ratio" in f else
                       "%s held it in %s of %s rounds" % (name, f["held_rounds"], f["rounds"])
                       for name, f in sorted(judged.items()))
    if how == "lower":
        return "confirmed in %s interleaved rounds at %s: it held the bound in every round, %s (%s)" % (
            n, rate, "with the lowest p99 beyond the noise" if any("p99_ratio" in f for f in judged.values())
            else "the only one that did", others)
    tied = [name for name, f in sorted(judged.items()) if f.get("p99_verdict") not in ("higher", None)]
    return "confirmed in %s interleaved rounds at %s: it held the bound in every round and ties with %s within the " \
           "noise (%s); named for %s" % (n, rate, ", ".join(tied) or "none", others, why)


def _ratio_text(f):
    return "%.2fx this one's (%s CI %.2f-%.2f), %s" % (f["p99_ratio"], level_text(f["p99_ratio_level"]),
                                                     f["p99_ratio_ci_low"], f["p99_ratio_ci_high"], f["p99_verdict"])


def _deploy_text(record, command):
    m = record.metrics
    above = m.get("rate_invalid_per_s")
    bracket = ("; %s was not, so the most lies in between" % _rate(above) if above is not None
               else "; every rate tried was valid, so it may take more")
    return "deploy %s (%s): %s with p99 within %s (p99 %s, valid by LoadGen%s); %s; %s%s" % (
        record.name, deploy_code.words(m), _rate(m["rate_at_bound_per_s"]), _ms(m.get("latency_bound_s")),
        _ms(m.get("p99_s")), bracket, accuracy_text(m), command, _files_text(m))


def _files_text(m):
    """Where the files the code below names are, or how to get them."""
    if not m.get("files"):
        return ""
    if m.get("kept"):
        return "; serve it with the code below, its files kept in %s" % m["kept"]
    return ("; serve it with the code below, which names its files in %s: they were not kept, add --keep %s to "
            "that command to keep them" % (deploy_code.PLACEHOLDER, deploy_code.PLACEHOLDER))


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
        held = fastest if not gate(fastest.metrics)[0] else None
        unmeasured = held is not None and gate(held.metrics)[0] is None
        confirms = [r for r in records if r.bench == "inference" and r.metrics.get("scenario") == CONFIRM]
        decided = decide(confirms, confirms[0].metrics.get("threshold", 0.05)) if best and confirms else None
        confirmed = decided and decided[0]
        if confirmed and confirmed[0] is not None:
            best = next(r for r in allowed if r.name == confirmed[0].name)
        if confirmed:
            best = Result(best.bench, best.name, dict(best.metrics, confirm_rate_per_s=decided[1],
                                                      confirm_rounds=confirms[0].metrics["rounds"]))
        return Recommendation(True, best, command(model_flags, best.metrics) if best else None, held,
                              measuring(model_flags, held.metrics) if unmeasured else None, confirmed,
                              deploy_code.code(best.metrics) if best else None, tuple(decided[2]) if decided else ())
    timed = [r for r in servers if r.metrics.get("p99_s") is not None] or servers
    closest = min(timed, key=lambda r: r.metrics.get("p99_s") or float("inf"))
    return Recommendation(False, closest, command(model_flags, closest.metrics))
