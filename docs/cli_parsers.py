"""The commands' and the benchmark suites' argparse parsers, for the CLI reference (cli.md,
sphinx-argparse).

Each function returns the command's own `build_parser()`, with one change: sphinx-argparse
reads help texts as reStructuredText, where a `*` (as in `MXNET_*` or `*.json`) starts
emphasis, so every `*` is escaped. The flags, defaults and texts are the parsers'."""
import argparse
import importlib
import os
import sys


def _escaped(parser):
    def fix(text):
        return text.replace("*", r"\*").replace(r"_\*", r"\_\*") if isinstance(text, str) else text

    parser.description = fix(parser.description)
    parser.epilog = fix(parser.epilog)
    for action in parser._actions:
        action.help = fix(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _escaped(sub)
            for choice in action._choices_actions:
                choice.help = fix(choice.help)
    return parser


def parser_of(command):
    return _escaped(importlib.import_module("gluonperf." + command).build_parser())


BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def suite_parser(name):
    """The `build_parser()` of benchmarks/NAME.py. benchmarks/ is not a package: its scripts
    import their sibling suite_stats, so the folder goes on sys.path, as when a script runs.
    Importing a suite only defines it (it runs under `if __name__ == "__main__"`), but some
    set the commands' thread defaults in os.environ for the MXNet they load; the docs build
    gets its environment back."""
    saved = dict(os.environ)
    sys.path.insert(0, BENCHMARKS)
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(BENCHMARKS)
        os.environ.clear()
        os.environ.update(saved)
    return _escaped(module.build_parser())


def bench(): return parser_of("bench")
def train(): return parser_of("train")
def launch(): return parser_of("launch")
def profile(): return parser_of("profile")
def profile_script(): return parser_of("cli.profile_script")
def predict(): return parser_of("predict")
def tune(): return parser_of("tune")
def infer(): return parser_of("infer")
def dataset(): return parser_of("dataset")
def compare(): return parser_of("compare")
def report(): return parser_of("report")


def train_throughput(): return suite_parser("train_throughput")
def levers(): return suite_parser("levers")
def hybridize_suite(): return suite_parser("hybridize_suite")
def model_variants(): return suite_parser("model_variants")
def checkpointing(): return suite_parser("checkpointing")
def dist_sync_terms(): return suite_parser("dist_sync_terms")
def verdicts(): return suite_parser("verdicts")
def ceiling_probe(): return suite_parser("ceiling_probe")
