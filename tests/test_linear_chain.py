"""benchmarks/linear_chain.py off the GPU: the chained large-N operators compute x @ W^T, and
the check that guards every timed variant catches a wrong host row or a NaN."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import linear_chain  # noqa: E402

from dak.kernels.config import KernelConfig, finalize  # noqa: E402
from linear_oracle import DEV  # noqa: E402  (the split modules' device: the GPU's, or the CPU under the interpreter)


def test_chain_check_passes_the_chain_and_catches_a_wrong_row():
    torch.manual_seed(11)
    m, k, n, m_h = 96, 64, 130, 48
    w = (torch.randn(m, k) / k ** 0.5).to(torch.bfloat16)
    x = torch.randn(n, k).to(torch.bfloat16)
    mods = linear_chain.chain_modules(w, m_h, 3, row_tile=16)
    cfg = finalize(KernelConfig(block_m=16, block_n=64, block_k=32, hbm_programs=4, ce_share=1.0, ce_chunks=2,
                                hbm_cublas=True, ce_taper=0.5), m_h, m - m_h, 4)
    step = linear_chain.chain_step(mods, x.to(DEV), cfg)
    ref = (x.float() @ w.float().t()).to(DEV)
    assert linear_chain.chain_error(step, ref) < 2e-2
    mods[1].w_host[5, 7] += 4.0  # one host weight of the middle operator
    assert linear_chain.chain_error(step, ref) > 0.1
    mods[2].w_host[0, 3] = float("nan")
    assert linear_chain.chain_error(step, ref) == float("inf")
    for mod in mods:
        mod._host.free()


def test_decode_chain_variants_compute_x_w_t_and_the_check_catches_a_wrong_row():
    """benchmarks/linear_decode_chain.py's variants at decode sizes (in place: nothing chained;
    copy engine with one or two chunks, HBM rows by the split kernel or cuBLAS) each give x @ W^T
    through chain_step, one after another on the same modules."""
    import linear_decode_chain as ldc
    from dataclasses import replace
    from dak.kernels.config import heuristic_config
    torch.manual_seed(12)
    m, k, m_h = 112, 80, 32
    w = (torch.randn(m, k) / k ** 0.5).to(torch.bfloat16)
    mods = linear_chain.chain_modules(w, m_h, 3, row_tile=16)
    ref_w = w.float().t().to(DEV)
    for n in (1, 3):
        x = torch.randn(n, k).to(torch.bfloat16).to(DEV)
        heur = heuristic_config(n, m_h, m - m_h, k, 4, False)
        for name, kw in ldc.VARIANTS.items():
            cfg = finalize(replace(heur, **kw), m_h, m - m_h, 4)
            step = linear_chain.chain_step(mods, x, cfg)
            assert all(mod._ahead is not None for mod in mods) == (kw["ce_share"] > 0), name
            assert linear_chain.chain_error(step, x.float() @ ref_w) < 2e-2, (name, n)
    mods[0].w_host[3, 1] += 4.0
    assert linear_chain.chain_error(step, x.float() @ ref_w) > 0.1
    for mod in mods:
        mod._host.free()
