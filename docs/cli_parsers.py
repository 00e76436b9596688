"""The commands' argparse parsers, for the CLI reference (cli.md, sphinx-argparse).

Each function returns the command's own `build_parser()`, with one change: sphinx-argparse
reads help texts as reStructuredText, where a `*` (as in `MXNET_*` or `*.json`) starts
emphasis, so every `*` is escaped. The flags, defaults and texts are the parsers'."""
import argparse
import importlib


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


def bench(): return parser_of("bench")
def train(): return parser_of("train")
def launch(): return parser_of("launch")
def profile(): return parser_of("profile")
def predict(): return parser_of("predict")
def tune(): return parser_of("tune")
def dataset(): return parser_of("dataset")
def compare(): return parser_of("compare")
def report(): return parser_of("report")
