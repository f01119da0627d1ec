"""The tables every result shares."""

from __future__ import annotations

from typing import Any, Dict

import pandas as pd


def summary_table(summary: Dict[str, Any]) -> pd.DataFrame:
    """One row per strategy and venue of a ``summary.json``: PA with its
    bootstrap CI, filled-share PA, PA-std, WR, GLR, AFI (the mean share of
    the order's shares left unfilled at the horizon, as the CLI and the
    report name it) and fill rate (1 − AFI)."""
    rows = []
    for s in summary.get("summaries", []):
        rows.append(
            {
                "strategy": s["strategy"],
                "env": s["env"],
                "orders": s["orders"],
                "pa": s["pa"]["mean"],
                "pa_lo": s["pa"]["lo"],
                "pa_hi": s["pa"]["hi"],
                "pa_filled": s.get("pa_filled"),
                "pa_std": s["pa_std"],
                "wr": s["wr"],
                "glr": s["glr"],
                "afi": s.get("afi"),
                "fill_rate": s.get("fill_rate"),
            }
        )
    return pd.DataFrame(rows)
