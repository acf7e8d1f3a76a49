"""Baselines that every dak benchmark compares against in the same run."""

from dak.baselines.linear import BASELINES, PrefetchLinear, TorchLinear, UVALinear, uva_view

__all__ = ["BASELINES", "PrefetchLinear", "TorchLinear", "UVALinear", "uva_view"]
