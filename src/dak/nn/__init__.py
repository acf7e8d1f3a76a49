"""nn modules built on dak's split kernels."""

from dak.nn.split_linear import SplitLinear

__all__ = ["SplitLinear"]
