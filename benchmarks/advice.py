"""Does tune's recipe pay, and how long does it take? Newcomers' scripts run as written and with the
recipe applied by hand.

    python benchmarks/advice.py [--scripts tabular_mlp,cifar_resnet20] [--tune-rounds auto] [--rounds 10]
                                [--exhaustive]

For each script in benchmarks/scripts/ (written the way the tutorials write them; not the
tests' scripts):
1. `python -m gluonperf.tune --rounds R --json ... -- python benchmarks/scripts/NAME.py`, as a
   user runs it (R: auto, the default levers and rounds): its recipe (records of kind `advice`),
   its wall time and its runs of the script; with --exhaustive, also `--rounds exhaustive`
   (every candidate until its interval is within +-5%, tune's rule before its sequential plan)
   and whether the two recommend the same changes;
2. the recipe applied by hand: each change mapped to what its author would edit, which the
   script offers as a flag (hybridize -> --hybridize MODE, the DataLoader's workers ->
   --num-workers N [--thread-pool], bfloat16 AMP -> --amp, a wait every step ->
   --read-every 50) or an environment line (threads, engine, bulk, ...);
3. the script as written against the recipe applied: each run a fresh process, timed by tune's
   own runner (the hooks count Trainer.step and time the steps; with no change made by them),
   interleaved B A B A ... for --rounds rounds (gluonperf.tuning.search.sweep): the ratio
   with its 95% interval and verdict. "No change pays here" has nothing to apply: the script
   as written is compared with itself (an A/A check of the runner, which should say "same" or
   "inconclusive").
Results: benchmarks/results/advice_<machine>_<date>.jsonl (the recipes, the comparisons and the
environment) and a table; docs/measurements.md lists them.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from gluonperf.script.runner import ScriptRunner, probe  # noqa: E402
from gluonperf.script.text import NOT_CHANGES  # noqa: E402
from gluonperf.tuning.candidates import Candidate  # noqa: E402
from gluonperf.tuning.search import sweep  # noqa: E402
from gluonperf.measure.harness import cpu_model, environment  # noqa: E402
from gluonperf.records import format_table, result, write_jsonl  # noqa: E402

SCRIPTS = ("tabular_mlp", "cifar_resnet20")
READ_EVERY = 50  # what "read the value every N steps" becomes when applied


# (vendor word, cpu family, models) -> the machine names of benchmarks/results (docs/results_tables.py)
GENERATIONS = [("epyc", 26, range(0, 256), "zen5"), ("epyc", 25, list(range(0x10, 0x20)) + list(range(0x60, 0x80))
                + list(range(0xa0, 0xb0)), "zen4"), ("epyc", 25, range(0, 256), "zen3"),
               ("xeon", 6, (143,), "spr"), ("xeon", 6, (207,), "emr")]


def machine_tag():
    """'epyc-zen5', 'xeon-spr', ...: the machine's name in the results' file names (its CPU's
    generation from /proc/cpuinfo's family and model; 'epyc-f26m2' for one not in GENERATIONS)."""
    family = model = -1
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "cpu family":
                family = int(value)
            elif key.strip() == "model":
                model = int(value)
    word = "epyc" if "EPYC" in cpu_model() else "xeon" if "Xeon" in cpu_model() else "cpu"
    for vendor, fam, models, name in GENERATIONS:
        if vendor == word and fam == family and model in models:
            return "%s-%s" % (word, name)
    return "%s-f%dm%d" % (word, family, model)


def user_env():
    """This environment as a user's shell has it: no OMP_*/MXNET_* settings (the commands' own
    thread defaults apply) and no GLUONPERF_* switches."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_", "GLUONPERF_"))}


def tune_recipe(script, rounds, log):
    """Run tune -- on the script as a user does; its records (the recipe's 'run' record carries
    tune's wall time and its runs of the script)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "tune.json")
        argv = [sys.executable, "-m", "gluonperf.tune", "--rounds", str(rounds), "--json", out, "--",
                sys.executable, os.path.join("benchmarks", "scripts", script + ".py")]
        env = user_env()
        log.write("%s: tune --rounds %s started at %s\n" % (script, rounds, datetime.datetime.utcnow().isoformat()))
        log.flush()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        log.write("$ %s\n%s%s\n" % (" ".join(argv[1:]), done.stderr, done.stdout))
        if done.returncode != 0:
            raise SystemExit("tune failed on %s: %s" % (script, done.stderr.strip().splitlines()[-1:]))
        with open(out) as f:
            return [json.loads(l) for l in f if l.strip()]


def applied(advice):
    """(script flags, environment) that apply the recipe by hand; and what was applied, in words."""
    flags, env, said = [], {}, []
    for a in advice:
        lever = a["lever"]
        if lever == "hybridize":
            mode = a["hooks"]["hybridize"]
            flags += ["--hybridize", mode]
            said.append("hybridize %s" % mode)
        elif lever == "data":
            flags += ["--num-workers", str(a["hooks"]["num_workers"])]
            if "thread_pool" in a["hooks"]:
                flags.append("--thread-pool")
            said.append("num_workers=%s%s" % (a["hooks"]["num_workers"], " thread_pool" if "thread_pool" in a["hooks"]
                                              else ""))
        elif lever == "dtype":
            flags.append("--amp")
            env.update(a.get("env_vars") or {})
            said.append("bfloat16 AMP")
        elif lever == "wait" and "--read-every" not in flags:
            flags += ["--read-every", str(READ_EVERY)]
            said.append("read every %d steps" % READ_EVERY)
        elif lever not in NOT_CHANGES:
            env.update(a.get("env_vars") or {})
            said.append(" ".join("%s=%s" % kv for kv in sorted((a.get("env_vars") or {}).items())))
    return flags, env, said


def recommended(advice):
    """The changes a recipe recommends, as comparable text: {lever: its settings}."""
    return {a["lever"]: " ".join("%s=%s" % kv for kv in sorted({**(a.get("env_vars") or {}),
                                                                 **(a.get("hooks") or {})}.items()))
            for a in advice if a["lever"] not in NOT_CHANGES}


def exhaustive_from(given, script):
    """The records of SCRIPT's exhaustive tune from --exhaustive-from SCRIPT=PATH, or None."""
    for item in given:
        name, _, path = item.partition("=")
        if name == script:
            with open(path) as f:
                return [json.loads(l) for l in f if l.strip()]
    return None


def cost(records):
    """(tune's wall time in seconds, its runs of the script) from its 'run' advice record."""
    run = next((r for r in records if r.get("bench") == "advice" and r.get("lever") == "run"), {})
    return run.get("wall_s"), run.get("runs")


def compare(script, flags, env, rounds, warmup=5, steps=None):
    """The script as written against the recipe applied, interleaved: the applied side's Result."""
    command = [sys.executable, os.path.join("benchmarks", "scripts", script + ".py")]
    written = ScriptRunner(command, warmup, steps or 20, cwd=ROOT)
    # as many steps as tune's probe would time: at least 20 and 1 s, on the script as written
    probe_runner, lines, _, error = probe(command, warmup, steps or 20, 600, cwd=ROOT)
    if error:
        raise SystemExit("%s: %s" % (script, error))
    written.steps = probe_runner.steps
    recipe = ScriptRunner(command + flags, warmup, probe_runner.steps, cwd=ROOT)
    base = Candidate("as written", (), (), written)
    other = Candidate("recipe applied", tuple(sorted(env.items())), (), recipe)
    results = sweep([base, other], written, written.steps, rounds, script, timeout=600)
    return next(r for r in results if r.name == "recipe applied"), written.steps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scripts", default=",".join(SCRIPTS))
    p.add_argument("--tune-rounds", default="auto", help="tune's --rounds (default: %(default)s)")
    p.add_argument("--exhaustive", action="store_true",
                   help="also run tune --rounds exhaustive on each script, once, and compare the changes it recommends")
    p.add_argument("--exhaustive-from", action="append", default=[], metavar="SCRIPT=PATH",
                   help="with --exhaustive: the records (--json) of a tune --rounds exhaustive of SCRIPT already run "
                        "on this machine, instead of running it again (it takes half an hour or more)")
    p.add_argument("--rounds", type=int, default=10, help="rounds of as written vs applied (default: %(default)s)")
    p.add_argument("--out", default=None, help="results file (default: benchmarks/results/advice_<machine>_<date>.jsonl)")
    args = p.parse_args()
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", "advice_%s_%s.jsonl" % (machine_tag(), day))
    rows, table = [], []
    with open(out.replace(".jsonl", ".log"), "w") as log:
        for script in args.scripts.split(","):
            records = tune_recipe(script, args.tune_rounds, log)
            advice = [r for r in records if r["bench"] == "advice"]
            wall, runs = cost(records)
            reference = {}
            if args.exhaustive:
                slow = exhaustive_from(args.exhaustive_from, script) or tune_recipe(script, "exhaustive", log)
                slow_advice = [r for r in slow if r["bench"] == "advice"]
                slow_wall, slow_runs = cost(slow)
                reference = {"exhaustive_recipe": recommended(slow_advice), "exhaustive_wall_s": slow_wall,
                             "exhaustive_runs": slow_runs,
                             "same_changes": recommended(slow_advice) == recommended(advice)}
                for rec in slow:
                    rows.append(result(rec.pop("bench") + "-exhaustive-of-" + script, rec.pop("name"), **rec))
            flags, env, said = applied(advice)
            r, steps = compare(script, flags, env, args.rounds)
            m = r.metrics
            row = result("advice-check", script, script=script, recipe=[a["change"] for a in advice if a["change"]],
                         recommended=recommended(advice), tune_rounds=args.tune_rounds, tune_wall_s=wall,
                         tune_runs=runs, **reference, applied=said, flags=flags, env_vars=env, steps=steps,
                         tune_together=next((a for a in advice if a["lever"] == "together"), None),
                         **{k: m.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level",
                                                  "verdict", "round_ratios", "images_per_s", "rounds")})
            rows.append(row)
            for rec in records:
                rows.append(result(rec.pop("bench") + "-of-" + script, rec.pop("name"), **rec))
            table.append(row)
            log.write("%s: applied %s -> %.2fx (%s)\n" % (script, said or "nothing", m["ratio"], m.get("verdict")))
            log.flush()
    write_jsonl(rows, out, environment())
    print(format_table(table, ["script", "tune_wall_s", "tune_runs", "exhaustive_wall_s", "same_changes", "applied",
                               "ratio", "ratio_ci_low", "ratio_ci_high", "rounds", "verdict"],
                       "advice check on %s (%d cores): each script as written vs its recipe applied by hand, "
                       "interleaved" % (cpu_model(), os.cpu_count())))
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
