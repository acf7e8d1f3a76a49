"""benchmarks/collect_device.py on a fake device folder."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from collect_device import collect  # noqa: E402


def test_copies_merges_and_logs_once(tmp_path):
    src, res = tmp_path / "dev", tmp_path / "results"
    (src / "cache").mkdir(parents=True)
    res.mkdir()
    (src / "e2e-fused.json").write_text(json.dumps({"rows": [1]}))
    (src / "run-V.log").write_text("### step\nrc=0\n")
    (src / "cache" / "split_linear.json").write_text(json.dumps({"b": 2, "a": 9}))
    (res / "tuning-cache-h200.json").write_text(json.dumps({"a": 1, "c": 3}))
    log = tmp_path / "session.log"
    got = collect(src, "V", "abc1234", "s7", log, res)
    assert [p.name for p in got] == ["e2e-fused-s7-h200.json"]
    assert json.loads((res / "tuning-cache-h200.json").read_text()) == {"a": 9, "b": 2, "c": 3}
    assert log.read_text() == "\n## call V (tree abc1234)\n### step\nrc=0\n"
    with pytest.raises(SystemExit, match="exists"):
        collect(src, "V", "abc1234", "s7", log, res)
    (src / "z-bad.json").write_text("{trunc")  # sorted after a good file: still nothing copied
    with pytest.raises(SystemExit, match="not valid JSON"):
        collect(src, "V", "abc1234", "s8", log, res)
    assert not (res / "e2e-fused-s8-h200.json").exists()
