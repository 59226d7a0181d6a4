"""Text encoder and its embedding store: cache hits, crash safety, the packaged MiniLM model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trace_selector.errors import InputError
from trace_selector.graph.encoder import EmbeddingStore, HashEncoder, TextEncoder, text_key


def test_hash_encoder_is_deterministic_unit_norm():
    enc = HashEncoder(32)
    x = enc.encode(["a", "b", "a"])
    assert x.shape == (3, 32) and x.dtype == torch.float32
    assert torch.allclose(x.norm(dim=1), torch.ones(3))
    assert torch.equal(x[0], x[2]) and not torch.equal(x[0], x[1])
    assert torch.equal(HashEncoder(32).encode(["b"])[0], x[1])
    assert (enc.last.texts, enc.last.unique) == (3, 2)
    assert enc.encode([]).shape == (0, 32)


def test_store_round_trip_and_nul_keys(tmp_path):
    # digests ending in NUL bytes must survive (numpy's bytes dtype would strip them)
    keys = [b"\x00" * 32, b"a" * 31 + b"\x00", text_key("x")]
    vecs = np.arange(12, dtype=np.float32).reshape(3, 4)
    store = EmbeddingStore(tmp_path, 4)
    store.add(keys, vecs)
    again = EmbeddingStore(tmp_path, 4)
    hit, found = again.lookup([keys[2], b"z" * 32, keys[0], keys[1]])
    assert hit.tolist() == [0, 2, 3]
    assert np.array_equal(found, vecs[[2, 0, 1]])


def test_store_ignores_uncommitted_shard_and_compacts(tmp_path):
    store = EmbeddingStore(tmp_path, 2)
    for i in range(40):
        store.add([text_key(str(i))], np.full((1, 2), i, np.float32))
    # the 32nd add merged 31 one-row shards into one, leaving 2; eight more adds followed
    assert store.num_shards == 10 and len(list(tmp_path.glob("*.key.npy"))) == 10
    np.save(tmp_path / "crashed.vec.npy", np.zeros((5, 2), np.float32))  # vectors written, keys never
    reopened = EmbeddingStore(tmp_path, 2)
    assert len(reopened) == 40 and reopened.num_shards == 10
    hit, found = reopened.lookup([text_key("7"), text_key("39"), text_key("0")])
    assert found[:, 0].tolist() == [7.0, 39.0, 0.0]


def test_memory_store_compacts_too():
    store = EmbeddingStore(None, 2)
    for i in range(33):
        store.add([text_key(str(i))], np.full((1, 2), i, np.float32))
    assert store.num_shards == 3
    assert store.lookup([text_key(str(i)) for i in range(33)])[1][:, 0].tolist() == list(range(33))


def test_store_float16_rounds_consistently(tmp_path):
    store = EmbeddingStore(tmp_path, 3, "float16")
    v = np.array([[0.1, 0.2, 0.3]], np.float32)
    returned = store.add([text_key("t")], v)
    _, found = EmbeddingStore(tmp_path, 3, "float16").lookup([text_key("t")])
    assert np.array_equal(returned, found) and not np.array_equal(returned, v)


def test_store_rejects_wrong_width(tmp_path):
    EmbeddingStore(tmp_path, 2).add([text_key("t")], np.zeros((1, 2), np.float32))
    with pytest.raises(InputError, match="delete the folder"):
        EmbeddingStore(tmp_path, 3)


def test_text_encoder_argument_errors(tmp_path):
    with pytest.raises(InputError, match="not a local sentence-transformers model"):
        TextEncoder(model=tmp_path)
    with pytest.raises(InputError, match="batch_size"):
        TextEncoder(batch_size=0)
    with pytest.raises(InputError, match="dtype"):
        TextEncoder(dtype="float8")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """One packaged-MiniLM encoder per module (loading the model is most of these tests' time)."""
    return TextEncoder(cache_dir=tmp_path_factory.mktemp("emb"), batch_size=2)


def test_minilm_encodes_once_then_serves_from_disk(minilm):
    texts = ["Paris is the capital of France.", "The capital city of France is Paris.",
             "Photosynthesis happens in chloroplasts.", "Paris is the capital of France."]
    enc = minilm
    x = enc.encode(texts)
    assert x.shape == (4, 384) and enc.dim == 384
    assert (enc.last.unique, enc.last.encoded, enc.last.cached) == (3, 3, 0)
    assert torch.allclose(x.norm(dim=1), torch.ones(4), atol=1e-5)
    assert torch.equal(x[0], x[3])
    sim = x @ x.T
    assert sim[0, 1] > 0.8 > 0.3 > sim[0, 2]  # paraphrase close, unrelated far
    warm = TextEncoder(cache_dir=enc.cache_dir)  # a second run: nothing to encode, model never loaded
    y = warm.encode(texts)
    assert (warm.last.encoded, warm.last.cached) == (0, 3)
    assert warm._model is None and warm.dim == 384
    assert torch.equal(x, y)
    assert warm.identity == enc.identity and warm.identity.startswith("all-MiniLM-L6-v2-")


def test_minilm_graph_features(minilm):
    from trace_selector.graph import build_graph
    from trace_selector.records import Document, QuestionGroup, Step, Trajectory

    steps = [Step("search", "capital of France", documents=[Document(1, "Paris", "Paris is the capital of France.")])]
    g = QuestionGroup("q", "What is the capital of France?", ["Paris"],
                      [Trajectory("q", "What is the capital of France?", 0, "Paris", steps)])
    data = build_graph(g, minilm)
    assert data["chunk"].x.shape == (1, 384) and data["answer"].y.tolist() == [1.0]


@pytest.mark.slow
def test_minilm_bfloat16_close_to_float32(tmp_path):
    texts = ["a small test sentence", "another one about rivers"]
    fp32 = TextEncoder(cache_dir=tmp_path).encode(texts)
    bf16_enc = TextEncoder(cache_dir=tmp_path, dtype="bfloat16", store_dtype="float16")
    bf16 = bf16_enc.encode(texts)
    assert bf16_enc.last.encoded == 2  # another identity: the fp32 vectors are not reused
    assert torch.allclose(bf16.norm(dim=1), torch.ones(2), atol=2e-3)
    assert (fp32 * bf16).sum(1).min() > 0.99
