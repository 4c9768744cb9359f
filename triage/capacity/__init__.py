"""`triage capacity`: the capacity method as a calculator.

The room's public face is what the command line calls; everything else is the room's own.
"""

from triage.capacity.calculator import plan
from triage.capacity.inputs import load_inputs
from triage.capacity.measure import measure_rate_at_slo
from triage.capacity.render import render_presets, render_text

__all__ = ["load_inputs", "measure_rate_at_slo", "plan", "render_presets", "render_text"]
