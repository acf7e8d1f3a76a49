"""`dak calibrate`: measure the machine and write a hardware profile with measured curves.

`plan` (what to measure) and `report` are pure Python; `device`, `linear`, `attention` and
`run` need a CUDA GPU and import torch only when called.
"""

from .plan import CalibrationPlan, ShapeJob, describe, make_plan

__all__ = ["CalibrationPlan", "ShapeJob", "describe", "make_plan"]
