"""Page store: reading page files, page search, `open` numbered lines and `find`."""

from __future__ import annotations

import pytest

from trace_selector.errors import FormatError
from trace_selector.search.pages import Page, PageStore, build_page_index, read_pages, write_pages

PAGES = [
    Page("https://en.wikipedia.org/wiki/Tomato", "Tomato",
         "Edible berry.\nThe tomato is a plant whose fruit is an edible berry. It originated from western "
         "South America.\nThe Spanish introduced tomatoes to Eurasia in the Columbian exchange."),
    Page("https://en.wikipedia.org/wiki/Mercury_(planet)", "Mercury (planet)",
         "Mercury is the first planet from the Sun and the smallest in the Solar System."),
    Page("https://en.wikipedia.org/wiki/Paris", "Paris", "Paris is the capital of France."),
]


def test_pages_round_trip_and_other_layouts(tmp_path):
    write_pages(PAGES, tmp_path / "p.jsonl.gz")
    assert read_pages(tmp_path / "p.jsonl.gz") == PAGES
    (tmp_path / "flash.jsonl").write_text(
        '{"url": "HTTPS://EN.wikipedia.org/wiki/Paris#x", "contents": "\\"Paris\\"\\nCapital."}\n'
        '{"docid": "7", "url": "https://x.org/a", "text": "plain"}\n'
    )
    got = read_pages(tmp_path / "flash.jsonl")
    assert got == [Page("https://en.wikipedia.org/wiki/Paris", "Paris", "Capital."), Page("https://x.org/a", "", "plain")]


def test_bad_page_rows(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"url": "https://a.org/x", "text": "a"}\n{"url": "https://A.org/x#y", "text": "b"}\n')
    with pytest.raises(FormatError, match=r"bad.jsonl:2: field 'url': duplicate page https://a.org/x"):
        read_pages(path)
    path.write_text('{"title": "x", "text": "a"}\n')
    with pytest.raises(FormatError, match=r":1: field 'url': missing"):
        read_pages(path)
    path.write_text('{"url": "https://a.org/x"}\n')
    with pytest.raises(FormatError, match=r":1: field 'text': missing"):
        read_pages(path)


def test_open_numbers_lines_under_the_canonical_url():
    store = PageStore(PAGES, line_width=60)
    text = store.open("https://EN.wikipedia.org/wiki/Tomato#History")
    lines = text.split("\n")
    assert lines[0] == "URL: https://en.wikipedia.org/wiki/Tomato"
    assert lines[1] == "Title: Tomato"
    assert lines[3] == "L0: Edible berry."
    body = [l for l in lines[3:]]
    assert [l.split(":")[0] for l in body] == [f"L{i}" for i in range(len(body))]
    assert all(len(l.split(": ", 1)[1]) <= 60 for l in body)
    assert lines[2] == f"[lines 0-{len(body) - 1} of {len(body)}]"
    # Title lookups: exact, case-folded, underscores; a window of lines; unknown pages.
    assert store.open("tomato") == text and store.open("Mercury_(planet)").startswith(
        "URL: https://en.wikipedia.org/wiki/Mercury_(planet)")
    window = store.open("Tomato", start=1, max_lines=1).split("\n")
    assert window[2] == f"[lines 1-1 of {len(body)}]" and window[3].startswith("L1: ")
    assert store.open("Atlantis") == "Page not found: Atlantis"


def test_find_returns_matching_numbered_lines():
    store = PageStore(PAGES, line_width=60)
    lines = store.lines(store.get("Tomato"))
    want = [f"L{i}: {l}" for i, l in enumerate(lines) if "eurasia" in l.lower()]
    out = store.find("https://en.wikipedia.org/wiki/Tomato", "EURASIA").split("\n")
    assert out[0] == "URL: https://en.wikipedia.org/wiki/Tomato" and out[3:] == want and len(want) == 1
    assert store.find("Tomato", "banana") == "No lines matching 'banana' in https://en.wikipedia.org/wiki/Tomato"
    assert store.find("Nowhere", "x") == "Page not found: Nowhere"


def test_page_search_and_saved_page_index(tmp_path):
    store = PageStore(PAGES)
    hits = store.search("smallest planet Sun", k=2)
    assert hits[0].title == "Mercury (planet)" and hits[0].url == hits[0].doc_id == PAGES[1].url
    build_page_index(PAGES).save(tmp_path / "pidx")
    loaded = PageStore.load(tmp_path / "pidx")
    assert loaded.pages == PAGES
    assert loaded.search_batch(["capital of France"], 1)[0][0].url == "https://en.wikipedia.org/wiki/Paris"
