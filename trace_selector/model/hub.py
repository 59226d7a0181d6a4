"""Selector checkpoints in the Hugging Face Hub format: save, strict load (`StrictHubMixin`, which
`SelectorNet` inherits, so the network owns its checkpoint), publish, model card.

A checkpoint folder holds ``model.safetensors`` (weights), ``config.json`` (the `ModelConfig`, written
by `PyTorchModelHubMixin`), optionally ``calibration.json`` (checkpoint_calibration.py) and
``README.md`` (a model card naming the search setting, the text encoder and the validation metrics,
rendered from ``card_template.md`` by `huggingface_hub.ModelCard` with YAML metadata the Hub reads).
The same folder loads locally or after a push:

    save_selector(net, "checkpoints/wikileads", setting="wikileads", metrics={"val_acc": 0.61})
    net = SelectorNet.load_checkpoint("checkpoints/wikileads")   # or "user/trace-selector-wikileads"
    trace-selector publish --checkpoint checkpoints/wikileads --repo-id user/trace-wikileads

Loading is strict: an unknown config key (a newer format) or a missing / unexpected / mis-shaped
weight is an `InputError` that names it; config keys added after a checkpoint was saved take their
defaults, which reproduce the old behaviour.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from huggingface_hub import ModelCard, ModelCardData, PyTorchModelHubMixin

from trace_selector.errors import InputError

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
CARD = "README.md"
TRAINING_CONFIG = "training_config.yaml"
"""The resolved training config, beside the weights of a trained checkpoint (optional)."""
CALIBRATION_FILE = "calibration.json"
"""The temperature the selector's confidences are read at (optional; `trace-selector calibrate`
writes it, checkpoint_calibration.py): ``{"temperature": T, ...}``."""
FILES = [CONFIG, WEIGHTS, CARD, TRAINING_CONFIG, CALIBRATION_FILE]
"""What a checkpoint folder may hold, downloaded and published together (the calibration file is
optional: `trace-selector calibrate` writes it)."""

CARD_TEMPLATE = Path(__file__).with_name("card_template.md")
"""Jinja template of the model card (package data), rendered by `huggingface_hub.ModelCard.from_template`."""

LICENSE = "apache-2.0"
"""License of the selectors this package trains and ships: the package's own (pyproject.toml)."""

TAGS = ("trace-selector", "graph-neural-network", "answer-selection")
"""Hub tags of every selector card; the method name (`ModelConfig.method`) is added to them."""

PAPER_LINE = ("`trace`: the paper's configuration (answer inputs: embedding + log1p(c), c/R; no grounding features, "
              "no vote prior)")
"""How a model card names the paper's method; ours get `method_line`'s list of additions."""


def method_line(config: Any) -> str:
    """The card's one-line account of a method: the paper's configuration, or TRACE plus which of our
    additions (so a card never claims fewer or more of them than the weights use)."""
    if config.method == "trace":
        return PAPER_LINE
    ours = [name for name, on in (("grounding features", config.grounding), ("a vote prior", config.vote_prior),
                                  ("the echo input", config.echo), ("the count input dropped", not config.count_input)) if on]
    listed = ", ".join(ours[:-1]) + f" and {ours[-1]}" if len(ours) > 1 else "".join(ours)
    return f"`{config.method}`: TRACE with {listed}, ours (not the paper's configuration)"


def card_data(config: Any, metrics: dict[str, float] | None = None) -> ModelCardData:
    """The card's YAML metadata: library, license, tags (with the method name), metric kinds."""
    return ModelCardData(library_name="trace-selector", license=LICENSE, tags=[*TAGS, config.method],
                         metrics=["accuracy"] if metrics else None)


def render_card(config: Any, setting: str | None = None, metrics: dict[str, float] | None = None,
                extra: dict[str, Any] | None = None, name: str = "PATH_OR_REPO_ID") -> str:
    """The model card text for a `ModelConfig` and its metrics, from `CARD_TEMPLATE`."""
    method = config.method
    card = ModelCard.from_template(
        card_data(config, metrics),
        template_path=str(CARD_TEMPLATE),
        method=method,
        method_line=method_line(config),
        setting=setting or "unknown",
        config=config,
        extra=dict(extra or {}),
        metrics={k: f"{v:.4f}" if isinstance(v, float) else v for k, v in (metrics or {}).items()},
        name=name,
    )
    return str(card).rstrip("\n") + "\n"  # Jinja drops the template's final newline


def save_selector(net: Any, out_dir: str | Path, setting: str | None = None,
                  metrics: dict[str, float] | None = None, extra: dict[str, Any] | None = None,
                  source: str | Path | None = None) -> Path:
    """Write `net` as a Hub-format folder (weights, config, model card) and return its path.

    With `source` (a checkpoint folder `net` was loaded from), its model card, training config and
    calibration file are copied instead of rendering a new card, so a re-save keeps the metrics it was published with.
    """
    import shutil

    from trace_selector.atomic import atomic_write

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / CARD).unlink(missing_ok=True)  # the mixin never overwrites a card; ours replaces it
    net.save_pretrained(out)
    src = Path(source) if source is not None else None
    if src is not None and (src / CARD).is_file() and src.resolve() != out.resolve():
        shutil.copyfile(src / CARD, out / CARD)
        for name in (TRAINING_CONFIG, CALIBRATION_FILE):  # both describe these same weights
            if (src / name).is_file():
                shutil.copyfile(src / name, out / name)
        return out
    with atomic_write(out / CARD) as fh:
        fh.write(render_card(net.config, setting, metrics, extra, name=str(out)))
    return out


EVAL_START = "<!-- trace-selector:evaluation -->"
EVAL_END = "<!-- /trace-selector:evaluation -->"


def relocate_card(folder: str | Path, old: str | Path, rows: dict[str, str] | None = None) -> Path:
    """After a saved selector was copied from `old` to `folder`: point its card's usage lines at
    `folder`, and replace the value of each ``| key | value |`` row named in `rows`. Returns the card."""
    from trace_selector.atomic import atomic_write

    card = Path(folder) / CARD
    text = card.read_text()
    for form in ('"{}"', "--checkpoint {} "):
        text = text.replace(form.format(old), form.format(folder))
    for key, value in (rows or {}).items():
        text = re.sub(rf"^\| {re.escape(key)} \| .* \|$", lambda _: f"| {key} | {value} |", text, count=1, flags=re.M)
    with atomic_write(card) as fh:
        fh.write(text)
    return card


def eval_markers(pool: str | None = None) -> tuple[str, str]:
    """Start and end markers of the evaluation section of one pool (or the pool-less legacy one)."""
    if pool is None:
        return EVAL_START, EVAL_END
    return f"<!-- trace-selector:evaluation pool={pool} -->", f"<!-- /trace-selector:evaluation pool={pool} -->"


def card_with_evaluation(card: str, table: str, command: str | None = None, pool: str | None = None,
                         note: str | None = None) -> str:
    """`card` with its evaluation section of `pool` set to `table` (Markdown from `report.format_table`)
    and an optional `note` above it: replaced in place when the card has that section already, else
    appended, so reruns never stack up and each pool (in-distribution, transfer) keeps its own section."""
    start, end = eval_markers(pool)
    title = "## Evaluation" + (f" on `{pool}`" if pool else "")
    body = (title + "\n\n" + (note.strip() + "\n\n" if note else "")
            + (f"```bash\n{command}\n```\n\n" if command else "") + table.strip() + "\n")
    section = f"{start}\n{body}{end}\n"
    if start in card and end in card:
        head, rest = card.split(start, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        return head + section + tail
    return card.rstrip("\n") + "\n\n" + section


def below_majority_note(row: str, entry: dict[str, Any]) -> str | None:
    """A warning for a card when selector row `row` (its results.json entry) scores below majority vote:
    a loss when the 95% interval excludes zero, no measurable gain when it does not; None when the
    selector scores at least as well as majority vote."""
    pair = entry.get("vs_majority")
    if not pair or pair["diff"] >= 0.0:
        return None
    from trace_selector.paired import Paired

    vs = f"{Paired(**pair).to_text()} against majority vote (difference [95% interval] won/lost)"
    if pair["high"] < 0.0:
        return (f"**Below majority vote on this pool:** `{row}` scores {entry['em']:.1f} EM, {vs}. "
                "On rollouts like these, prefer majority vote.")
    return (f"**No gain over majority vote on this pool:** `{row}` scores {entry['em']:.1f} EM, {vs}; "
            "the interval includes zero, so the loss is not significant, but nothing here favours the selector.")


def update_card(checkpoint: str | Path, table: str, command: str | None = None, pool: str | None = None,
                note: str | None = None) -> Path:
    """Write an evaluation table (of `pool`, with `note` above it) into a local checkpoint's model card
    (atomically); its metadata then also lists the table's metrics (exact match, F1)."""
    from trace_selector.atomic import atomic_write

    path = Path(checkpoint) / CARD
    if not path.is_file():
        raise InputError(f"{checkpoint}: no {CARD} model card to update (is it a local checkpoint folder?)")
    try:
        card = ModelCard.load(path)
    except ValueError as err:  # a YAML header that is not a mapping
        raise InputError(f"{path}: unreadable model card ({_one_line(err)})") from err
    card.text = card_with_evaluation(card.text, table, command, pool, note)
    card.data.metrics = list(dict.fromkeys([*(card.data.metrics or []), "exact_match", "f1"]))
    with atomic_write(path) as fh:
        fh.write(str(card))
    return path


def is_repo_id(path_or_repo: str | Path) -> bool:
    """Whether a checkpoint argument names a Hub repo ('owner/name') rather than a local path: nothing
    exists there and it has the shape of a repo id."""
    text = str(path_or_repo)
    return not Path(text).expanduser().exists() and not text.startswith((".", "/", "~")) and text.count("/") == 1


def resolve(path_or_repo: str | Path, revision: str | None = None, cache_dir: str | Path | None = None,
            token: str | bool | None = None, local_files_only: bool = False) -> Path:
    """The local checkpoint folder of a folder path (or its ``selector/`` subfolder) or Hub repo id
    (downloaded into the Hub cache)."""
    path = Path(path_or_repo).expanduser()
    if path.is_dir():
        for candidate in (path, path / "selector"):
            if (candidate / CONFIG).is_file():
                return candidate
        raise InputError(f"{path}: not a selector checkpoint (no {CONFIG}; expected {CONFIG} + {WEIGHTS})")
    if not is_repo_id(path_or_repo):
        raise InputError(f"{path_or_repo}: checkpoint folder not found (and not a Hub repo id 'owner/name')")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(
            repo_id=str(path_or_repo), revision=revision, cache_dir=cache_dir, token=token,
            local_files_only=local_files_only, allow_patterns=FILES,
        ))
    except Exception as err:  # offline, unknown repo, auth: all one line for the CLI
        # A mistyped local folder such as 'checkpoints/name' also has a repo id's shape: say both.
        raise InputError(f"{path_or_repo}: no checkpoint folder there, and cannot fetch it as Hub repo "
                         f"'{path_or_repo}' ({_one_line(err)})") from err


def read_temperature(checkpoint: str | Path) -> float | None:
    """The temperature in ``<checkpoint>/calibration.json``; a Hub repo id is read from its snapshot
    (fetched like the selector itself). None: the checkpoint has no such file."""
    folder = Path(checkpoint).expanduser()
    if is_repo_id(checkpoint):
        folder = resolve(str(checkpoint))
    path = folder / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["temperature"]
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"{path}: expected a JSON object with a number \"temperature\" ({err})") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InputError(f"{path}: temperature must be a number > 0, got {value!r}")
    return float(value)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def _names(keys: list[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


class StrictHubMixin(PyTorchModelHubMixin):
    """`PyTorchModelHubMixin` whose loading is strict, for networks built from a config dataclass.

    The network class sets `config_class` (a dataclass with ``from_json(data, where)``) and takes that
    config as its only ``__init__`` argument; ``save_pretrained`` is the mixin's, while
    ``from_pretrained`` and `load_checkpoint` refuse any mismatch between config.json and the weights.
    """

    config_class: ClassVar[Any]
    """The network's config dataclass (decodes ``config.json``)."""

    @classmethod
    def load_checkpoint(cls, path_or_repo: str | Path, config: dict[str, Any] | None = None, map_location: str = "cpu",
                        revision: str | None = None, cache_dir: str | Path | None = None,
                        token: str | bool | None = None, local_files_only: bool = False):
        """The network in eval mode from a checkpoint folder or Hub repo id, loaded strictly."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        folder = resolve(path_or_repo, revision, cache_dir, token, local_files_only)
        config_path, weights = folder / CONFIG, folder / WEIGHTS
        if config is None:
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as err:
                raise InputError(f"{config_path}: unreadable config ({_one_line(err)})") from err
        cfg = cls.config_class.from_json(config, where=str(config_path))
        if not weights.is_file():
            raise InputError(f"{weights}: weights file missing")
        try:
            state = load_file(str(weights), device=map_location)
        except (SafetensorError, OSError) as err:
            raise InputError(f"{weights}: unreadable safetensors file ({_one_line(err)})") from err
        net = cls(cfg)
        expected = net.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        shapes = sorted(k for k in set(expected) & set(state) if expected[k].shape != state[k].shape)
        problems = []
        if missing:
            problems.append(f"missing weights {_names(missing)}")
        if unexpected:
            problems.append(f"unexpected weights {_names(unexpected)}")
        if shapes:
            problems.append("shape mismatch " + _names([f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}" for k in shapes]))
        if problems:
            raise InputError(f"{weights}: checkpoint does not match its config.json: {'; '.join(problems)}")
        net.load_state_dict(state, strict=True)
        return net.eval()

    @classmethod
    def _from_pretrained(cls, *, model_id: str, map_location: str = "cpu", strict: bool = True, **kwargs: Any):
        """Strict loading for the mixin's ``from_pretrained``."""
        return cls.load_checkpoint(
            model_id,
            config=kwargs.get("config"),
            map_location=map_location,
            revision=kwargs.get("revision"),
            cache_dir=kwargs.get("cache_dir"),
            token=kwargs.get("token"),
            local_files_only=bool(kwargs.get("local_files_only", False)),
        )

    @classmethod
    def publish(cls, checkpoint: str | Path, repo_id: str, endpoint: str | None = None, private: bool = False,
                token: str | None = None) -> str:
        """Upload a checkpoint folder to a Hub repo (created if needed); returns the repo URL.

        The folder is loaded first, so a broken checkpoint is never published. Any network or auth
        failure is an `InputError` with one line saying where and why.
        """
        folder = resolve(checkpoint, None, None, None, True) if Path(checkpoint).is_dir() else None
        if folder is None:
            raise InputError(f"{checkpoint}: checkpoint folder not found")
        cls.load_checkpoint(folder)
        from huggingface_hub import HfApi

        where = endpoint or "the Hugging Face Hub"
        try:
            api = HfApi(endpoint=endpoint, token=token)
            url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
            api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                              allow_patterns=FILES, commit_message="Upload TRACE selector")
        except Exception as err:
            raise InputError(f"publish {repo_id} to {where} failed ({_one_line(err)})") from err
        return str(url)
