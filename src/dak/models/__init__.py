"""Model descriptions for planning: built-in configs, ModelSpec, workloads and operators."""

from .configs import BUILTIN_CONFIGS, builtin_config, builtin_names
from .spec import ModelSpec, load_config, load_spec

__all__ = ["BUILTIN_CONFIGS", "builtin_config", "builtin_names", "ModelSpec", "load_config", "load_spec"]
from .ops import DTYPE_BYTES, MinimumHbmSet, Operator, Workload, list_operators, minimum_hbm_set  # noqa: E402

__all__ += ["DTYPE_BYTES", "MinimumHbmSet", "Operator", "Workload", "list_operators", "minimum_hbm_set"]
