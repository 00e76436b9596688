"""Imports point down only: a module may import from its own layer or the layers below it.

From the bottom: runtime, then records and config (plain data), measure, training, tuning
(candidates against a baseline, knowing no runner), experiments, inference, script and scaling
(the area packages: a user's script is gluonperf/script/), render, cli, and the commands at the top
(gluonperf/<command>.py and the bench package), beside them the workers package (every process the commands
start: tune's steprate worker, Horovod's ranks, bench's and infer's workers). The package root (`gluonperf/__init__.py`:
UserError, error_line) imports nothing of gluonperf's and sits below everything. A module's `if __name__ ==
"__main__":` block is that module run as a command, so it may use cli/; only the commands, workers/ and the
launchers that horovodrun runs have one.
"""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "gluonperf"
LAYERS = ["runtime", "records config", "measure", "training", "tuning",
          "experiments inference script scaling", "render", "cli"]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names.split()}
AREAS = [name for name in RANK if RANK[name] == RANK["script"]]  # side by side: experiments, inference, ...
COMMANDS = len(LAYERS)  # the commands' layer: gluonperf/<command>.py, bench/, and workers/ beside them


def layer(module):
    """The layer of `module` (a dotted name under gluonperf)."""
    parts = module.split(".")
    if len(parts) == 1 or not (PACKAGE / parts[1]).exists() and not (PACKAGE / (parts[1] + ".py")).exists():
        return -1  # the package root, or a name imported from it
    return RANK.get(parts[1], COMMANDS)


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_main_block(node):
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__")


def imports(path):
    """(line, imported module) of every import of gluonperf in `path`, outside its __main__ block."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skipped = {id(n) for top in tree.body if is_main_block(top) for n in ast.walk(top)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for target in ([module] if node.module else [module + "." + a.name for a in node.names]):
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name


def upward_imports(root=PACKAGE):
    found = []
    for path in sorted(root.rglob("*.py")):
        me = module_name(path)
        for line, target in imports(path):
            if target.split(".")[0] == "gluonperf" and layer(target) > layer(me):
                found.append("%s:%d imports %s" % (path.relative_to(root.parent), line, target))
    return found


def test_imports_point_down():
    assert upward_imports() == [], "imports that run up a layer (see this test's docstring for the order)"


def test_workers_sit_with_the_commands():
    assert layer("gluonperf.workers.steprate") == layer("gluonperf.tune") == COMMANDS
    assert layer("gluonperf.cli.profile_script") == layer("gluonperf.cli.tune_script") == RANK["cli"]


def test_the_new_packages_are_placed():
    """Issue 62: tuning/ below the areas (it knows no runner), script/ and scaling/ among them."""
    assert layer("gluonperf.tuning.search") == RANK["tuning"] < layer("gluonperf.script.runner")
    assert layer("gluonperf.script.runner") == layer("gluonperf.experiments.step_time") == RANK["script"]
    assert layer("gluonperf.scaling.validation") == RANK["script"]
    assert RANK["training"] < RANK["tuning"]


def package_imports(package, root=PACKAGE):
    """(module, line, imported gluonperf module) of every import in gluonperf/<package>/."""
    for path in sorted((root / package).rglob("*.py")):
        for line, target in imports(path):
            yield module_name(path), line, target


@pytest.mark.parametrize("one, other", [("script", "tuning"), ("tuning", "script")])
def test_script_and_tuning_never_import_each_other(one, other):
    """The command hands the script's runner to tuning: neither package needs the other (the
    script's levers build candidates through the candidate they are given)."""
    found = ["%s:%d imports %s" % (m, line, t) for m, line, t in package_imports(one)
             if t.split(".")[:2] == ["gluonperf", other]]
    assert found == []


def area(module):
    """The area package of `module` (a dotted name under gluonperf), or None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in AREAS else None


def cross_area_imports(root=PACKAGE):
    """Imports from one area package into another (outside `__main__` blocks)."""
    found = []
    for one in AREAS:
        if not (root / one).is_dir():
            continue
        for module, line, target in package_imports(one, root):
            if area(target) not in (None, one):
                found.append("%s:%d imports %s" % (module, line, target))
    return found


def test_the_areas_stand_side_by_side():
    """experiments/, inference/, script/ and scaling/ import none of each other: what two share
    (the Blocks, the operators, the training runs) sits below them."""
    assert cross_area_imports() == [], "an area imports another: move what both need down (measure/, training/)"


@pytest.mark.parametrize("source, crossing", [
    ("from ..experiments.step_time import phase\n", True),
    ("def f():\n    from ..scaling import runs\n", True),  # inside a function counts too
    ("import gluonperf.inference.serving\n", True),
    ("from .. import experiments\n", True),
    ("from . import parts\n", False),                      # its own area
    ("from ..measure.blocks import walk\n", False),        # below
    ("if __name__ == '__main__':\n    from ..experiments import sweep\n", False),
])
def test_the_check_sees_one_area_import_another(tmp_path, source, crossing):
    """The check itself, on a made-up package with the four areas."""
    package = tmp_path / "gluonperf"
    for folder in AREAS + ["measure"]:
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "script" / "probe.py").write_text(source)
    global PACKAGE
    saved, PACKAGE = PACKAGE, package
    try:
        assert bool(cross_area_imports(package)) == crossing
    finally:
        PACKAGE = saved


def test_tuning_knows_no_runner():
    """tuning/ imports no runner: not gluonperf's training runners, not a user's script's."""
    found = ["%s:%d imports %s" % (m, line, t) for m, line, t in package_imports("tuning")
             if t.startswith(("gluonperf.training.runners", "gluonperf.training.levers", "gluonperf.script",
                              "gluonperf.inference", "gluonperf.workers"))]
    assert found == []


def test_the_top_level_holds_only_the_commands():
    """gluonperf/*.py: the commands `python -m gluonperf` lists, the package's __init__ and
    __main__, and records and config; a worker or half of a command goes in a package."""
    import gluonperf.__main__ as entry
    allowed = {name for name, _ in entry.COMMANDS} | {"__init__", "__main__", "records", "config"}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules - allowed == set(), "top-level modules that are not commands"
    missing = {name for name, _ in entry.COMMANDS
               if not (PACKAGE / (name + ".py")).exists() and not (PACKAGE / name / "__main__.py").exists()}
    assert missing == set(), "commands listed in gluonperf/__main__.py that have no module"


@pytest.mark.parametrize("source, upward", [
    ("from ..cli import common\n", True),            # training -> cli
    ("from ..render.records import x\n", True),      # render sits above training
    ("from ..measure import stats\n", False),        # down
    ("from . import models\n", False),               # same layer
    ("from .. import UserError\n", False),           # the root
    ("if __name__ == '__main__':\n    from ..cli import common\n", False),
    ("def f():\n    from ..experiments import sweep\n", True),  # inside a function counts too
])
def test_the_check_sees_an_upward_import(tmp_path, source, upward):
    """The check itself, on a made-up package laid out as gluonperf is."""
    global PACKAGE
    package = tmp_path / "gluonperf"
    for folder in ("cli", "render", "measure", "training", "experiments"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "training" / "steps.py").write_text(source)
    saved, PACKAGE = PACKAGE, package
    try:
        assert bool(upward_imports(package)) == upward
    finally:
        PACKAGE = saved


def import_cycles(root=PACKAGE):
    """Pairs of gluonperf modules that import each other (directly or through others)."""
    modules = {module_name(p): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for _, target in imports(path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target != "gluonperf":
                targets.add(target)
        graph[name] = targets

    def reaches(start, goal):
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            for t in graph.get(m, ()):
                if t == goal:
                    return True
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return False
    return sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a)})


def test_no_module_imports_back():
    """Within a layer too: two modules that import each other are one concern, or need a third."""
    assert import_cycles() == []


def main_blocks(root=PACKAGE):
    """gluonperf's modules that can be run (`if __name__ == "__main__":`), as module names."""
    return sorted(module_name(p) for p in root.rglob("*.py")
                  if any(is_main_block(top) for top in ast.parse(p.read_text()).body))


# modules run as programs that are neither commands nor under workers/, and why
RUNNABLE_ELSEWHERE = {
    "gluonperf.runtime.horovod_launcher": "horovodrun itself (run_horovodrun), a launcher: the one node launch's "
                                          "Horovod engine starts through ps_launcher, which starts the ranks",
    "gluonperf.cli.profile_script": "profile -- COMMAND's half, called by gluonperf.profile in its own process; "
                                    "gluonperf starts no process of it",
    "gluonperf.training.horovod": "the rank of `train --engine horovod`, a command users run (under launch or "
                                  "their own horovodrun), whose training loop is in-process training's too",
}


def commands():
    """The commands' modules (users run them; gluonperf runs some as children too, which answer with
    their --json records): gluonperf/<command>.py, gluonperf/__main__.py, gluonperf/bench/__main__.py."""
    import gluonperf.__main__ as entry
    return {"gluonperf.__main__", "gluonperf.bench.__main__"} | {"gluonperf." + name for name, _ in entry.COMMANDS}


def rank_bodies(root=PACKAGE):
    """gluonperf's modules that start a Horovod rank's work (`hvd.init()`), as module names."""
    def inits(tree):
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "init"
                   and isinstance(n.func.value, ast.Name) and n.func.value.id == "hvd" for n in ast.walk(tree))
    return sorted(module_name(p) for p in root.rglob("*.py") if inits(ast.parse(p.read_text())))


def outside_workers(root=PACKAGE, allowed=()):
    """What runs in a process of its own but lives outside workers/: a sitecustomize.py (a folder put on
    a child's PYTHONPATH), a module with a `__main__` block or the body of a Horovod rank (`hvd.init()`),
    not in `allowed`."""
    sites = [p.relative_to(root.parent).as_posix() for p in sorted(root.rglob("sitecustomize.py"))
             if p.relative_to(root).parts[0] != "workers"]
    runnable = sorted(set(main_blocks(root)) | set(rank_bodies(root)))
    return sites + [m for m in runnable if m.split(".")[1:2] != ["workers"] and m not in allowed]


def test_processes_start_in_the_commands_or_the_workers():
    """Issue 74: what runs in a process gluonperf starts (a worker, a Horovod rank's body, the user's
    script's sitecustomize, launch's workers' exit guard) lives in workers/, not in an area's module (whose `__main__` block
    reached up into cli/); the commands and RUNNABLE_ELSEWHERE, each with its reason, are the rest."""
    assert outside_workers(allowed=commands() | set(RUNNABLE_ELSEWHERE)) == []
    assert set(RUNNABLE_ELSEWHERE) <= set(main_blocks()) | set(rank_bodies())  # no stale exception
    assert "gluonperf.workers.coldstart" in main_blocks() and layer("gluonperf.workers.coldstart") == COMMANDS


@pytest.mark.parametrize("path, source, outside", [
    ("inference/probe.py", "if __name__ == '__main__':\n    main()\n", True),
    ("runtime/script_site/sitecustomize.py", "import os\n", True),
    ("workers/probe.py", "if __name__ == '__main__':\n    main()\n", False),
    ("workers/launch_site/sitecustomize.py", "import os\n", False),
    ("inference/probe.py", "def main():\n    pass\n", False),
    ("scaling/rank.py", "def rank(hvd):\n    hvd.init()\n", True),
    ("workers/rank.py", "def rank(hvd):\n    hvd.init()\n", False),
    ("scaling/rank.py", "def rank(hvd):\n    hvd.size()\n", False),
])
def test_the_check_sees_what_runs_outside_workers(tmp_path, path, source, outside):
    """The check itself, on a made-up package."""
    package = tmp_path / "gluonperf"
    (package / path).parent.mkdir(parents=True)
    (package / path).write_text(source)
    global PACKAGE
    saved, PACKAGE = PACKAGE, package
    try:
        assert bool(outside_workers(package)) == outside
    finally:
        PACKAGE = saved
