"""dak: split-operator LLM inference across HBM and pinned host memory.

Importing dak never touches CUDA or Triton; GPU pieces are imported lazily.
"""

__version__ = "0.1.0"
