import torch, triton
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
from dak.kernels import fused_ops
for dtype in (torch.float16, torch.bfloat16):
    g = torch.Generator().manual_seed(1)
    b, hq, hk, l, d = 2, 4, 2, 3, 64
    q = torch.randn(b, l, hq, d, generator=g).to("cuda", dtype).transpose(1, 2)
    k = torch.randn(b, l, hk, d, generator=g).to("cuda", dtype).transpose(1, 2)
    ang = torch.randn(b, l, d, generator=g) * 3
    cos, sin = ang.cos().to("cuda", dtype), ang.sin().to("cuda", dtype)
    rq, rk = apply_rotary_pos_emb(q, k, cos, sin)
    gq, gk = fused_ops.rotary(q, k, cos, sin)
    c, s = cos.unsqueeze(1).float(), sin.unsqueeze(1).float(); qf = q.float()
    rh = torch.cat((-qf[..., d//2:], qf[..., :d//2]), -1)
    man = ((qf * c).to(dtype).float() + (rh * s).to(dtype).float()).to(dtype)
    fma = (qf * c + (rh * s).to(dtype).float()).to(dtype)
    print(dtype, "hf==mine", torch.equal(rq.contiguous(), gq), "frac", (rq.contiguous() == gq).float().mean().item(),
          "hf==manual", torch.equal(rq, man), "mine==manual", torch.equal(gq, man.contiguous()), "mine==fma", (gq == fma.contiguous()).float().mean().item(),
          "maxdiff", (rq.float() - gq.float()).abs().max().item())
    out = torch.empty((b, hq, l, d), dtype=dtype, device="cuda")
    fused_ops._rotary_kernel[(b * hq * l,)](q, cos, sin, out, hq, l, q.stride(0), q.stride(1), q.stride(2),
                                          cos.stride(0), cos.stride(1), HALF=d // 2, num_warps=1, enable_fp_fusion=False)
    print("  nofusion: hf==mine", torch.equal(rq.contiguous(), out), (rq.contiguous() == out).float().mean().item())
