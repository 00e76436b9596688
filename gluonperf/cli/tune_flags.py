"""The flags `tune --model` and `tune -- python train.py` share: --rounds and --budget, read into
a tuning.rounds.Rounds."""
import argparse

from ..tuning.rounds import Budget, Rounds
from .common import positive_int


def rounds_type(text):
    """--rounds: auto, exhaustive or a whole number (an argparse type)."""
    if text in ("auto", "exhaustive"):
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("%r is not a whole number of rounds (at least 1), auto or exhaustive" % text)
    return value


ROUNDS_HELP = ("interleaved rounds per lever: auto: each candidate until its verdict is settled (faster or slower "
               "beyond the noise, or unable to reach the smallest speed-up worth a change), at most %d rounds, "
               "with intervals that stay valid under that stopping (a group-sequential plan: docs/verdicts.md); "
               "exhaustive: at least 5 rounds, then until every candidate's 95%%%% interval is within +-5%%%% (at "
               "most 30; slow); or a number of rounds (default: %%(default)s)") % Rounds().maximum


def add_rounds(p, budget, budget_help=None):
    """--rounds and --budget (its default `budget` seconds, None: `budget_help` says the rule)."""
    p.add_argument("--rounds", type=rounds_type, default="auto", help=ROUNDS_HELP)
    p.add_argument("--budget", type=positive_int, default=budget, metavar="SEC",
                   help="with --rounds auto: the whole tune's seconds, kept: no round starts that would end past "
                        "it, the levers are tried in order while it lasts and the ones it did not reach are named "
                        "(the intervals stay valid whenever it stops the rounds) (default: %s)"
                        % (budget_help or "%(default)s"))


def rounds_policy(args, budget=None, per_run=0.0):
    """The sweep's Rounds from --rounds and --budget (or `budget` seconds, when --budget was not
    given), its budget planned at `per_run` seconds a run until runs are seen."""
    if args.rounds == "auto":
        return Rounds(budget=Budget(args.budget or budget, per_run))
    if args.rounds == "exhaustive":
        return Rounds(exhaustive=True)
    return Rounds(fixed=args.rounds)
