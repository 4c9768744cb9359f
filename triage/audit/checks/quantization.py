"""Quantization (量化): nothing here is visible in metrics.

Whether quantisation was the right answer, is compatible, was calibrated on production
inputs, kept quality on the golden set and can be rolled back lives in evaluation
reports and release history, not in Prometheus; every item says what would settle it.
"""

from __future__ import annotations

from triage.audit.checks.base import Registry

CHECKS = Registry("quantization")
CHECKS.not_visible(
    "quantization.bottleneck",
    "quantization.compatibility",
    "quantization.calibration_data",
    "quantization.golden_set",
    "quantization.long_tools_structured",
    "quantization.rollback",
)
