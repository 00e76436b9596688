import csv
import json
import pytest

from gluonperf.measure.harness import Measurement
from gluonperf.records import format_table, read_jsonl, result, write_csv, write_jsonl


def _results():
    m = Measurement("a", (0.001, 0.002, 0.003))
    return [result("demo", "a", m, speedup=1.0, rss_peak_bytes=2 ** 20, images_per_s=12.5),
            result("demo", "b", speedup=2.5, note="x")]


def test_table_shows_units_and_all_rows():
    text = format_table(_results(), title="T", wide=True)  # every column (--wide); fitted: tests/test_tables.py
    lines = text.splitlines()
    assert lines[0] == "T" and len(lines) == 5
    assert "2 ms" in text and "1.0 MiB" in text and "12.5/s" in text
    assert lines[-1].split()[:2] == ["demo", "b"] and " - " in lines[-1]


def test_jsonl_round_trips_with_environment(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_jsonl(_results(), str(path), env={"mxnet": "1.9.1"})
    rows = [json.loads(line) for line in open(path)]
    assert [r["name"] for r in rows] == ["a", "b"]
    assert rows[0]["median_s"] == 0.002 and rows[0]["env"] == {"mxnet": "1.9.1"}
    back = read_jsonl(str(path))
    assert back[0][0].metrics["speedup"] == 1.0 and back[1][1] == {"mxnet": "1.9.1"}
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def test_csv_has_union_of_columns(tmp_path):
    path = tmp_path / "r.csv"
    write_csv(_results(), str(path))
    rows = list(csv.DictReader(open(path)))
    assert rows[0]["bench"] == "demo" and rows[1]["note"] == "x" and rows[1]["median_s"] == ""


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    """Between the command's checks and its writing, the disk can fill up: the output is
    not half-written, no temporary file is left, and the user gets one line (exit 1)."""
    import errno
    import os

    import pytest

    from gluonperf.cli import common as cli
    from gluonperf.runtime import outputs

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(outputs.os, "fsync", full)
    out = tmp_path / "out.json"
    with pytest.raises(OSError) as e:
        write_jsonl([result("b", "x", images_per_s=1.0)], str(out))
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(out)
    assert os.listdir(tmp_path) == []

    def main(argv):
        write_jsonl([result("b", "x", images_per_s=1.0)], str(out))
    with pytest.raises(SystemExit) as exit:
        cli.run(main, "python -m gluonperf.bench")
    err = capsys.readouterr().err
    assert exit.value.code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "cannot write %s: No space left on device" % out in err
    assert os.listdir(tmp_path) == []

    def bug(argv):  # any other OSError is a bug to see whole, not a disk to free
        open(str(tmp_path / "missing" / "file"))
    with pytest.raises(FileNotFoundError):
        cli.run(bug, "python -m gluonperf.bench")


def test_the_temporary_file_of_a_write_is_registered_for_cleanup(tmp_path, monkeypatch):
    """A signal during the final write removes the half-written temporary file too: it is
    registered with guard while it exists, and only then."""
    import os

    from gluonperf.runtime import guard, outputs
    seen = []
    real_fsync = os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (seen.append(set(guard._temp_paths)), real_fsync(fd)))
    out = tmp_path / "out.json"
    write_jsonl([result("b", "x", images_per_s=1.0)], str(out))
    assert [p for p in seen[0] if os.path.basename(p).startswith(".tmp-")], seen
    assert not [p for p in guard._temp_paths if p.startswith(str(tmp_path))]
    assert os.listdir(tmp_path) == ["out.json"] and read_jsonl(str(out))[0][0].name == "x"


def test_records_carry_their_schema_and_a_newer_one_is_refused_in_one_line(tmp_path, run):
    """Every line says its record schema (records.SCHEMA); a file without one (written before
    it existed) reads as it is; a newer schema is refused by compare as one line, exit 2."""
    import json
    from gluonperf.records import SCHEMA, SchemaError, read_jsonl, result, write_jsonl
    path = tmp_path / "new.json"
    write_jsonl([result("b", "x", images_per_s=1.0)], str(path))
    assert json.loads(path.read_text())["schema"] == SCHEMA
    (r, _), = read_jsonl(str(path))
    assert "schema" not in r.metrics
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"bench": "b", "name": "x", "images_per_s": 2.0}) + "\n")
    assert read_jsonl(str(old))[0][0].metrics == {"images_per_s": 2.0}
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"bench": "b", "name": "x", "images_per_s": 2.0, "schema": SCHEMA + 1}) + "\n")
    with pytest.raises(SchemaError):
        read_jsonl(str(newer))
    p = run("gluonperf.compare", str(old), str(newer))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "python -m gluonperf.compare: error: NEW file %s line 1 is of record schema %d, which this gluonperf "
        "(schema %d) cannot read; upgrade gluonperf to read it" % (newer, SCHEMA + 1, SCHEMA))
