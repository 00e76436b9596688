"""Code small enough to read (HELPER_STANDARDS, issue 62): no module of the package over 500
lines, no function over 80, counted with `ast` (end_lineno - lineno + 1, a function's
decorators left out); no module docstring over 15 lines (issue 74: a note of what the module
holds and the one thing to know; the reasoning is in the docs).

A table of argparse flags is aside: a function counts as one when all but FLAG_TABLE_OTHER of
its lines lie inside calls that make a parser or add flags to it (`ArgumentParser(...)`,
`p.add_argument(...)`, `p.add_argument_group(...)`, a helper named `add_*` such as
`cli.add_model_flags(p)`), wherever they sit (a dict of them, as `add_training_flags` holds).
"""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "gluonperf"
MODULE_LINES = 500
FUNCTION_LINES = 80
DOCSTRING_LINES = 15
FLAG_TABLE_OTHER = 20  # lines of a table of flags outside its flag calls: signature, docstring, a loop


def is_flag_call(node):
    """A call that makes a parser or adds flags to one."""
    if not isinstance(node, ast.Call):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return name == "ArgumentParser" or name.startswith("add_")


def is_flag_table(function):
    """Whether all but FLAG_TABLE_OTHER lines of `function` lie inside flag calls."""
    covered = set()
    for node in ast.walk(function):
        if is_flag_call(node):
            covered.update(range(node.lineno, node.end_lineno + 1))
    return function.end_lineno - function.lineno + 1 - len(covered) <= FLAG_TABLE_OTHER


def oversized(path):
    """What in the file at `path` is over the limits: ['module 612 lines', 'function f 95 lines']."""
    text = path.read_text()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES:
        found.append("module %d lines" % lines)
    tree = ast.parse(text)
    if ast.get_docstring(tree) is not None:
        docstring = tree.body[0]
        length = docstring.end_lineno - docstring.lineno + 1
        if length > DOCSTRING_LINES:
            found.append("module docstring %d lines" % length)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > FUNCTION_LINES and not is_flag_table(node):
                found.append("function %s %d lines" % (node.name, length))
    return found


def sizes(root=PACKAGE):
    """{path relative to the repository: what it has over the limits} for the package's modules."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        over = oversized(path)
        if over:
            found[path.relative_to(root.parent).as_posix()] = over
    return found


def test_no_module_or_function_over_the_limits():
    assert sizes() == {}, ("split these along their concerns (a module per concern, a function per step); "
                           "a module docstring's reasoning goes to the docs page that explains it")


def test_the_check_counts_lines_and_sets_flag_tables_aside(tmp_path):
    """The check itself, on made-up modules."""
    long_body = "def f():\n" + "    x = 1\n" * 80
    (tmp_path / "long.py").write_text(long_body)
    assert oversized(tmp_path / "long.py") == ["function f 81 lines"]
    (tmp_path / "fits.py").write_text("def f():\n" + "    x = 1\n" * 79)
    assert oversized(tmp_path / "fits.py") == []
    flags = ("def build_parser():\n    p = argparse.ArgumentParser(prog='x')\n"
             + "".join("    p.add_argument(\n        '--f%d',\n        help='flag')\n" % i for i in range(30))
             + "    return p\n")
    (tmp_path / "flags.py").write_text(flags)
    assert oversized(tmp_path / "flags.py") == []
    in_a_dict = ("def add_flags(p, names):\n    flags = {\n"
                 + "".join("        'f%d': lambda: p.add_argument(\n            '--f%d'),\n" % (i, i) for i in range(40))
                 + "    }\n    for name in names:\n        flags[name]()\n")
    (tmp_path / "dict.py").write_text(in_a_dict)
    assert oversized(tmp_path / "dict.py") == []
    mixed = flags.replace("    return p\n", "    x = 1\n" * 25 + "    return p\n")
    (tmp_path / "mixed.py").write_text(mixed)
    assert oversized(tmp_path / "mixed.py") == ["function build_parser %d lines" % (3 + 90 + 25)]
    (tmp_path / "big.py").write_text("x = 1\n" * 501)
    assert oversized(tmp_path / "big.py") == ["module 501 lines"]
    note = '"""What it holds.\n' + "More.\n" * 13 + '"""\n'
    (tmp_path / "note.py").write_text(note + "x = 1\n")
    assert oversized(tmp_path / "note.py") == []
    (tmp_path / "essay.py").write_text(note.replace("More.", "More.\nMore.", 1) + "x = 1\n")
    assert oversized(tmp_path / "essay.py") == ["module docstring 16 lines"]
