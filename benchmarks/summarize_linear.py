"""Markdown summary of a bench_linear.py JSON: per host share, over all shapes and token counts.

    python benchmarks/summarize_linear.py benchmarks/results/linear-decode-h200.json
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from link_floor import floor_counts  # noqa: E402


def main(path: str) -> None:
    d = json.load(open(path))
    rows = d["rows"]
    print(f"{d['meta']['gpu']}, git {d['meta']['git_sha']}, B_h (copy engine) "
          f"{d['B_h_copy_engine'] / 1e9:.1f} GB/s, N in {sorted({r['N'] for r in rows})}, "
          f"{len({r['shape'] for r in rows})} shapes\n")
    print("| host share x | dak / bound (median, max) | dak EB GB/s (median) | vs prefetch (min, median) "
          "| vs UVA (min) | vs torch all-HBM (min) |")
    print("|---|---|---|---|---|---|")
    for xr in sorted({r["x_req"] for r in rows}):
        rs = [r for r in rows if r["x_req"] == xr]
        ob = [r["dak_over_bound"] for r in rs]
        pre = [r["speedup_vs_prefetch"] for r in rs]
        print(f"| {100 * xr:g}% | {statistics.median(ob):.2f}, {max(ob):.2f} "
              f"| {statistics.median(r['eb_dak'] for r in rs) / 1e9:.0f} "
              f"| {min(pre):.2f}x, {statistics.median(pre):.2f}x "
              f"| {min(r['speedup_vs_uva'] for r in rs):.2f}x "
              f"| {min(r['speedup_vs_torch'] for r in rs):.3f}x |")
    floored = [r for r in rows if "floor_ms" in r]
    if floored:
        print("\nAlone against the link floor (the bound with its link term measured for the case's own host "
              "bytes, link_floor.py):\n")
        print("| host share x | cases | within 1.05 x bound | within 1.05 x floor | floor > 1.05 x bound "
              "| dak / floor (median, max) | hbm_fork faster |")
        print("|---|---|---|---|---|---|---|")
        for xr in sorted({r["x_req"] for r in floored}):
            rs = [r for r in floored if r["x_req"] == xr]
            fc, of = floor_counts(rs), [r["dak_over_floor"] for r in rs]
            fork = sum(v.get("hbm_fork", 1e9) < v["config"] for v in (r["t_dak_variants_ms"] for r in rs))
            print(f"| {100 * xr:g}% | {fc['rows']} | {fc['within_bound']} | {fc['within_floor']} "
                  f"| {fc['floor_above_bound']} | {statistics.median(of):.2f}, {max(of):.2f} | {fork} |")
    chained = [r for r in rows if "t_chain_ms" in r]
    if not chained:
        return
    print(f"\nChained by copy-ahead ({chained[0]['chain_ops']} operators of a shape in a row, time per operator):\n")
    print("| host share x | cases | alone / bound (median, max) | chained best / bound (median, max) "
          "| chained heuristic / bound (median, max) | within 1.05 x bound: alone, chained | "
          "chained vs chained prefetch (min, median) |")
    print("|---|---|---|---|---|---|---|")
    for xr in sorted({r["x_req"] for r in chained}):
        rs = [r for r in chained if r["x_req"] == xr]
        al, ch, he = ([r[f] for r in rs] for f in ("dak_over_bound", "chain_over_bound", "chain_heuristic_over_bound"))
        pre = [r["chain_speedup_vs_prefetch_chain"] for r in rs]
        print(f"| {100 * xr:g}% | {len(rs)} | {statistics.median(al):.2f}, {max(al):.2f} "
              f"| {statistics.median(ch):.2f}, {max(ch):.2f} | {statistics.median(he):.2f}, {max(he):.2f} "
              f"| {sum(v <= 1.05 for v in al)}, {sum(v <= 1.05 for v in ch)} "
              f"| {min(pre):.2f}x, {statistics.median(pre):.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1])
