"""`dak bench e2e`: dak against end-to-end offload baselines, per model, batch and offload ratio.

Each case builds one system over the same seeded random weights, generates `gen_len` tokens
for the same random prompts (one untimed warm-up generation of 2 tokens first: kernel compiles,
graph capture), and records per timed run TTFT (prefill + first token) and TPOT (mean decode
step after the first token; the engine replays its CUDA graph back to back). A row's TPOT is
the median over `repeats` runs (one run for accelerate and the real-capacity case).

Row metrics (bytes per decode step from the planner's operator inventory):
- eb = weight bytes read per step / TPOT; eb_kv = (weights + KV bytes read) / TPOT;
- bound_s: the greedy roofline step time at the same HBM budget (see dak.bench.e2e_cases);
  eb_over_bound = bound_s / TPOT (1.0 = at the bound);
- predicted_s: the step time of the placement the system built, from the hardware profile
  (its measured curves if it has any, else the roofline), plus the profile's per-layer
  overhead of the small kernels between operators; predicted_over_measured;
- token_agreement: share of generated tokens equal to the first system run on that model and
  batch (the weights are identical, so the math is; bf16 near-ties can still flip a token, and
  a flipped token changes the rest of its request's tokens);
- first_logits_err: max |logits - reference logits| / max |reference logits| at the prompts'
  last token (what the first generated token is chosen from), against the first system run in
  this process on that model and batch (first_logits_reference); first_token_gap: how far below
  the reference's best logit the system's first tokens are, in the same unit (0 when they are the
  reference's choice; a near-tie flip stays <= 2 x first_logits_err, a wrong result does not);
- fp32_logits_err, fp32_token_gap: the same against HF's model in float32 over the same weights
  (`--fp32-reference`, dak.bench.e2e_reference; fp32_reference says where it ran or why not).
Results go to JSON after every case, so a cut-short run keeps what it measured.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import statistics
import time

import torch

from dak.bench.e2e_cases import Case, E2EConfig, plan_cases, real_capacity_cases
from dak.bench.meta import metadata, write_json
from dak.models.ops import list_operators


def prompts(vocab: int, batch: int, prompt_len: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(3, vocab, (batch, prompt_len), generator=g)


def _base_row(c: Case) -> dict:
    from dak.baselines.e2e import placement_summary
    w = c.workload
    ops = list_operators(c.spec, w)
    return {
        "model": c.model, "system": c.system, "kind": c.kind, "batch": w.batch, "prompt_len": w.prompt_len,
        "gen_len": w.gen_len, "dtype": w.dtype, "x_req": c.x_req, "hbm_budget": c.budget,
        "required_host_bytes": c.required_host_bytes, "operator_bytes": sum(op.bytes for op in ops),
        "weight_traffic": sum(op.traffic for op in ops if op.kind != "attention"),
        "kv_traffic": sum(op.traffic for op in ops if op.kind == "attention"),
        "bound_s": c.bound_s if math.isfinite(c.bound_s) else None, "status": "skipped" if c.skip else "planned", "note": c.skip or c.note,
        "planned": None if c.placement is None else placement_summary(c.placement),
    }


def _agreement(tokens: torch.Tensor, ref: torch.Tensor) -> tuple[float, int]:
    """(share of equal tokens, first step where any request differs; -1 when none does)."""
    same = tokens == ref
    diff = (~same).any(0).nonzero()
    return float(same.float().mean()), int(diff[0]) if len(diff) else -1


def _compare(logits: torch.Tensor, first: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max |logits - ref|, how far below ref's best logit the tokens `first` sit), over max |ref|."""
    scale = float(ref.abs().max()) or 1.0
    gap = ref.max(-1).values - ref.gather(1, first[:, None].long())[:, 0]
    return float((logits - ref).abs().max()) / scale, float(gap.max()) / scale


def _first_logits(row: dict, key: tuple, logits: torch.Tensor, first: torch.Tensor, refs: dict) -> None:
    """first_logits_err and first_token_gap against the first logits recorded for `key`, and
    fp32_logits_err / fp32_token_gap against the fp32 reference where one was computed (see above)."""
    ref_system, ref = refs.setdefault(key + ("logits",), (row["system"], logits))
    err, gap = _compare(logits, first, ref)
    row.update(first_logits_err=err, first_token_gap=gap, first_logits_reference=ref_system)
    fp32 = refs.get(key + ("fp32",))
    if fp32 is not None:
        row["fp32_reference"] = fp32[0]
        if fp32[1] is not None:
            row["fp32_logits_err"], row["fp32_token_gap"] = _compare(logits, first, fp32[1])


def _fp32_reference(c: Case, cfg: E2EConfig, refs: dict, log) -> None:
    """The fp32 first-token logits of `c`'s model, batch and prompts, once per key (dak.bench.e2e_reference)."""
    from dak.bench.e2e_reference import fp32_first_logits
    w = c.workload
    key = (c.model, w.batch, w.prompt_len, w.gen_len, "fp32")
    if key not in refs:
        try:
            logits, note = fp32_first_logits(c.cfg, prompts(c.spec.vocab_size, w.batch, w.prompt_len, cfg.seed), cfg.seed)
        except (RuntimeError, ValueError) as e:  # OOM and the like: recorded, the run goes on without it
            logits, note = None, f"fp32 reference failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        refs[key] = (note, logits)
        log(f"  {c.model} B={w.batch}: {note}")


def _metrics(row: dict, runs: list, built, refs: dict, logits: torch.Tensor | None = None) -> None:
    tpot = statistics.median(r[2] for r in runs)
    traffic = row["weight_traffic"] + row["kv_traffic"]
    pl = built.placement
    pred = pl.predicted_s if pl is not None and pl.feasible else None
    key = (row["model"], row["batch"], row["prompt_len"], row["gen_len"])
    tokens = runs[-1][0]
    if key not in refs:  # the first system run here is the reference; its tokens go to the JSON
        refs[key] = (row["system"], tokens)
        row["tokens"] = tokens.tolist()
    ref = refs[key]
    agree, first = _agreement(tokens, ref[1])
    row.update({
        "status": "ok", "ttft_s": statistics.median(r[1] for r in runs), "tpot_s": tpot,
        "tpot_runs": [r[2] for r in runs], "tpot_step_median_s": runs[-1][3],
        "tokens_per_s": row["batch"] / tpot if tpot else 0.0,
        "eb": row["weight_traffic"] / tpot if tpot else 0.0, "eb_kv": traffic / tpot if tpot else 0.0,
        "eb_bound": traffic / row["bound_s"] if row["bound_s"] else None,
        "eb_over_bound": row["bound_s"] / tpot if tpot and row["bound_s"] else None,
        "predicted_s": pred, "predicted_over_measured": pred / tpot if pred and tpot else None,
        "host_bytes": built.host_bytes, "offload_ratio": built.host_bytes / row["operator_bytes"],
        "graphs": built.graphs, "token_agreement": agree, "first_mismatch_step": first,
        "token_reference": ref[0], **built.extra,
    })
    if pl is not None:
        row["hbm_bytes"] = pl.hbm_bytes
    if logits is not None:
        _first_logits(row, key, logits, tokens[:, 0], refs)


def run_case(c: Case, cfg: E2EConfig, refs: dict, log=print) -> dict:
    """Build, warm up, time and free one case; never raises for a failing system."""
    from dak.baselines.hf_accelerate import AccelerateUnavailable
    from dak.bench.e2e_systems import REGISTRY
    from dak.host import pinned_bytes
    row = _base_row(c)
    if c.skip:
        log(f"  skip {c.model} B={c.workload.batch} {c.system}: {c.skip}")
        return row
    w = c.workload
    ids = prompts(c.spec.vocab_size, w.batch, w.prompt_len, cfg.seed)
    repeats = 1 if c.system == "accelerate" or c.kind == "real-capacity" else cfg.repeats
    built, runs, t0 = None, [], time.perf_counter()
    try:
        built = REGISTRY[c.system](c, cfg)
        row["build_s"] = time.perf_counter() - t0
        row["pinned_bytes"] = pinned_bytes()
        if torch.cuda.is_available():
            row["hbm_allocated"] = torch.cuda.memory_allocated()
        if c.kind != "real-capacity" and torch.cuda.is_available():
            built.run(ids, min(2, w.gen_len))  # warm-up: compiles, graph capture, cuBLAS heuristics
        runs = [built.run(ids, w.gen_len) for _ in range(repeats)]
        check = built.first_logits is not None and c.kind != "real-capacity"  # (no second system to compare)
        logits = built.first_logits(ids) if check else None  # after the timed runs
        _metrics(row, runs, built, refs, logits)
    except AccelerateUnavailable as e:
        row.update(status="unavailable", note=str(e))
    except (RuntimeError, ValueError) as e:  # OOM, an infeasible build: recorded, the run goes on
        row.update(status="failed", note=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
    finally:
        if built is not None:
            built.free()
        del built
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    row["wall_s"] = time.perf_counter() - t0
    log(_line(row))
    return row


def _reuse(c: Case, rows: list[dict]) -> dict | None:
    """The row of `c.same_as` at the same model, batch and x, relabelled (None if it did not run)."""
    w = c.workload
    for r in reversed(rows):
        if (r["model"], r["batch"], r["prompt_len"], r["gen_len"], r["x_req"], r["system"]) == \
                (c.model, w.batch, w.prompt_len, w.gen_len, c.x_req, c.same_as) and r["status"] == "ok":
            return dict({k: v for k, v in r.items() if k != "tokens"}, system=c.system, note=f"same build as {c.same_as} (nothing on the host): row reused",
                        token_agreement=1.0, first_mismatch_step=-1, token_reference=c.same_as)
    return None


def _line(r: dict) -> str:
    x = "real" if r["x_req"] is None else f"{100 * r['x_req']:g}%"
    head = f"  {r['model']} B={r['batch']} x={x} {r['system']}: "
    if r["status"] != "ok":
        return head + f"{r['status']} {r['note']}"
    pred = r["predicted_over_measured"]
    return head + (f"TPOT {1e3 * r['tpot_s']:.2f} ms (bound {1e3 * r['bound_s']:.2f}, EB/bound "
                   f"{r['eb_over_bound']:.2f}{'' if pred is None else f', pred/meas {pred:.2f}'}) TTFT "
                   f"{1e3 * r['ttft_s']:.1f} ms EB {r['eb'] / 1e9:.0f} GB/s host {r['host_bytes'] / 1e9:.2f} GB "
                   f"tokens {100 * r['token_agreement']:.0f}%{_logits_note(r)} [{r['wall_s']:.0f}s]")


def _logits_note(r: dict) -> str:
    err = r.get("first_logits_err")
    if err is None:
        return ""
    fp32 = "" if r.get("fp32_logits_err") is None else \
        f"; vs fp32 {r['fp32_logits_err']:.1e}, gap {r['fp32_token_gap']:.1e}"
    return f" (first logits err {err:.1e}, token gap {r['first_token_gap']:.1e}{fp32})"


def run_e2e(cfg: E2EConfig, log=print) -> dict:
    """Run every case of `cfg`; writes cfg.out (and cfg.plot) and returns the payload."""
    from dak.bench.e2e_report import render_summary, summarize
    payload = {"meta": metadata(), "config": dataclasses.asdict(cfg), "definitions": __doc__, "rows": []}
    refs: dict = {}
    if cfg.append and os.path.exists(cfg.out):  # keep the rows (and token references) already there
        with open(cfg.out) as fh:
            old = json.load(fh)
        payload["rows"] = old["rows"]
        payload["previous_runs"] = old.get("previous_runs", []) + [old["meta"]]
        for r in old["rows"]:
            if "tokens" in r:
                refs[(r["model"], r["batch"], r["prompt_len"], r["gen_len"])] = (r["system"], torch.tensor(r["tokens"]))

    def record(cases):
        for c in cases:
            row = _reuse(c, payload["rows"]) if c.same_as else None
            if row is None and cfg.fp32_reference and not c.skip and c.kind != "real-capacity":
                _fp32_reference(c, cfg, refs, log)  # before the case is built: the HBM is free
            payload["rows"].append(row or run_case(c, cfg, refs, log))
            write_json(cfg.out, payload)

    record(plan_cases(dataclasses.replace(cfg, real_capacity=None)) if cfg.models else [])
    if cfg.real_capacity:
        free = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
        log(f"real capacity: {cfg.real_capacity}, free HBM {'-' if free is None else f'{free / 2**30:.1f} GiB'}")
        record(real_capacity_cases(cfg, free))
    payload["summary"] = summarize(payload["rows"])
    write_json(cfg.out, payload)
    log(render_summary(payload["summary"]))
    log(f"wrote {cfg.out}")
    if cfg.plot:
        from dak.bench.e2e_plot import plot
        log(plot(payload, cfg.plot))
    return payload
