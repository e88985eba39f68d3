"""How numbers are shown to a person: returns to 3 significant figures, and JSON without NaN.

A return can be anything an environment's rewards sum to: 9.333333, -1234.5,
1e300 (a 302-digit number in fixed notation) or NaN. Every place that prints
one (train's last line, the progress bar, evaluate) goes through
`significant`, so they agree and none prints more digits than mean anything.
summary.json is read by other programs: `finite_json` writes null where a
number is NaN or infinite, since strict JSON parsers reject `NaN`.
"""
from __future__ import annotations

import json
import math
from typing import Any

SIGNIFICANT_DIGITS = 3


def significant(x: float | None, digits: int = SIGNIFICANT_DIGITS) -> str:
    """x rounded to `digits` significant figures: fixed notation from 0.001 to under a million, else exponent
    notation ('9.33', '-1230', '475', '1.00e+300', 'nan'); 'n/a' for None."""
    if x is None:
        return "n/a"
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    exponent = math.floor(math.log10(abs(x)))
    if -3 <= exponent < 6:
        decimals = max(0, digits - 1 - exponent)
        return f"{round(x, digits - 1 - exponent):.{decimals}f}"
    return f"{x:.{digits - 1}e}"


def _finite(value: Any) -> Any:
    """value with every non-finite float (in nested dicts and lists) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def finite_json(value: Any) -> str:
    """value as strict JSON (indented): NaN and infinities become null, which every JSON parser reads."""
    return json.dumps(_finite(value), indent=2, allow_nan=False)
