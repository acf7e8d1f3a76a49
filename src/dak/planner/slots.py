"""The copy-ahead chain's slots as a timeline: what the combined step model (dak.planner.stream)
cannot see. That model takes the link as busy for the whole step; a chain whose host bytes sit in
one large copy behind little compute leaves the compute side waiting instead."""

from __future__ import annotations


def slot_stall(ct, slots: int, compute_s: float) -> float:
    """The compute side's wait for copy-ahead copies of the chain `ct` (a dak.planner.stream.ChainTime,
    its copies' link times in ct.copies) when it runs as it is built (dak.kernels.copy_ahead): the k-th copy-engine operator's copy starts once the link is free and
    operator k-slots' GEMMs have freed its slot (the events it waits on), and operator k waits
    for it. A step of `compute_s` of compute (spread over the operators in
    proportion to their local times) is simulated; with a wrapped chain the first copy is the
    previous step's last, late only by what the step's tail does not hide. The combined model
    assumes a link busy the whole step: one large copy behind little compute (an LM head's share
    copied last, forty-third session: Llama-3-8B at 10% on the H100 predicted 11.0 ms, measured
    15.1) breaks that. Where stream.exact_search holds, stream.chained prices the step at least at
    compute_s + this stall (the first copy's wait included); where the link is the bottleneck
    anyway the combined model stays. Not elsewhere: it re-plans a few batch-8 placements
    (greedy's, on some profiles) that no GPU run has checked yet."""
    ce = [i for i, f in enumerate(ct.copy_engine) if f]
    total = sum(ct.times)
    if not ce or total <= 0:
        return 0.0
    scale = compute_s / total
    copy = {i: ct.copies[i] for i in ce}

    def run(first_ready: float) -> tuple[float, float]:
        t, link = 0.0, (first_ready if ct.wrapped else 0.0)  # a wrapped first copy holds the link till then
        ends: list = []
        for i, dt in enumerate(ct.times):
            if i in copy:
                k = len(ends)
                if k == 0 and ct.wrapped:
                    ready = first_ready
                else:
                    freed = ends[k - slots] if k >= slots else 0.0
                    link = max(link, freed) + copy[i]
                    ready = link
                t = max(t, ready) + dt * scale
                ends.append(t)
            else:
                t += dt * scale
        return t, link

    end, link = run(0.0)
    if ct.wrapped:  # the first copy follows the last one: late by what the step's tail leaves uncovered
        end, _ = run(max(0.0, link + copy[ce[0]] - end))
    return max(0.0, end - compute_s)
