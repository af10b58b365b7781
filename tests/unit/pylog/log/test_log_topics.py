"""Topic names, topic IDs, partition.metadata and the durable topic store."""

from __future__ import annotations

import pytest

from pylog.log import topics as t


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "__consumer_offsets", "0"])
def test_legal_names(name: str) -> None:
    t.validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "ü", "a*"])
def test_illegal_names(name: str) -> None:
    with pytest.raises(t.TopicNameError):
        t.validate_topic_name(name)


def test_collision_key() -> None:
    assert t.collision_key("a.b") == t.collision_key("a_b")
    assert t.collision_key("a.b") != t.collision_key("a-b")


def test_topic_id_text_round_trip() -> None:
    for _ in range(50):
        u = t.new_topic_id()
        s = t.topic_id_str(u)
        assert len(s) == 22 and not s.startswith("-") and "=" not in s
        assert t.topic_id_from_str(s) == u


def test_partition_metadata_round_trip(tmp_path) -> None:
    u = t.new_topic_id()
    t.write_partition_metadata(str(tmp_path), u)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {t.topic_id_str(u)}\n"
    assert t.read_partition_metadata(str(tmp_path)) == u
    (tmp_path / "partition.metadata").write_text("version: 9\ntopic_id: x\n")
    assert t.read_partition_metadata(str(tmp_path)) is None


def test_store_round_trip_and_atomic_write(tmp_path) -> None:
    store = t.TopicStore(str(tmp_path))
    assert store.load() == {}
    doc = {"a": {"topic_id": "x", "partitions": 2, "configs": {"retention.ms": "5"}}}
    store.save(doc)
    assert store.load() == doc
    assert not (tmp_path / (t.STORE_NAME + ".tmp")).exists()
    (tmp_path / t.STORE_NAME).write_text("[]")
    with pytest.raises(ValueError):
        store.load()


def test_meta_properties(tmp_path) -> None:
    assert t.read_meta_properties(str(tmp_path)) == {}
    t.write_meta_properties(str(tmp_path), {"version": "1", "cluster.id": "abc", "node.id": "0"})
    assert t.read_meta_properties(str(tmp_path)) == {"version": "1", "cluster.id": "abc", "node.id": "0"}
