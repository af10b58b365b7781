"""SASL seeds for the wire fuzzer: sessions that lead a connection into each state of the
broker's SASL state machine (``pylog.security.sasl.authenticator``), then a mutant.

A seed is (prefix frames, target frame): the prefix is sent frame by frame, each answer
awaited, so that the mutant meets the connection where the seed left it:

- before any handshake: SaslHandshake v0/v1 (every mechanism, an unknown one), ApiVersions,
  and requests that are not admitted before authentication (Metadata, Produce);
- after a v1 handshake: SaslAuthenticate v0, v1 and v2 carrying PLAIN, SCRAM client-first,
  OAUTHBEARER tokens (unsecured, expired, malformed);
- after a SCRAM client-first: a client-final (the nonce is the client's; the server's part
  differs every time, so it reaches the nonce and proof checks);
- after a v0 handshake: raw token frames (no Kafka header);
- after a PLAIN login: re-authentication handshakes and ordinary requests.

The seeds are built here (they hold a fixed user and password known to the fuzz broker), so
no recording is needed. Mutants are the generic byte mutators of ``mutators.py``.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

from . import mutators
from .driver import HANG_SECONDS, INCOMPLETE_SECONDS, MAX_FRAME, Outcome

USER, PASSWORD = "fuzz", "fuzz-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'user_{USER}="{PASSWORD}";')
_i32 = struct.Struct(">i")
#: Byte-level mutators only (the frame-type aware ones target produce batches).
KINDS = ["bitflip", "bytes", "truncate", "short", "size", "header", "count", "splice"]


def _req(key: int, version: int, cid: int, body: bytes, flexible: bool = False) -> bytes:
    header = struct.pack(">hhih", key, version, cid, 4) + b"fuzz" + (b"\x00" if flexible else b"")
    return mutators.with_size(header + body)


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def handshake(mech: bytes, version: int = 1, cid: int = 1) -> bytes:
    return _req(17, version, cid, _string(mech))


def authenticate(token: bytes, version: int = 1, cid: int = 2) -> bytes:
    if version >= 2:  # flexible: compact bytes (length + 1), then tagged fields
        from pylog.protocol.codec import write_uvarint

        buf = bytearray()
        write_uvarint(buf, len(token) + 1)
        return _req(36, version, cid, bytes(buf) + token + b"\x00", flexible=True)
    return _req(36, version, cid, _i32.pack(len(token)) + token)


def _oauth(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def seeds() -> list[tuple[list[bytes], bytes]]:
    from pylog.security.sasl.oauthbearer import unsecured_token

    good = unsecured_token("fuzz", 3600)
    expired = unsecured_token("fuzz", 1, now_s=1_000_000)
    plain = b"\x00" + USER.encode() + b"\x00" + PASSWORD.encode()
    scram_first = f"n,,n={USER},r=fuzznonce0123456789".encode()
    out: list[tuple[list[bytes], bytes]] = []
    for mech in (b"PLAIN", b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"OAUTHBEARER", b"GSSAPI"):
        out += [([], handshake(mech, 1)), ([], handshake(mech, 0))]
    out += [([], _req(18, 0, 1, b"")), ([], _req(3, 1, 1, _i32.pack(-1)))]
    for v in (0, 1, 2):
        out += [([handshake(b"PLAIN")], authenticate(plain, v)),
                ([handshake(b"SCRAM-SHA-256")], authenticate(scram_first, v)),
                ([handshake(b"SCRAM-SHA-512")], authenticate(scram_first, v)),
                ([handshake(b"OAUTHBEARER")], authenticate(_oauth(good), v)),
                ([handshake(b"OAUTHBEARER")], authenticate(_oauth(expired), v))]
    final = b"c=biws,r=fuzznonce0123456789xyz,p=" + b"A" * 44
    out += [([handshake(b"SCRAM-SHA-256"), authenticate(scram_first)], authenticate(final, 1, 3)),
            ([handshake(b"OAUTHBEARER"), authenticate(_oauth(expired))], authenticate(b"\x01", 1, 3))]
    out += [([handshake(b"PLAIN", 0)], mutators.with_size(plain)),
            ([handshake(b"SCRAM-SHA-512", 0)], mutators.with_size(scram_first))]
    login = [handshake(b"PLAIN"), authenticate(plain)]
    out += [(login, handshake(b"PLAIN", 1, 3)), (login, handshake(b"SCRAM-SHA-256", 1, 3)),
            (login, _req(3, 1, 3, _i32.pack(-1))), (login, authenticate(plain, 1, 3))]
    return out


def _read(sock: socket.socket, deadline: float) -> bytes | None:
    """One frame (an empty one is legal: a raw PLAIN answer); None when closed."""
    buf = b""
    need = 4
    while len(buf) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf += chunk
        if need == 4 and len(buf) >= 4:
            size = _i32.unpack_from(buf)[0]
            if not 0 <= size <= MAX_FRAME:
                raise ValueError(f"response size prefix {size}")
            need = 4 + size
    return buf


def send_session(address: tuple[str, int], prefix: list[bytes], data: bytes) -> Outcome:
    """The prefix frames (each answered), then ``data``; classify what comes back (the
    statuses of ``driver.send_one``; a SASL exchange never rightly waits)."""
    t0 = time.monotonic()
    try:
        sock = socket.create_connection(address, timeout=HANG_SECONDS)
    except OSError as exc:
        return Outcome("connect", f"cannot connect: {exc}")
    try:
        for frame in prefix:
            try:
                sock.sendall(frame)
                if _read(sock, time.monotonic() + HANG_SECONDS) is None:
                    return Outcome("prefix", "closed before answering a seed frame")
            except (TimeoutError, OSError, ValueError) as exc:
                return Outcome("prefix", f"seed frame not answered: {exc!r}")
        size = _i32.unpack_from(data)[0] if len(data) >= 4 else 0
        complete = len(data) >= 4 and 0 <= size <= MAX_FRAME and 4 + size <= len(data)
        bad_size = len(data) >= 4 and not 0 <= size <= MAX_FRAME
        try:
            sock.sendall(data)
        except OSError:
            return Outcome("closed", "closed while sending", time.monotonic() - t0)
        wait = HANG_SECONDS if complete or bad_size else INCOMPLETE_SECONDS
        try:
            answer = _read(sock, time.monotonic() + wait)
        except TimeoutError:
            if not complete and not bad_size:
                return Outcome("incomplete", "", time.monotonic() - t0)
            return Outcome("hang", f"no answer and no close within {wait:g} s",
                           time.monotonic() - t0)
        except ValueError as exc:
            return Outcome("bad-answer", str(exc), time.monotonic() - t0)
        except OSError as exc:
            return Outcome("closed", repr(exc), time.monotonic() - t0)
        if answer is None:
            return Outcome("closed", "", time.monotonic() - t0)
        return Outcome("answered", "", time.monotonic() - t0)
    finally:
        sock.close()


def mutants(seed: int, count: int) -> Any:
    """(index, kind, prefix, bytes): ``count`` mutants of the SASL seeds' targets; one in
    eight is sent unmutated (the state machine's well-formed paths)."""
    table = seeds()
    rng = random.Random(seed)
    targets = [t for _, t in table]
    for index in range(count):
        prefix, target = rng.choice(table)
        if rng.random() < 0.125:
            yield index, "seed", prefix, target
            continue
        kind = rng.choices(KINDS, weights=[mutators.KINDS[k][1] for k in KINDS])[0]
        yield index, kind, prefix, mutators.KINDS[kind][0](rng, target, targets)
