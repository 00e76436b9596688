"""The shape of the code, read from its syntax tree (no import, no MXNet; fast): issue 74's
parameter objects. No function takes more than MAX_PARAMETERS parameters outside the functions
that build argparse parsers (what travels together travels as one frozen dataclass), and `args`,
the parsed flags, is never written after parsing (what is made of a flag is a value of its own)."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "gluonperf"
MAX_PARAMETERS = 8

# Functions allowed over the limit (an entry no longer over it fails below): none.
ALLOWED = set()

# What makes a function a parser builder: it calls one of these itself (not in a function nested in it).
PARSER_CALLS = {"ArgumentParser", "add_argument", "add_argument_group", "add_mutually_exclusive_group",
                "add_subparsers", "add_parser"}


def parameters(node):
    """How many parameters a function takes: positional, keyword-only, *args and **kwargs (one
    each), without the `self` or `cls` of a method."""
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def _own_calls(node):
    """The names called in `node`'s body, outside the functions and classes nested in it."""
    todo, names = list(node.body), set()
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Call):
            f = n.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None))
        todo.extend(ast.iter_child_nodes(n))
    return names


def builds_parser(node):
    return bool(_own_calls(node) & PARSER_CALLS)


def functions(root=PACKAGE):
    """(where: 'path/in/package.py:Qualified.name', the function's node) of every function."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield "%s:%s%s" % (rel, prefix, child.name), child
                    yield from walk(child, "%s%s." % (prefix, child.name))
                elif isinstance(child, ast.ClassDef):
                    yield from walk(child, "%s%s." % (prefix, child.name))
                else:
                    yield from walk(child, prefix)
        yield from walk(ast.parse(path.read_text(), str(path)), "")


def over_the_limit(root=PACKAGE):
    """{where: parameters} of the functions over MAX_PARAMETERS that build no parser."""
    return {where: parameters(node) for where, node in functions(root)
            if parameters(node) > MAX_PARAMETERS and not builds_parser(node)}


def test_no_function_outside_the_parsers_takes_more_than_8_parameters():
    over = over_the_limit()
    new = {where: n for where, n in over.items() if where not in ALLOWED}
    assert not new, ("functions over %d parameters: put what travels together in a (frozen) dataclass: %s"
                     % (MAX_PARAMETERS, ", ".join("%s (%d)" % kv for kv in sorted(new.items()))))
    stale = sorted(ALLOWED - set(over))
    assert not stale, "no longer over the limit (or gone): take them out of ALLOWED: %s" % ", ".join(stale)


def test_the_count_and_the_parser_exemption(tmp_path):
    """The check itself: self and cls are not counted, *args and **kwargs are one each; a function
    that builds a parser may take more, a function nested in it (an argparse type) may not."""
    (tmp_path / "m.py").write_text(
        "import argparse\n"
        "def nine(a, b, c, d, e, f, g, h, i): pass\n"
        "def eight(a, b, c, d, e, f, *args, **kwargs): pass\n"
        "def keywords(a, b, c, d, e, f, g, *, h, i): pass\n"
        "class K:\n"
        "    def method(self, a, b, c, d, e, f, g, h): pass\n"
        "    def wide(self, a, b, c, d, e, f, g, h, i): pass\n"
        "def build_parser(a, b, c, d, e, f, g, h, i):\n"
        "    p = argparse.ArgumentParser()\n"
        "    def kind(a, b, c, d, e, f, g, h, i): pass\n"
        "    p.add_argument('--x', type=kind)\n"
        "    return p\n")
    assert over_the_limit(tmp_path) == {"m.py:nine": 9, "m.py:keywords": 9, "m.py:K.wide": 9,
                                        "m.py:build_parser.kind": 9}


# Writes into `args` still there: TEMPORARY, to be emptied like ALLOWED. bench's main hands footprint
# the bfloat16 note that bench/__main__.py made before MXNet loaded (footprint says it between its
# own notes).
ALLOWED_WRITES = {"bench/__init__.py:main"}


def _targets(node):
    if isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            yield from _targets(e)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def own_nodes(fn):
    """Every node of a function's body, without those of the functions and classes defined in it
    (each is an entry of its own)."""
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


def writes_to_args(root=PACKAGE):
    """{where: [line, ...]} of the functions that assign to an attribute of `args` (`args.x = ...`,
    `args.x += ...`, `setattr(args, ...)`, `delattr(args, ...)`)."""
    out = {}
    for where, fn in functions(root):
        for n in own_nodes(fn):
            targets = []
            if isinstance(n, ast.Assign):
                targets = [t for target in n.targets for t in _targets(target)]
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
                targets = list(_targets(n.target))
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr")
                  and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "args"):
                out.setdefault(where, []).append(n.lineno)
            if any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "args"
                   for t in targets):
                out.setdefault(where, []).append(n.lineno)
    return out


def test_args_is_not_written_after_parsing():
    found = writes_to_args()
    new = {where: lines for where, lines in found.items() if where not in ALLOWED_WRITES}
    assert not new, ("args written after parsing: compute a value of its own (a local, or a dataclass built "
                     "from args): %s" % ", ".join("%s (line %s)" % (w, ",".join(map(str, l)))
                                                  for w, l in sorted(new.items())))
    stale = sorted(ALLOWED_WRITES - set(found))
    assert not stale, "args no longer written there: take them out of ALLOWED_WRITES: %s" % ", ".join(stale)


def test_the_writes_check_sees_every_form(tmp_path):
    (tmp_path / "m.py").write_text(
        "def plain(args):\n    args.x = 1\n"
        "def pair(args):\n    args.x, y = 1, 2\n"
        "def augmented(args):\n    args.n += 1\n"
        "def by_name(args):\n    setattr(args, 'x', 1)\n"
        "def read(args):\n    y = args.x\n    other = args\n    other.x = 1\n"
        "def outer(args):\n    def inner():\n        args.x = 1\n")
    assert writes_to_args(tmp_path) == {"m.py:plain": [2], "m.py:pair": [4], "m.py:augmented": [6],
                                        "m.py:by_name": [8], "m.py:outer.inner": [15]}


# Issue 74: ModelSpec is the only model type past the command line. `args.model`, the --model text,
# is turned into a ModelSpec by cli.resolve_model (which takes `args` whole); no other function hands
# the text on. The places that still do, each for a reason:
MODEL_TEXT_ALLOWED = {
    "cli/common.py:resolve_model": "the resolution itself: resolve_spec(args.model, ...)",
    "infer.py:check": "--model is an exported model's files (PREFIX-symbol.json + params) or a spec; the "
                      "spec is resolved there, the files go to inference.ladder.model_source, a ModelSource",
    "workers/steprate.py:main": "tune's steprate worker reads the spec's text its parent wrote on its "
                                "command line (training.steprate parses it with as_spec)",
}


def _is_args_model(node):
    return (isinstance(node, ast.Attribute) and node.attr == "model" and isinstance(node.value, ast.Name)
            and node.value.id == "args")


def model_text_handed_on(root=PACKAGE):
    """{where: [line, ...]} of the functions that hand `args.model` on as it was parsed: as an
    argument of a call (positional, keyword or starred), bound to a name, or returned. Reading it
    in a comparison, a message's formatting or a command line being built is not handing it on."""
    out = {}
    for where, fn in functions(root):
        for n in own_nodes(fn):
            values = []
            if isinstance(n, ast.Call):
                values = list(n.args) + [k.value for k in n.keywords]
                values += [v.value for v in n.args if isinstance(v, ast.Starred)]
                if isinstance(n.func, ast.Attribute) and n.func.attr == "format":
                    values = []  # "...".format(args.model): a message
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Return)):
                values = [n.value]
            if any(_is_args_model(v) for v in values if v is not None):
                out.setdefault(where, []).append(n.lineno)
    return out


def test_the_model_text_goes_only_to_its_resolution():
    found = model_text_handed_on()
    new = {where: lines for where, lines in found.items() if where not in MODEL_TEXT_ALLOWED}
    assert not new, ("args.model handed on as text: pass `args` to cli.resolve_model and the ModelSpec it returns "
                     "on: %s" % ", ".join("%s (line %s)" % (w, ",".join(map(str, l))) for w, l in sorted(new.items())))
    stale = sorted(set(MODEL_TEXT_ALLOWED) - set(found))
    assert not stale, "args.model no longer handed on there: take them out of MODEL_TEXT_ALLOWED: %s" % ", ".join(stale)


def test_the_model_text_check_sees_every_hand_over(tmp_path):
    (tmp_path / "m.py").write_text(
        "def positional(args):\n    build(args.model)\n"
        "def keyword(args):\n    build(model=args.model)\n"
        "def bound(args):\n    name = args.model\n"
        "def returned(args):\n    return args.model\n"
        "def read(args):\n    if args.model == 'mlp':\n        pass\n"
        "    print('%s at %d' % (args.model, 3), '{}'.format(args.model))\n"
        "    flags = ['--model', args.model]\n    spec = resolve_model(args)\n"
        "def other(opts):\n    build(opts.model)\n")
    assert model_text_handed_on(tmp_path) == {"m.py:positional": [2], "m.py:keyword": [4], "m.py:bound": [6],
                                              "m.py:returned": [8]}
