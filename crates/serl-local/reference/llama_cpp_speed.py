"""llama.cpp's prompt and generation speed on the prompt `serl prompts probe`
times, for the side-by-side figures in docs/llm.md.

    pip install llama-cpp-python==0.3.16        # builds llama.cpp from source
    cargo run -p serl -- prompts render reward > /tmp/reward.txt
    python crates/serl-local/reference/llama_cpp_speed.py MODEL /tmp/reward.txt --runs 3

The prompt is what `serl prompts probe` times: the reward module's prompt as
the one user message, in the file's own chat template. Each run takes a
fresh context (no cached prefix), reads the whole prompt, then samples 128
tokens at the probe's settings (temperature 0.7, top-p 0.95), every
end-of-generation token masked so that each reply is 128 tokens long. The
figures are llama.cpp's own timings (llama_perf_context: decoding only,
sampling left out), one line per run, then the medians.
"""

import argparse
import statistics
import time

from llama_cpp import Llama, llama_cpp


def one_run(model: str, prompt: str, threads: int, tokens: int, seed: int) -> tuple[float, float, int, int]:
    llm = Llama(
        model_path=model,
        n_ctx=8192,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    # Every reply runs to `tokens`, so that each run times as many: no
    # end-of-generation token is ever sampled.
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    ends = [t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)]
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    llm.create_chat_completion(
        logit_bias={t: -1e9 for t in ends},
        messages=[{"role": "user", "content": prompt}],
        max_tokens=tokens,
        temperature=0.7,
        top_p=0.95,
        seed=seed,
    )
    perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
    prompt_tps = perf.n_p_eval / (perf.t_p_eval_ms / 1e3)
    gen_tps = perf.n_eval / (perf.t_eval_ms / 1e3)
    return prompt_tps, gen_tps, perf.n_p_eval, perf.n_eval


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("prompt_file")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    a = ap.parse_args()
    prompt = open(a.prompt_file, encoding="utf-8").read()
    prompts, gens = [], []
    for r in range(a.runs):
        t = time.perf_counter()
        p, g, n_p, n_g = one_run(a.model, prompt, a.threads, a.tokens, r)
        prompts.append(p)
        gens.append(g)
        print(f"run {r + 1}: prompt {n_p} tokens at {p:.1f} tokens/s, "
              f"generation {n_g} tokens at {g:.1f} tokens/s ({time.perf_counter() - t:.1f} s)")
    print(f"median: prompt {statistics.median(prompts):.1f} tokens/s, "
          f"generation {statistics.median(gens):.1f} tokens/s")


if __name__ == "__main__":
    main()
