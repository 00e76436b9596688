"""Run the commands the README and the docs pages show, and write their real output.

Each example runs as a user runs it (a subprocess, from a scratch folder, in an environment
with no OMP_*/MXNET_* preset, so the commands' own thread defaults apply), at small sizes
that finish on a CPU-only machine. Its output (stderr and stdout, in the order written) goes
to docs/examples/NAME.md: a caption naming the machine (lscpu's model name, cores), the date
and the run time, then the command and its output in a code block. The pages include those
files, and the README's quick start is rewritten between its `<!-- example:NAME -->` and
`<!-- /example:NAME -->` markers, so no sample output is pasted by hand.

    python docs/examples.py                   # all of them (a few minutes on 2 cores)
    python docs/examples.py --only train,compare
    python docs/examples.py --list

An example that fails (a non-zero exit where none is expected, an exit 0 where an error is
the point, or past --timeout) is reported on stderr with its output's tail; its file is not
written (the others are), and the exit code is 1.

An example of RECORDS keeps the records its command wrote (--json) beside its output, as
docs/examples/NAME.jsonl, and the prose that states its figures (the readings, docs/readings.py,
between `<!-- reading:NAME -->` and `<!-- /reading:NAME -->` in the pages) is rewritten from
them, so no figure beside an example is typed by hand:

    python docs/examples.py --readings         # rewrite the readings from the kept records
    python docs/examples.py --check-readings   # exit 1 where a page's reading is not the records'
"""
import argparse
import datetime
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (name, what it shows, command lines). Each command line runs in the same scratch folder,
# in order, so a later one can read what an earlier one wrote (compare, report); the files of
# FILES (docs/your_model/, docs/your_script/) are put there first, as a user's own model file
# or training script sits in their folder. A line that
# starts with "! " must exit non-zero (an error the page shows; exiting 0 fails the example);
# its exit code is shown after it, as compare's is.
EXAMPLES = [
    ("quickstart", "the README's quick start: the main job at its defaults",
     ["python -m gluonperf.bench hybridize"]),
    ("commands", "the list of commands",
     ["python -m gluonperf"]),
    ("bench_async", "bench async at small sizes",
     ["python -m gluonperf.bench async --demo-size 1000 --sizes 10,100,1000 --repeat 3"]),
    ("bench_memory", "bench memory, 20 batches",
     ["python -m gluonperf.bench memory --batches 20 --every 1,5"]),
    ("bench_parallel", "bench parallel at its defaults",
     ["python -m gluonperf.bench parallel"]),
    ("bench_overlap", "bench overlap at its defaults",
     ["python -m gluonperf.bench overlap"]),
    ("bench_allreduce", "bench allreduce, two sizes over two contexts",
     ["python -m gluonperf.bench allreduce --sizes 4K,4M --num-ctx 2 --repeat 3"]),
    ("bench_footprint", "bench footprint, LeNet with and without checkpointing",
     ["python -m gluonperf.bench footprint --model lenet --batch-sizes 32,64 --hybridize none,hybrid "
      "--checkpoint 0,2 --steps 2"]),
    ("bench_footprint_budget", "bench footprint --budget: LeNet's largest batch within 48 MiB",
     ["python -m gluonperf.bench footprint --model lenet --batch-sizes 64 --hybridize hybrid --checkpoint 0,2 "
      "--steps 2 --budget 48M"]),
    ("bench_allreduce_reuse", "bench allreduce of 32 MiB, new receive buffers each time and reused",
     ["python -m gluonperf.bench allreduce --sizes 32M --num-ctx 2 --repeat 3",
      "python -m gluonperf.bench allreduce --sizes 32M --num-ctx 2 --repeat 3 --reuse-buffers"]),
    ("bench_scratch", "bench scratch, two epochs on two contexts",
     ["python -m gluonperf.bench scratch --ctx cpu0,cpu1 --epochs 2"]),
    ("train", "train LeNet on the digits set on two contexts",
     ["python -m gluonperf.train --dataset digits --model lenet --ctx cpu0,cpu1 --epochs 2 "
      "--json results/train.json"]),
    ("train_scaling", "train --scaling: one context against two",
     ["python -m gluonperf.train --scaling --dataset digits --model lenet --ctx cpu0,cpu1 --steps 10 "
      "--batch-size 128 --json results/scaling.json"]),
    ("train_errors", "train's one-line errors: a loss that becomes NaN, a resumed run that does, a save "
                     "directory of another run",
     ["! python -m gluonperf.train --dataset digits --model lenet --lr 1e6 --batch-size 32 --epochs 1",
      "python -m gluonperf.train --dataset digits --model lenet --batch-size 32 --epochs 1 --save ckpt-lenet",
      "! python -m gluonperf.train --dataset digits --model lenet --batch-size 32 --epochs 3 --lr 1e6 "
      "--resume ckpt-lenet",
      "! python -m gluonperf.train --dataset digits --model lenet --batch-size 32 --epochs 1 --save ckpt-lenet"]),
    ("launch", "launch: two workers and a server training LeNet with dist_sync",
     ["python -m gluonperf.launch -n 2 -s 1 --timeout 300 -- python -m gluonperf.train --kvstore dist_sync "
      "--model lenet --dataset digits --epochs 1 --batch-size 32 --workers 0"]),
    ("launch_horovod", "launch --engine horovod: two ranks training LeNet with Horovod's allreduce",
     ["python -m gluonperf.launch --engine horovod -n 2 --timeout 300 -- python -m gluonperf.train "
      "--kvstore horovod --model lenet --dataset digits --epochs 1 --batch-size 32 --workers 0"]),
    ("launch_horovod_dry_run", "launch --engine horovod --dry-run over a hostfile of two machines",
     ["python -c \"open('hostfile', 'w').write('node-a\\nnode-b\\n')\"",
      "python -m gluonperf.launch --engine horovod -n 4 --hostfile hostfile --dry-run "
      "-- python -m gluonperf.train --kvstore horovod --model lenet"]),
    ("bench_engines", "bench engines: LeNet on two CPU contexts, one process against Horovod and dist_sync",
     ["python -m gluonperf.bench engines --model lenet --batch-size 32 --steps 8 --epochs 3 --rounds 5"]),
    ("launch_dry_run", "launch --dry-run over a hostfile of two machines: the plan, nothing started",
     ["python -c \"open('hostfile', 'w').write('192.168.1.11\\n192.168.1.12\\n')\"",
      "cat hostfile",
      "python -m gluonperf.launch -n 2 --hostfile hostfile --host-ip 192.168.1.10 --port 9091 --dry-run "
      "-- python -m gluonperf.train --kvstore dist_sync --model lenet"]),
    ("profile", "profile LeNet's training step against a quick ceiling",
     ["python -m gluonperf.profile --model lenet --batch-size 64 --steps 5 --ceiling quick "
      "--json results/profile.json"]),
    ("predict", "predict ResNet-18's scaling from a measured step time",
     ["python -m gluonperf.predict --model resnet18_v1 --t1 0.366 --per-device-batch 256 --devices 1,8 "
      "--machines 1,8,64 --link pcie3 --network 25gbe"]),
    ("predict_horovod", "predict the same with Horovod: one process per device, one ring over all of them",
     ["python -m gluonperf.predict --model resnet18_v1 --t1 0.366 --per-device-batch 256 --devices 1,8 "
      "--machines 1,8,64 --link pcie3 --network 25gbe --engine horovod"]),
    ("predict_no_overlap", "predict the same without overlap, over 10 GbE",
     ["python -m gluonperf.predict --model resnet18_v1 --t1 0.366 --per-device-batch 256 --devices 8 "
      "--machines 1,8,64 --link pcie3 --network 10gbe --overlap no"]),
    ("predict_validate", "predict --validate: predicted against measured on this machine, LeNet",
     ["python -m gluonperf.predict --validate --model lenet"]),
    ("tune", "tune LeNet's thread and hybridize levers",
     ["python -m gluonperf.tune --model lenet --levers threads,hybridize --rounds 2 --steps 20 "
      "--json results/tune.json"]),
    ("compare", "compare two runs of the same command",
     ["python -m gluonperf.bench hybridize --repeat 3 --number 300 --json results/run1.json",
      "python -m gluonperf.bench hybridize --repeat 3 --number 300 --json results/run2.json",
      "python -m gluonperf.compare results/run1.json results/run2.json --fail-above 50%"]),
    ("compare_ab", "compare --ab: the same command against itself, run in alternation",
     ["python -m gluonperf.compare --ab \"python -m gluonperf.bench hybridize --repeat 3 --number 300\" "
      "\"python -m gluonperf.bench hybridize --repeat 3 --number 300\" --runs 3"]),
    ("report", "report: one HTML page of the results above",
     ["python -m gluonperf.report results -o report.html"]),
    ("input_pipeline", "an image folder and its .rec at 224x224, each loader alone, and profile's input verdict",
     ["python -m gluonperf.dataset make images --images-per-class 20 --classes 10 --size 224 --rec",
      "python -m gluonperf.bench input --dataset images --model resnet18_v1 --batch-size 8 --workers 0,1 --repeat 3",
      "python -m gluonperf.bench input --dataset images.rec --model resnet18_v1 --batch-size 8 --workers 0,1 "
      "--repeat 3",
      "python -m gluonperf.profile --dataset images --model resnet18_v1 --batch-size 8 --workers 1 --input-only "
      "--steps 2 --rounds 4 --warmup 1"]),
    ("bench_time_to_accuracy", "bench time-to-accuracy: SGD, Adam and RMSProp on LeNet and the digits, 3 seeds",
     ["python -m gluonperf.bench time-to-accuracy --optimizers sgd,adam,rmsprop --seeds 3 --epochs 6 "
      "--target-top1 0.9"]),
    ("your_model", "a model of one's own from a file: hybridize, train, footprint and the per-Block profile",
     ["cat mynet.py",
      "python -m gluonperf.bench hybridize --model mynet.py:build --input-shape 3,32,32 --batch-size 16 "
      "--number 20 --repeat 3",
      "python -m gluonperf.train --model mynet.py:build --model-args width=16 --input-shape 3,32,32 "
      "--dataset synthetic --epochs 1 --limit 1024",
      "python -m gluonperf.bench footprint --model mynet.py:build --input-shape 3,32,32 --batch-sizes 16,32 "
      "--steps 2",
      "python -m gluonperf.profile --model mynet.py:build --input-shape 3,32,32 --batch-size 32 --steps 5 "
      "--ceiling quick"]),
    ("your_script", "a training script of one's own, profiled from outside: its images in memory, then slow",
     ["python -m gluonperf.profile --json results/script.json -- python train_script.py",
      "python -m gluonperf.profile --depth 0 --operator-steps 0 --ceiling off --json results/script_slow.json "
      "-- python train_script.py --slow-data"]),
    ("script_memory", "profile -- on a script that keeps every step's output to score the epoch, then on the same "
                      "script adding the correct count up on the device: memory over the whole run",
     ["python -m gluonperf.profile --depth 0 --operator-steps 0 --ceiling off -- python score_epoch.py",
      "python -m gluonperf.profile --depth 0 --operator-steps 0 --ceiling off -- python score_epoch.py --on-device"]),
    ("faster_script", "tune -- on a newcomer's script: the recipe, each change measured on it",
     ["python -m gluonperf.tune --levers threads,hybridize,data --json results/tune_script.json -- "
      "python tabular_mlp.py"]),
    ("your_model_errors", "a model spec that does not fit: each one line, nothing run",
     ["! python -m gluonperf.train --model mynet.py:build",
      "! python -m gluonperf.train --model mynet.py:build --input-shape 32,32",
      "! python -m gluonperf.train --model mynet.py:buld --input-shape 3,32,32"]),
    ("infer", "infer at its defaults: LeNet, every rung built here, every layout, single-stream and offline",
     ["python -m gluonperf.infer --json infer.json"]),
    ("infer_exported", "from training to deployment in two commands: LeNet trained on digits and exported, then "
                       "served from its files, each rung judged on 835 held-out digits",
     ["python -m gluonperf.train --model lenet --dataset digits --export deploy/lenet",
      "python -m gluonperf.infer --model deploy/lenet-symbol.json --calib-data digits --json served.json"]),
    ("infer_runtimes", "where should the model run: the LeNet trained on digits, MXNet's rungs beside ONNX Runtime's "
                       "and OpenVINO's on the same file exported, each judged on 835 held-out digits, each saying "
                       "what ran",
     ["python -m gluonperf.train --model lenet --dataset digits --export deploy/lenet",
      "python -m gluonperf.infer --model deploy/lenet-symbol.json --calib-data digits --precision "
      "static,int8,ort-fp32,ort-int8,ov-fp32,ov-int8 --layouts 1x2 --json runtimes.json"]),
    ("infer_server", "infer's server scenario: static, fused and INT8 at the highest rate within a 50 ms p99, the "
                     "close ones confirmed in interleaved rounds, and what to deploy",
     ["python -m gluonperf.infer --precision static,fused,int8 --scenario server --latency-bound 50ms "
      "--json server.json"]),
    ("ladder_mlp", "the precision ladder of the MLP trained on digits and exported: each rung judged on 835 "
                   "held-out digits, one short offline run",
     ["python -m gluonperf.train --model mlp --dataset digits --export deploy/mlp",
      "python -m gluonperf.infer --model deploy/mlp-symbol.json --calib-data digits --scenario offline "
      "--batch-sizes 64 --layouts 2x1 --rounds 1 --cold-starts 0 --json mlp.json"]),
    ("infer_errors", "infer's one-line errors: the server scenario without a bound, a bound of 0, a symbol file "
                     "without its parameters, calibration data of the wrong shape for the model",
     ["! python -m gluonperf.infer --scenario server",
      "! python -m gluonperf.infer --latency-bound 0",
      "python -c \"open('net-symbol.json', 'w').write('{}')\"",
      "! python -m gluonperf.infer --model net-symbol.json --input-shape 1,28,28",
      "! python -m gluonperf.infer --model mlp --calib-data digits"]),
    ("bench_optimizers", "bench optimizers at its defaults (LeNet)",
     ["python -m gluonperf.bench optimizers"]),
    ("bench_optimizers_resnet18", "bench optimizers on ResNet-18, a smaller step than the defaults",
     ["python -m gluonperf.bench optimizers --model resnet18 --batch-size 16 --repeat 5 --steps 3"]),
]
NAMES = [name for name, _, _ in EXAMPLES]
# the examples whose records are kept (the file their command writes with --json), for the readings
RECORDS = {"infer": "infer.json", "infer_exported": "served.json", "infer_runtimes": "runtimes.json",
           "infer_server": "server.json",
           "ladder_mlp": "mlp.json"}
READING = re.compile(r"(<!-- reading:(\w+) -->\n)(.*?)(<!-- /reading:\2 -->)", re.S)
FILES = [os.path.join(HERE, "your_model", "mynet.py"), os.path.join(HERE, "your_script", "train_script.py"),
         os.path.join(HERE, "your_script", "score_epoch.py"), os.path.join(ROOT, "benchmarks", "scripts", "tabular_mlp.py")]


def machine():
    """lscpu's model name, family and model, and the number of cores ('2-core AMD EPYC (family 25
    model 1)')."""
    model, cores, family = "unknown CPU", os.cpu_count(), ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        model = fields.get("Model name", model)
        per_socket = int(fields.get("Core(s) per socket", 0)) * int(fields.get("Socket(s)", 1) or 1)
        cores = per_socket or cores
        if fields.get("CPU family") and fields.get("Model"):
            family = " (family %s model %s)" % (fields["CPU family"], fields["Model"])
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return "%d-core %s%s" % (cores, model, family)


def clean_env():
    """The user's environment without the settings that change the commands' defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_", "KMP_", "GOMP_", "DNNL_"))}
    env["PYTHONUNBUFFERED"] = "1"  # stderr's notes and stdout's table in the order written
    env["COLUMNS"] = "100"  # the tables as a 100-column terminal shows them (issue 55)
    return env


def run(commands, cwd, timeout):
    """Run each command line in cwd; (transcript, seconds, error or None)."""
    transcript, start = [], time.time()
    for line in commands:
        must_fail = line.startswith("! ")
        line = line[2:] if must_fail else line
        argv = shlex.split(line)
        argv = [sys.executable if a == "python" else a for a in argv]
        try:
            p = subprocess.run(argv, cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return transcript, time.time() - start, "timed out after %d s: %s\n%s" % (timeout, line, out[-2000:])
        transcript.append("$ " + line)
        transcript.extend(p.stdout.rstrip("\n").split("\n") if p.stdout.strip() else [])
        if must_fail and p.returncode == 0:
            return transcript, time.time() - start, "exit 0, where an error was the point: %s\n%s" % (
                line, p.stdout[-2000:])
        if p.returncode != 0 and not must_fail and not line.startswith("python -m gluonperf.compare"):
            return transcript, time.time() - start, "exit %d: %s\n%s" % (p.returncode, line, p.stdout[-2000:])
        if must_fail or line.startswith("python -m gluonperf.compare"):
            transcript.append("$ echo $?")
            transcript.append(str(p.returncode))
    return transcript, time.time() - start, None


def caption(where, seconds):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "Real output on a %s, %s (%.0f s; generated by `python docs/examples.py`):" % (where, when, seconds)


def render(where, transcript, seconds):
    return "%s\n\n```text\n%s\n```\n" % (caption(where, seconds), "\n".join(transcript))


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def update_readme(readme, name, text):
    """Replace the block between <!-- example:NAME --> and <!-- /example:NAME --> in readme."""
    with open(readme) as f:
        old = f.read()
    pattern = re.compile(r"(<!-- example:%s -->\n).*?(<!-- /example:%s -->)" % (name, name), re.S)
    if not pattern.search(old):
        return False
    write_atomically(readme, pattern.sub(lambda m: m.group(1) + text + m.group(2), old))
    return True


def kept_records(examples_dir, name):
    """(records, caption) an example kept: its NAME.jsonl as gluonperf Results and its output's
    first line; None when it kept none."""
    from gluonperf.records.files import read_jsonl
    path = os.path.join(examples_dir, name + ".jsonl")
    if not os.path.isfile(path):
        return None
    with open(os.path.join(examples_dir, name + ".md")) as f:
        caption = f.readline().strip()
    return [r for r, _ in read_jsonl(path)], caption


def reading_text(name, examples_dir):
    """The Markdown of reading `name` from the records its examples kept; ValueError saying why
    there is none."""
    from readings import READINGS
    if name not in READINGS:
        raise ValueError("no reading %r in docs/readings.py" % name)
    example, write, others = READINGS[name]
    kept = [kept_records(examples_dir, e) for e in (example,) + tuple(others)]
    missing = [e for e, k in zip((example,) + tuple(others), kept) if k is None]
    if missing:
        raise ValueError("no records kept of %s: run python docs/examples.py --only %s"
                         % (", ".join(missing), ",".join(missing)))
    (records, caption), more = kept[0], [k[0] for k in kept[1:]]
    return write(records, caption, *more).rstrip("\n") + "\n"


def pages(docs_dir):
    """The Markdown pages under docs_dir (not a built copy) and the README beside it."""
    found = [p for p in glob.glob(os.path.join(docs_dir, "**", "*.md"), recursive=True)
             if "_build" not in p and os.sep + "examples" + os.sep not in p]
    readme = os.path.join(os.path.dirname(os.path.abspath(docs_dir)), "README.md")
    return sorted(found) + ([readme] if os.path.isfile(readme) else [])


def update_readings(docs_dir, examples_dir, write=True, only=None):
    """Rewrite each reading block of the pages (of the examples in `only`, default all) from the
    kept records; with write=False change nothing. Returns ['page: reading: why'] of the blocks
    that were (or would be) rewritten or cannot be."""
    from readings import READINGS
    stale = []
    for page in pages(docs_dir):
        with open(page) as f:
            old = f.read()

        def block(m):
            name = m.group(2)
            if only is not None and name in READINGS and not {READINGS[name][0], *READINGS[name][2]} & set(only):
                return m.group(0)
            try:
                text = reading_text(name, examples_dir)
            except ValueError as e:
                stale.append("%s: %s: %s" % (os.path.relpath(page, docs_dir), name, e))
                return m.group(0)
            if text != m.group(3):
                stale.append("%s: %s: %s" % (os.path.relpath(page, docs_dir), name,
                                             "rewritten from the records" if write else "not what the records give"))
            return m.group(1) + text + m.group(4)
        new = READING.sub(block, old)
        if write and new != old:
            write_atomically(page, new)
    return stale


def names(text):
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in NAMES]
    if unknown:
        raise argparse.ArgumentTypeError("unknown example(s) %s; --list shows them" % ", ".join(unknown))
    return chosen


def build_parser():
    p = argparse.ArgumentParser(prog="python docs/examples.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", type=names, metavar="NAME[,NAME...]",
                   help="run only these examples (compare and report read what train, profile and tune wrote: "
                        "run them together)")
    p.add_argument("--list", action="store_true", help="list the examples and exit")
    p.add_argument("--out", default=os.path.join(HERE, "examples"), help="folder of the output files "
                   "(default: docs/examples)")
    p.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                   help="README whose marked blocks are rewritten (default: the repository's)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per command (default: 300)")
    p.add_argument("--readings", action="store_true",
                   help="run nothing: rewrite the readings in the pages from the records the examples kept")
    p.add_argument("--check-readings", action="store_true",
                   help="run nothing, change nothing: exit 1 naming each reading that is not what the records give")
    p.add_argument("--docs", default=HERE, help="folder of the pages whose readings are rewritten or checked "
                                                "(default: docs/; its examples/ holds the records)")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not os.path.isfile(args.readme):
        parser.error("--readme %s: no such file" % args.readme)
    if args.list:
        for name, what, commands in EXAMPLES:
            print("%-22s %s\n%22s   %s" % (name, what, "", "\n                         ".join(commands)))
        return 0
    if args.readings or args.check_readings:
        stale = update_readings(args.docs, os.path.join(args.docs, "examples"), write=args.readings)
        for line in stale:
            print("examples: %s" % line, file=sys.stderr if args.check_readings else sys.stdout)
        return 1 if stale and args.check_readings else 0
    chosen = args.only or NAMES
    os.makedirs(args.out, exist_ok=True)
    where, failed = machine(), []
    with tempfile.TemporaryDirectory(prefix="gluonperf-examples-") as scratch:
        os.makedirs(os.path.join(scratch, "results"))
        for path in FILES:
            shutil.copy(path, scratch)
        for name, _, commands in EXAMPLES:
            if name not in chosen:
                continue
            transcript, seconds, error = run(commands, scratch, args.timeout)
            if error:
                print("examples: %s failed (%s)" % (name, error), file=sys.stderr)
                failed.append(name)
                continue
            text = render(where, transcript, seconds)
            write_atomically(os.path.join(args.out, name + ".md"), text)
            if name in RECORDS:
                shutil.copy(os.path.join(scratch, RECORDS[name]), os.path.join(args.out, name + ".jsonl"))
            in_readme = update_readme(args.readme, name, text)
            print("%-16s %5.1f s  %s%s" % (name, seconds, os.path.join(args.out, name + ".md"),
                                           " and README.md" if in_readme else ""))
    for line in update_readings(args.docs, args.out, only=chosen):
        print("examples: %s" % line)
    if failed:
        print("examples: %d failed: %s" % (len(failed), ", ".join(failed)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
