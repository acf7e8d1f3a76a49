"""benchmarks/rebound_e2e.py: the batch-8 table's bounds re-planned at other HBM read rates."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import rebound_e2e  # noqa: E402

TABLE = ROOT / "benchmarks" / "results" / "e2e-h200.json"


def _rows():
    return rebound_e2e.dak_rows(json.loads(TABLE.read_text())["rows"], 8, "dak-consolidated")


def test_the_preset_rate_reproduces_stored_bounds_and_faster_hbm_lowers_them():
    """All-HBM rows scale with the HBM rate; link-bound rows (OPT-30B at 40%) barely move."""
    rows = {(r["model"], round(100 * r["x_req"])): r for r in _rows()}
    hbm, link = rows[("llama-3-8b", 0)], rows[("opt-30b", 40)]
    for r in (hbm, link):
        assert rebound_e2e.bound_at(r, None) == pytest.approx(r["bound_s"], rel=1e-6)
        assert rebound_e2e.bound_at(r, 3.7e12) == pytest.approx(r["bound_s"], rel=1e-6)
    assert rebound_e2e.bound_at(hbm, 4.14e12) == pytest.approx(hbm["bound_s"] * 3.7 / 4.14, rel=0.02)
    assert rebound_e2e.bound_at(link, 4.14e12) > 0.95 * link["bound_s"]


def test_cli_prints_every_row_and_rejects_bad_rates(capsys):
    rebound_e2e.main([str(TABLE), "--hbm-rate", "4.14e12"])
    out = capsys.readouterr().out
    assert out.count("\n") >= len(_rows()) + 2 and "EB >= 0.9 x bound:" in out and "at 4.14 TB/s" in out
    for bad in ("fast", "0", "-1e12", "nan"):
        with pytest.raises(SystemExit, match="--hbm-rate"):
            rebound_e2e.main([str(TABLE), f"--hbm-rate={bad}"])
    with pytest.raises(SystemExit, match="no finished"):
        rebound_e2e.main([str(TABLE), "--batch", "3"])
