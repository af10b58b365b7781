"""DescribeUserScramCredentials (key 50), version 0 (KIP-554): the SCRAM mechanisms and
iterations of users (never salts or keys), from ``broker.scram`` (``pylog.broker.scram_admin``).
No users named: every user with a credential."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeUserScramCredentialsResponse

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeUserScramCredentialsResponse


async def handle_describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.DESCRIBE)  # Kafka: DESCRIBE on the cluster
    users = None if not request.users else [u.name for u in request.users]
    results = [
        _R.DescribeUserScramCredentialsResult(
            user=user, error_code=code, error_message=message,
            credential_infos=[_R.CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
        for user, code, message, infos in ctx.broker.scram.describe(users)
    ]
    return _R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message, results=[])
