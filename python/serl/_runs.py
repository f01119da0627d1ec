"""serl's run directories as Python objects: an evolve run's designs,
candidates and tables, a training run's metrics."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import pandas as pd

from ._env import PathLike
from ._native import SerlError
from ._tables import summary_table as _summary_table

try:  # Python 3.11+
    import tomllib as _toml
except ImportError:  # pragma: no cover - older Pythons, with tomli if present
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ImportError:
        _toml = None  # type: ignore[assignment]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SerlError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}") from None


def _read_toml(path: Path) -> Optional[Dict[str, Any]]:
    if not path.is_file() or _toml is None:
        return None
    try:
        return _toml.loads(path.read_text())
    except Exception as e:  # noqa: BLE001 - any parse error, named with the file
        raise SerlError(f"{path}: {e}") from None


@dataclass
class Run:
    """A run directory of ``serl evolve`` or ``serl train``.

    Attributes:
        path: the directory.
        kind: ``"evolve"`` or ``"train"``.
        config: its config (``evolve.toml`` or ``train.toml``) as a dict.
        candidates: an evolve run's scored candidates, one row each (key,
            iteration, score, the validation metrics, training seconds).
        designs: each candidate's design (reward, state, architecture,
            imagination, ...), by key.
        test: the final test's table (strategy × venue), once declared.
        day_tests: the test's day-level tests (Wilcoxon, BH q-values).
        metrics: a training run's ``metrics.jsonl``, one row per update.
        finals: an evolve run's final trainings (``final/*``) as runs.
        recommendation: what an evolve run recommends, first of all: the
            final training it points to (``recommended``: ``serl-best`` or
            ``ppo-default``), the design's key (``design``, None for plain
            PPO) and why (``reason``); from ``evidence.json``.
        evidence: the figures behind it (σ_d, the noise edge, the minimum
            detectable edge, PBO, the deflated Sharpe ratio, the SPA test).
    """

    path: Path
    kind: str
    config: Optional[Dict[str, Any]] = None
    candidates: pd.DataFrame = field(default_factory=pd.DataFrame)
    designs: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    test: Optional[pd.DataFrame] = None
    day_tests: Optional[pd.DataFrame] = None
    metrics: Optional[pd.DataFrame] = None
    finals: Dict[str, "Run"] = field(default_factory=dict)
    recommendation: Optional[Dict[str, Any]] = None
    evidence: Optional[Dict[str, Any]] = None

    @property
    def best(self) -> Optional[str]:
        """The key of the candidate with the best validation score."""
        if self.candidates.empty:
            return None
        return str(self.candidates.sort_values("score", ascending=False).iloc[0]["key"])

    def __repr__(self) -> str:
        parts = [f"Run({str(self.path)!r}, kind={self.kind!r}"]
        if self.recommendation is not None:
            parts.append(f"recommended={self.recommendation.get('recommended')!r}")
        if self.kind == "evolve":
            parts.append(f"candidates={len(self.candidates)}")
        if self.metrics is not None:
            parts.append(f"updates={len(self.metrics)}")
        return ", ".join(parts) + ")"


def _candidates(path: Path) -> tuple:
    rows: List[Dict[str, Any]] = []
    designs: Dict[str, Dict[str, Any]] = {}
    for f in sorted((path / "scores").glob("*.json")):
        # A finalist retrained from a fresh seed, or scored on a fold of
        # the non-test days, is no candidate.
        if (
            f.name.endswith(".secs.json")
            or f.name.startswith("rescore_")
            or re.match(r"fold\d+(s\d+)?_", f.name)
        ):
            continue
        c = _read_json(f)
        v = c.get("validation") or {}
        secs_file = f.with_name(f.stem + ".secs.json")
        secs = _read_json(secs_file) if secs_file.is_file() else {}
        designs[c["key"]] = c.get("design") or {}
        rows.append(
            {
                "key": c["key"],
                "iteration": c.get("iteration"),
                "score": c.get("score"),
                "pa": v.get("pa"),
                "pa_std": v.get("pa_std"),
                "wr": v.get("wr"),
                "glr": v.get("glr"),
                "afi": v.get("afi"),
                "pa_dynamic": v.get("pa_dynamic"),
                "success_rate": c.get("success_rate"),
                "train_secs": secs.get("train", c.get("train_secs")),
            }
        )
    return pd.DataFrame(rows), designs


def _metrics(path: Path) -> Optional[pd.DataFrame]:
    f = path / "metrics.jsonl"
    if not f.is_file():
        return None
    rows = []
    for k, line in enumerate(f.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SerlError(f"{f}: line {k}: {e.msg}") from None
    return pd.DataFrame(rows)


def load_run(path: PathLike) -> Run:
    """Reads a ``serl evolve`` or ``serl train`` run directory."""
    p = Path(path)
    if not p.is_dir():
        raise SerlError(f"run directory {p} does not exist")
    if (p / "evolve.toml").is_file() or (p / "scores").is_dir():
        candidates, designs = _candidates(p)
        run = Run(p, "evolve", _read_toml(p / "evolve.toml"), candidates, designs)
        if (p / "evidence.json").is_file():
            run.evidence = _read_json(p / "evidence.json")
            run.recommendation = run.evidence.get("recommendation")
        if (p / "test" / "summary.json").is_file():
            summary = _read_json(p / "test" / "summary.json")
            run.test = _summary_table(summary)
            run.day_tests = pd.DataFrame(summary.get("day_tests", []))
        for d in sorted((p / "final").glob("*")) if (p / "final").is_dir() else []:
            # final/recommended is a link to one of the others.
            if not d.is_symlink() and (d / "metrics.jsonl").is_file():
                run.finals[d.name] = load_run(d)
        return run
    if (p / "metrics.jsonl").is_file() or (p / "train.toml").is_file():
        config = _read_toml(p / "train.toml")
        if config is None and (p / "config.json").is_file():
            config = _read_json(p / "config.json")
        return Run(p, "train", config, metrics=_metrics(p))
    raise SerlError(
        f"{p} is not a serl run directory (no evolve.toml, scores/, metrics.jsonl or train.toml)"
    )


def _options(**kw: Any) -> str:
    """The run's options as the native side reads them (paths as text,
    unset ones left out)."""
    return json.dumps(
        {k: (str(v) if isinstance(v, Path) else v) for k, v in kw.items() if v is not None and v is not False}
    )


def run_train(
    out: PathLike,
    *,
    config: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    algo: Optional[str] = None,
    total_steps: Optional[int] = None,
    seed: Optional[int] = None,
    resume: bool = False,
) -> Run:
    """Trains one policy into ``out`` as ``serl train`` does, through the
    same library function (``serl_study::train::run``): the run folder
    locked, the bars loaded, the policy trained (``algo``: ``"ppo"``,
    ``"ddqn"`` or ``"sac"``) or resumed. Returns the run
    (:func:`load_run`)."""
    from . import _native

    _native.run_train(
        str(out),
        _options(
            config=config and Path(config),
            data=data and Path(data),
            algo=algo,
            total_steps=total_steps,
            seed=seed,
            resume=resume,
        ),
    )
    return load_run(out)


def run_evolve(
    out: PathLike,
    *,
    config: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    seed: Optional[int] = None,
    resume: bool = False,
) -> Run:
    """Runs SE-RL into ``out`` as ``serl evolve`` does, through the same
    library function (``serl_study::evolve::run``): the loop, then (unless
    its test is sealed) the ablations and the report. Returns the run
    (:func:`load_run`)."""
    from . import _native

    _native.run_evolve(
        str(out),
        _options(config=config and Path(config), data=data and Path(data), seed=seed, resume=resume),
    )
    return load_run(out)

