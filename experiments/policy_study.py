"""Which policy setup should write the bundled pools? Policy models x strategies x prompts, measured.

Every setup rolls out the same dev questions at the same K, and the table reports what a training pool
buys: single-rollout EM, majority EM, oracle pass@K, the mixed fraction (questions where selection
matters), the gold-in-evidence rate (share of searching trajectories that retrieved a gold alias),
seconds per trajectory and mixed questions per hour of rollout wall time. One engine per model serves
all of its setups (engine start is not counted); the prefix cache is reset between setups.

Each setup writes its pool under --out-dir, so a killed study resumes where it stopped (a finished
setup is only re-read) and the pools can be inspected with `trace-selector validate`.

The rule (issue 14): the default is the setup with the most mixed questions per hour among those with
majority EM >= 15% and oracle pass@K >= 40%; if none qualifies, the best by mixed per hour, flagged.
`--rule multihop` (the wikihops setting) asks instead for majority EM between 15% and 70%, oracle
pass@K at least 15 points above majority and at least 2.0 searches per trajectory.

    VLLM_CPU_OMP_THREADS_BIND=0-1 VLLM_CPU_NUM_OF_RESERVED_CPU=0 VLLM_CPU_KVCACHE_SPACE=4 HF_HUB_OFFLINE=1 \\
    python experiments/policy_study.py --limit 40 --k 8 --out-dir runs/policy-study --json data/pools/policy_study.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from trace_selector.records import read_pool
from trace_selector.records.summary import summarize
from trace_selector.rollout.runner import load_rollout_config, run_rollout

MIN_MAJORITY = 0.15
MIN_ORACLE = 0.40
RULES = {
    "single-hop": "majority >= 15% and oracle >= 40%",
    "multihop": "15% <= majority <= 70%, oracle >= majority + 15 points, searches per trajectory >= 2.0",
}


def qualifies(r: dict, rule: str = "single-hop") -> bool:
    """Whether a setup's figures meet the rule's bars."""
    if rule == "multihop":
        return (MIN_MAJORITY <= r["majority"] <= 0.70 and r["oracle"] >= r["majority"] + 0.15
                and r["searches"] >= 2.0)
    return r["majority"] >= MIN_MAJORITY and r["oracle"] >= MIN_ORACLE


def choose(rows: list[dict], rule: str = "single-hop") -> tuple[dict, bool]:
    """(the default setup, whether it met the rule's thresholds)."""
    ok = [r for r in rows if qualifies(r, rule)]
    pool = ok or rows
    return max(pool, key=lambda r: r["mixed_per_hour"]), bool(ok)


def measure(pool_path: Path, k: int) -> dict:
    s = summarize(read_pool(pool_path))
    acct = s.meta.get("accounting", {})
    qpd = acct.get("qpd_turn1")
    return {"single": s.single, "majority": s.majority, "oracle": s.oracle, "mixed": s.mixed,
            "gold_in_evidence": s.gold_in_evidence, "s_per_traj": s.seconds_per_trajectory,
            "mixed_per_hour": s.mixed_per_hour, "qpd_turn1": qpd,
            "searches": s.actions.get("search", 0) / max(1, s.trajectories),
            "valid_action_rate": acct.get("valid_action_rate"), "questions": s.questions, "k": k}


def render(rows: list[dict]) -> str:
    head = ("| model | strategy | prompt | single EM | majority | oracle pass@K | mixed | gold in evidence "
            "| QPD turn 1 | searches / traj | s / traj | mixed q / hour |")
    lines = [head, "|" + "---|" * 3 + "---:|" * 9]
    for r in rows:
        pct = lambda x: "" if x is None else f"{100 * x:.1f}"  # noqa: E731
        qpd = "" if r["qpd_turn1"] is None else f"{r['qpd_turn1']:.3f}"
        lines.append(f"| {r['model']} | {r['strategy']} | {r['prompt']} | {pct(r['single'])} | {pct(r['majority'])} "
                     f"| {pct(r['oracle'])} | {pct(r['mixed'])} | {pct(r['gold_in_evidence'])} "
                     f"| {qpd} | {r.get('searches', float('nan')):.2f} "
                     f"| {r['s_per_traj']:.2f} | {r['mixed_per_hour']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", default="wikileads")
    ap.add_argument("--split", default="dev", help="dev questions only: prompts are chosen here")
    ap.add_argument("--limit", type=int, default=40, help="questions (the first N of the split)")
    ap.add_argument("--k", type=int, default=8, help="trajectories per question")
    ap.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("--strategies", default="standard,divinit")
    ap.add_argument("--prompts", default="plain,clues")
    ap.add_argument("--recipe", default="rollout/wikileads-standard.yaml", help="base recipe (agent settings)")
    ap.add_argument("--out-dir", type=Path, default=Path("runs/policy-study"))
    ap.add_argument("--json", type=Path, help="write the rows and the choice here")
    ap.add_argument("--rule", choices=sorted(RULES), default="single-hop",
                    help="which bars the default must clear: " + "; ".join(f"{k}: {v}" for k, v in RULES.items()))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="extra rollout config overrides for every setup (repeatable)")
    args = ap.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)

    from trace_selector.engines import make_engine

    rows = []
    for model in args.models.split(","):
        engine = None
        try:
            for strategy, prompt in itertools.product(args.strategies.split(","), args.prompts.split(",")):
                out = args.out_dir / f"{model}-{strategy}-{prompt}.jsonl.gz"
                cfg = load_rollout_config(args.recipe, [f"strategy={strategy}", f"agent.prompt={prompt}",
                                                        *args.overrides],
                                          setting=args.setting, split=args.split, limit=args.limit, k=args.k,
                                          model=model)
                if not (out.exists() and read_pool(out).meta and len(read_pool(out).groups) >= args.limit):
                    if engine is None:
                        t0 = time.perf_counter()
                        engine = make_engine(cfg.engine, model=model, max_model_len=cfg.agent.max_context,
                                             seed=cfg.seed, **cfg.engine_options)
                        print(f"[{model}] engine up in {time.perf_counter() - t0:.0f} s", flush=True)
                    llm = getattr(engine, "llm", None)
                    if llm is not None:  # no setup profits from another's cached prompts
                        llm.reset_prefix_cache()
                    run_rollout(cfg, out, engine=engine)
                row = {"model": model, "strategy": strategy, "prompt": prompt, **measure(out, args.k)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            if engine is not None:
                engine.close()
    table = render(rows)
    best, qualified = choose(rows, args.rule)
    verdict = (f"default: {best['model']} / {best['strategy']} / {best['prompt']} "
               f"({best['mixed_per_hour']:.0f} mixed questions per hour"
               + (")" if qualified else f"; no setup met the {args.rule} rule ({RULES[args.rule]}), "
                  "so this is the best by mixed per hour)"))
    print(table + "\n\n" + verdict)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "default": best, "qualified": qualified, "rule": args.rule,
                                         "questions": args.limit, "k": args.k, "split": args.split}, indent=2))


if __name__ == "__main__":
    main()
