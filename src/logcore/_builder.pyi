from collections.abc import Sequence
from typing import Literal, final

from typing_extensions import Buffer

@final
class BatchBuilder:
    def __init__(
        self,
        *,
        compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none",
        compression_level: int | None = None,
        base_offset: int = 0,
        timestamp_type: str | int = "create",
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
    ) -> None: ...
    def append(
        self,
        value: Buffer | None,
        key: Buffer | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, Buffer | None]] | None = None,
    ) -> int: ...
    def append_many(
        self,
        values: Sequence[Buffer | None],
        keys: Sequence[Buffer | None] | None = None,
        timestamps_ms: Sequence[int] | None = None,
    ) -> None: ...
    def estimated_size(self) -> int: ...
    def __len__(self) -> int: ...
    def build(self) -> bytes: ...
