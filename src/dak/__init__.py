"""dak: split-operator LLM inference across HBM and pinned host memory.

Importing dak never touches CUDA or Triton; GPU pieces are imported lazily.
"""

__version__ = "0.1.0"


def offload(*args, **kwargs):
    """Plan and offload an HF causal LM for one GPU; see dak.runtime.offload.offload."""
    from dak.runtime.offload import offload as _offload
    return _offload(*args, **kwargs)
