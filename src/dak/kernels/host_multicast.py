"""Build, load and launch the CUDA cluster-multicast kernel for host rows (cuda/host_multicast.cu).

Triton 3.6 cannot launch thread-block clusters or multicast TMA on Hopper, so this kernel is
CUDA C++ (inline PTX), compiled with nvcc for sm_90a at first use per variant (block_m,
block_n, cluster, stages, dtype) and cached as a cubin in $DAK_CACHE_DIR/cuda (default
~/.cache/dak/cuda), keyed by the source, the flags and nvcc's version. It is loaded with the
driver API (cuda-bindings) into the context torch uses and launched with cuLaunchKernelEx and a
cluster-dimension attribute, on torch's current stream (so it captures into CUDA graphs).
TMA descriptors are encoded by cuTensorMapEncodeTiled (libcuda through ctypes) directly on the
pinned host pointer: cudaHostAlloc'd memory is mapped, and under UVA its device address is its
host address.

Importing this module needs neither a GPU, nor nvcc, nor cuda-bindings.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parent / "cuda" / "host_multicast.cu"
KERNEL_NAME = b"dak_host_multicast"
THREADS = 256
ROW_BYTES = 128  # BK = 64 two-byte elements: one 128-byte swizzle line per tile row
SMEM_LIMIT = 227 * 1024
_DTYPE_CODE = {torch.float16: 6, torch.bfloat16: 9}  # CU_TENSOR_MAP_DATA_TYPE_{FLOAT16,BFLOAT16}
_SWIZZLE_128B, _L2_PROMOTE_NONE, _L2_PROMOTE_128B = 3, 0, 2


def nvcc_path() -> str | None:
    """$DAK_NVCC, nvcc on PATH, $CUDA_HOME/bin/nvcc or /usr/local/cuda/bin/nvcc; None if absent."""
    cands = [os.environ.get("DAK_NVCC"), shutil.which("nvcc"),
             os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
             "/usr/local/cuda/bin/nvcc"]
    return next((c for c in cands if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def stages_for(block_m: int, block_n: int) -> int:
    """Pipeline depth: 4 stages when they fit in shared memory, else as many as fit (>= 2)."""
    per = (block_m + block_n) * ROW_BYTES
    return max(2, min(4, (SMEM_LIMIT - 2048) // per))


def smem_bytes(block_m: int, block_n: int) -> int:
    return stages_for(block_m, block_n) * (block_m + block_n) * ROW_BYTES + 1024  # + alignment slack


def nvcc_flags(block_m: int, block_n: int, cluster: int, dtype: torch.dtype, arch: str = "sm_90a") -> list[str]:
    return ["-cubin", f"-arch={arch}", "-O3", "-std=c++17", f"-DDAK_BM={block_m}", f"-DDAK_BN={block_n}",
            f"-DDAK_CL={cluster}", f"-DDAK_STAGES={stages_for(block_m, block_n)}",
            f"-DDAK_FP16={int(dtype == torch.float16)}"]


@lru_cache(maxsize=None)
def _nvcc_version(nvcc: str | None) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout if nvcc else ""


def cache_dir() -> Path:
    root = os.environ.get("DAK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dak")
    return Path(root) / "cuda"


def compile_cubin(block_m: int, block_n: int, cluster: int, dtype: torch.dtype, arch: str = "sm_90a",
                  nvcc: str | None = None) -> bytes:
    """The cubin of one variant: from the cache, else compiled now with nvcc (a few seconds)."""
    nvcc = nvcc or nvcc_path()
    flags = nvcc_flags(block_m, block_n, cluster, dtype, arch)
    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + " ".join(flags).encode() + _nvcc_version(nvcc).encode()).hexdigest()[:24]
    path = cache_dir() / f"host_multicast-{key}.cubin"
    if path.is_file():
        return path.read_bytes()
    if nvcc is None:
        raise RuntimeError("the cuda_multicast host kernel needs nvcc (CUDA 12.3+) to compile at first use; "
                           "put nvcc on PATH or set DAK_NVCC, or use host_kernel='triton_once'")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    res = subprocess.run([nvcc, *flags, str(SOURCE), "-o", str(tmp)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nvcc failed on {SOURCE.name} with {' '.join(flags)}:\n{res.stderr[-4000:]}")
    os.replace(tmp, path)
    return path.read_bytes()


def _check(result):
    """Unpack a cuda-bindings (err, *values) tuple; raise with the driver's message on error."""
    from cuda.bindings import driver
    err, rest = result[0], result[1:]
    if err != driver.CUresult.CUDA_SUCCESS:
        _, msg = driver.cuGetErrorString(err)
        raise RuntimeError(f"CUDA driver error {int(err)}: {msg.decode() if msg else err}")
    return rest[0] if len(rest) == 1 else rest


_FUNCS: dict = {}


def _function(device: torch.device, block_m: int, block_n: int, cluster: int, dtype: torch.dtype):
    """The loaded kernel for one variant on `device` (compiled and loaded on first use)."""
    key = (device.index, block_m, block_n, cluster, dtype)
    if key not in _FUNCS:
        from cuda.bindings import driver
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("the cuda_multicast kernel must be loaded before CUDA graph capture; "
                               "run the launch (or SplitLinear.prepare) once outside capture first")
        torch.cuda.init()
        with torch.cuda.device(device):
            torch.cuda.current_stream(device).synchronize()  # makes torch's primary context current
            _check(driver.cuInit(0))
            if int(_check(driver.cuCtxGetCurrent())) == 0:
                ctx = _check(driver.cuDevicePrimaryCtxRetain(_check(driver.cuDeviceGet(device.index))))
                _check(driver.cuCtxSetCurrent(ctx))
            module = _check(driver.cuModuleLoadData(compile_cubin(block_m, block_n, cluster, dtype)))
            func = _check(driver.cuModuleGetFunction(module, KERNEL_NAME))
            _check(driver.cuFuncSetAttribute(
                func, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem_bytes(block_m, block_n)))
        _FUNCS[key] = (module, func)
    return _FUNCS[key][1]


_LIBCUDA = None


def tensor_map(t: torch.Tensor, box_rows: int, l2_promote: bool) -> ctypes.Array:
    """A 2-D TMA descriptor (128 opaque bytes) of a (rows, K) tensor with unit column stride and a
    16-byte aligned row stride, boxes of (box_rows, 64) elements, 128B swizzle, zero fill."""
    global _LIBCUDA
    if _LIBCUDA is None:
        _LIBCUDA = ctypes.CDLL("libcuda.so.1")
    desc = (ctypes.c_uint64 * 16)()
    dims = (ctypes.c_uint64 * 2)(t.shape[1], t.shape[0])
    strides = (ctypes.c_uint64 * 1)(t.stride(0) * t.element_size())
    box = (ctypes.c_uint32 * 2)(ROW_BYTES // t.element_size(), box_rows)
    ones = (ctypes.c_uint32 * 2)(1, 1)
    res = _LIBCUDA.cuTensorMapEncodeTiled(
        ctypes.byref(desc), _DTYPE_CODE[t.dtype], 2, ctypes.c_void_p(t.data_ptr()), dims, strides, box, ones,
        0, _SWIZZLE_128B, _L2_PROMOTE_128B if l2_promote else _L2_PROMOTE_NONE, 0)
    if res != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed (CUresult {res}) for a {tuple(t.shape)} "
                           f"tensor with strides {t.stride()} at {t.data_ptr():#x}")
    return desc


def launch_host_multicast(x: torch.Tensor, w_host: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                          *, block_m: int, block_n: int, cluster: int, programs: int) -> None:
    """out[:, :M_H] = x @ w_host^T (+ bias[:M_H]) on the current stream.

    x (N, K) contiguous in HBM with K * 2 bytes a multiple of 16; w_host (M_H, K) pinned, rows 16-byte
    aligned; out (N, >= M_H) with unit column stride; all bf16 or all fp16. `programs` caps the
    CTAs (rounded down to whole clusters, at least one cluster).
    """
    from cuda.bindings import driver
    n, k = x.shape
    m_h = w_host.shape[0]
    func = _function(x.device, block_m, block_n, cluster, x.dtype)
    groups = -(-n // (cluster * block_n))
    items = -(-m_h // block_m) * groups
    clusters = max(1, min(items, programs // cluster))
    keep = [tensor_map(w_host, block_m // cluster, False), tensor_map(x, block_n, True),
            ctypes.c_uint64(0 if bias is None else bias.data_ptr()), ctypes.c_uint64(out.data_ptr()),
            ctypes.c_int(n), ctypes.c_int(k), ctypes.c_int(m_h), ctypes.c_longlong(out.stride(0)),
            ctypes.c_int(groups)]
    params = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(a) for a in keep])
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = clusters * cluster, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = THREADS, 1, 1
    cfg.sharedMemBytes = smem_bytes(block_m, block_n)
    cfg.hStream = driver.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    _check(driver.cuLaunchKernelEx(cfg, func, ctypes.addressof(params), 0))
