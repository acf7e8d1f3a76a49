"""benchmarks/fit_split_overheads.py: least squares with held coefficients, on synthetic runs."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fit_split_overheads as fso  # noqa: E402


def _runs(true, n=12, seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        f = np.array([rng.integers(0, 200), rng.integers(0, 300), rng.uniform(0, 5e-3)])
        pred = rng.uniform(4e-3, 0.1)
        out.append({"f": f, "predicted": pred, "measured": pred + f @ true, "model": "m", "system": "s"})
    return out


def test_recovers_the_coefficients_and_holds_a_fixed_one():
    true = np.array([5e-6, 14e-6, 0.5])
    data = _runs(true)
    np.testing.assert_allclose(fso.fit(data), true, rtol=1e-6)
    held = fso.fit(data, {2: 0.2})
    assert held[2] == 0.2 and not np.allclose(held[:2], true[:2])  # the others absorb the change
    assert fso.within(data, true) == len(data)


def test_bad_fix_is_refused_clearly():
    assert fso.parse_fix(["attention_host_excess=0.2"]) == {2: 0.2}
    for bad in ("bogus=1", "copy_op_overhead_s=", "copy_op_overhead_s=fast"):
        with pytest.raises(SystemExit, match="--fix"):
            fso.parse_fix([bad])
