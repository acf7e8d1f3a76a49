// Host rows of a split linear with TMA multicast inside a thread-block cluster (sm_90a).
//
// Y[:, r] = X @ W[r, :]^T + b[r] for the host rows r in [0, M_H): W is pinned host memory read
// in place over the host link (host memory is not cached in L2, so every reader pays the link).
// A cluster of CL CTAs shares one BM-row tile of W: CTA `rank` fetches rows
// [rank*BM/CL, (rank+1)*BM/CL) of each BK-wide k-slice once and TMA-multicasts them into the
// shared memory of every CTA of the cluster. Each CTA multiplies the whole tile with its own BN
// tokens, so one fetch serves CL*BN tokens: link bytes per host byte = ceil(N / (CL*BN)).
//
// Persistent: cluster c walks work items (row tile, token group) c, c + #clusters, ...; all
// CTAs of a cluster walk the same items. Per stage: full barrier (local; expects the W tile and
// this CTA's X tile bytes), empty barrier (count CL: every CTA of the cluster has consumed the
// stage, since every CTA's multicast writes into every CTA). mma.sync m16n8k16, fp32 accumulate.
// Tiles are TMA'd with 128B swizzle: BK * 2 bytes = one 128-byte line per row.
//
// Compile-time parameters (nvcc -D): DAK_BM, DAK_BN, DAK_CL, DAK_STAGES, DAK_FP16.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef DAK_BM
#define DAK_BM 64
#endif
#ifndef DAK_BN
#define DAK_BN 128
#endif
#ifndef DAK_CL
#define DAK_CL 4
#endif
#ifndef DAK_STAGES
#define DAK_STAGES 4
#endif
#ifndef DAK_FP16
#define DAK_FP16 0
#endif

#if DAK_FP16
typedef __half elem_t;
#define DAK_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
__device__ __forceinline__ elem_t to_elem(float v) { return __float2half_rn(v); }
__device__ __forceinline__ float to_float(elem_t v) { return __half2float(v); }
#else
typedef __nv_bfloat16 elem_t;
#define DAK_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
__device__ __forceinline__ elem_t to_elem(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float to_float(elem_t v) { return __bfloat162float(v); }
#endif

constexpr int BM = DAK_BM, BN = DAK_BN, BK = 64, CL = DAK_CL, ST = DAK_STAGES;
constexpr int WARPS_M = 2, WARPS_N = 4, NTHREADS = 32 * WARPS_M * WARPS_N;
constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, MT = WTM / 16, NT = WTN / 8;
constexpr int SLICE = BM / CL;  // W rows each CTA fetches and multicasts
constexpr uint32_t ROW_BYTES = BK * 2, W_BYTES = BM * ROW_BYTES, X_BYTES = BN * ROW_BYTES;
constexpr uint32_t SLICE_BYTES = SLICE * ROW_BYTES, STAGE_BYTES = W_BYTES + X_BYTES;
static_assert(SLICE % 8 == 0, "each multicast slice must be whole 1024-byte swizzle atoms");
static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile must be whole mma tiles");
static_assert(CL >= 1 && CL <= 8 && (CL & (CL - 1)) == 0, "cluster size 1, 2, 4 or 8");

struct alignas(64) TmaDesc { unsigned long long v[16]; };  // an opaque CUtensorMap

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t special(int which) {
  uint32_t r;
  if (which == 0) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  else if (which == 1) asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  else asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void bar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Wait for phase `parity` of a local barrier; CLUSTER_SCOPE when other CTAs arrive on it.
template <bool CLUSTER_SCOPE>
__device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity) {
  if (CLUSTER_SCOPE)
    asm volatile(
        "{\n\t.reg .pred p;\n"
        "WAIT:\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n\t"
        "@p bra DONE;\n\t"
        "bra WAIT;\n"
        "DONE:\n\t}" ::"r"(bar), "r"(parity) : "memory");
  else
    asm volatile(
        "{\n\t.reg .pred p;\n"
        "WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
        "@p bra DONE;\n\t"
        "bra WAIT;\n"
        "DONE:\n\t}" ::"r"(bar), "r"(parity) : "memory");
}
// Arrive on the barrier at the same offset in CTA `cta` of this cluster.
__device__ __forceinline__ void bar_arrive_remote(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n\t.reg .b32 ra;\n\t"
      "mapa.shared::cluster.u32 ra, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n\t}" ::"r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t dst, const TmaDesc* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_load_multicast(uint32_t dst, const TmaDesc* map, uint32_t bar, int c0, int c1,
                                                   uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}
// 32 bits (two elements, columns c, c+1) of row r of a 128B-swizzled tile of 128-byte rows.
__device__ __forceinline__ uint32_t lds(const uint8_t* tile, int r, int c) {
  const int off = r * 128 + ((((c >> 3) ^ (r & 7))) << 4) + ((c & 7) << 1);
  return *reinterpret_cast<const uint32_t*>(tile + off);
}

struct Work {  // where global iteration g of this CTA points
  int tile, group, ki;
};
__device__ __forceinline__ Work work_of(int g, int k_iters, int n_groups) {
  const int item = static_cast<int>(special(1)) + (g / k_iters) * static_cast<int>(special(2));
  return {item / n_groups, item % n_groups, g % k_iters};
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
dak_host_multicast(const __grid_constant__ TmaDesc w_map,  // host W (M_H, K), box (BK, SLICE)
                   const __grid_constant__ TmaDesc x_map,  // X (N, K), box (BK, BN)
                   const elem_t* __restrict__ bias,        // (M_H,) or nullptr
                   elem_t* __restrict__ y,                 // Y[:, :M_H], row stride ldy
                   int n_tokens, int k, int m_rows, long long ldy, int n_groups) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[ST], empty_bar[ST];
  // 128B-swizzled TMA tiles want 1024-byte aligned shared addresses (same offset in every CTA)
  uint8_t* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N, grp_id = lane >> 2, tig = lane & 3;
  const int rank = static_cast<int>(special(0));
  const int k_iters = (k + BK - 1) / BK;
  const int items = ((m_rows + BM - 1) / BM) * n_groups;
  const int cid = static_cast<int>(special(1)), ncl = static_cast<int>(special(2));
  const int total = cid < items ? ((items - cid + ncl - 1) / ncl) * k_iters : 0;

  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      bar_init(smem_addr(&full_bar[s]), 1);
      bar_init(smem_addr(&empty_bar[s]), CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();

  // Producer (thread 0): iteration g's W slice (multicast to the cluster) and own X tile.
  // Slices or token blocks wholly past the tensor's end are skipped (their outputs are not stored).
  auto issue = [&](int g) {
    const Work w = work_of(g, k_iters, n_groups);
    const int s = g % ST, row0 = w.tile * BM, tok0 = (w.group * CL + rank) * BN;
    const uint32_t bar = smem_addr(&full_bar[s]);
    const uint32_t stage = smem_addr(smem + s * STAGE_BYTES);
    const int live_slices = min(CL, (m_rows - row0 + SLICE - 1) / SLICE);
    bar_expect_tx(bar, live_slices * SLICE_BYTES + (tok0 < n_tokens ? X_BYTES : 0u));
    if (rank < live_slices)
      tma_load_multicast(stage + rank * SLICE_BYTES, &w_map, bar, w.ki * BK, row0 + rank * SLICE,
                         static_cast<uint16_t>((1u << CL) - 1));
    if (tok0 < n_tokens) tma_load(stage + W_BYTES, &x_map, bar, w.ki * BK, tok0);
  };
  if (tid == 0)
    for (int g = 0; g < min(ST, total); ++g) issue(g);

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (int g = 0; g < total; ++g) {
    const int s = g % ST;
    const Work w = work_of(g, k_iters, n_groups);
    const int tok0 = (w.group * CL + rank) * BN;
    bar_wait<false>(smem_addr(&full_bar[s]), (g / ST) & 1);
    if (tok0 < n_tokens) {
      const uint8_t* wt = smem + s * STAGE_BYTES;
      const uint8_t* xt = wt + W_BYTES;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        const int c0 = kk + 2 * tig, c1 = c0 + 8;
        uint32_t a[MT][4], b[NT][2];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const int r = wm * WTM + i * 16 + grp_id;
          a[i][0] = lds(wt, r, c0);
          a[i][1] = lds(wt, r + 8, c0);
          a[i][2] = lds(wt, r, c1);
          a[i][3] = lds(wt, r + 8, c1);
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int n = wn * WTN + j * 8 + grp_id;
          b[j][0] = lds(xt, n, c0);
          b[j][1] = lds(xt, n, c1);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j)
            asm volatile(DAK_MMA "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                         : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
      }
    }
    __syncthreads();  // every warp of this CTA is done with stage s
    if (tid == 0) {
      for (int c = 0; c < CL; ++c) bar_arrive_remote(smem_addr(&empty_bar[s]), c);
      if (g + ST < total) {
        bar_wait<true>(smem_addr(&empty_bar[s]), (g / ST) & 1);  // the whole cluster is done with it
        issue(g + ST);
      }
    }
    if (w.ki == k_iters - 1) {  // epilogue of this work item: Y[tok, row] = acc + bias
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = w.tile * BM + wm * WTM + i * 16 + grp_id + 8 * h;
          const float bv = (bias != nullptr && row < m_rows) ? to_float(bias[row]) : 0.f;
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int tok = tok0 + wn * WTN + j * 8 + 2 * tig + e;
              if (row < m_rows && tok < n_tokens)
                y[static_cast<long long>(tok) * ldy + row] = to_elem(acc[i][j][2 * h + e] + bv);
              acc[i][j][2 * h + e] = 0.f;
            }
        }
    }
  }
  cluster_sync();  // no CTA exits while cluster peers may still arrive on its barriers
}
