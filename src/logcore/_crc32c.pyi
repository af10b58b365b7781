from typing_extensions import Buffer

IMPLEMENTATION: str
NOGIL_THRESHOLD: int

def crc32c(data: Buffer, crc: int = 0) -> int: ...
def crc32c_portable(data: Buffer, crc: int = 0) -> int: ...
