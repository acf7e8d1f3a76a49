"""Generation engine: the prefill (on a GPU captured per prompt-length bucket and replayed,
dak.runtime.prefill_graphs), then one CUDA graph replayed per decode token.

The decode step is static: a (B,) token buffer in, the cache `lengths` advanced by one inside
the graph, the HF forward with the "dak" attention, the lm_head, and sampling (greedy argmax,
or Gumbel-max sampling after HF's logits warpers) writing the next tokens back into the
same buffer. Kernel configs are planned and compiled by an eager warm-up step before capture
(dak.runtime.decode_graphs); the warm-up's cache writes sit at position 0, which the prefill
overwrites. One graph per sampling setting. Without a GPU (Triton interpreter) the same step
runs eagerly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from dak.defaults import DEFAULT_KV_AHEAD, DEFAULT_KV_BUCKETS
from dak.models.ops import kv_bucket_caps  # noqa: F401 -- re-exported (dak.runtime.offload, tests)
from dak.kernels.copy_ahead import copy_ahead_step, prime
from dak.runtime.decode_graphs import capture_decode
from dak.runtime.fused import decode_step, fused
from dak.runtime.kv_ahead import kv_ahead_step
from dak.runtime.prompts import check_prompts
from dak.runtime.stopping import EosStop
from dak.runtime.kv import DakKV
from dak.runtime.prefill_graphs import PrefillGraphs, check_count
from dak.runtime.logits_state import LogitsState
from dak.runtime.sampling import Sampling, draw, greedy, hold_eos, sample  # noqa: F401 -- re-exported
from dak.shares import graphs_default, prefill_graphs_default


@dataclass
class GenerateResult:
    tokens: torch.Tensor       # (B, G) generated ids
    ttft_s: float              # prefill + first token
    tpot_s: float              # mean time per decode step after the first token
    steps: int
    stopped: tuple | None = None  # per request, the step of its EOS or stop string (None: ran on); None without either
    sampling: Sampling | None = None  # the decoding settings applied
    scores: tuple | None = None  # per step, the (B, V) fp32 scores (processed, warped), when asked for
    logits: tuple | None = None  # per step, the (B, V) fp32 logits before any processor, when asked for


class Engine:
    """Runs `model` (HF causal LM with dak modules) over `kv` for a static batch.

    kv_buckets > 1: one decode graph per cache-length bucket (sharing one memory pool), so that
    the attention's copy-engine path copies each host request's keys only up to the bucket's
    length instead of max_len; eager decoding then copies exactly the rows in use.
    kv_ahead: the attention of each layer queues the copy of the next layer's staged host K/V
    (dak.runtime.kv_ahead; two HBM slots of one layer's staged K/V); False unlinks `kv`.
    """

    def __init__(self, model, kv: DakKV, graphs: bool | None = None, prefill_tokens: int | None = None,
                 kv_buckets: int = DEFAULT_KV_BUCKETS, kv_ahead: bool = DEFAULT_KV_AHEAD,
                 prefill_graphs: bool | None = None, prefill_bucket: int = 32):
        if prefill_tokens is not None and (isinstance(prefill_tokens, bool) or not isinstance(prefill_tokens, int)
                                           or prefill_tokens < 1):
            raise ValueError(f"prefill_tokens must be a positive integer or None (sized from free HBM), "
                             f"got {prefill_tokens!r}")
        self.model, self.kv = model, kv
        self.prefill_tokens = prefill_tokens
        self._spec = None  # the model's ModelSpec (spec())
        self.base = model.base_model
        self.device = kv.device
        self.batch = kv.batch
        if graphs is None:
            graphs = self.device.type == "cuda" and graphs_default()
        self.graphs = graphs
        if self.graphs and self.device.type != "cuda":
            raise ValueError("CUDA graphs need a GPU; pass graphs=False")
        if prefill_graphs is None:
            prefill_graphs = self.graphs and prefill_graphs_default()
        if prefill_graphs and not self.graphs:
            raise ValueError("captured prefill needs graphs=True (a GPU)")
        check_count("prefill_bucket", prefill_bucket)  # also when unused: a bad value is a caller's bug
        self._prefill = PrefillGraphs(self, prefill_bucket) if prefill_graphs else None
        self.tok = torch.zeros(self.batch, dtype=torch.long, device=self.device)
        self.logits: torch.Tensor | None = None
        self.state = LogitsState(self.batch, model.config.vocab_size, kv.max_len, self.device)  # processors'
        self._graphs: dict[Sampling, torch.cuda.CUDAGraph] = {}  # the full-length graph
        self.kv_caps = kv_bucket_caps(kv.max_len, kv_buckets)
        if not isinstance(kv_ahead, bool):
            raise ValueError(f"kv_ahead must be True or False, got {kv_ahead!r}")
        if kv_ahead:  # stage the next layer's host K/V while this one runs (dak.runtime.kv_ahead)
            from dak.runtime.kv_ahead import link
            self.kv_ahead_layers = link(kv, self.spec().num_heads)
        else:
            kv.ahead, self.kv_ahead_layers = None, 0
        self._bucket_graphs: dict[Sampling, list] = {}  # (cap, graph), caps ascending
        self._wrapped: list = []  # wrapped copy-ahead chains the graphs use ($DAK_COPY_WRAP)

    def spec(self):
        """The model's ModelSpec (built once, on first use)."""
        if self._spec is None:
            from dak.models.spec import ModelSpec
            self._spec = ModelSpec.from_config(self.model.config.to_dict())
        return self._spec

    def release_graphs(self) -> None:
        """Drop the captured decode graphs (and their memory pool)."""
        self._graphs.clear()
        self._bucket_graphs.clear()
        self._wrapped.clear()
        if self._prefill is not None:
            self._prefill.clear()

    def _forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        with fused():  # one-launch rotary embedding (dak.runtime.fused)
            return self.base(input_ids=ids, position_ids=pos, use_cache=False, dak_kv=self.kv).last_hidden_state

    def _step(self, s: Sampling) -> None:
        self.kv.lengths += 1
        pos = (self.kv.lengths - 1).long().unsqueeze(1)
        with copy_ahead_step(self.device), kv_ahead_step(self.kv), decode_step():  # host copies queued ahead
            h = self._forward(self.tok.unsqueeze(1), pos)
            out = self.model.lm_head(h)[:, 0]
        if self.logits is None:
            self.logits = torch.empty(out.shape, dtype=torch.float32, device=out.device)
        self.logits.copy_(out)  # one conversion into the static fp32 buffer, sampled from there
        held = self.state.process(self.logits, s, self.kv.lengths)
        if s.external:  # the caller's processors and the draw follow on the host (_host_take)
            self.state.held.copy_(held)
            return
        self._take(draw(held, s), s)

    @property
    def seen(self) -> torch.Tensor | None:
        """(batch, V + 1) bool: the tokens seen, under a repetition penalty (LogitsState)."""
        return self.state.seen

    def _host_take(self, procs, t: int, s: Sampling, raw: torch.Tensor) -> None:
        """New token t drawn after the caller's logits processors (dak.runtime.host_processors); `raw`
        its logits before any processor."""
        self._take(draw(procs(t, self.state.held, raw), s), s)

    def _take(self, tok: torch.Tensor, s: Sampling) -> None:
        """The next tokens into the static buffer (and the processors' state)."""
        self.tok.copy_(tok)
        self.state.note(self.tok, s, self.kv.lengths)

    @torch.no_grad()
    def prepare(self, s: Sampling = Sampling()) -> None:
        """Plan, compile and (on a GPU) capture the decode step for sampling setting `s`."""
        self.state.allocate(s)
        if s in self._graphs or not self.graphs:
            return
        graphs = capture_decode(self, s)
        self._graphs[s] = graphs[-1][1]
        self._bucket_graphs[s] = graphs

    def prefill_rows(self, b: int, n: int, free_bytes: int | None = None) -> int:
        """Requests prefilled per forward: `prefill_tokens` // n, or (None) as many as 80% of the
        free HBM (`free_bytes`, read off the GPU when None) holds the activations of, at 2.5 x
        the planner's prefill workspace each. Off the GPU, with no figure given: all b."""
        if self.prefill_tokens is not None:
            return max(1, min(b, self.prefill_tokens // n))
        if free_bytes is None:
            if self.device.type != "cuda":
                return b
            free_bytes = torch.cuda.mem_get_info(self.device)[0] + torch.cuda.memory_reserved(self.device) \
                - torch.cuda.memory_allocated(self.device)
        from dak.models.ops import Workload, minimum_hbm_set
        w = Workload(phase="prefill", batch=1, prompt_len=n, gen_len=0)  # bf16 and fp16: same bytes
        per_request = 2.5 * minimum_hbm_set(self.spec(), w).workspace
        return max(1, min(b, int(0.8 * free_bytes / per_request)))

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, prompt_lengths: torch.Tensor) -> torch.Tensor:
        """Right-padded prompts (B, L) -> fp32 logits (B, V) at each prompt's last token.

        Runs in chunks of `prefill_rows` requests, so activations stay within the free HBM."""
        b, n = ids.shape
        self.kv.lengths.copy_(prompt_lengths)
        rows = self.prefill_rows(b, n)
        logits = []
        try:
            # graphed per prompt bucket when one forward takes every request; in request chunks
            # HBM is short (a graph would hold its activations: the 70B real-capacity case ran out)
            run = self._prefill.run if self._prefill is not None and rows >= b else self.prefill_chunk
            for r0 in range(0, b, rows):
                r1 = min(b, r0 + rows)
                logits.append(run(r0, ids[r0:r1], prompt_lengths[r0:r1]))
        finally:
            self.kv.prefill_first, self.kv.prompt_lengths = 0, prompt_lengths
        return logits[0] if len(logits) == 1 else torch.cat(logits)

    def prefill_chunk(self, r0: int, ids: torch.Tensor, plen: torch.Tensor) -> torch.Tensor:
        """fp32 logits at each prompt's last token of requests [r0, r0 + rows) (ids (rows, L),
        right-padded; plen their lengths), their keys and values stored. Capturable."""
        rows, n = ids.shape
        self.kv.prefill_first, self.kv.prompt_lengths = r0, plen
        pos = torch.arange(n, device=self.device).expand(rows, n)
        h = self._forward(ids, pos)
        last = h[torch.arange(rows, device=self.device), (plen - 1).long()]
        return self.model.lm_head(last.unsqueeze(1))[:, 0].float()

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, max_new_tokens: int, prompt_lengths: torch.Tensor | None = None,
                 sampling: Sampling = Sampling(), eos_token_id=None, pad_token_id=None,
                 on_token=None, min_new_tokens: int = 0, stop_strings=None, criteria=None,
                 processors=None, outputs: tuple = (False, False)) -> GenerateResult:
        """Generate `max_new_tokens` tokens for each of the (B <= batch, L) prompts.

        eos_token_id (an id or a list): a request stops at its first EOS (later tokens are
        `pad_token_id`, default the first EOS id), and generation ends once all have stopped
        (dak.runtime.stopping); the result then has fewer than max_new_tokens columns.
        on_token(column): called with each step's (B,) tokens as recorded (it syncs, if it reads them).
        min_new_tokens: the EOS ids are held back (-inf) until a request has that many new tokens
        (HF's MinNewTokensLengthLogitsProcessor; nothing to hold without eos_token_id, as in HF).
        stop_strings: a dak.runtime.stop_strings.StopStrings (bound here to the prompts), or None.
        criteria: HF StoppingCriteria (a list; dak.runtime.stopping.EosStop calls them), or None.
        processors: HF LogitsProcessors (a list), run on the host each step after dak's own
        (dak.runtime.host_processors), or None. outputs: (scores, logits), keep each step's (HF's
        output_scores / output_logits; the step's draw then runs on the host too)."""
        ids, plen, b = self._check(ids, max_new_tokens, prompt_lengths)
        if isinstance(min_new_tokens, bool) or not isinstance(min_new_tokens, int) or min_new_tokens < 0:
            raise ValueError(f"min_new_tokens must be an integer >= 0, got {min_new_tokens!r}")
        if stop_strings is not None:
            ids_cpu, plen_cpu = ids[:b].tolist(), plen[:b].tolist()
            stop_strings.start([row[:n] for row, n in zip(ids_cpu, plen_cpu)], self.batch, self.device)
        stop = None if eos_token_id is None and stop_strings is None and not criteria else EosStop(
            eos_token_id, pad_token_id, self.model.config.vocab_size, self.batch, b, self.device,
            stop_strings, every_step=on_token is not None, criteria=criteria)
        if criteria:
            stop.start_criteria(ids[:b], plen[:b].tolist(), max_new_tokens)
        # the EOS hold is this call's, whatever the caller's Sampling says (nothing to hold without EOS ids)
        sampling = replace(sampling, hold_eos=stop is not None and stop.pads and min_new_tokens > 0,
                           external=False)
        procs = None
        if processors or any(outputs):
            from dak.runtime.host_processors import HostProcessors, check_processors
            pad = int(stop.pad) if stop is not None else pad_token_id if isinstance(pad_token_id, int) else 0
            procs = HostProcessors(check_processors(processors, sampling, min_new_tokens), ids[:b],
                                   plen[:b].tolist(), max_new_tokens, pad, *outputs, s=sampling)
            sampling = replace(sampling, external=True)
        self.prepare(sampling)
        out = torch.empty(self.batch, max_new_tokens, dtype=torch.long, device=self.device)
        self._sync()
        t0 = time.perf_counter()
        self.state.start(sampling, ids, plen, max_new_tokens, stop.eos if stop is not None else None, min_new_tokens)
        raw = self.prefill(ids, plen)
        held = self.state.process(raw, sampling, self.kv.lengths)
        if procs is not None:
            self.state.held.copy_(held)
            self._host_take(procs, 0, sampling, raw)
        else:
            self._take(draw(held, sampling), sampling)
        self._record(out, 0, stop, on_token, b, procs)
        self._sync()
        t1 = time.perf_counter()
        graphs = self._bucket_graphs.get(sampling)
        if graphs:  # a wrapped chain's graphs find its first slot filled (an interrupted step empties it)
            prime(self._wrapped)
        bucketed = len(self.kv_caps) > 1
        steps = max_new_tokens - 1
        if stop is not None and stop.finished(0, wait=True):  # every request ended at its first token
            steps = 0
        try:
            for t in range(1, steps + 1):
                need = ids.shape[1] + t  # the longest request's keys after this step's append
                if graphs:
                    next(g for cap, g in graphs if cap >= need).replay()
                else:
                    if bucketed:
                        self.kv.set_copy_rows(need)
                    self._step(sampling)
                if procs is not None:
                    self._host_take(procs, t, sampling, self.logits)
                self._record(out, t, stop, on_token, b, procs)
                if stop is not None and stop.finished(t):
                    steps = t
                    break
        finally:
            self.kv.set_copy_rows(None)
        self._sync()
        t2 = time.perf_counter()
        cols = steps + 1 if stop is None else stop.length(steps + 1)
        return GenerateResult(out[:b, :cols], t1 - t0, (t2 - t1) / steps if steps else 0.0, steps,
                              None if stop is None else stop.stopped_steps(), sampling,
                              *(procs.kept(cols) if procs is not None else (None, None)))

    def _record(self, out: torch.Tensor, t: int, stop, on_token=None, b: int = 0, procs=None) -> None:
        if stop is None:
            out[:, t] = self.tok
        else:
            stop.record(out, t, self.tok)
        if procs is not None:
            procs.record(t, out[:, t])
        if on_token is not None:
            on_token(out[:b, t])

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _check(self, ids, max_new_tokens, prompt_lengths):
        """(ids on the device padded to the static batch, prompt lengths, real prompts)."""
        if getattr(self.kv, "freed", False):
            raise RuntimeError("this model's memory was released by dak_free(); offload it again to generate")
        ids, plen, b = check_prompts(ids, max_new_tokens, prompt_lengths, self.batch, self.kv.max_len,
                                     self.model.config.vocab_size)
        return ids.to(self.device, torch.long), plen.to(self.device), b
