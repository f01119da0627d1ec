"""Stable-Baselines3's PPO trained on serl's static replay, then scored by
serl's backtester on the validation orders next to TWAP (and a policy
trained by `serl train`, when given).

    python python/examples/sb3_ppo.py                      # the bundled data, a short run
    python python/examples/sb3_ppo.py --data ../shared/data/us-equities-1min-2018 \
        --config configs/train.toml --total-steps 60000 --serl-run runs/ppo-static

It uses configs/train.toml's PPO settings (8 environments, 256 steps each
per update, minibatches of 256, 10 epochs, learning rate 3e-4, two tanh
layers of 64) and normalises observations as serl's trainer does. Needs
stable-baselines3 and torch (`pip install stable-baselines3`); without them
it says so and exits.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import serl

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=ROOT / "data" / "lean")
    ap.add_argument("--config", default=None, help="a serl train config (its orders, env and PPO settings)")
    ap.add_argument("--total-steps", type=int, default=20000)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--serl-run", default=None, help="a `serl train` run directory to score beside it")
    ap.add_argument("--out", default=None, help="a folder for the backtest's report")
    args = ap.parse_args()
    try:
        import torch
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import VecNormalize
    except ImportError:
        print("skipped: this example needs Stable-Baselines3 and torch (pip install stable-baselines3)")
        sys.exit(0)
    import serl.sb3

    torch.set_num_threads(1)
    venv = serl.sb3.SB3VecEnv(
        serl.VecExecutionEnv(args.envs, data=args.data, config=args.config, seed=args.seed)
    )
    venv = VecNormalize(venv, norm_obs=True, norm_reward=False)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=256,
        batch_size=256,
        n_epochs=10,
        learning_rate=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs={"net_arch": [64, 64], "activation_fn": torch.nn.Tanh},
        seed=args.seed,
        device="cpu",
    )
    start = time.perf_counter()
    model.learn(args.total_steps)
    secs = time.perf_counter() - start
    print(f"SB3 PPO: {args.total_steps} steps in {secs:.1f} s, {args.total_steps / secs:,.0f} steps/s")

    def sb3_policy(obs, decision):
        normed = venv.normalize_obs(obs[None, :])
        action, _ = model.predict(normed, deterministic=True)
        return float(np.clip(action[0, 0], 0.0, 1.0))

    strategies = ["twap"] + ([f"policy:{args.serl_run}"] if args.serl_run else [])
    result = serl.backtest(
        data=args.data,
        config=args.config,
        strategies=strategies,
        policies={"sb3-ppo": sb3_policy},
        split="validation",
        out=args.out,
    )
    print(result.table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
