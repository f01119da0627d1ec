"""Synthetic pairs: random token ids < 49152 (timing only, meaningless text)."""
import json, random, sys
n, plen, rlen, seed = (int(a) for a in (sys.argv[1:5] if len(sys.argv) > 4 else (2, 100, 30, 0)))
rng = random.Random(seed)
ids = lambda k: [rng.randrange(3, 49152) for _ in range(k)]
for _ in range(n):
    print(json.dumps({"prompt_ids": ids(plen), "chosen_ids": ids(rlen), "rejected_ids": ids(rlen)}))
