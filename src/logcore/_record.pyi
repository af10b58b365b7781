from typing import Literal, final

_Header = tuple[str, bytes | None]

@final
class Record:
    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[_Header],
    ) -> None: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> Literal["create", "log_append"]: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[_Header]: ...
    @property
    def headers_or_none(self) -> list[_Header] | None: ...
