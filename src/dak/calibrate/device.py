"""Device probes of `dak calibrate` (CUDA GPU only): run metadata, HBM read, copy-engine H2D and
SM zero-copy host-read bandwidth, dense matmul FLOP/s, and the congestion measurement.

Bandwidths are bytes/s. Kernel times are medians of CUDA-graph replays (dak.kernels.timing),
except the congestion runs, which need two streams at once and are timed eagerly by events.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from dak.kernels.timing import event_ms, graph_time_ms

BF16 = torch.bfloat16
HOST_K = 8192  # row length of the link probes' weights (16 KiB rows in bf16)


def _run(cmd: list[str]) -> str | None:
    try:
        return subprocess.check_output(cmd, text=True, timeout=20, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.SubprocessError):
        return None


def metadata() -> dict:
    """GPU name, driver, library versions, date and git sha of this calibration run."""
    import triton
    props = torch.cuda.get_device_properties(0)
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    here = os.path.dirname(os.path.abspath(__file__))
    sha = os.environ.get("DAK_GIT_SHA") or _run(["git", "-C", here, "rev-parse", "--short", "HEAD"])
    return {"gpu": torch.cuda.get_device_name(0), "driver": (driver or "unknown").splitlines()[0],
            "cuda": torch.version.cuda, "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0], "sm_count": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", 0), "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "git_sha": sha or "unknown", "command": " ".join(["dak"] + sys.argv[1:])}


def device_numbers() -> dict:
    """sm_count, smem_per_sm, hbm_capacity and host_ram of this machine."""
    props = torch.cuda.get_device_properties(0)
    smem = getattr(props, "shared_memory_per_multiprocessor", 0) or 228 * 1024
    return {"sm_count": props.multi_processor_count, "smem_per_sm": int(smem),
            "hbm_capacity": int(props.total_memory),
            "host_ram": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}


def hbm_bandwidth(m: int = 8192, k: int = 28672) -> float:
    """cuBLAS GEMV (8 tokens) over two weights of m x k bf16, rotated so replays miss L2."""
    ws = [torch.randn(m, k, device="cuda", dtype=BF16) for _ in range(2)]
    x = torch.randn(8, k, device="cuda", dtype=BF16)
    ms = graph_time_ms([lambda w=w: F.linear(x, w) for w in ws])
    return m * k * 2 / (ms * 1e-3)


def copy_engine_bandwidth(nbytes: int = 256 << 20) -> float:
    """Host-to-device copy of an exact-size cudaHostAlloc'd buffer (median of 7)."""
    from dak.host import PinnedBuffer
    src = PinnedBuffer((nbytes // (2 * HOST_K), HOST_K), BF16)
    src.tensor.fill_(1.0)
    dst = torch.empty(src.tensor.shape, dtype=BF16, device="cuda")
    dst.copy_(src.tensor, non_blocking=True)
    ms = statistics.median(event_ms(lambda: dst.copy_(src.tensor, non_blocking=True)) for _ in range(7))
    return src.nbytes / (ms * 1e-3)


def matmul_flops(n: int = 8192) -> float:
    a, b = (torch.randn(n, n, device="cuda", dtype=BF16) for _ in range(2))
    return 2.0 * n**3 / (graph_time_ms([lambda: a @ b]) * 1e-3)


class LinkProbe:
    """Split-kernel reads of a pinned weight (all rows on host) and of an HBM weight.

    host_read(p, s): host-read bandwidth with p host programs and s pipeline stages.
    hbm_under_load(p, s): HBM-read bandwidth of the HBM programs while p x s host readers run
    on another stream, and the host bandwidth meanwhile (the paper's congestion effect).
    """

    def __init__(self, host_mib: int = 256, hbm_mib: int = 1024):
        from dak.host import PinnedBuffer
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.m_h = host_mib * (1 << 20) // (2 * HOST_K)
        self.m_g = hbm_mib * (1 << 20) // (2 * HOST_K)
        self.buf = PinnedBuffer((self.m_h, HOST_K), BF16)
        self.buf.tensor.fill_(1.0)
        self.w_g = torch.ones(self.m_g, HOST_K, device="cuda", dtype=BF16)
        self.x = torch.randn(8, HOST_K, device="cuda", dtype=BF16)
        self.out_h = torch.empty(8, self.m_h, device="cuda", dtype=BF16)
        self.out_g = torch.empty(8, self.m_g, device="cuda", dtype=BF16)
        self.no_hbm = torch.empty(0, HOST_K, device="cuda", dtype=BF16)
        self.no_host = torch.empty(0, HOST_K, dtype=BF16)
        self.host_ms: dict = {}

    def _host_call(self, p: int, s: int):
        from dak.kernels.config import KernelConfig, finalize
        from dak.kernels.split_linear import split_linear
        cfg = finalize(KernelConfig(block_m=16, block_k=256, num_stages=s, host_programs=p), self.m_h, 0, self.sms)
        return lambda: split_linear(self.x, self.buf.tensor, self.no_hbm, None, cfg, out=self.out_h)

    def _hbm_call(self):
        from dak.kernels.config import heuristic_config
        from dak.kernels.split_linear import split_linear
        cfg = heuristic_config(8, 0, self.m_g, HOST_K, self.sms, False)
        return lambda: split_linear(self.x, self.no_host, self.w_g, None, cfg, out=self.out_g)

    def host_read(self, p: int, s: int) -> float:
        ms = graph_time_ms([self._host_call(p, s)], target_ms=20, max_replays=5)
        self.host_ms[(p, s)] = ms
        return self.buf.nbytes / (ms * 1e-3)

    def hbm_under_load(self, p: int | None, s: int, reps: int = 3) -> tuple[float, float]:
        """(HBM bytes/s, host bytes/s) with p x s host readers running alongside (p=None: alone)."""
        hbm = self._hbm_call()
        host = self._host_call(p, s) if p else None
        hbm()
        if host:
            host()
        torch.cuda.synchronize()
        one = max(event_ms(hbm), 1e-3)
        n = max(2, min(32, int(0.6 * self.host_ms.get((p, s), 8 * one) / one))) if p else 8
        s_host, s_hbm, main = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.current_stream()
        g_bw, h_bw = [], []
        for _ in range(reps):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            s_host.wait_stream(main)
            s_hbm.wait_stream(main)
            if host:
                with torch.cuda.stream(s_host):
                    ev[0].record()
                    host()
                    ev[1].record()
            with torch.cuda.stream(s_hbm):
                if host:
                    torch.cuda._sleep(100_000)  # ~50 us: the host programs take their SMs first
                ev[2].record()
                for _ in range(n):
                    hbm()
                ev[3].record()
            torch.cuda.synchronize()
            g_bw.append(self.w_g.numel() * 2 * n / (ev[2].elapsed_time(ev[3]) * 1e-3))
            if host:
                h_bw.append(self.buf.nbytes / (ev[0].elapsed_time(ev[1]) * 1e-3))
        return statistics.median(g_bw), statistics.median(h_bw) if h_bw else 0.0
