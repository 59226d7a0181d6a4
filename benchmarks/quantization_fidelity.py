"""How far the W8A8 int8 variant's token distribution is from the bf16 model's, on the pool's own text.

Trajectories of a pool sampled from the bf16 policy are rebuilt token by token as the agent built them
(system + question prompt, then each turn's sampled text and the observation it got, the forced-answer
notice where the agent gave one, the final answer turn) and teacher-forced through both models with
vLLM's prompt log-probabilities. On the model's own tokens (not the prompt or the observations) it
reports:
- mean log-probability of the sampled token under each model;
- the mean of log p_bf16 - log p_int8 over those tokens: with tokens drawn from the bf16 model this
  estimates the per-token KL divergence KL(bf16 || int8) (the grammar narrowed what could be sampled,
  so read it as a close estimate, not an exact one);
- how often both models' most likely next token is the same.
Each model is scored in its own process (one engine in memory at a time).

    VLLM_CPU_OMP_THREADS_BIND=0-1 VLLM_CPU_NUM_OF_RESERVED_CPU=0 VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 \\
    python benchmarks/quantization_fidelity.py data/pools/wikihops-train.jsonl.gz --questions 60
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path


def sequences(pool: Path, prompt_variant: str, questions: int, tokenizer) -> list[dict]:
    """The first trajectory of each of the first `questions` questions, as token ids with a mask of
    the positions the policy sampled."""
    from trace_selector.records import read_pool
    from trace_selector.rollout import prompts

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    out = []
    for group in read_pool(pool).groups[:questions]:
        t = group.trajectories[0]
        messages = [{"role": "system", "content": prompts.system_prompt("webqa", prompt_variant)},
                    {"role": "user", "content": prompts.USER_TEMPLATE.format(question=t.question)}]
        ids = encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        sampled = [False] * len(ids)

        def add(text: str, own: bool) -> None:
            piece = encode(text)
            ids.extend(piece)
            sampled.extend([own] * len(piece))

        for step in t.steps:
            add(step.raw_text or "", True)
            add(prompts.observation(step.search_result or ""), False)
        if t.finish_reason == "forced":
            add(prompts.observation(prompts.FORCE_ANSWER), False)
        add(t.final_text or "", True)
        out.append({"question": t.question_id, "ids": ids, "sampled": sampled})
    return out


def score(model: str, seqs_file: Path, out_file: Path) -> None:
    """Teacher-force every sequence through `model`: per position, the token's log-probability and the
    model's most likely token."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from trace_selector.engines.models import resolve

    seqs = json.loads(seqs_file.read_text())
    llm = LLM(model=resolve(model), max_model_len=max(len(s["ids"]) for s in seqs) + 8, enforce_eager=True,
              max_num_seqs=4, enable_prefix_caching=False, seed=0)
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
    outs = llm.generate([TokensPrompt(prompt_token_ids=s["ids"]) for s in seqs], params)
    rows = []
    for s, o in zip(seqs, outs):
        lp, top = [None], [None]
        for pos, entry in enumerate(o.prompt_logprobs[1:], start=1):
            lp.append(entry[s["ids"][pos]].logprob)
            top.append(next(tok for tok, v in entry.items() if v.rank == 1))
        rows.append({"logprob": lp, "top1": top})
    out_file.write_text(json.dumps(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pool", type=Path, help="a pool sampled from --model")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--variant", default=None, help="the model to compare (default: <model>-w8a8)")
    ap.add_argument("--prompt", default=None, help="agent prompt variant (default: the pool's recorded one)")
    ap.add_argument("--questions", type=int, default=60, help="one trajectory of each of this many questions")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--score", nargs=3, metavar=("MODEL", "SEQS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.score:
        score(args.score[0], Path(args.score[1]), Path(args.score[2]))
        return
    import yaml
    from transformers import AutoTokenizer

    from trace_selector.engines.models import resolve

    variant = args.variant or args.model + "-w8a8"
    prompt = args.prompt
    if prompt is None:
        recorded = yaml.safe_load(Path(str(args.pool) + ".config.yaml").read_text())
        prompt = recorded["agent"]["prompt"]
    tokenizer = AutoTokenizer.from_pretrained(resolve(args.model))
    seqs = sequences(args.pool, prompt, args.questions, tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        seqs_file = Path(tmp) / "seqs.json"
        seqs_file.write_text(json.dumps(seqs))
        scored = {}
        for name in (args.model, variant):
            out = Path(tmp) / f"{len(scored)}.json"
            subprocess.run([sys.executable, __file__, str(args.pool), "--score", name, str(seqs_file), str(out)],
                           check=True)
            scored[name] = json.loads(out.read_text())
    base, other = scored[args.model], scored[variant]
    lp_a, lp_b, agree, n = 0.0, 0.0, 0, 0
    for s, a, b in zip(seqs, base, other):
        for pos, own in enumerate(s["sampled"]):
            if own and pos > 0:
                lp_a += a["logprob"][pos]
                lp_b += b["logprob"][pos]
                agree += a["top1"][pos] == b["top1"][pos]
                n += 1
    figures = {"pool": str(args.pool), "model": args.model, "variant": variant, "prompt": prompt,
               "trajectories": len(seqs), "scored_tokens": n,
               "mean_logprob_model": lp_a / n, "mean_logprob_variant": lp_b / n,
               "kl_per_token": (lp_a - lp_b) / n, "perplexity_ratio": math.exp((lp_a - lp_b) / n),
               "top1_agreement": agree / n}
    print(json.dumps(figures, indent=2))
    print(f"\n{variant} vs {args.model} on {n} sampled tokens of {len(seqs)} trajectories: "
          f"KL per token {figures['kl_per_token']:.4f} nats, perplexity x{figures['perplexity_ratio']:.3f}, "
          f"top-1 agreement {100 * figures['top1_agreement']:.1f}%")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
