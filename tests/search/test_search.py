"""Corpus parsing, BM25 ranking and save/load, canonical URLs, and the `index`/`search` commands."""

from __future__ import annotations

import gzip
import json

import pytest

from trace_selector.cli import main
from trace_selector.errors import FormatError, InputError
from trace_selector.search.bm25 import BM25Index, SearchHit, build_index, format_results, s_stem, tokenize
from trace_selector.search.corpus import Passage, parse_contents, read_corpus, write_corpus
from trace_selector.search.urls import canonical_url, wiki_url

DOCS = [
    ("Tomato", "The tomato is an edible berry of the nightshade family."),
    ("Potato", "The potato is a starchy tuber grown in the Andes."),
    ("Paris", "Paris is the capital and largest city of France."),
    ("Berlin", "Berlin is the capital of Germany."),
    ("Columbian exchange", "The Spanish brought tomatoes and potatoes to Europe."),
]


def _corpus(tmp_path, name="corpus.jsonl"):
    path = tmp_path / name
    write_corpus([Passage(str(i), t, x) for i, (t, x) in enumerate(DOCS)], path)
    return path


def test_corpus_round_trip_plain_and_gz(tmp_path):
    for name in ("c.jsonl", "c.jsonl.gz"):
        path = _corpus(tmp_path, name)
        passages = read_corpus(path)
        assert [(p.title, p.text) for p in passages] == DOCS
        assert passages[2].id == "2"
    first = json.loads(gzip.open(tmp_path / "c.jsonl.gz", "rt").readline())
    assert first == {"id": "0", "contents": '"Tomato"\nThe tomato is an edible berry of the nightshade family.'}


def test_parse_contents_without_title():
    assert parse_contents('"Mercury (planet)"\nA planet.') == ("Mercury (planet)", "A planet.")
    assert parse_contents("no title line") == ("", "no title line")


@pytest.mark.parametrize(
    "line, where",
    [
        ('{"id": "1", "contents": "\\"T\\"\\nx"}\n{"id": 2}\n', ":2: field 'contents': missing"),
        ('{"contents": "x"}\n', ":1: field 'id': missing"),
        ('{"id": "1", "contents": 5}\n', ":1: field 'contents': expected a string"),
        ('{"id": "1", "contents": "a"}\n{"id": "1", "contents": "b"}\n', ":2: field 'id': duplicate id '1'"),
        ('{"id": "1", "contents": "a"}\nnot json\n', ":2: not valid JSON"),
        ("[1, 2]\n", ":1: expected a JSON object"),
    ],
)
def test_malformed_corpus_names_file_line_field(tmp_path, line, where):
    path = tmp_path / "bad.jsonl"
    path.write_text(line)
    with pytest.raises(FormatError) as err:
        read_corpus(path)
    assert str(err.value).startswith(str(path)) and where in str(err.value)


def test_missing_and_empty_corpus(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_corpus(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(FormatError, match="empty"):
        read_corpus(tmp_path / "empty.jsonl")


def test_tokenizer_folds_case_accents_plurals_and_stopwords():
    assert tokenize("The Tomatoes of Bogotá") == ["tomatoe", "bogota"]
    assert [s_stem(w) for w in ("berries", "potatoes", "cats", "glass", "virus", "is")] == [
        "berry", "potatoe", "cat", "glass", "virus", "is"]
    assert tokenize("cats") == tokenize("cat")


def test_search_ranks_the_matching_passage_first(tmp_path):
    index = BM25Index.build(read_corpus(_corpus(tmp_path)))
    hits = index.search("capital of Germany", k=3)
    assert [h.title for h in hits[:2]] == ["Berlin", "Paris"]
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert hits[0].score > hits[1].score > 0
    assert isinstance(hits[0], SearchHit) and hits[0].doc_id == "3"
    # Only passages sharing a term come back; a query of stop words finds nothing.
    assert len(index.search("starchy tuber", k=5)) == 1
    assert index.search("the of and", k=3) == []


def test_ties_break_by_corpus_order(tmp_path):
    passages = [Passage(str(i), "", "same words here") for i in range(6)]
    index = BM25Index.build(passages)
    assert [h.doc_id for h in index.search("words", k=4)] == ["0", "1", "2", "3"]


def test_batch_equals_single_and_save_load_round_trip(tmp_path):
    index = BM25Index.build(read_corpus(_corpus(tmp_path)))
    queries = ["tomato berry", "capital", "potatoes Andes", "Spanish Europe", "zzz"]
    batch = index.search_batch(queries, k=3, chunk=2)
    assert batch == [index.search(q, 3) for q in queries]
    index.save(tmp_path / "idx")
    index.save(tmp_path / "idx")  # overwrite in place
    loaded = BM25Index.load(tmp_path / "idx")
    assert loaded.search_batch(queries, k=3) == batch
    assert len(loaded) == len(DOCS)
    with pytest.raises(InputError, match="k must be"):
        index.search("x", 0)


def test_load_rejects_a_non_index_folder(tmp_path):
    with pytest.raises(InputError, match="not a BM25 index folder"):
        BM25Index.load(tmp_path)


def test_format_results():
    hits = [SearchHit(1, "3", "Berlin", "Berlin is the capital.", 2.0), SearchHit(2, "2", "Paris", "Paris too.", 1.0)]
    assert format_results(hits) == "Doc 1 (Title: Berlin) Berlin is the capital.\nDoc 2 (Title: Paris) Paris too."
    assert format_results([]) == "No results found."


def test_index_and_search_commands(tmp_path, capsys):
    corpus = _corpus(tmp_path)
    assert main(["index", str(corpus), "--out", str(tmp_path / "idx")]) == 0
    assert "indexed 5 passages" in capsys.readouterr().out
    assert main(["search", "capital of France", "--index", str(tmp_path / "idx"), "-k", "1"]) == 0
    assert capsys.readouterr().out.strip() == "Doc 1 (Title: Paris) Paris is the capital and largest city of France."
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    assert main(["index", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "x")]) == 1
    assert "bad.jsonl:1: field 'contents': missing" in capsys.readouterr().err


def test_build_index_report(tmp_path):
    info = build_index(_corpus(tmp_path), tmp_path / "idx")
    assert info.startswith("indexed 5 passages") and (tmp_path / "idx" / "index.json").is_file()


@pytest.mark.parametrize(
    "url, canonical",
    [
        ("HTTPS://EN.Wikipedia.ORG/wiki/Tomato#History", "https://en.wikipedia.org/wiki/Tomato"),
        ("https://en.wikipedia.org/wiki/%54omato", "https://en.wikipedia.org/wiki/Tomato"),
        ("https://en.wikipedia.org/wiki/%7e%2d%2E%5F", "https://en.wikipedia.org/wiki/~-._"),
        ("https://en.wikipedia.org/wiki/AC%2fDC", "https://en.wikipedia.org/wiki/AC%2FDC"),
        ("https://en.wikipedia.org/wiki/Bogotá", "https://en.wikipedia.org/wiki/Bogot%C3%A1"),
        ("https://en.wikipedia.org/wiki/Bogot%c3%a1", "https://en.wikipedia.org/wiki/Bogot%C3%A1"),
        ("https://example.com/search?q=A%20b&x=1#top", "https://example.com/search?q=A%20b&x=1"),
        ("http://Example.com:80", "http://example.com/"),
        ("https://example.com:8443/Path", "https://example.com:8443/Path"),
        ("  Tomato  ", "Tomato"),
    ],
)
def test_canonical_url(url, canonical):
    assert canonical_url(url) == canonical
    assert canonical_url(canonical) == canonical  # idempotent


def test_wiki_url():
    assert wiki_url("2001: A Space Odyssey") == "https://en.wikipedia.org/wiki/2001:_A_Space_Odyssey"
    assert wiki_url("Who Framed Roger Rabbit?").endswith("/Who_Framed_Roger_Rabbit%3F")
    assert wiki_url("Bogotá") == canonical_url("https://en.wikipedia.org/wiki/Bogotá")
