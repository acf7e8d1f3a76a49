"""Collect one device call's output into benchmarks/results/ (after `bash benchmarks/h200_next.sh X`).

Copies every JSON of the call's $OUT folder as `<stem>-<tag>-h200.json` (refusing to overwrite
a committed result), merges its tuning cache into `tuning-cache-h200.json`, and appends the
call's log to the session log under a header naming the call and the tree it ran.

    python3 benchmarks/collect_device.py /work/.device/3 --call V --sha 1a2b3c4 --tag s7 \
        --log benchmarks/results/h200-session-2026-12-02.log
"""

import argparse
import json
import shutil
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def collect(src: Path, call: str, sha: str, tag: str, log: Path, results: Path = RESULTS) -> list[Path]:
    if not src.is_dir():
        raise SystemExit(f"{src} is not a folder (pass the device call's files_at)")
    files = sorted(src.glob("*.json"))
    for f in files:  # check everything before copying anything
        if (results / f"{f.stem}-{tag}-h200.json").exists():
            raise SystemExit(f"{results / f'{f.stem}-{tag}-h200.json'} exists; pick another --tag")
        try:
            json.loads(f.read_text())  # a truncated file is an error here, not in a later replot
        except ValueError as e:
            raise SystemExit(f"{f} is not valid JSON ({e}); nothing was copied") from None
    copied = []
    for f in files:
        dst = results / f"{f.stem}-{tag}-h200.json"
        shutil.copyfile(f, dst)
        copied.append(dst)
    cache = src / "cache" / "split_linear.json"
    if cache.exists():
        merged_path = results / "tuning-cache-h200.json"
        merged = json.loads(merged_path.read_text()) if merged_path.exists() else {}
        merged.update(json.loads(cache.read_text()))
        merged_path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    logs = sorted(src.glob("run-*.log")) + sorted(src.glob("*tests*.log"))
    with open(log, "a") as out:
        out.write(f"\n## call {call} (tree {sha})\n")
        for lf in logs:
            out.write(lf.read_text())
    return copied


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path, help="the device call's files_at folder")
    ap.add_argument("--call", required=True, help="the h200_next.sh call letter")
    ap.add_argument("--sha", required=True, help="the DAK_GIT_SHA the call ran with")
    ap.add_argument("--tag", required=True, help="suffix for the copied JSON names, e.g. s7")
    ap.add_argument("--log", required=True, type=Path, help="session log to append to")
    a = ap.parse_args(argv)
    for p in collect(a.src, a.call, a.sha, a.tag, a.log):
        print(f"copied {p}")


if __name__ == "__main__":
    main()
