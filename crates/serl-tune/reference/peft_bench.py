#!/usr/bin/env python3
"""PyTorch + PEFT reference timing of LoRA DPO fine-tuning on CPU.

Mirrors serl-tune's trainer (crates/serl-tune/src/train.rs):
  * the model is the GGUF file dequantized to float32, frozen; LoRA r=8,
    alpha=16, dropout 0 on q/k/v/o/gate/up/down; AdamW lr 5e-4, wd 0;
    gradients clipped to global norm 1.0; DPO beta 0.1 with the reference
    log-probs taken as zeros (timing only).
  * --mode cache (default): per pair, the prompt's keys/values but its last
    token are computed once under torch.no_grad() (with the adapter on, as
    the Rust trainer does); then chosen and rejected each run a forward over
    [prompt[-1]] + reply[:-1] on a *copy* of that cache (transformers'
    DynamicCache grows in place on every forward), the reply tokens'
    log-probs are summed, the DPO loss is backpropagated, and one AdamW step
    is taken.
  * --mode full: the usual PEFT way: prompt + reply[:-1] in one forward and
    backward, no cache.

"reply seconds" = forward + backward + clip + AdamW step of the replies (the
Rust trainer's reply_secs covers the same), excluding the prompt cache pass,
which is reported separately. reply tokens = len(chosen) + len(rejected).
With --repeat N, each figure is the median over N passes over all pairs.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                   help="a .gguf file (dequantized to f32 by transformers) or an HF model directory")
    p.add_argument("--pairs", required=True, help="JSONL: {prompt_ids, chosen_ids, rejected_ids} per line")
    p.add_argument("--mode", choices=["cache", "full"], default="cache")
    p.add_argument("--repeat", type=int, default=3, help="timed passes over all pairs (median reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed pairs run first (not counted)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="attention implementation")
    p.add_argument("--all-logits", action="store_true",
                   help="full mode: compute the LM head on every position (as TRL does), not just the reply's")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="global grad-norm clip (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU)")
    p.add_argument("--check", action="store_true",
                   help="before timing: check that the cached path's log-probs equal the full path's "
                        "and that a used cache copy leaves the prompt cache untouched")
    return p.parse_args()


def load_model(path, attn):
    from transformers import AutoModelForCausalLM
    if path.endswith(".gguf"):
        d, f = os.path.split(os.path.abspath(path))
        m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation=attn)
    else:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=attn)
    m.to(torch.float32)
    return m


def load_pairs(path):
    pairs = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            p, c, r = o["prompt_ids"], o["chosen_ids"], o["rejected_ids"]
            if len(p) < 1 or len(c) < 1 or len(r) < 1:
                sys.exit(f"{path}:{n}: prompt and replies need at least one token each")
            pairs.append((p, c, r))
    if not pairs:
        sys.exit(f"{path}: no pairs")
    return pairs


def reply_logprob(logits, reply):
    """Sum of log p(reply[i]) from logits [1, len(reply), V]."""
    lp = F.log_softmax(logits[0].float(), dim=-1)
    tgt = torch.tensor(reply, dtype=torch.long, device=logits.device).unsqueeze(1)
    return lp.gather(1, tgt).sum()


def _cache_kw():
    """transformers >= 5.2x names the KV-cache argument/output `cache`; older: `past_key_values`."""
    import inspect
    from transformers import LlamaForCausalLM
    return "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


CACHE_KW = None
DEVICE = "cpu"


def ids_tensor(ids):
    return torch.tensor(ids, device=DEVICE)


def sync():
    """Timers read after the GPU's queued work is done."""
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def prompt_cache(model, prompt):
    """Keys/values of prompt[:-1] (None for a one-token prompt), no grad."""
    head = prompt[:-1]
    if not head:
        return None
    with torch.no_grad():
        out = model(input_ids=ids_tensor([head]), use_cache=True)
    return getattr(out, CACHE_KW)


def lp_cached(model, cache, last, reply):
    # DynamicCache.update() rebinds its layers' keys/values to torch.cat(...) on
    # every forward, i.e. the cache object grows in place: give each reply a copy.
    c = copy.deepcopy(cache) if cache is not None else None
    ids = ids_tensor([[last] + reply[:-1]])
    out = model(input_ids=ids, use_cache=c is not None, **{CACHE_KW: c})
    return reply_logprob(out.logits, reply)


def lp_full(model, prompt, reply, all_logits=False):
    ids = ids_tensor([prompt + reply[:-1]])
    if all_logits:
        out = model(input_ids=ids, use_cache=False)
        logits = out.logits[:, len(prompt) - 1:]
    else:
        out = model(input_ids=ids, use_cache=False, logits_to_keep=len(reply))
        logits = out.logits
    assert logits.shape[1] == len(reply)
    return reply_logprob(logits, reply)


def cache_len(cache):
    return cache.get_seq_length() if cache is not None else 0


def check(model, pairs):
    p, c, r = pairs[0]
    model.eval()
    with torch.no_grad():
        cache = prompt_cache(model, p)
        n0 = cache_len(cache)
        a = lp_cached(model, cache, p[-1], c)
        n1 = cache_len(cache)
        b = lp_cached(model, cache, p[-1], c)  # second use of the same prompt cache
        full = lp_full(model, p, c)
        full_all = lp_full(model, p, c, all_logits=True)
        # what goes wrong without the copy: the cache object grows in place
        raw = prompt_cache(model, p)
        ids = ids_tensor([[p[-1]] + c[:-1]])
        model(input_ids=ids, use_cache=True, **{CACHE_KW: raw})
        grown = cache_len(raw)
    model.train()
    res = {
        "prompt_cache_len": n0,
        "prompt_cache_len_after_copy_use": n1,
        "uncopied_cache_len_after_use": grown,
        "lp_cached": a.item(), "lp_cached_again": b.item(), "lp_full": full.item(),
        "lp_full_all_logits": full_all.item(),
        "abs_diff_cached_vs_full": abs(a.item() - full.item()),
    }
    tol = 1e-4 * max(1.0, abs(full.item()))
    ok = (n0 == n1 == len(p) - 1 and abs(a.item() - b.item()) <= tol and abs(a.item() - full.item()) <= tol
          and abs(full_all.item() - full.item()) <= tol)
    res["ok"] = bool(ok)
    return res


def main():
    global CACHE_KW, DEVICE
    args = parse()
    CACHE_KW = _cache_kw()
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from peft import LoraConfig, get_peft_model
    import transformers, peft

    t0 = time.perf_counter()
    base = load_model(args.model, args.attn).to(DEVICE)
    load_secs = time.perf_counter() - t0
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS, bias="none",
                     task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    pairs = load_pairs(args.pairs)

    result = {
        "mode": args.mode, "device": args.device, "model": args.model, "pairs_file": args.pairs, "pairs": len(pairs),
        "threads": torch.get_num_threads(), "attn": args.attn, "cache_kwarg": CACHE_KW,
        "all_logits": bool(args.all_logits) if args.mode == "full" else None,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__},
        "trainable_params": sum(p.numel() for p in params),
        "load_secs": round(load_secs, 2),
    }
    if args.check:
        result["check"] = check(model, pairs)

    def run_pair(p, c, r, tm):
        if args.mode == "cache":
            sync()
            t = time.perf_counter()
            cache = prompt_cache(model, p)
            sync()
            tm["prompt"] += time.perf_counter() - t
            t = time.perf_counter()
            lc = lp_cached(model, cache, p[-1], c)
            lr = lp_cached(model, cache, p[-1], r)
        else:
            sync()
            t = time.perf_counter()
            lc = lp_full(model, p, c, args.all_logits)
            lr = lp_full(model, p, r, args.all_logits)
        margin = lc - lr - 0.0  # reference log-probs: zeros (timing only)
        loss = F.softplus(-args.beta * margin)
        sync()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t3 = time.perf_counter()
        tm["fwd"] += t1 - t
        tm["bwd"] += t2 - t1
        tm["step"] += t3 - t2
        tm["reply"] += t3 - t
        tm["tokens"] += len(c) + len(r)
        tm["prompt_tokens"] += len(p) - 1 if args.mode == "cache" else 2 * len(p)
        return loss.item()

    for i in range(args.warmup):
        run_pair(*pairs[i % len(pairs)], {k: 0.0 for k in ["prompt", "fwd", "bwd", "step", "reply", "tokens", "prompt_tokens"]})

    passes = []
    for _ in range(max(1, args.repeat)):
        tm = {k: 0.0 for k in ["prompt", "fwd", "bwd", "step", "reply", "tokens", "prompt_tokens"]}
        losses = [run_pair(p, c, r, tm) for p, c, r in pairs]
        tm["loss_mean"] = sum(losses) / len(losses)
        passes.append(tm)

    med = lambda k: statistics.median(x[k] for x in passes)
    tokens = int(passes[0]["tokens"])
    reply_secs = med("reply")
    result.update({
        "repeat": len(passes), "warmup_pairs": args.warmup,
        "reply_tokens": tokens,
        "reply_secs": round(reply_secs, 4),
        "reply_tokens_per_sec": round(tokens / reply_secs, 2),
        "reply_fwd_secs": round(med("fwd"), 4),
        "reply_bwd_secs": round(med("bwd"), 4),
        "optim_step_secs": round(med("step"), 4),
        "prompt_cache_secs": round(med("prompt"), 4) if args.mode == "cache" else None,
        "prompt_cache_tokens": int(passes[0]["prompt_tokens"]) if args.mode == "cache" else None,
        "total_secs_incl_prompt": round(statistics.median(x["reply"] + x["prompt"] for x in passes), 4),
        "passes_reply_secs": [round(x["reply"], 4) for x in passes],
        "passes_prompt_secs": [round(x["prompt"], 4) for x in passes],
        "loss_mean_last_pass": round(passes[-1]["loss_mean"], 6),
    })
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
