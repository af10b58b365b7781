"""pylog.protocol.apis: the advertised table (issue 4) and API keys."""

from __future__ import annotations

from pylog.protocol import _schema, apis
from pylog.protocol.apis import ADVERTISED, SUPPORTED, ApiKey


def test_api_key_names_match_the_specs() -> None:
    assert len(ApiKey) == len(_schema.REQUESTS)
    for key in ApiKey:
        spec = _schema.REQUESTS[int(key)]
        assert spec.endswith("Request")
        assert key.name.replace("_", "") == spec[: -len("Request")].upper()


def test_advertised_table_is_issues_4_7_10_and_11() -> None:
    assert ADVERTISED == {
        0: (0, 11), 1: (4, 12), 2: (1, 7), 3: (0, 12), 18: (0, 4), 19: (2, 7), 20: (1, 6),
        21: (0, 2), 22: (0, 5), 23: (2, 4), 32: (1, 4), 33: (0, 2), 35: (0, 4), 37: (0, 3), 44: (0, 1), 60: (0, 1),
        # issue 21: SASL and SCRAM credentials (KIP-152, KIP-368, KIP-554)
        17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        # issue 7: consumer groups (classic protocol)
        8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5),
        15: (0, 5), 16: (0, 5), 42: (0, 2), 47: (0, 0),
        # issue 10: transactions, partition side
        27: (0, 1), 61: (0, 0),
        # issue 10: transactions, group coordinator side
        28: (0, 4),
        # issue 10: the transaction coordinator (transaction.version 0)
        24: (0, 5), 25: (0, 4), 26: (0, 4), 65: (0, 0), 66: (0, 1),
        # issue 11: replication, the controller's requests to brokers
        4: (0, 7), 5: (0, 4),
        # issue 22: client quotas (KIP-546)
        48: (0, 1), 49: (0, 1),
        # issue 21: ACLs (v0 removed in Kafka 4, KIP-896)
        29: (1, 3), 30: (1, 3), 31: (1, 3),
        # issue 25: KIP-848 consumer groups (heartbeat v1: SubscribedTopicRegex; describe
        # v1: MemberType, KIP-1099)
        68: (0, 1), 69: (0, 1),
        # issue 25: KIP-932 share groups (Kafka 4.2's versions)
        76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
        # issue 25: KIP-932's share coordinator (inter-broker; the vendored specs' v0)
        83: (0, 0), 84: (0, 0), 85: (0, 0), 86: (0, 0), 87: (0, 0),
        90: (0, 1), 91: (0, 0), 92: (0, 0),
    }


def test_produce_0_to_2_advertised_but_not_served() -> None:
    assert SUPPORTED[ApiKey.PRODUCE] == (3, 11)
    assert {k: v for k, v in SUPPORTED.items() if k != ApiKey.PRODUCE} == {
        k: v for k, v in ADVERTISED.items() if k != ApiKey.PRODUCE
    }
    assert not apis.is_supported(0, 2) and apis.is_supported(0, 3)
    assert apis.is_supported(0, 2, ADVERTISED)
    assert not apis.is_supported(8, 1) and apis.is_supported(8, 2)  # OffsetCommit 2-9
    assert apis.is_supported(24, 0) and apis.is_supported(24, 5)  # AddPartitionsToTxn
    assert not apis.is_supported(26, 5)  # EndTxn v5 needs transaction.version 2


def test_advertised_versions_exist_in_the_schemas() -> None:
    for key, (lo, hi) in ADVERTISED.items():
        for name in (_schema.REQUESTS[key], _schema.RESPONSES[key]):
            slo, shi = _schema.MESSAGES[name][3]
            assert slo <= lo <= hi <= shi, name


def test_api_versions_keys_and_names() -> None:
    rows = apis.api_versions_keys()
    assert [(r.api_key, r.min_version, r.max_version) for r in rows] == sorted(
        (int(k), lo, hi) for k, (lo, hi) in ADVERTISED.items()
    )
    assert apis.api_name(1) == "Fetch" and apis.api_name(9999) == "Unknown(9999)"


def test_cluster_mode_table() -> None:
    # Served with zookeeper.connect only: UpdateMetadata, ControlledShutdown and the admin
    # requests the controller answers (ElectLeaders, Alter/ListPartitionReassignments).
    assert apis.CLUSTER_ADVERTISED == {6: (0, 8), 7: (0, 3), 43: (0, 2), 45: (0, 0), 46: (0, 0)}
    assert not set(apis.CLUSTER_ADVERTISED) & set(ADVERTISED)
    for key, (lo, hi) in apis.CLUSTER_ADVERTISED.items():
        for name in (_schema.REQUESTS[key], _schema.RESPONSES[key]):
            slo, shi = _schema.MESSAGES[name][3]
            assert slo <= lo <= hi <= shi, name
