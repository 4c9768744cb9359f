"""What the DCGM exporter's numbers and labels mean beyond their face value.

**Blank values.** When DCGM cannot read a field it stores a *blank* in its place, a
value at the top of the field type's range, and older dcgm-exporter releases export it
as if it were a reading (GPU temperature 9223372036854775794; newer ones skip the series).
The values are defined in DCGM's `dcgm_structs.h` (`DCGM_BLANK_VALUES`):

- 64-bit integers: `DCGM_INT64_BLANK` 0x7ffffffffffffff0 = 9223372036854775792, then
  `DCGM_INT64_NOT_FOUND` (+1), `DCGM_INT64_NOT_SUPPORTED` (+2, the one most often seen:
  9223372036854775794) and `DCGM_INT64_NOT_PERMISSIONED` (+3);
- 32-bit integers: `DCGM_INT32_BLANK` 0x7ffffff0 = 2147483632 and +1 .. +3 likewise;
- doubles: `DCGM_FP64_BLANK` 140737488355328.0 (2**47, chosen so that +1.0 .. +3.0 stay
  exact), `DCGM_FP64_NOT_FOUND`, `_NOT_SUPPORTED`, `_NOT_PERMISSIONED`.

DCGM's own test is `DCGM_INT64_IS_BLANK(v)`: `v >= DCGM_INT64_BLANK` (and likewise for
INT32 and FP64), so anything at or above the base is blank, not only the four named.
A blank is a missing reading: it must never become a temperature, a memory ratio or an
XID code, nor reach a `max` or `sum` across GPUs. The catalog filters every DCGM
selector (`signals/catalog.yaml`):

- a gauge whose real readings are small (°C, W, %, MiB, an XID code, a clock-event
  bitmask) keeps values below `GAUGE_CEILING` (`DCGM_INT32_BLANK`), which rules out all
  three families, the FP64 and INT64 ones lying above it;
- a counter, which can pass 2**31 honestly (throttled time in ns), is read only over
  windows whose samples all lie below `COUNTER_CEILING` (`DCGM_FP64_BLANK`), which is
  still below every INT64 blank.

The live path drops what still looks blank in a DCGM signal's answer (`is_blank`), as a
second guard against a catalog source a user wrote without the filter.

**Host label.** Released dcgm-exporter names the node `Hostname`; its HEAD renamed the
label to `hostname` (NVIDIA/dcgm-exporter#655). Both are read wherever the node matters.

**XID.** `DCGM_FI_DEV_XID_ERRORS` is the *last* XID code a GPU reported, held until the
GPU or the exporter restarts, not a count: a code that was there before the incident is
old news, one that appears or changes is an event. It is never rated, increased or summed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import numpy.typing as npt

DCGM_INT32_BLANK: Final = 0x7FFFFFF0
"""2147483632; NOT_FOUND, NOT_SUPPORTED and NOT_PERMISSIONED are +1, +2, +3."""
DCGM_INT64_BLANK: Final = 0x7FFFFFFFFFFFFFF0
"""9223372036854775792; NOT_FOUND, NOT_SUPPORTED and NOT_PERMISSIONED are +1, +2, +3."""
DCGM_FP64_BLANK: Final = 140737488355328.0
"""2**47; NOT_FOUND, NOT_SUPPORTED and NOT_PERMISSIONED are +1.0, +2.0, +3.0."""

GAUGE_CEILING: Final = DCGM_INT32_BLANK
"""A DCGM gauge reading at or above this is blank (the lowest blank of any type)."""
COUNTER_CEILING: Final = DCGM_FP64_BLANK
"""A DCGM counter reading at or above this is blank (below every INT64 blank too)."""
SIGNAL_CEILING: Final = DCGM_INT32_BLANK / 100
"""A signal computed from DCGM at or above this is a blank that came through: the smallest
blank after the catalog's one scaling (percent to ratio). No real GPU signal comes near it
(temperatures, watts, ratios, XID codes, ECC errors in a window, 0/1 flags)."""

HOST_LABELS: Final = ("Hostname", "hostname")
"""The node's name on DCGM series: released exporters write `Hostname`, HEAD `hostname`."""


def is_blank(values: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Which values of a DCGM signal are blanks that came through (NaN is not: it is no sample)."""
    with np.errstate(invalid="ignore"):
        return np.asarray(values >= SIGNAL_CEILING, dtype=np.bool_)


def host_label(labels: Mapping[str, str]) -> str:
    """The label naming the node on a DCGM series (`Hostname` or `hostname`), "" when neither has a value."""
    return next((name for name in HOST_LABELS if labels.get(name)), "")


def host_of(labels: Mapping[str, str]) -> str:
    """The node a DCGM series is about, whichever of the two labels names it; "" when neither."""
    name = host_label(labels)
    return labels[name] if name else ""


__all__ = [
    "COUNTER_CEILING",
    "DCGM_FP64_BLANK",
    "DCGM_INT32_BLANK",
    "DCGM_INT64_BLANK",
    "GAUGE_CEILING",
    "HOST_LABELS",
    "SIGNAL_CEILING",
    "host_label",
    "host_of",
    "is_blank",
]
