"""AlterUserScramCredentials (key 51), version 0 (KIP-554): upsert or delete users' SCRAM
credentials. The client sends the salt and the salted password (never the password); the
broker stores salt, stored key, server key and iterations (``pylog.broker.scram_admin``:
ZooKeeper in cluster mode, the data directory on a single node)."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AlterUserScramCredentialsResponse

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = AlterUserScramCredentialsResponse


async def handle_alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.ALTER)  # Kafka: ALTER on the cluster
    results = await ctx.broker.scram.alter(request.deletions or [], request.upsertions or [])
    return _R(throttle_time_ms=0, results=[
        _R.AlterUserScramCredentialsResult(user=u, error_code=c, error_message=m)
        for u, c, m in results])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    users = dict.fromkeys(a.name for a in list(request.deletions or []) + list(request.upsertions or []))
    return _R(throttle_time_ms=0, results=[
        _R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
        for u in users])
