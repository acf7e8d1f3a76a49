"""Pinned host storage for offloaded weight rows.

`PinnedBuffer` allocates an exact-size CPU tensor and page-locks it with cudaHostRegister, so
that GPU threads (plain loads or TMA) can read it in place over the host link. PyTorch's own
`pin_memory()` goes through a caching allocator that rounds every block up to a power of two
(a 2.1 GiB weight would pin 4 GiB); this module pins exactly the bytes asked for. The memory is
unregistered and freed when the buffer object is garbage collected -- except during CUDA graph
capture: cudaFreeHost and cudaHostUnregister synchronize the device, which would invalidate the
capture, so a release that arrives then (a buffer's last reference dropped, or a garbage
collection inside capture) waits for `release_deferred()`, which the next allocation, `free()`
and `pinned_bytes()` call.

`check_host_tensor` validates a user-supplied host tensor: CPU, pinned, contiguous rows and
16-byte aligned base and row stride (what TMA requires).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref

import torch

from dak.runtime_env import EnvironmentProblem, interpreting

TMA_ALIGN = 16
# 'alloc': cudaHostAlloc through cuda-bindings (falls back to 'register' without it);
# 'alloc-wc': the same, write-combined (the CPU writes it fast and reads it very slowly; copies
# and GPU reads skip the CPU caches' snoop: an experiment); 'register': cudaHostRegister of an
# ordinary CPU allocation; 'thp': cudaHostRegister of 2 MiB-aligned anonymous memory advised
# MADV_HUGEPAGE (physically contiguous 2 MiB runs where the kernel has them: an experiment).
PIN_METHODS = ("alloc", "alloc-wc", "register", "thp")


PIN_METHOD: str | None = None  # overrides $DAK_PIN_METHOD when set (benchmarks, tests)


def pin_method() -> str:
    """The pinning method: PIN_METHOD, else $DAK_PIN_METHOD, read when memory is pinned (a bad value
    must not break `import dak` or `dak env`, which reports it)."""
    method = PIN_METHOD or os.environ.get("DAK_PIN_METHOD") or "alloc"
    if method not in PIN_METHODS:
        raise ValueError(f"DAK_PIN_METHOD must be one of {', '.join(PIN_METHODS)}, got {method!r}: "
                         f"unset it or pick one (`dak env` lists them)")
    return method


_CUDA_HOST_REGISTER_PORTABLE = 1
_LIVE = [0]  # pinned bytes currently held (see pinned_bytes)
_DEFERRED: list = []  # (release, args) that arrived during CUDA graph capture
_CUDA_HOST_REGISTER_MAPPED = 2
_CUDA_HOST_ALLOC_WRITE_COMBINED = 4


def _cudart():
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            "pinned host memory needs a CUDA GPU (torch.cuda.is_available() is False); "
            "set TRITON_INTERPRET=1 to test on the CPU with unpinned buffers"
        )
    return torch.cuda.cudart()


def _host_alloc(nbytes: int, write_combined: bool = False):
    """Exactly `nbytes` of cudaHostAlloc'd memory (portable, mapped) as a uint8 CPU tensor.

    The memory is released by cudaFreeHost when the last tensor viewing it is collected
    (torch.frombuffer keeps the owning object alive). None when cuda-bindings is missing.
    """
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return None
    flags = _CUDA_HOST_REGISTER_PORTABLE | _CUDA_HOST_REGISTER_MAPPED
    err, ptr = rt.cudaHostAlloc(nbytes, flags | (_CUDA_HOST_ALLOC_WRITE_COMBINED if write_combined else 0))
    if int(err) != 0:
        raise RuntimeError(f"cudaHostAlloc of {nbytes} bytes failed with CUDA error {int(err)}; "
                           "the host may be out of lockable memory")

    _LIVE[0] += nbytes

    class _PinnedBytes(ctypes.c_uint8 * nbytes):
        def __del__(self, _ptr=ptr, _rt=rt, _n=nbytes):
            try:
                _release(_free_host, _rt, _ptr, _n)
            except Exception:  # interpreter shutdown
                pass

    return torch.frombuffer(_PinnedBytes.from_address(ptr), dtype=torch.uint8)


_HUGE = 2 << 20


def _thp_bytes(nbytes: int) -> torch.Tensor:
    """`nbytes` of 2 MiB-aligned anonymous memory advised MADV_HUGEPAGE and touched (so the kernel
    backs it with huge pages where it can), as a uint8 CPU tensor that keeps its mapping alive."""
    size = -(-nbytes // _HUGE) * _HUGE
    region = mmap.mmap(-1, size + _HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = torch.frombuffer(region, dtype=torch.uint8)  # holds `region` alive
    off = (-whole.data_ptr()) % _HUGE
    region.madvise(mmap.MADV_HUGEPAGE, off, size)
    out = whole[off:off + nbytes]
    out.zero_()
    return out


def pinned_bytes() -> int:
    """Bytes of pinned host memory that dak's buffers hold right now (for leak checks)."""
    release_deferred()
    return _LIVE[0]


def _capturing() -> bool:
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:  # noqa: BLE001 -- interpreter shutdown, or no usable driver
        return False


def _release(fn, *args) -> None:
    """Run one pinned-memory release now, or after the CUDA graph capture in progress."""
    if _capturing():
        _DEFERRED.append((fn, args))
        return
    release_deferred()
    fn(*args)


def release_deferred() -> int:
    """Run the releases that arrived during graph capture (none while one is still running);
    returns how many ran."""
    if not _DEFERRED or _capturing():
        return 0
    todo, _DEFERRED[:] = list(_DEFERRED), []
    for fn, args in todo:
        fn(*args)
    return len(todo)


def _free_host(rt, ptr: int, nbytes: int) -> None:
    _LIVE[0] -= nbytes
    try:
        rt.cudaFreeHost(ptr)
    except Exception:  # noqa: BLE001 -- interpreter shutdown
        pass


def _unregister_now(ptr: int, tensor: torch.Tensor, nbytes: int) -> None:
    # `tensor` is held until here so the memory outlives its registration.
    _LIVE[0] -= nbytes
    try:
        torch.cuda.cudart().cudaHostUnregister(ptr)
    except Exception:  # interpreter shutdown: the process is going away anyway
        pass
    del tensor


def _unregister(ptr: int, tensor: torch.Tensor, nbytes: int = 0) -> None:
    try:
        _release(_unregister_now, ptr, tensor, nbytes)
    except Exception:  # noqa: BLE001 -- interpreter shutdown
        pass


def padded_cols(cols: int, dtype: torch.dtype) -> int:
    """`cols` rounded up so one row spans a multiple of 16 bytes (TMA's stride rule)."""
    per = max(1, TMA_ALIGN // torch.empty((), dtype=dtype).element_size())
    return -(-cols // per) * per


class PinnedBuffer:
    """A page-locked CPU matrix of `shape` (rows, cols) and `dtype`, pinned at its exact size.

    Rows are padded to a 16-byte stride (at most 14 bytes each) so TMA can address them;
    `tensor` is the (rows, cols) view. Under TRITON_INTERPRET=1 without a GPU the memory is
    ordinary CPU memory (nothing to pin).
    """

    def __init__(self, shape: tuple[int, int], dtype: torch.dtype):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or any(s < 0 for s in shape):
            raise ValueError(f"PinnedBuffer takes a non-negative (rows, cols) shape, got {shape}")
        rows, cols = shape
        release_deferred()
        pcols = padded_cols(cols, dtype)
        es = torch.empty((), dtype=dtype).element_size()
        self.nbytes = rows * pcols * es
        self.pinned = False
        self.method = "pageable"
        gpu = torch.cuda.is_available()
        method = pin_method()
        wc = method == "alloc-wc"
        alloc = _host_alloc(self.nbytes, wc) if gpu and self.nbytes and method != "register" else None
        if alloc is not None:
            self._storage = alloc.view(dtype).view(rows, pcols)
            self.pinned, self.method = True, "cudaHostAlloc" + (" (write-combined)" if wc else "")
        elif gpu and self.nbytes and method == "thp":
            self._storage = _thp_bytes(self.nbytes).view(dtype).view(rows, pcols)
        else:
            self._storage = torch.empty((rows, pcols), dtype=dtype)
        self.tensor = self._storage[:, :cols]
        if self.pinned or not gpu or self.nbytes == 0:
            return
        ptr = self._storage.data_ptr()
        if ptr % TMA_ALIGN:
            raise RuntimeError(f"CPU allocator returned a misaligned buffer (address % 16 = {ptr % 16})")
        flags = _CUDA_HOST_REGISTER_PORTABLE | _CUDA_HOST_REGISTER_MAPPED
        err = _cudart().cudaHostRegister(ptr, self.nbytes, flags)
        if int(err) != 0:
            raise RuntimeError(
                f"cudaHostRegister of {self.nbytes} bytes failed with CUDA error {int(err)}; "
                "the host may be out of lockable memory (check `ulimit -l` and free RAM)"
            )
        self.pinned, self.method = True, "cudaHostRegister" + (" (THP)" if method == "thp" else "")
        _LIVE[0] += self.nbytes
        self._finalizer = weakref.finalize(self, _unregister, ptr, self._storage, self.nbytes)

    @classmethod
    def from_tensor(cls, src: torch.Tensor) -> "PinnedBuffer":
        """A pinned copy of `src` (any device); rows stay contiguous."""
        buf = cls(tuple(src.shape), src.dtype)
        if buf.nbytes:
            buf.tensor.copy_(src.detach())
        return buf

    def free(self) -> None:
        """Release now instead of at garbage collection (idempotent). Views taken earlier must
        not be used afterwards with cudaHostRegister'd memory; cudaHostAlloc'd memory lives
        until its last view is gone."""
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()
        self.pinned = False
        self._storage = self.tensor = None


def check_host_tensor(t: torch.Tensor, name: str = "host weight") -> None:
    """Raise ValueError unless `t` can be read in place by GPU threads and TMA."""
    if t.device.type != "cpu":
        raise ValueError(f"{name} must live in host memory, got a tensor on {t.device}")
    if t.numel() == 0:
        return
    if t.dim() != 2 or t.stride(1) != 1:
        raise ValueError(f"{name} must be a 2-D tensor with contiguous rows, got strides {t.stride()}")
    if not interpreting() and not t.is_pinned():
        raise ValueError(
            f"{name} is pageable host memory; the GPU can only read pinned memory in place. "
            "Use dak.host.PinnedBuffer.from_tensor(t).tensor (exact-size pinning)"
        )
    row_bytes = t.stride(0) * t.element_size()
    if t.data_ptr() % TMA_ALIGN or row_bytes % TMA_ALIGN:
        raise ValueError(
            f"{name} must have a 16-byte aligned base address and row stride for TMA "
            f"(address % 16 = {t.data_ptr() % 16}, row stride = {row_bytes} bytes); "
            "copy it into a fresh dak.host.PinnedBuffer"
        )


def device_matrix(rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised (rows, cols) HBM matrix whose row stride is a multiple of 16 bytes."""
    return torch.empty((rows, padded_cols(cols, dtype)), dtype=dtype, device=device)[:, :cols]
