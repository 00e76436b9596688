"""python -m gluonperf.dataset make DIR: make a small image data set offline, to try gluonperf's
image-data commands (train, profile and bench input with --dataset PATH) without downloading one.

Writes DIR/CLASS/NNNN.jpg (the UCI handwritten digits or synthetic patterns, upscaled to --size) and,
with --rec, packs them into DIR.rec and DIR.idx beside the folder, as MXNet's im2rec does
(gluonperf.training.image_data.make_folder, pack_rec). Nothing is computed here.
"""
import argparse
import os
import shutil

from . import UserError
from .cli import common as cli

PROG = "python -m gluonperf.dataset"


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, description="Make a small image data set offline: a folder of JPEGs with one subfolder per "
                               "class, and with --rec its RecordIO file and index (what im2rec writes). Point "
                               "gluonperf at it with --dataset DIR or --dataset DIR.rec (docs/input.md).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    make = sub.add_parser("make", help="write DIR/CLASS/NNNN.jpg, and DIR.rec + DIR.idx with --rec",
                          description="Write --classes x --images-per-class JPEGs of --size x --size into "
                                      "DIR/CLASS/ (DIR must be new or empty), from the UCI handwritten "
                                      "digits (10 classes, offline) or synthetic coloured stripes, upscaled; with "
                                      "--rec also pack them into DIR.rec and DIR.idx (and DIR.lst) beside DIR.")
    make.add_argument("directory", metavar="DIR", help="the folder to write (new or empty)")
    make.add_argument("--images-per-class", type=cli.positive_int, default=20, help="(default: %(default)s)")
    make.add_argument("--classes", type=cli.positive_int, default=10, help="(default: %(default)s)")
    make.add_argument("--size", type=_size, default=224, help="side of the square images in pixels "
                                                              "(default: %(default)s, ResNet's input)")
    make.add_argument("--source", choices=("digits", "synthetic"), default="digits",
                      help="digits: the UCI 8x8 handwritten digits (at most 10 classes); synthetic: a colour "
                           "and a stripe frequency per class, with noise (default: %(default)s)")
    make.add_argument("--rec", action="store_true", help="also pack the images into DIR.rec and DIR.idx")
    make.add_argument("--quality", type=_quality, default=90, help="JPEG quality, 1-100 (default: %(default)s)")
    make.add_argument("--seed", type=cli.non_negative_int, default=0, help="(default: %(default)s)")
    return p


_size = cli.checked(int, "a whole number", lambda v: 8 <= v <= 4096, "must be between 8 and 4096 pixels")
_quality = cli.checked(int, "a whole number", lambda v: 1 <= v <= 100, "must be between 1 and 100")


def make(args):
    directory = args.directory.rstrip("/") or args.directory
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        raise UserError("%s already exists and is not an empty folder; give a new one" % directory)
    prefix = directory
    outputs = [prefix + ext for ext in (".rec", ".idx", ".lst")] if args.rec else []
    taken = [o for o in outputs if os.path.exists(o)]
    if taken:
        raise UserError("%s already exists; move it away or give another DIR" % taken[0])
    cli.check_output_dir(directory, "DIR")
    created = not os.path.exists(directory)
    from .training.image_data import make_folder, pack_rec
    try:
        files = make_folder(directory, args.images_per_class, args.size, args.classes, args.source, args.seed,
                            args.quality)
        print("wrote %d images of %dx%d in %d class folders: %s" % (len(files), args.size, args.size, args.classes,
                                                                   directory))
        if args.rec:
            rec, idx, n = pack_rec(directory, prefix)
            print("packed %d records into %s and %s" % (n, rec, idx))
    except BaseException:  # nothing half-written
        for o in outputs:
            if os.path.exists(o):
                os.remove(o)
        if created:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            for entry in os.listdir(directory):
                shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)
        raise
    print("use it: python -m gluonperf.train --dataset %s --model resnet18_v1%s" % (
        directory, " (or --dataset %s.rec [--loader recorditer])" % prefix if args.rec else ""))
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "make":
        return make(args)
    return 2


if __name__ == "__main__":
    cli.run(main, PROG)
