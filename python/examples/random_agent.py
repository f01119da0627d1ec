"""A random agent in serl's static replay of the bundled data, next to TWAP
in the same environment.

    python python/examples/random_agent.py
    python python/examples/random_agent.py --venue dynamic --episodes 10
"""

import argparse
from pathlib import Path

import numpy as np

import serl

ROOT = Path(__file__).resolve().parents[2]


def episode(env, order, act):
    """Plays order number `order`, asking `act(inventory_left, steps_left)`
    for each action; returns the whole-order PA and the return."""
    _, info = env.reset(options={"order": order})
    left, steps_left = 1.0, info["order"]["steps"]
    done = False
    while not done:
        _, _, done, _, info = env.step(act(left, steps_left))
        left, steps_left = info["inventory_left"], info["steps_left"]
    return info["episode"]["pa_bps"], info["episode"]["return"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=ROOT / "data" / "lean", help="minute bars (default: the bundled LEAN sample)")
    ap.add_argument("--venue", default="static", choices=["static", "dynamic"])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    env = serl.ExecutionEnv(data=args.data, venue=args.venue, seed=args.seed)
    env.action_space.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    orders = rng.integers(len(env.orders), size=args.episodes)
    print(f"{len(env.orders)} orders; observation: {len(env.obs_names)} columns; actions: {env.action_space}")

    def random_act(left, steps_left):
        return env.action_space.sample()

    def twap_act(left, steps_left):
        # TWAP: an even share of what is left over the steps left.
        return np.array([left / max(1, steps_left)], dtype=np.float32)

    rows = []
    for k in orders:
        o = env.orders[k]
        pa_random, ret = episode(env, int(k), random_act)
        pa_twap, _ = episode(env, int(k), twap_act)
        rows.append((pa_random, pa_twap))
        print(f"{o['symbol']:>5} {o['date']} {o['side']:>4}  random PA {pa_random:9.2f} bps  TWAP PA {pa_twap:7.2f} bps  return {ret:8.3f}")
    pa = np.array(rows)
    print(f"\nmean over {len(rows)} episodes: random {pa[:, 0].mean():.2f} ± {pa[:, 0].std():.2f} bps, "
          f"TWAP {pa[:, 1].mean():.2f} ± {pa[:, 1].std():.2f} bps (whole-order PA: unfilled shares charged at the horizon)")


if __name__ == "__main__":
    main()
