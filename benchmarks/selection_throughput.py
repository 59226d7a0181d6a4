"""Selection throughput: questions per second of TRACE vs the LLM aggregators (SolAgg, SummAgg) and the
fast baselines, measured in one run on the same pool and printed side by side.

    .venv/bin/python benchmarks/selection_throughput.py                       # synthetic pool, fast + LLM
    .venv/bin/python benchmarks/selection_throughput.py --pool pool.jsonl.gz --checkpoint checkpoints/wikileads
    .venv/bin/python benchmarks/selection_throughput.py --no-llm --questions 200 --k 16

Without --pool a synthetic pool is generated (seeded): each question has K trajectories with 1-4
searches of 3 documents, log-probabilities, stated confidences and answers drawn from a few
candidates, so every method has its inputs. `trace` runs only with --checkpoint. LLM methods use
the engine spec given by --engine (default: in-process vLLM with the packaged SmolLM2-135M); engine
start-up is not counted, each method's time is its `select` over the whole pool. Note that the
aggregators make no call for questions whose answers are unanimous (see `baselines.aggregators`); the
synthetic pool has none.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from trace_selector.records import Document, Pool, QuestionGroup, Step, Trajectory


def synthetic_pool(questions: int, k: int, seed: int = 0) -> Pool:
    """A pool with every field the baselines read; answers differ within each question."""
    rng = random.Random(seed)
    words = "river castle treaty empire island poet saint harbour canal bishop valley crown".split()
    groups = []
    for q in range(questions):
        names = [f"{rng.choice(words).title()} {rng.choice(words).title()}" for _ in range(3)]
        gold = names[0]
        trajs = []
        for s in range(k):
            answer = names[0] if s == 0 else rng.choice(names + [""])
            steps = []
            for j in range(rng.randint(1, 4)):
                docs = [Document(r, rng.choice(names), " ".join(rng.choices(words, k=60)) + f" {rng.choice(names)}.") for r in (1, 2, 3)]
                steps.append(Step("search", f"{rng.choice(words)} {rng.choice(words)} {j}", documents=docs,
                                  search_result="\n".join(f"Doc {d.rank} (Title: {d.title}) {d.text}" for d in docs),
                                  raw_text=f"I should look up {rng.choice(words)}.",
                                  logprobs=[-rng.expovariate(3.0) for _ in range(40)]))
            trajs.append(Trajectory(str(q), f"Which {rng.choice(words)} is named after the {rng.choice(words)}?", s, answer,
                                    steps=steps, golden_answers=[gold], confidence=round(rng.random(), 2),
                                    final_text=f"The results point to {answer}. <answer>{answer}</answer>",
                                    final_logprobs=[-rng.expovariate(3.0) for _ in range(20)]))
        groups.append(QuestionGroup(str(q), trajs[0].question, [gold], trajs))
    return Pool(groups=groups, path=f"synthetic({questions}x{k}, seed {seed})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool", default=None, help="pool file (default: a synthetic pool)")
    p.add_argument("--questions", type=int, default=6, help="synthetic pool: questions")
    p.add_argument("--k", type=int, default=4, help="trajectories per question (first k of a real pool)")
    p.add_argument("--checkpoint", default=None, help="selector checkpoint; adds the 'trace' method")
    p.add_argument("--engine", default="vllm", help="engine spec for the LLM methods")
    p.add_argument("--no-llm", action="store_true", help="fast baselines (and trace) only")
    p.add_argument("--out", default=None, help="results.json (default: a temporary folder)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="EvalConfig override, e.g. llm.report_tokens=128")
    a = p.parse_args(argv)

    from trace_selector.evaluate import evaluate, format_table, load_eval_config
    from trace_selector.records import read_pool

    pool = read_pool(a.pool) if a.pool else synthetic_pool(a.questions, a.k)
    methods = ["single", "majority", "weighted_stated", "weighted_token", "fewest_tools", "most_tools"]
    if a.checkpoint:
        methods.append("trace")
    if not a.no_llm:
        methods += ["solagg", "summagg"]
    out = a.out or str(Path(tempfile.mkdtemp(prefix="selection_throughput_")) / "results.json")
    cfg = load_eval_config(None, {"pool": a.pool or "", "methods": methods, "k": a.k, "checkpoint": a.checkpoint,
                                  "engine": a.engine, "out": out, "budget": False}, a.set)
    results = evaluate(cfg, pool)
    print(format_table(results))
    print()
    print("questions/s side by side:", json.dumps({m: r.get("questions_per_s") for m, r in results["methods"].items()}))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
