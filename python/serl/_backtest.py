"""serl's backtester from Python: the code ``serl backtest`` runs, with
Python callables among the strategies."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Union

import pandas as pd

from . import _native
from ._env import Config, PathLike, _config, _path
from ._tables import summary_table

#: A policy: ``policy(obs, decision) -> action``. ``obs`` is the float32
#: observation the environments give (designed features included), and
#: ``decision`` a dict with ``step``, ``steps``, ``remaining`` (share of the
#: order left), ``order_id``, ``symbol`` and ``date``; the action is one of
#: the environments' action space (a share, an index, or a share index and
#: a placement index).
Policy = Callable[[Any, Dict[str, Any]], Any]


@dataclass
class BacktestResult:
    """What a backtest returns.

    Attributes:
        orders: one row per order, strategy and venue (``orders.csv``):
            ``pa_bps`` is the whole-order PA (unfilled shares charged at
            the horizon), ``pa_filled_bps`` the filled shares' alone.
        summary: ``summary.json``: per strategy and venue the metrics with
            bootstrap CIs, paired differences against TWAP, day-level tests
            (Wilcoxon, Benjamini–Hochberg), PA by symbol.
        report: the report's folder when ``out`` was given.
    """

    orders: pd.DataFrame
    summary: Dict[str, Any]
    report: Optional[Path] = None
    table: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        self.table = summary_table(self.summary)


def backtest(
    data: Optional[PathLike] = None,
    config: Config = None,
    strategies: Iterable[str] = ("twap",),
    policies: Optional[Mapping[str, Union[Policy, PathLike]]] = None,
    split: str = "validation",
    venue: str = "static",
    state: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    lobster: Optional[PathLike] = None,
) -> BacktestResult:
    """Plays strategies over the parent orders of ``split``, as ``serl
    backtest`` does, and scores them.

    Args:
        data: minute bars (``--data``).
        config: a ``serl backtest`` or ``serl train`` config file, or a dict
            of its tables. A training config also sets the action space of
            Python policies.
        strategies: names as ``serl backtest --strategy`` takes them
            (``twap``, ``vwap``, ``pov:0.05``, ``ac``, ``twap-passive``,
            ``policy:RUN_DIR``).
        policies: name → a callable :data:`Policy`, or a ``serl train`` run
            directory.
        split: ``train``, ``validation``, ``test`` or ``all``.
        venue: ``static``, ``dynamic``, ``both`` (or with ``lobster``:
            ``lobster``, ``all``).
        state: a state module file whose features Python policies see.
        out: a folder for the report (``orders.csv``, ``summary.json``,
            ``report.md``, ``report.html``).
        lobster: LOBSTER days instead of bars (``--lobster``).
    """
    path, as_json = _config(config)
    named = []
    for name, p in (policies or {}).items():
        named.append((str(name), os.fspath(p) if isinstance(p, (str, os.PathLike)) else p))
    orders, summary = _native.backtest(
        (_path(data), _path(lobster)),
        (path, as_json),
        (split, venue),
        [str(s) for s in strategies],
        named,
        (_path(state), _path(out)),
    )
    return BacktestResult(
        orders=pd.DataFrame.from_records(json.loads(orders)),
        summary=json.loads(summary),
        report=None if out is None else Path(out),
    )
