"""Runtime: build a planned model, its split KV cache, and generate with CUDA graphs."""

from dak.runtime.engine import Engine, GenerateResult, Sampling
from dak.runtime.offload import offload

__all__ = ["Engine", "GenerateResult", "Sampling", "offload"]
