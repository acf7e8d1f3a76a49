"""A calibrated profile without its measured curves, for end-to-end A/Bs of the cost models.

The copy prices every operator on the roofline at the profile's own measured rates (bandwidths,
FLOP/s, fitted overheads, congestion windows kept), so `dak bench e2e --hardware P.json` against
`--hardware P-roofline.json` compares the greedy on measured curves with the greedy on the
roofline on one machine profile (issue 6's target):

    PYTHONPATH=src python3 benchmarks/strip_curves.py profile.json profile-roofline.json
"""

from __future__ import annotations

import argparse
import dataclasses

from dak.hardware import get_profile


def strip(src: str, dst: str) -> None:
    try:
        prof = get_profile(src)
    except ValueError as exc:  # missing, unreadable or malformed: say so without a traceback
        raise SystemExit(str(exc)) from None
    if not prof.curves:
        raise SystemExit(f"{src} has no measured curves: nothing to strip (it already plans on the roofline)")
    meta = dict(prof.meta, derived_from=src, derivation="measured curves removed (benchmarks/strip_curves.py)")
    dataclasses.replace(prof.roofline_only(), name=f"{prof.name}-roofline", meta=meta).to_json(dst)
    print(f"wrote {dst}: {len(prof.curves)} curves removed")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a calibrated profile .json (dak calibrate)")
    ap.add_argument("out", help="where to write the copy without curves")
    a = ap.parse_args(argv)
    strip(a.profile, a.out)


if __name__ == "__main__":
    main()
