import csv
import json

from gluonperf.benchmark import Measurement
from gluonperf.records import format_table, read_jsonl, result, write_csv, write_jsonl


def _results():
    m = Measurement("a", (0.001, 0.002, 0.003))
    return [result("demo", "a", m, speedup=1.0, rss_peak_bytes=2 ** 20, images_per_s=12.5),
            result("demo", "b", speedup=2.5, note="x")]


def test_table_shows_units_and_all_rows():
    text = format_table(_results(), title="T")
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
