"""Steps per second from Python: serl's environments (single and
vectorized, static and dynamic) next to a minimal numpy execution
environment of the same task. docs/python.md has the figures.

    python python/examples/benchmark.py
    python python/examples/benchmark.py --data ../shared/data/us-equities-1min-2018 --repeats 3

The numpy environment works a parent order over one session of minute bars
as serl's static replay does: every `decision_minutes` the agent picks a
share of the order, traded evenly over the step's bars at the minute price
plus half the spread, capped at a share of each bar's volume; the
observation is serl's 29 columns (time and inventory left, five book levels
a side from the spread, returns over 1–60 minutes, volume, spread). It runs
on synthetic bars: its cost does not depend on the prices. Its vectorized
form steps N orders as arrays.
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import serl

ROOT = Path(__file__).resolve().parents[2]
HORIZONS = np.array([1, 5, 15, 30, 60])


class NumpyExecutionEnv:
    """One order at a time over synthetic minute bars, in numpy."""

    def __init__(self, decision_minutes=5, minutes=390, cap=0.1, seed=0):
        rng = np.random.default_rng(seed)
        self.k, self.minutes, self.cap = decision_minutes, minutes, cap
        self.steps = minutes // decision_minutes
        self.price = 100 * np.exp(np.cumsum(rng.normal(0, 5e-4, (20, minutes + 60)), axis=1))
        self.volume = rng.uniform(5e3, 2e4, (20, minutes + 60))
        self.spread_bps = rng.uniform(1, 5, 20)
        self.rng = rng

    def reset(self):
        self.day = self.rng.integers(len(self.price))
        self.t, self.left, self.qty = 0, 1.0, 1e5
        self.cash, self.bench = 0.0, 0.0
        return self.obs()

    def obs(self):
        m = 60 + self.t * self.k
        p, v, s = self.price[self.day], self.volume[self.day], self.spread_bps[self.day]
        o = np.empty(29, dtype=np.float32)
        o[0], o[1] = 1 - self.t / self.steps, self.left
        levels = (np.arange(1, 6) - 0.5) * s / 10
        o[2:7], o[7:12] = -levels, v[m - 1] / v[m - 30:m].mean()
        o[12:17], o[17:22] = levels, o[7:12]
        o[22:27] = (p[m - 1] / p[m - 1 - HORIZONS] - 1) * 1e3
        o[27], o[28] = v[m - 1] / v[m - 30:m].mean(), s / 10
        return o

    def step(self, action):
        m = 60 + self.t * self.k
        p, v = self.price[self.day, m:m + self.k], self.volume[self.day, m:m + self.k]
        want = min(max(float(action), 0.0), self.left) * self.qty
        per_bar = np.minimum(want / self.k, self.cap * v)
        fill_price = p * (1 + self.spread_bps[self.day] / 2e4)
        self.cash += float(per_bar @ fill_price)
        self.bench += p.mean() * self.qty / self.steps
        self.left -= per_bar.sum() / self.qty
        self.t += 1
        done = self.t >= self.steps
        reward = -float(per_bar @ (fill_price - p.mean())) / self.qty
        return self.obs() if not done else np.zeros(29, np.float32), reward, done, {}


class NumpyVecExecutionEnv:
    """N orders stepped as arrays (one row each), in numpy."""

    def __init__(self, n, decision_minutes=5, minutes=390, cap=0.1, seed=0):
        self.one = NumpyExecutionEnv(decision_minutes, minutes, cap, seed)
        self.n, self.k, self.cap = n, decision_minutes, cap
        self.steps = self.one.steps
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.day = self.rng.integers(len(self.one.price), size=self.n)
        self.t = np.zeros(self.n, dtype=np.int64)
        self.left = np.ones(self.n)
        return self.obs()

    def obs(self):
        e, d = self.one, self.day
        m = 60 + self.t * self.k
        p, v = e.price[d], e.volume[d]
        rows = np.arange(self.n)[:, None]
        o = np.empty((self.n, 29), dtype=np.float32)
        o[:, 0], o[:, 1] = 1 - self.t / self.steps, self.left
        s = e.spread_bps[d][:, None]
        levels = (np.arange(1, 6)[None, :] - 0.5) * s / 10
        avg = v[rows, m[:, None] - np.arange(1, 31)[None, :]].mean(axis=1)
        last = v[np.arange(self.n), m - 1] / avg
        o[:, 2:7], o[:, 7:12] = -levels, last[:, None]
        o[:, 12:17], o[:, 17:22] = levels, last[:, None]
        now = p[np.arange(self.n), m - 1][:, None]
        o[:, 22:27] = (now / p[rows, m[:, None] - 1 - HORIZONS[None, :]] - 1) * 1e3
        o[:, 27], o[:, 28] = last, s[:, 0] / 10
        return o

    def step(self, actions):
        e, d = self.one, self.day
        m = 60 + self.t * self.k
        cols = m[:, None] + np.arange(self.k)[None, :]
        rows = np.arange(self.n)[:, None]
        p, v = e.price[d][rows, cols], e.volume[d][rows, cols]
        want = np.minimum(np.clip(actions.reshape(-1), 0, None), self.left) * 1e5
        per_bar = np.minimum(want[:, None] / self.k, self.cap * v)
        fill = p * (1 + e.spread_bps[d][:, None] / 2e4)
        rewards = -(per_bar * (fill - p.mean(axis=1, keepdims=True))).sum(axis=1) / 1e5
        self.left -= per_bar.sum(axis=1) / 1e5
        self.t += 1
        dones = self.t >= self.steps
        if dones.any():
            k = np.flatnonzero(dones)
            self.day[k] = self.rng.integers(len(e.price), size=len(k))
            self.t[k], self.left[k] = 0, 1.0
        return self.obs(), rewards, dones, {}


def rate(run, seconds):
    """Steps per second of `run(batch)` → steps, over about `seconds`."""
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += run()
    return steps / (time.perf_counter() - start)


def single(env, action, batch=1000):
    env.reset()

    def run():
        for _ in range(batch):
            out = env.step(action)
            if out[2]:
                env.reset()
        return batch

    return run


def vectorized(env, n, batch=20):
    env.reset()
    actions = np.full((n, 1), 0.02)
    step = getattr(env, "step_arrays", env.step)

    def run():
        for _ in range(batch):
            step(actions)
        return batch * n

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=ROOT / "data" / "lean")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    action = np.array([0.02], dtype=np.float32)
    rows = []

    def measure(name, make):
        rates = [rate(make(), args.seconds) for _ in range(args.repeats)]
        rows.append((name, statistics.median(rates)))
        print(f"{name:<52} {statistics.median(rates):>14,.0f} steps/s (median of {args.repeats})", flush=True)

    for venue in ("static", "dynamic"):
        secs = args.seconds
        measure(f"serl ExecutionEnv {venue}", lambda: single(serl.ExecutionEnv(data=args.data, venue=venue), action, 1000 if venue == "static" else 20))
        for n in (1, 64, 1024):
            measure(f"serl VecExecutionEnv {venue}, N = {n}",
                    lambda: vectorized(serl.VecExecutionEnv(n, data=args.data, venue=venue), n, 20 if venue == "static" else 2))
            if venue == "static":
                measure(f"serl VecExecutionEnv {venue}, N = {n}, Gymnasium step",
                        lambda: vectorized_gym(serl.VecExecutionEnv(n, data=args.data, venue=venue), n))
        args.seconds = secs
    measure("numpy environment, single", lambda: single(NumpyExecutionEnv(), 0.02))
    for n in (1, 64, 1024):
        measure(f"numpy environment, vectorized, N = {n}", lambda: vectorized(NumpyVecExecutionEnv(n), n))


def vectorized_gym(env, n, batch=20):
    env.reset()
    actions = np.full((n, 1), 0.02)

    def run():
        for _ in range(batch):
            env.step(actions)
        return batch * n

    return run


if __name__ == "__main__":
    main()
