"""Summary of `dak bench e2e` rows: per (model, batch, ratio) speedups and the issue's targets.

Targets (from the issue; checked only where the rows exist):
dak's row is dak-consolidated (the default policy) where it ran, else dak-greedy. In a merged file
dak is compared only with baselines (and dak-uniform) measured in the same run as its row.
- small batch (B <= 64): dak EB >= 0.9 x bound at every ratio (eb_over_bound >= 0.9);
  >= 1.5x the best baseline (prefetch, uva, accelerate) at 0 < x <= 2%; never slower than any
  baseline; predicted TPOT within 10% of measured.
- large batch (B > 64): dak >= 1.3x dak-uniform at 0 < x <= 40%.
- real capacity: runs to completion with TPOT <= 1.1 x the planner's bound.
"""

from __future__ import annotations

from dak.bench.e2e_cases import BASELINES, SYSTEMS

SMALL_BATCH = 64
DAK_SYSTEMS = ("dak-consolidated", "dak-greedy")  # the row that stands for dak, first present


def _ok(rows, **match):
    return [r for r in rows if r["status"] == "ok" and all(r[k] == v for k, v in match.items())]


def _group(rows: list[dict], key) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def summarize(rows: list[dict]) -> dict:
    """{'groups': one dict per (model, batch, x), 'real_capacity': [...], 'targets': {name: [pass, fail]}}."""
    groups, targets = [], {}

    def check(name: str, passed: bool, where: str):
        t = targets.setdefault(name, {"pass": 0, "fail": 0, "failed": []})
        t["pass" if passed else "fail"] += 1
        if not passed:
            t["failed"].append(where)

    ratio_rows = [r for r in rows if r["kind"] == "ratio"]
    for (model, batch, x), rs in sorted(_group(ratio_rows, lambda r: (r["model"], r["batch"], r["x_req"])).items()):
        tpot = {r["system"]: r["tpot_s"] for r in rs if r["status"] == "ok"}
        g = {"model": model, "batch": batch, "x_req": x, "tpot_s": tpot}
        greedy = next((r for s in DAK_SYSTEMS for r in _ok(rs, system=s)), None)
        same = [r for r in rs if r["status"] == "ok" and greedy is not None and r.get("run") == greedy.get("run")]
        base = {r["system"]: r["tpot_s"] for r in same if r["system"] in BASELINES}
        uniform = next((r["tpot_s"] for r in same if r["system"] == "dak-uniform"), None)
        where = f"{model} B={batch} x={100 * x:g}%"
        if greedy is not None:
            tg = greedy["tpot_s"]
            g["dak_system"] = greedy["system"]
            g["eb_over_bound"] = greedy["eb_over_bound"]
            g["predicted_over_measured"] = greedy["predicted_over_measured"]
            if base:
                best = min(base, key=base.get)
                g["best_baseline"], g["speedup_vs_best_baseline"] = best, base[best] / tg
            if uniform is not None:
                g["greedy_over_uniform"] = uniform / tg
            if batch <= SMALL_BATCH:
                if g["eb_over_bound"] is not None:
                    check("small batch: EB >= 0.9 x bound", g["eb_over_bound"] >= 0.9, where)
                if g["predicted_over_measured"] is not None:
                    check("small batch: predicted within 10% of measured",
                          abs(g["predicted_over_measured"] - 1) <= 0.10, where)
                if base:
                    check("small batch: never slower than a baseline", g["speedup_vs_best_baseline"] >= 1.0, where)
                    if 0 < x <= 0.02:
                        check("small batch: >= 1.5x best baseline at 0 < x <= 2%",
                              g["speedup_vs_best_baseline"] >= 1.5, where)
            elif "greedy_over_uniform" in g and 0 < x <= 0.40:
                check("large batch: dak >= 1.3x uniform at 0 < x <= 40%", g["greedy_over_uniform"] >= 1.3, where)
        groups.append(g)
    real = []
    rc_rows = [r for r in rows if r["kind"] == "real-capacity"]
    dak_rc = {}  # model -> its dak row: the first of DAK_SYSTEMS present
    for s in reversed(DAK_SYSTEMS):
        dak_rc.update({r["model"]: r for r in rc_rows if r["system"] == s})
    for r in rc_rows:
        done = r["status"] == "ok"
        over = r["tpot_s"] / r["bound_s"] if done and r["bound_s"] else None
        real.append({"model": r["model"], "system": r["system"], "status": r["status"], "tpot_s": r.get("tpot_s"),
                     "bound_s": r["bound_s"], "tpot_over_bound": over, "host_bytes": r.get("host_bytes")})
        if r is dak_rc.get(r["model"]):
            check("real capacity: completes with TPOT <= 1.1 x bound", done and over is not None and over <= 1.1,
                  f"{r['model']} B={r['batch']}")
    return {"groups": groups, "real_capacity": real, "targets": targets}


def _ms(t) -> str:
    return "-" if t is None else f"{1e3 * t:.2f}"


def _f(v, fmt="{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_summary(s: dict) -> str:
    """Text tables: TPOT (ms) per system and greedy's ratios, then the targets."""
    lines = []
    for (model, batch), gs in _group(s["groups"], lambda g: (g["model"], g["batch"])).items():
        systems = [x for x in SYSTEMS if any(x in g["tpot_s"] for g in gs)]
        lines += ["", f"{model}, batch {batch}: TPOT in ms",
                  f"{'x':>6} " + "".join(f"{x:>17}" for x in systems)
                  + f"{'EB/bound':>10}{'pred/meas':>10}{'vs best':>9}{'dak/unif':>9}"]
        for g in gs:
            lines.append(f"{100 * g['x_req']:>5g}% " + "".join(f"{_ms(g['tpot_s'].get(x)):>17}" for x in systems)
                         + f"{_f(g.get('eb_over_bound')):>10}{_f(g.get('predicted_over_measured')):>10}"
                         + f"{_f(g.get('speedup_vs_best_baseline'), '{:.2f}x'):>9}"
                         + f"{_f(g.get('greedy_over_uniform'), '{:.2f}x'):>9}")
    for r in s["real_capacity"]:
        lines.append(f"real capacity {r['model']} {r['system']}: {r['status']}, TPOT {_ms(r['tpot_s'])} ms, "
                     f"bound {_ms(r['bound_s'])} ms, TPOT/bound {_f(r['tpot_over_bound'])}")
    if s["targets"]:
        lines += ["", "targets:"]
        for name, t in s["targets"].items():
            miss = f"  (missed: {', '.join(t['failed'][:6])}{' ...' if len(t['failed']) > 6 else ''})" \
                if t["fail"] else ""
            lines.append(f"  {'PASS' if not t['fail'] else 'FAIL'} {name}: {t['pass']}/{t['pass'] + t['fail']}{miss}")
    return "\n".join(lines)
