"""Output paths (--json, --csv, --plot, --trace, -o, dataset make DIR) lose nothing and replace
nothing that is not gluonperf's: an unwritable path is refused before the work; a symlink is
followed (the link stays); a FIFO, a device, /dev/stdout and /dev/fd/N are written straight
through, not renamed over (gluonperf.runtime.outputs)."""
import errno
import json
import os
import re
import stat
import threading

import pytest

from helpers import run_leaving_nothing
from gluonperf import UserError
from gluonperf.cli import common as cli
from gluonperf.records import read_jsonl, result, write_csv, write_jsonl
from gluonperf.runtime import outputs

RECORDS = [result("b", "x", images_per_s=1.0), result("b", "y", images_per_s=2.0)]


def _one_line(p):
    lines = [l for l in p.stderr.strip().splitlines() if not l.startswith("note: ")]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_a_symlink_is_followed_onto_its_target_and_stays_a_link(tmp_path):
    """The records reach the link's target (renamed atomically in the target's directory),
    the link the user made is still there; a dangling link gets its target made."""
    (tmp_path / "results").mkdir()
    target, link = tmp_path / "results" / "run.json", tmp_path / "link.json"
    target.write_text("old\n")
    link.symlink_to(target)
    write_jsonl(RECORDS, str(link))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [r.name for r, _ in read_jsonl(str(target))] == ["x", "y"]
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to("results/new.csv")  # relative, to a file not made yet
    write_csv(RECORDS, str(dangling))
    assert dangling.is_symlink() and (tmp_path / "results" / "new.csv").read_text().startswith("bench,name")
    assert sorted(os.listdir(tmp_path / "results")) == ["new.csv", "run.json"]  # no temporary file left


def test_a_fifo_is_written_through_and_its_reader_gets_the_records(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []

    def read():
        with open(fifo) as f:
            got.append(f.read())
    reader = threading.Thread(target=read, daemon=True)  # daemon: today's code left it waiting on a replaced FIFO
    reader.start()
    cli.check_output_path(str(fifo), "--json")  # accepted, without opening it (which would wait for a reader)
    write_jsonl(RECORDS, str(fifo))
    reader.join(60)  # the writer closed the FIFO: the reader has its end of file
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["fifo"]
    assert [json.loads(line)["name"] for line in got[0].splitlines()] == ["x", "y"]


def test_process_substitution_dev_fd_is_written_through(tmp_path):
    """`--json >(jq .)` gives /dev/fd/N, a pipe this process holds: the records go into it,
    after what Python had buffered for it; its read end is refused before the work."""
    read_end, write_end = os.pipe()
    try:
        path = "/dev/fd/%d" % write_end
        cli.check_output_path(path, "--json")
        write_jsonl(RECORDS, path)
        os.close(write_end)
        write_end = None
        with os.fdopen(read_end, "r") as f:
            read_end = None
            assert [json.loads(line)["name"] for line in f.read().splitlines()] == ["x", "y"]
        r, w = os.pipe()
        with pytest.raises(UserError, match="open for reading only"):
            cli.check_output_path("/dev/fd/%d" % r, "--json")
        os.close(r)
        os.close(w)
    finally:
        for fd in (read_end, write_end):
            if fd is not None:
                os.close(fd)


def _full_device(tmp_path):
    """A device that answers every write with ENOSPC: a node of its own (root), so that nothing
    can replace the machine's /dev/full; without root /dev/full itself, which cannot be replaced then."""
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
        open(node, "wb").close()  # not a nodev mount
        return str(node)
    except OSError:
        if node.exists():
            node.unlink()
        return "/dev/full"


def test_a_device_stays_a_device_and_its_write_error_is_one_line(tmp_path, capsys):
    device = _full_device(tmp_path)
    with pytest.raises(outputs.OutputError) as e:
        write_csv(RECORDS, device)
    assert e.value.errno == errno.ENOSPC and e.value.filename == device
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert not [p for p in os.listdir(os.path.dirname(device)) if p.startswith(".tmp-")]

    def main(argv):
        write_jsonl(RECORDS, device)
    with pytest.raises(SystemExit) as exit:
        cli.run(main, "python -m gluonperf.bench")
    err = capsys.readouterr().err
    assert exit.value.code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "cannot write %s: No space left on device" % device in err
    assert stat.S_ISCHR(os.stat(device).st_mode)
    outputs.write_output(os.devnull, b"nothing")  # a device that takes it: written, still a device
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_staged_file_goes_beside_its_target_or_through(tmp_path):
    """The trace writer's path (MXNet's profiler fills a file it names): staged in the symlink
    target's directory and renamed onto the target; staged elsewhere and copied into a pipe."""
    (tmp_path / "d").mkdir()
    link = tmp_path / "trace.json"
    link.symlink_to(tmp_path / "d" / "t.json")
    tmp = outputs.staging_file(str(link), ".json")
    assert os.path.dirname(tmp) == str(tmp_path / "d")
    with open(tmp, "w") as f:
        f.write('{"traceEvents": []}')
    outputs.move_into_place(tmp, str(link))
    assert link.is_symlink() and json.loads((tmp_path / "d" / "t.json").read_text()) == {"traceEvents": []}
    assert os.listdir(tmp_path / "d") == ["t.json"]
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as reader:
        path = "/dev/fd/%d" % write_end
        tmp = outputs.staging_file(path, ".json")
        assert not os.path.dirname(tmp).startswith("/proc")
        with open(tmp, "wb") as f:
            f.write(b"trace")
        outputs.move_into_place(tmp, path)
        os.close(write_end)
        assert reader.read() == b"trace" and not os.path.exists(tmp)


def test_an_unwritable_place_is_refused_by_the_check(tmp_path):
    """What every command checks before its work (cli.check_output_path, check_output_dir):
    /proc takes no new file, even from root; nor does a path under a regular file."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for path in ("/proc/x.json", "/proc/new/x.json", str(a_file / "x.json")):
        with pytest.raises(UserError, match="cannot be written"):
            cli.check_output_path(path, "--csv")
    with pytest.raises(UserError, match="cannot be written"):
        cli.check_output_dir("/proc/d", "DIR")
    with pytest.raises(UserError, match="is a directory"):
        cli.check_output_path(str(tmp_path), "--plot")
    for path in (str(tmp_path / "new" / "x.json"), str(a_file), "/dev/stdout", os.devnull):
        cli.check_output_path(path, "--trace")
    assert sorted(os.listdir(tmp_path)) == ["a-file"]  # the checks leave nothing behind


def test_train_refuses_an_unwritable_json_before_training():
    p = run_leaving_nothing(["-m", "gluonperf.train", "--dataset", "digits", "--model", "mlp", "--limit", "256",
                             "--batch-size", "32", "--epochs", "1", "--json", "/proc/x.json"], timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stdout  # no epoch row: refused before training
    assert _one_line(p) == ("python -m gluonperf.train: error: --json /proc/x.json cannot be written "
                            "(/proc is not a writable directory)")


def test_dataset_make_refuses_a_folder_that_cannot_be_made(tmp_path):
    p = run_leaving_nothing(["-m", "gluonperf.dataset", "make", "/proc/d", "--images-per-class", "1"], timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert "DIR /proc/d cannot be written" in _one_line(p)
    assert not os.path.exists("/proc/d")


BENCH = ["-m", "gluonperf.bench", "hybridize", "--repeat", "2", "--number", "10"]


def test_json_to_dev_stdout_comes_out_on_stdout_and_csv_through_a_symlink(tmp_path):
    (tmp_path / "results").mkdir()
    link = tmp_path / "r.csv"
    link.symlink_to(tmp_path / "results" / "r.csv")
    p = run_leaving_nothing(BENCH + ["--json", "/dev/stdout", "--csv", str(link)], timeout=180)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    assert rows and all(r["bench"] == "hybridize" and "env" in r for r in rows)
    assert lines[:len(rows)] == [l for l in lines if l.startswith("{")], p.stdout  # the records, then the table
    assert any(l.startswith("name ") and re.search(r"  median \((s|ms|us|ns)\)", l)  # median_s, its unit once
               for l in lines[len(rows):]), p.stdout
    assert link.is_symlink()
    assert (tmp_path / "results" / "r.csv").read_text().count("\n") == len(rows) + 1


def test_json_through_a_symlink_reaches_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "results").mkdir()
    target, link = tmp_path / "results" / "r.json", tmp_path / "latest.json"
    target.write_text("")
    link.symlink_to(target)
    p = run_leaving_nothing(BENCH + ["--json", str(link)], timeout=180)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert {r.bench for r, _ in read_jsonl(str(target))} == {"hybridize"}
    assert os.listdir(tmp_path / "results") == ["r.json"]


def test_a_reader_that_stopped_reading_is_no_error(tmp_path):
    """Output piped into a reader that has gone (`| head`): exit 0, no traceback. The pipe's
    read end is closed before the command starts, so its first write meets a broken pipe."""
    import subprocess
    import sys
    from helpers import clean_env, ROOT
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    write_jsonl([result("b", "x", images_per_s=1.0)], str(old))
    write_jsonl([result("b", "x", images_per_s=1.1)], str(new))
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run([sys.executable, "-m", "gluonperf.compare", str(old), str(new)], cwd=ROOT,
                           env=clean_env(), stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
