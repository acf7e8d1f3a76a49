"""What a calibrated profile says, in text (pure Python): bandwidths, the congestion effect,
the windows' gain over the un-capped setting, curve points above the convex envelope; and the
repeatability check between two profiles."""

from __future__ import annotations

import statistics

from ..planner.curves import above_envelope
from ..units import format_bandwidth, format_time

SCALARS = ("hbm_bandwidth", "host_bandwidth_ce", "host_bandwidth_sm", "flops")


def summary(profile, details: dict | None = None) -> str:
    d = details or {}
    m = profile.meta
    out = [f"profile {profile.name}: {m.get('gpu', '?')} (driver {m.get('driver', '?')}, torch {m.get('torch', '?')}, "
           f"triton {m.get('triton', '?')}), {m.get('date', '?')}",
           f"HBM read {format_bandwidth(profile.hbm_bandwidth)}, copy engine H2D "
           f"{format_bandwidth(profile.host_bandwidth_ce)}, SM host reads {format_bandwidth(profile.host_bandwidth_sm)} "
           f"(best window), matmul {profile.flops / 1e12:.0f} TFLOP/s",
           f"small kernels between operators: {format_time(profile.layer_overhead_s)} per decoder layer"
           + (f", {format_time(profile.fused_layer_overhead_s)} per fused Llama-family layer"
              if profile.fused_layer_overhead_s else "") + " (added to predicted decode steps)"]
    if profile.unfused_op_overhead_s:
        out.append(f"fused q/k/v, gate/up products: {format_time(profile.unfused_op_overhead_s)} saved per launch "
                   "they spare (charged when a member holds host rows)")
    if d.get("layer_slope"):
        step, ops = d["layer_slope"]
        out[-1] += (f": a decode step takes {format_time(step)} per layer, its operators "
                    f"{format_time(ops)} as this profile times them")
    out += congestion_lines(profile, d.get("hbm_alone"), d.get("host_loaded", {}))
    out += window_lines(profile)
    for c in profile.curves:
        far = above_envelope(c, 0.05)
        if far:
            pts = ", ".join(f"x={x:.3g}: {format_time(t)} vs {format_time(e)}" for x, t, e in far)
            out.append(f"curve {c.key}: {len(far)} point(s) > 5% above the convex envelope (the greedy's order; "
                       f"predictions use the points) ({pts})")
    for f in d.get("failures", []):
        out.append(f"FAILED (roofline used instead): {f}")
    return "\n".join(out)


def congestion_lines(profile, hbm_alone: float | None, host_loaded: dict) -> list[str]:
    if not profile.link:
        return []
    out = ["host link: programs x stages -> host read alone | HBM read next to it"
           + (f" (alone {format_bandwidth(hbm_alone)})" if hbm_alone else "")]
    for s in profile.link:
        rel = f" = {s.hbm_bandwidth / hbm_alone:.2f}x" if hbm_alone and s.hbm_bandwidth else ""
        loaded = host_loaded.get(f"{s.host_programs}x{s.num_stages}")
        out.append(f"  {s.host_programs:>3} x {s.num_stages}: {format_bandwidth(s.host_bandwidth):>11} | "
                   f"{format_bandwidth(s.hbm_bandwidth):>11}{rel}"
                   + (f" (host meanwhile {format_bandwidth(loaded)})" if loaded else ""))
    return out


def window_lines(profile) -> list[str]:
    if not profile.windows:
        return ["congestion windows: none searched (every measured host part went through the copy engine)"]
    gains = [w.gain for w in profile.windows]
    vs_default = [w.default_time_s / w.time_s for w in profile.windows]
    return [f"congestion windows ({len(gains)} launch shapes): gain over un-capped host programs "
            f"min {min(gains):.2f}x, median {statistics.median(gains):.2f}x, max {max(gains):.2f}x; "
            f"over the kernel's own config median {statistics.median(vs_default):.2f}x, "
            f"max {max(vs_default):.2f}x"]


def compare(a, b) -> tuple[str, float]:
    """Text and the largest relative difference of the bandwidths (scalars and link samples)."""
    rows, worst = [], 0.0

    def rel(x, y):
        return abs(x - y) / max(abs(x), abs(y), 1e-30)

    for f in SCALARS:
        r = rel(getattr(a, f), getattr(b, f))
        worst = max(worst, r)
        rows.append(f"{f:<20} {getattr(a, f):>12.4g} {getattr(b, f):>12.4g} {100 * r:>6.2f}%")
    link_b = {(s.host_programs, s.num_stages): s for s in b.link}
    link_r = [rel(s.host_bandwidth, link_b[(s.host_programs, s.num_stages)].host_bandwidth)
              for s in a.link if (s.host_programs, s.num_stages) in link_b]
    if link_r:
        worst = max(worst, max(link_r))
        rows.append(f"link host reads: {len(link_r)} settings, max diff {100 * max(link_r):.2f}%")
    curves_b = {c.key: dict(c.points) for c in b.curves}
    cr = [rel(t, curves_b[c.key][x]) for c in a.curves if c.key in curves_b
          for x, t in c.points if x in curves_b[c.key]]
    if cr:
        rows.append(f"curve points: {len(cr)}, median diff {100 * statistics.median(cr):.2f}%, "
                    f"max {100 * max(cr):.2f}%, {sum(r < 0.05 for r in cr)} within 5%")
    for what, f in (("per layer", "layer_overhead_s"), ("per fused layer", "fused_layer_overhead_s")):
        va, vb = getattr(a, f), getattr(b, f)
        if va or vb:
            rows.append(f"small kernels {what} {format_time(va)} vs {format_time(vb)} ({100 * rel(va, vb):.1f}%)")
    rows.append(f"largest bandwidth difference {100 * worst:.2f}% ({'<' if worst < 0.05 else '>='} 5%)")
    return "\n".join(rows), worst
