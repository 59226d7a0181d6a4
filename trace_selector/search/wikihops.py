"""The bundled `wikihops` search setting: multi-hop questions over the same Wikipedia leads and corpus
as `wikileads`, each needing at least two retrievals (docs/design.md, "Search settings").

Three question types, in the spirit of HotpotQA, 2WikiMultiHopQA and MuSiQue:

- ``bridge``: identify an entity from a clue sentence of its lead (its name masked), then look up an
  attribute stated in another passage of the same article ("In what year was the person born who
  directed the first feature-length animated film?": the clue names the article, its first passage
  holds the life span); or, HotpotQA style, quote another article's sentence with a name blanked out
  and ask about the blanked article (`mention_questions`).
- ``compositional``: follow a relation that one article's short description states to a second
  article, then ask about the second ("In what year was the author of A Christmas Carol born?";
  "What is the capital of the country or region in which Adana lies?").
- ``comparison``: compare a year of two named entities, each in its own article ("Who was born first,
  Galileo Galilei or Johannes Kepler?"); the answer is one of two named options (chance level 50%),
  so these are capped at `MAX_COMPARISON_SHARE` of the setting.

Every kept question passes the two-retrieval rule, checked with the setting's own BM25 index:
the whole question as a query returns no passage (title or text) with the answer in its top 3 (for
comparisons: not both years), and each hop's gold passage is in the top 3 of its own sub-question.
An article belongs to the split `wikileads.split_of` gives it, and a question is kept only when all
its articles share one split, so no article a test question depends on appears in any train question.

Pure functions of the article list and the index: two runs give the same bytes.
Run through `trace-selector data prepare --setting wikihops` (trace_selector.search.setting.prepare).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from trace_selector.records.answers import normalize_answer
from trace_selector.search.corpus import Passage
from trace_selector.search.wikileads import (
    _DANGLING, _PERSON, _THING, _YEARS, SPLITS, Article, clean, contains_answer, is_person, passages_of, shorten,
    split_sentences, subject_phrase, title_aliases,
)

VERSION = "wikihops-1"
"""Generator version recorded in the manifest; bump it whenever the output would change."""
TYPES = ("bridge", "compositional", "comparison")
MAX_QUESTION_WORDS = 50
MAX_PER_ANSWER = 20
"""At most this many questions share one gold answer (one birth year, one capital)."""
MAX_COMPARISON_SHARE = 0.2
"""Comparison questions (a 50% guess) are at most this share of all kept questions."""
TOP_K = 3
"""Depth of every retrieval check (the agent's default top-k)."""


@dataclass(slots=True, frozen=True)
class Hop:
    """One retrieval a question needs."""

    question: str
    """The hop as a question of its own ("In what year was Charles Dickens born?")."""
    title: str
    """Article holding the hop's fact."""
    passage: str
    """Corpus id of the passage holding the fact."""


@dataclass(slots=True)
class MultiHop:
    """A generated question before the retrieval checks."""

    question: str
    """Question text, ending in "?"."""
    answers: list[str]
    """Gold answer first, then safe aliases."""
    type: str
    """bridge / compositional / comparison."""
    template: str
    """Which pattern produced it (born_year, creator_born, capital_of_location, born_first, ...)."""
    hops: list[Hop]
    """Retrievals in the order an agent needs them (comparison: either order)."""
    chance: float = 0.0
    """Accuracy of a blind guess between named options (0.5 for comparisons, else 0)."""
    years: list[str] = field(default_factory=list)
    """Comparison only: the two years compared (both must not come back from one search)."""

    @property
    def entities(self) -> list[str]:
        return list(dict.fromkeys(h.title for h in self.hops))


# --- facts the leads and descriptions state ----------------------------------------------------

def is_human(art: Article) -> bool:
    """One human being: `wikileads.is_person`, and a People article or a lead saying "He/She ...", so
    empires and wars with a span in their description ("Byzantine Empire (330–1453)") are left out."""
    return is_person(art) and (art.topic == "People" or any(_PERSON.match(s) for s in split_sentences(art.lead)))


def life_span(art: Article) -> tuple[str | None, str | None]:
    """(birth year, death year) from a person's description "English writer (1812–1870)"."""
    m = _YEARS.search(art.description) if is_human(art) else None
    if not m:
        return None, None
    return m.group("born") or m.group("b"), m.group("died") or m.group("d")


_ROLES = (("director", ("film", "movie", "documentary")),
          ("composer", ("opera", "symphony", "concerto", "ballet", "oratorio", "song", "sonata", "suite",
                        "composition", "requiem", "cantata", "mass", "musical")),
          ("painter", ("painting", "fresco", "mural", "portrait", "triptych", "altarpiece")),
          ("sculptor", ("sculpture", "statue", "bust")),
          ("author", ("novel", "novella", "book", "poem", "play", "essay", "story", "dialogue", "treatise",
                      "tragedy", "comedy", "epic", "series", "work", "collection", "text", "memoir", "manifesto",
                      "pamphlet", "saga", "verse", "tale", "fairy", "trilogy", "libretto", "satire")))
_WORK = re.compile(r"^(?:(?P<year>\d{3,4}s?|\d+(?:st|nd|rd|th)-century(?: BC)?) )?(?P<kind>[^()]{2,60}?) "
                   r"(?:written |composed |directed |painted |created )?by (?P<name>.+)$")


@dataclass(slots=True, frozen=True)
class Relation:
    """A relation from one article to another, read off the first article's short description."""

    kind: str
    """The first article's kind as its description says ("1843 novella", "city")."""
    role: str
    """Creator relations: director / composer / painter / sculptor / author; "located" for places."""
    target: str
    """Title of the article the relation points to."""


def place_aliases(title: str) -> list[str]:
    """`title_aliases` plus the name before a comma ("San José, Costa Rica" -> "San José")."""
    out = title_aliases(title)
    head = title.split(",")[0].strip()
    return out + [head] if "," in title and head not in out else out


def _longest_title(text: str, titles: set[str]) -> str | None:
    words = text.split()
    for j in range(len(words), 0, -1):
        cand = " ".join(words[:j]).rstrip(".,;:")
        if cand in titles:
            return cand
    return None


def creator_of(art: Article, people: set[str]) -> Relation | None:
    """Work -> creator from a description "1843 novella by Charles Dickens" whose creator is an article
    about one person; the role comes from the kind word (novella -> author)."""
    m = _WORK.match(art.description)
    if not m:
        return None
    target = _longest_title(m.group("name"), people)
    words = set(re.findall(r"[a-z]+", m.group("kind").lower()))
    role = next((r for r, kinds in _ROLES if words & set(kinds)), None)
    if target is None or role is None or target == art.title:
        return None
    return Relation(m.group("kind").strip(), role, target)


_PLACE_KIND = re.compile(r"\b(city|town|capital|port|province|state|region|island|islands|metropolis|municipality|"
                         r"district|prefecture|village|peninsula|archipelago|county|oblast|emirate|governorate|"
                         r"canton|commune|territory|republic|mountain|volcano|lake|river|desert|site|temple|"
                         r"palace|cathedral|mosque|church|monument|castle|fortress|museum|university|park)\b", re.I)
_LOCATED = re.compile(r"^(?P<kind>[^()]{2,60}?) (?:in|of) (?:the )?(?P<place>[A-Z].*)$")


def location_of(art: Article, capitals: dict[str, str]) -> Relation | None:
    """Place -> the country or region it lies in, from a description "City in Turkey" or "Largest
    city of Ivory Coast" (the last comma part: "City in Bavaria, Germany" -> Germany), when that
    country or region has a known capital other than the place itself."""
    m = _LOCATED.match(art.description)
    if not m or not _PLACE_KIND.search(m.group("kind")) or re.search(r"\bcapital\b", m.group("kind"), re.I):
        return None
    place = _longest_title(m.group("place").split(",")[-1].strip(), set(capitals))
    if place is None or place == art.title or capitals[place] == art.title:
        return None
    return Relation(m.group("kind").strip(), "located", place)


_CAPITAL_DESC = re.compile(r"^(?:[A-Z][a-z]+ )?[Cc]apital(?: city)?(?: and (?:the )?(?:largest|most populous) "
                           r"(?:city|metropolis))?(?: city)? of (?:the )?(?P<place>[A-Z][^,;()]*)$")


def capitals(arts: Sequence[Article]) -> dict[str, str]:
    """Country or region -> its capital's title, from capital cities' descriptions
    ("Capital and largest city of Ghana"); a place named capital by two articles is left out."""
    titles = {a.title for a in arts}
    found: dict[str, set[str]] = defaultdict(set)
    for art in arts:
        m = _CAPITAL_DESC.match(art.description)
        place = _longest_title(m.group("place"), titles) if m else None
        if place and place != art.title:
            found[place].add(art.title)
    return {p: next(iter(c)) for p, c in sorted(found.items()) if len(c) == 1}


def clue_sentences(art: Article, pronoun: re.Pattern[str]) -> list[tuple[int, str]]:
    """(passage index, clue) for each lead sentence about the subject as "He/She/It <rest>", outside
    the first passage (which holds the description and so the life span or relation)."""
    out = []
    for p, group in enumerate(passages_of(art)):
        if p == 0:
            continue
        for sent in group:
            s = clean(sent)
            m = pronoun.match(s) if s else None
            rest = shorten(m.group("rest")) if m else None
            if rest and len(rest.split()) >= 5 and not _DANGLING.search(rest):
                out.append((p, rest))
    return out


# --- question templates -----------------------------------------------------------------------

def _pick(key: str, n: int) -> int:
    """A fixed pseudo-random choice among n options, by a hash of `key`."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def bridge_questions(art: Article, ids: list[str], rel: Relation | None) -> list[MultiHop]:
    """Clue (a later passage) -> the article -> a fact of its first passage."""
    out: list[MultiHop] = []
    name = subject_phrase(art)
    if is_human(art):
        clues = clue_sentences(art, _PERSON)
        if not clues:
            return out
        p, clue = clues[_pick(f"bridge:{art.title}", len(clues))]
        born, died = life_span(art)
        hop1 = Hop(f"Who {clue}?", art.title, ids[p])
        if born:
            out.append(MultiHop(f"In what year was the person born who {clue}?", [born], "bridge", "born_year",
                                [hop1, Hop(f"In what year was {name} born?", art.title, ids[0])]))
        if died:
            out.append(MultiHop(f"In what year did the person die who {clue}?", [died], "bridge", "died_year",
                                [hop1, Hop(f"In what year did {name} die?", art.title, ids[0])]))
        return out
    clues = clue_sentences(art, _THING)
    if not clues or rel is None:
        return out
    p, clue = clues[_pick(f"bridge:{art.title}", len(clues))]
    noun = _kind_noun(rel.kind)
    hop1 = Hop(f"Which {noun} {clue}?", art.title, ids[p])
    if rel.role == "located":
        out.append(MultiHop(f"In which country or region is the {noun} that {clue}?", title_aliases(rel.target),
                            "bridge", "location", [hop1, Hop(f"Where is {name}?", art.title, ids[0])]))
    else:
        out.append(MultiHop(f"Who was the {rel.role} of the {noun} that {clue}?", title_aliases(rel.target),
                            "bridge", "creator", [hop1, Hop(f"Who was the {rel.role} of {name}?", art.title, ids[0])]))
    return out


MENTIONS_PER_TEMPLATE = 3
"""Masked-mention questions per article and template, each about another name (more would let a few
long leads that name many people dominate the setting)."""
_SPAN = re.compile(r"\((?:c\. )?(?P<start>\d{3,4})\s*[–-]\s*(?:c\. )?\d{2,4}\)$")
_QUOTE_WORDS = (8, 32)
"""A masked sentence is quoted whole, so it must be long enough to find and short enough to read."""


def _standalone(text: str, start: int, end: int) -> bool:
    """The name at text[start:end] is not part of a longer proper name ("New Mexico", "Niger River")."""
    before = text[:start].rstrip().rsplit(" ", 1)[-1] if text[:start].strip() else ""
    after = text[end:].lstrip().split(" ", 1)[0].strip(",.;:") if text[end:].strip() else ""
    # A capitalised word right before the name joins it, unless it opens the sentence ("The ___ River").
    joined_before = (before[:1].isupper() and text[:start].strip() not in {"The", "A", "An"}
                     and not before.endswith((".", ",", ";", ":")))
    return not joined_before and not after[:1].isupper()


def mention_questions(art: Article, ids: list[str], targets: dict[str, list[MultiHop]],
                      pattern: re.Pattern[str]) -> list[MultiHop]:
    """HotpotQA-style bridges through a mention: a sentence of `art` names another article (a person
    with a life span, a country or region with a capital, an empire or war with a span); the question
    quotes the sentence with that
    name blanked out and asks about the named article. At most `MENTIONS_PER_TEMPLATE` questions per
    template and article, each about another name.
    `targets` maps the mentioned title to its second-hop questions (with "{blank}" in the question)."""
    found: dict[str, list[tuple[str, MultiHop]]] = defaultdict(list)
    options = []
    for p, group in enumerate(passages_of(art)):
        for sent in group:
            s = clean(sent)
            if not s or not _QUOTE_WORDS[0] <= len(s.split()) <= _QUOTE_WORDS[1] or '"' in s:
                continue
            names = {m.group(0) for m in pattern.finditer(s) if _standalone(s, m.start(), m.end())} - {art.title}
            for name in sorted(names):
                if s.count(name) != 1:
                    continue
                options.append((p, s.replace(name, "___"), name))
    options.sort(key=lambda o: _pick(f"mention:{art.title}:{o[2]}:{o[1]}", 1 << 30))
    for p, masked, name in options:
        for q in targets.get(name, []):
            if len(found[q.template]) >= MENTIONS_PER_TEMPLATE or name in {x[0] for x in found[q.template]}:
                continue
            if contains_answer(masked, title_aliases(name)):
                continue
            hop1 = Hop(f'"{masked}"', art.title, ids[p])
            found[q.template].append((name, MultiHop(q.question.format(blank=f'"{masked}"'), q.answers, "bridge",
                                                     q.template, [hop1, *q.hops])))
    return [q for template in sorted(found) for _, q in found[template]]


def _kind_noun(kind: str) -> str:
    """The head noun phrase of a description kind, lowercased, years dropped ("1843 novella" -> "novella")."""
    words = [w for w in kind.split() if not re.match(r"^\d", w)]
    phrase = " ".join(words).strip() or "work"
    return phrase[:1].lower() + phrase[1:] if not phrase.split()[0].isupper() else phrase


def compositional_questions(art: Article, ids: list[str], rel: Relation, target: Article, target_ids: list[str],
                            capital: tuple[str, list[str]] | None) -> list[MultiHop]:
    """Relation of `art` -> `target` -> a fact of `target`."""
    name = subject_phrase(art)
    out: list[MultiHop] = []
    if rel.role == "located":
        if capital is None:
            return out
        cap_title, cap_ids = capital
        hop1 = Hop(f"In which country or region is {name}?", art.title, ids[0])
        hop2 = Hop(f"What is the capital of {subject_phrase(target)}?", cap_title, cap_ids[0])
        out.append(MultiHop(f"What is the capital of the country or region in which {name} lies?",
                            place_aliases(cap_title), "compositional", "capital_of_location", [hop1, hop2]))
        return out
    born, died = life_span(target)
    hop1 = Hop(f"Who was the {rel.role} of {name}?", art.title, ids[0])
    who = subject_phrase(target)
    if born:
        out.append(MultiHop(f"In what year was the {rel.role} of {name} born?", [born], "compositional",
                            "creator_born", [hop1, Hop(f"In what year was {who} born?", target.title, target_ids[0])]))
    if died:
        out.append(MultiHop(f"In what year did the {rel.role} of {name} die?", [died], "compositional",
                            "creator_died", [hop1, Hop(f"In what year did {who} die?", target.title, target_ids[0])]))
    return out


def comparison_question(a: Article, b: Article, ids_a: list[str], ids_b: list[str], which: str) -> MultiHop | None:
    """Who was born (died) first, A or B? Both named, each year in its own article."""
    ya, yb = (life_span(x)[0 if which == "born" else 1] for x in (a, b))
    if not ya or not yb or ya == yb:
        return None
    first = a if int(ya) < int(yb) else b
    na, nb = subject_phrase(a), subject_phrase(b)
    verb = "was born" if which == "born" else "died"
    ask = "In what year was {} born?" if which == "born" else "In what year did {} die?"
    return MultiHop(f"Who {verb} first, {na} or {nb}?", title_aliases(first.title), "comparison",
                    f"{which}_first", [Hop(ask.format(na), a.title, ids_a[0]), Hop(ask.format(nb), b.title, ids_b[0])],
                    chance=0.5, years=[ya, yb])


def candidates(arts: Sequence[Article], owned: dict[str, list[str]]) -> tuple[list[MultiHop], list[MultiHop]]:
    """All (bridge + compositional, comparison) candidates, in a fixed order, before any check."""
    by_title = {a.title: a for a in arts}
    people = {a.title for a in arts if life_span(a)[0]}
    caps = capitals(arts)
    cap_ids = {place: (cap, owned[cap]) for place, cap in caps.items()}
    main: list[MultiHop] = []
    for art in arts:
        rel = creator_of(art, people) or location_of(art, caps)
        main += bridge_questions(art, owned[art.title], rel)
        if rel is not None:
            main += compositional_questions(art, owned[art.title], rel, by_title[rel.target], owned[rel.target],
                                            cap_ids.get(rel.target))
    targets: dict[str, list[MultiHop]] = defaultdict(list)
    for title in sorted(people):
        born, died = life_span(by_title[title])
        who = subject_phrase(by_title[title])
        ids0 = owned[title][0]
        if born:
            targets[title].append(MultiHop("In what year was the person born who is left out of this sentence: {blank}?",
                                           [born], "bridge", "mention_born",
                                           [Hop(f"In what year was {who} born?", title, ids0)]))
        if died:
            targets[title].append(MultiHop("In what year did the person die who is left out of this sentence: {blank}?",
                                           [died], "bridge", "mention_died",
                                           [Hop(f"In what year did {who} die?", title, ids0)]))
    # Empires, wars and periods with a span in their description ("Crimean War (1853–1856)").
    for art in arts:
        m = _SPAN.search(art.description)
        if m and not is_person(art) and art.title not in people:
            targets[art.title].append(MultiHop("In what year did the thing left out of this sentence begin: {blank}?",
                                               [m.group("start")], "bridge", "mention_began",
                                               [Hop(f"When did {subject_phrase(art)} begin?", art.title,
                                                    owned[art.title][0])]))
    for place, (cap, cids) in sorted(cap_ids.items()):
        targets[place].append(MultiHop("What is the capital of the place left out of this sentence: {blank}?",
                                       place_aliases(cap), "bridge", "mention_capital",
                                       [Hop(f"What is the capital of {subject_phrase(by_title[place])}?", cap, cids[0])]))
    names = sorted(targets, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    for art in arts:
        main += mention_questions(art, owned[art.title], targets, pattern)
    # Comparison pairs: people in a hash order, each paired with its neighbour, so every person is in
    # at most two pairs (once per year kind).
    pairs: list[MultiHop] = []
    for which in ("born", "died"):
        group = sorted((a for a in arts if a.title in people),
                       key=lambda a: hashlib.sha256(f"{which}:{a.title}".encode()).hexdigest())
        for a, b in zip(group[::2], group[1::2]):
            q = comparison_question(a, b, owned[a.title], owned[b.title], which)
            if q is not None:
                pairs.append(q)
    return main, pairs


SPLIT_SHARES = (("train", 70), ("dev", 15), ("test", 15))
"""Percent of new article groups drawn into each split: the train pool needs about 1,900 questions for
800 mixed ones at the default policy's 42.5% mixed share; dev (400 questions) and test (500) still hold
the dev, DivInit and partial-rollout pools and the 400-question sealed pool."""


class SplitAssigner:
    """Splits that cannot leak: every article gets one split, fixed by the first kept question that
    uses it; a question takes its articles' split, or draws one by a hash of its text when none of
    them has one yet; a question whose articles already sit in two splits is refused. So no article
    that a question of one split depends on is used by a question of another."""

    def __init__(self) -> None:
        self.split: dict[str, str] = {}

    def assign(self, question: str, entities: Sequence[str]) -> str | None:
        taken = {self.split[t] for t in entities if t in self.split}
        if len(taken) > 1:
            return None
        if taken:
            split = taken.pop()
        else:
            bucket = _pick(f"split:{question}", 100)
            split = next(name for name, upto in _cumulative(SPLIT_SHARES) if bucket < upto)
        for t in entities:
            self.split[t] = split
        return split


def _cumulative(shares: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    out, total = [], 0
    for name, pct in shares:
        total += pct
        out.append((name, total))
    return out


# --- the retrieval checks ---------------------------------------------------------------------

def passage_has(p: Passage, answers: Sequence[str]) -> bool:
    """True if the passage as the agent sees it (title and text) contains a gold alias."""
    return contains_answer(f"{p.title}. {p.text}", answers)


@dataclass(slots=True)
class Checks:
    """Per-candidate outcomes of the retrieval checks."""

    one_search: bool
    """The whole question's top-k holds the answer (comparison: both years): dropped."""
    hop_found: list[bool]
    """Each hop's gold passage is in its sub-question's top-k."""


def check(cands: Sequence[MultiHop], index, k: int = TOP_K) -> list[Checks]:  # index: BM25Index
    """Run the two-retrieval rule for every candidate with batched BM25 searches."""
    whole = index.search_batch([c.question for c in cands], k)
    hop_q = [h.question for c in cands for h in c.hops]
    hop_hits = iter(index.search_batch(hop_q, k))
    by_id = {p.id: p for p in index.passages}
    out = []
    for c, hits in zip(cands, whole):
        found = [by_id[h.doc_id] for h in hits]
        if c.type == "comparison":
            one = all(any(contains_answer(p.text, [y]) for p in found) for y in c.years)
        else:
            one = any(passage_has(p, c.answers) for p in found)
        hop_found = [any(h.doc_id == hop.passage for h in next(hop_hits)) for hop in c.hops]
        out.append(Checks(one, hop_found))
    return out


def independent_answer_rate(rows: Sequence[dict], passages: Sequence[Passage], k: int = TOP_K) -> float:
    """Share of questions whose answer (any alias, title or text) is in the top k of a second BM25,
    built independently of the setting's index: bm25s' own tokenizer with English stopwords and no
    stemming, Robertson's BM25 with Pyserini's k1=0.9, b=0.4."""
    import bm25s

    if not rows:
        return 0.0
    corpus = [f"{p.title}. {p.text}" for p in passages]
    retriever = bm25s.BM25(k1=0.9, b=0.4, method="robertson")
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([r["question"] for r in rows], stopwords="en", show_progress=False)
    docs, _ = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    hits = 0
    for row, top in zip(rows, docs):
        if row["type"] == "comparison":
            continue
        hits += any(passage_has(passages[int(i)], row["golden_answers"]) for i in top)
    asked = sum(r["type"] != "comparison" for r in rows)
    return hits / max(1, asked)


def generate(arts: Sequence[Article], passages: Sequence[Passage], owned: dict[str, list[str]],
             index) -> tuple[list[dict], dict]:
    """Kept questions as FlashRAG rows (split, type, template, hops, entities, chance) and a report
    of what each check kept, per type."""
    main, pairs = candidates(arts, owned)
    splits = SplitAssigner()
    stats: dict[str, Counter] = defaultdict(Counter)
    hop_hits: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0], [0, 0]])
    kept: list[tuple[MultiHop, str]] = []
    per_answer: Counter[str] = Counter()
    for group in (main, pairs):
        results = check(group, index)
        # A hash order, so the first questions (which fix their articles' splits) are no family's favourites.
        order = sorted(range(len(group)), key=lambda i: hashlib.sha256(group[i].question.encode()).hexdigest())
        for c, res in ((group[i], results[i]) for i in order):
            s = stats[c.type]
            s["candidates"] += 1
            for i, ok in enumerate(res.hop_found):
                hop_hits[c.type][i][0] += ok
                hop_hits[c.type][i][1] += 1
            if len(c.question.split()) > MAX_QUESTION_WORDS:
                s["dropped_too_long"] += 1
            elif c.type != "comparison" and contains_answer(c.question, c.answers):
                s["dropped_answer_in_question"] += 1
            elif res.one_search:
                s["dropped_one_search_finds_answer"] += 1
            elif not all(res.hop_found):
                s["dropped_hop_not_retrievable"] += 1
            elif per_answer[normalize_answer(c.answers[0])] >= MAX_PER_ANSWER:
                s["dropped_answer_cap"] += 1
            elif (split := splits.assign(c.question, c.entities)) is None:
                s["dropped_articles_in_two_splits"] += 1
            else:
                if c.type != "comparison":
                    per_answer[normalize_answer(c.answers[0])] += 1
                kept.append((c, split))
    # Comparisons fill at most MAX_COMPARISON_SHARE of the whole: n_cmp <= share / (1 - share) * n_other.
    n_other = sum(c.type != "comparison" for c, _ in kept)
    room = int(MAX_COMPARISON_SHARE / (1 - MAX_COMPARISON_SHARE) * n_other)
    cmp_rows = [(c, s) for c, s in kept if c.type == "comparison"]
    stats["comparison"]["dropped_share_cap"] = max(0, len(cmp_rows) - room)
    kept = [(c, s) for c, s in kept if c.type != "comparison"] + cmp_rows[:room]
    rows = []
    for n, (c, split) in enumerate(kept):
        rows.append({
            "id": f"wikihops-{c.type}-{n:05d}", "question": c.question, "golden_answers": c.answers, "split": split,
            "family": c.type, "type": c.type, "template": c.template, "entities": c.entities, "chance": c.chance,
            "hops": [{"question": h.question, "title": h.title, "passage": h.passage} for h in c.hops],
        })
    report = {
        "candidates": {t: stats[t]["candidates"] for t in TYPES},
        "dropped": {t: {k: v for k, v in sorted(stats[t].items()) if k.startswith("dropped")} for t in TYPES},
        "hop_recall_at_3": {t: [round(h / max(1, n), 4) for h, n in hop_hits[t]] for t in TYPES},
        "chance": {t: (0.5 if t == "comparison" else 0.0) for t in TYPES},
    }
    return rows, report


def leakage(rows: Sequence[dict]) -> dict[str, int]:
    """Articles that questions of two different splits both depend on, per pair of splits (0 expected)."""
    arts: dict[str, set[str]] = {s: set() for s in SPLITS}
    for r in rows:
        arts[r["split"]].update(r["entities"])
    return {f"{a}&{b}": len(arts[a] & arts[b]) for i, a in enumerate(SPLITS) for b in SPLITS[i + 1:]}



def format_report(r: dict, folder) -> str:
    """Text form of a wikihops report.json: counts, what each check kept, hop recall, leakage."""
    src = r["source"]
    lines = [f"{r['setting']} ({r['version']}) in {folder}",
             f"source: {src['package']} {src['version']} {src['file']} sha256 {src['sha256'][:16]}...",
             f"articles {r['articles']} | passages {r['passages']} | pages {r['pages']}", "",
             f"{'questions':<16}" + "".join(f"{s:>8}" for s in (*r["splits"], "total"))
             + f"{'candidates':>12}{'kept':>8}{'chance':>8}"]
    for t, counts in r["questions"].items():
        extra = (f"{r['candidates'][t]:>12}{r['kept_share'][t]:>8.1%}{r['chance'][t]:>8.0%}" if t in r["candidates"]
                 else "")
        lines.append(f"  {t:<14}" + "".join(f"{counts.get(s, 0):>8}" for s in (*r["splits"], "total")) + extra)
    lines += ["", "templates: " + ", ".join(f"{k} {v}" for k, v in r["templates"].items()), "",
              "dropped (per type):"]
    for t, drops in r["dropped"].items():
        lines.append(f"  {t:<14} " + (", ".join(f"{k.removeprefix('dropped_')} {v}" for k, v in drops.items()) or "none"))
    lines += ["", "BM25 recall@3 of each hop's gold passage from its own sub-question (all candidates):"]
    for t, rec in r["hop_recall_at_3"].items():
        lines.append(f"  {t:<14} " + "  ".join(f"hop {i + 1} {x:.3f}" for i, x in enumerate(rec)))
    ind = r["independent_bm25_answer_at_3"]
    lines += ["", f"comparison share {r['comparison_share']:.1%} (a blind guess between the two named options is right half the time)",
              f"answer in the top 3 of an independent BM25 (whole question, dev+test, non-comparison): "
              f"{ind['dev+test']:.1%} of {ind['n']}",
              "articles shared between splits: " + ", ".join(f"{k} {v}" for k, v in r["leakage_shared_articles"].items()),
              "", "files (sha256):"] + [f"  {k:<28} {v}" for k, v in r["files"].items()]
    return "\n".join(lines)
