"""What an evaluation writes: each method's results.json entry (`summarize`), results.json with its
resolved config, the per-question JSONL, the budget-curve PNG (`plot_budget`) and the Markdown table
(`format_table`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_selector.adaptive import ADAPTIVE_SUFFIX, usage
from trace_selector.atomic import atomic_write
from trace_selector.config import dump_config
from trace_selector.paired import Paired
from trace_selector.records import QuestionGroup
from trace_selector.scoring import MethodRun

if TYPE_CHECKING:  # evaluate imports this module; the config is only a type here
    from trace_selector.evaluate import EvalConfig


def summarize(name: str, run: MethodRun, groups: Sequence[QuestionGroup]) -> dict[str, Any]:
    """The results.json entry of one method."""
    scores = run.scores
    n = max(1, len(groups))
    entry: dict[str, Any] = {
        "em": round(100.0 * sum(s[0] for s in scores) / n, 4),
        "f1": round(100.0 * sum(s[1] for s in scores) / n, 4),
        "seconds": round(run.seconds, 4),
        "questions_per_s": round(len(groups) / run.seconds, 3) if run.seconds > 0 else None,
        "tokens_in": sum(p.tokens_in for p in run.picks),
        "tokens_out": sum(p.tokens_out for p in run.picks),
        "parse_failures": sum(p.parse_failures for p in run.picks),
        "fallbacks": sum(1 for p in run.picks if p.fallback),
    }
    used = [usage(g, p) for g, p in zip(groups, run.picks)]
    entry["mean_trajectories"] = round(sum(u[0] for u in used) / n, 4)
    if groups and all(u[1] is not None for u in used):
        entry["mean_generated_tokens"] = round(sum(u[1] for u in used) / n, 2)  # type: ignore[misc]
    report = sum(p.extra.get("report_tokens", 0) for p in run.picks)
    traj = sum(p.extra.get("trajectory_tokens", 0) for p in run.picks)
    if traj:
        entry["report_tokens"] = report
        entry["trajectory_tokens"] = traj
        entry["compression_ratio"] = round(report / traj, 4)
    cut = sum(p.extra.get("cut_tokens", 0) for p in run.picks)  # trajectory text LLM methods could not fit
    if cut:
        entry["cut_tokens"] = cut
    forced = sum(1 for p in run.picks if p.extra.get("forced_answer"))
    if forced:
        entry["forced_answers"] = forced
    signals: dict[str, int] = {}
    for p in run.picks:  # DeepConf: token confidences or the sampled-log-prob fallback, per question
        if "signal" in p.extra:
            signals[p.extra["signal"]] = signals.get(p.extra["signal"], 0) + 1
    if signals:
        entry["signal"] = signals
    return entry


def write_outputs(cfg: EvalConfig, results: dict[str, Any], groups: Sequence[QuestionGroup], runs: dict[str, MethodRun]) -> None:
    """results.json, its resolved config, and the optional per-question JSONL and plot (all atomic)."""
    out = Path(cfg.out)
    with atomic_write(out) as fh:
        json.dump(results, fh, indent=2, default=str)
        fh.write("\n")
    dump_config(cfg, out.with_name(out.stem + ".config.yaml"))
    if cfg.per_question:
        with atomic_write(cfg.per_question) as fh:
            for gi, g in enumerate(groups):
                row: dict[str, Any] = {"question_id": g.question_id, "question": g.question, "gold": g.golden_answers,
                                       "k": len(g.trajectories), "methods": {}}
                for name, run in runs.items():
                    p = run.picks[gi]
                    em, f1 = run.scores[gi]
                    row["methods"][name] = {"sample_id": p.sample_id, "answer": p.answer, "em": em, "f1": f1,
                                            "correct": em == 1.0, "fallback": p.fallback}
                    if p.scores:
                        row["methods"][name]["scores"] = {str(k): round(v, 6) for k, v in p.scores.items()}
                    if p.extra:  # model output, agent actions, rubric scores: what to read when a method errs
                        row["methods"][name]["details"] = p.extra
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    if cfg.plot and (results["budget_curve"] or results.get("adaptive_curve")):
        chosen = {n: (r["mean_trajectories"], r["em"]) for n, r in results["methods"].items()
                  if n in results.get("adaptive_curve", {})}
        plot_budget(results["budget_curve"], cfg.plot, title=Path(results["pool"]).name,
                    adaptive=results.get("adaptive_curve", {}), chosen=chosen)


def plot_budget(curve: dict[str, dict[str, float]], path: str | Path, title: str = "",
                adaptive: dict[str, list[dict[str, Any]]] | None = None,
                chosen: dict[str, tuple[float, float]] | None = None) -> None:
    """One line per method (EM vs k, log2 x axis) and a dashed oracle pass@k line, as a PNG; each
    adaptive row's threshold sweep (EM vs mean trajectories used) dotted on the same axes, its chosen
    threshold starred."""
    # A bare Figure renders with Agg without touching pyplot's global backend (a notebook keeps its own).
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for name, points in curve.items():
        ks = sorted(points, key=int)
        oracle = name == "oracle_pass_at_k"
        ax.plot([int(k) for k in ks], [points[k] for k in ks], marker="o", ms=3,
                ls="--" if oracle else "-", color="black" if oracle else None, label="oracle pass@k" if oracle else name)
    for name, sweep in (adaptive or {}).items():
        pts = sorted((p["mean_trajectories"], p["em"]) for p in sweep if p["mean_trajectories"] > 0)
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=":", marker=".", ms=3, label=f"{name} (sweep)")
        if chosen and name in chosen and chosen[name][0] > 0:
            ax.plot(*chosen[name], marker="*", ms=10, color=line[0].get_color(), ls="none")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("trajectories per question (k; adaptive: mean used)")
    ax.set_ylabel("EM (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)


def format_table(results: dict[str, Any]) -> str:
    """Markdown table: method, EM, F1, paired differences, questions/s, tokens in/out, notes."""
    against = results.get("paired", {}).get("against", [])
    pair_heads = "".join(f" vs {a} [95% CI] won/lost |" for a in against)
    # Trajectories used per question, only next to adaptive rows (fixed-K tables stay as they were).
    cost = bool(results.get("adaptive_curve"))
    lines = [
        f"pool {results['pool']}: {results['n_questions']} questions, k={results['k']}"
        + (f" (asked for {results['k_requested']}; the pool has at most {results['k']} per question, so it "
           f"uses {results['k']})" if "k_requested" in results else "")
        + f", oracle pass@k {results['oracle_pass_at_k']:.1f}%",
        "",
        f"| method | EM | F1 |{pair_heads}{' trajectories | gen. tokens |' if cost else ''} questions/s | tokens in | tokens out | notes |",
        "|---|---:|---:|" + "---:|" * len(against) + ("---:|---:|" if cost else "") + "---:|---:|---:|---|",
    ]
    for name, r in results["methods"].items():
        if "skipped" in r:
            lines.append(f"| {name} | - | - |" + " - |" * (len(against) + 2 * cost) + f" - | - | - | skipped: {r['skipped']} |")
            continue
        pairs = "".join(f" {Paired(**r[f'vs_{a}']).to_text() if f'vs_{a}' in r else '-'} |" for a in against)
        notes = []
        if r["parse_failures"]:
            notes.append(f"{r['parse_failures']} parse failures")
        if r["fallbacks"]:
            notes.append(f"{r['fallbacks']} fallbacks")
        if r.get("cut_tokens"):
            notes.append(f"{r['cut_tokens']} tokens cut to fit")
        if r.get("forced_answers"):
            notes.append(f"{r['forced_answers']} forced answers")
        if "shown_trajectories" in r.get("settings", {}):  # LLM aggregators: what the prompt budget cut
            s = r["settings"]
            notes.append(f"{s['clipped_trajectories']} of {s['shown_trajectories']} trajectories clipped")
        if r.get("signal", {}).get("sampled_logprob"):
            notes.append(f"sampled-token log-probs, no token_conf on {r['signal']['sampled_logprob']} questions")
        if "compression_ratio" in r:
            notes.append(f"compression {r['compression_ratio']:.3f}")
        if r.get("selector_method", name) not in (name, name.removesuffix(ADAPTIVE_SUFFIX)):
            notes.append(f"checkpoint is a {r['selector_method']} selector")
        if "fixed_k_em" in r:
            s = r.get("settings", {})
            at = f"threshold {s['threshold']:g}" if "threshold" in s else ""
            if "temperature" in s:
                at += f", T={s['temperature']:g}"
            notes.append(f"adaptive ({at}): stopped early on {r['stopped_early']}; EM {r['fixed_k_em']:.1f} at full K")
            if "over_orders" in r:
                o = r["over_orders"]
                notes.append(f"over {o['orders']} random orders: EM {o['em']:.1f} (sd {o['em_sd']:.1f}) on "
                             f"{o['mean_trajectories']:.2f} trajectories")
        if cost and "calibration" in r:
            notes.append(f"ECE {r['calibration']['ece']:.3f} (T={r['calibration']['temperature']:g})")
        mine = ""
        if cost:
            tokens = r.get("mean_generated_tokens")
            mine = f" {r['mean_trajectories']:.2f} | {'-' if tokens is None else f'{tokens:.0f}'} |"
        qps = "-" if r["questions_per_s"] is None else f"{r['questions_per_s']:.3g}"
        lines.append(f"| {name} | {r['em']:.1f} | {r['f1']:.1f} |{pairs}{mine} {qps} | {r['tokens_in']} | {r['tokens_out']} | {'; '.join(notes)} |")
    families = results.get("families")
    if families:
        lines += ["", "EM by question family (questions):", "",
                  "| method |" + "".join(f" {f} ({n}) |" for f, n in families.items()),
                  "|---|" + "---:|" * len(families)]
        lines += [f"| {name} |" + "".join(f" {r['em_by_family'][f]:.1f} |" for f in families)
                  for name, r in results["methods"].items() if "em_by_family" in r]
    return "\n".join(lines)
