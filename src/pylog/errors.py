"""pylog's exception hierarchy: the one table of Kafka error codes.

Shape (after Kafka's ``clients/.../common/protocol/Errors.java``):

- ``KafkaError`` is the root of every error pylog raises on purpose.
- ``ApiError`` subclasses, one per Kafka error code, carry the class attributes ``code``
  (the int16 sent on the wire), ``name`` (Kafka's constant, e.g. ``"NOT_LEADER_OR_FOLLOWER"``),
  ``retriable`` and ``invalid_metadata`` (Kafka's ``RetriableException`` and
  ``InvalidMetadataException`` families: a client should refresh metadata before retrying).
  Class names follow Kafka's constant: ``OFFSET_OUT_OF_RANGE`` is ``OffsetOutOfRangeError``.
  A registry keyed by code refuses duplicates at class creation.
- ``error_for_code(code)`` returns the class for a code (``None`` for 0, ``UnknownServerError``
  for codes it does not know, as ``Errors.forCode`` falls back to a generic error).
- ``code_for_exception(exc)`` walks the exception's MRO and holds the only table from
  ``logcore.errors`` classes to Kafka codes (``Errors.forException``). ``logcore.errors`` is
  imported lazily so that importing this module (and ``pylog.protocol``, which uses it)
  never loads the storage engine.
- ``ProtocolError`` splits in two, after h11's ``_util.py``: ``LocalProtocolError`` (we tried
  to build something illegal: a bug on our side) and ``RemoteProtocolError`` (the peer sent
  bytes that are not a valid Kafka frame or message).

The code table was written from Kafka's ``Errors`` enum (codes -1 to 129; Kafka 4.x).
"""

from __future__ import annotations

__all__ = [
    "KafkaError",
    "ApiError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "FrameTooLargeError",
    "UnsupportedVersionProtocolError",
    "error_for_code",
    "code_for_exception",
    "ERRORS_BY_CODE",
]


class KafkaError(Exception):
    """Root of every error pylog raises on purpose."""


class ProtocolError(KafkaError):
    """The Kafka wire protocol was violated (by us or by the peer)."""


class LocalProtocolError(ProtocolError):
    """We tried to encode or send something illegal (a bug in the caller).

    Examples: a field value out of range for its wire type, a version the message does not
    have, sending on a connection that is closed or in ``ERROR``.
    """


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid Kafka frame or message.

    Attributes:
        error_code: the Kafka code a broker may answer with when the request header could be
            decoded (``INVALID_REQUEST`` 42 by default, ``UNSUPPORTED_VERSION`` 35 for a
            version the codec does not know).
    """

    error_code: int = 42

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class FrameTooLargeError(RemoteProtocolError):
    """A size prefix announced a frame over the connection's limit (``socket.request.max.bytes``)."""


class UnsupportedVersionProtocolError(RemoteProtocolError):
    """A message version outside the versions the schema defines."""

    error_code = 35


ERRORS_BY_CODE: dict[int, type[ApiError]] = {}


class ApiError(KafkaError):
    """An error with a Kafka error code. Subclasses set ``code``, ``retriable``, ``invalid_metadata``.

    Every subclass that sets a ``code`` is registered; a second class with the same code
    raises ``TypeError`` at class creation (the table must stay one-to-one).
    """

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    invalid_metadata: bool = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return  # an intermediate family class, not a code
        other = ERRORS_BY_CODE.get(cls.code)
        if other is not None:
            raise TypeError(
                f"error code {cls.code} already registered by {other.__name__}; "
                f"{cls.__name__} cannot take it"
            )
        ERRORS_BY_CODE[cls.code] = cls

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else (self.__doc__ or self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, {str(self)!r})"


class UnknownServerError(ApiError):
    """The server experienced an unexpected error when processing the request."""

    code, retriable, invalid_metadata = -1, False, False
    name = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(ApiError):
    """The requested offset is not within the range of offsets maintained by the server."""

    code, retriable, invalid_metadata = 1, False, False
    name = "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(ApiError):
    """This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."""

    code, retriable, invalid_metadata = 2, True, False
    name = "CORRUPT_MESSAGE"


class UnknownTopicOrPartitionError(ApiError):
    """This server does not host this topic-partition."""

    code, retriable, invalid_metadata = 3, True, True
    name = "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidFetchSizeError(ApiError):
    """The requested fetch size is invalid."""

    code, retriable, invalid_metadata = 4, False, False
    name = "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(ApiError):
    """There is no leader for this topic-partition as we are in the middle of a leadership election."""

    code, retriable, invalid_metadata = 5, True, True
    name = "LEADER_NOT_AVAILABLE"


class NotLeaderOrFollowerError(ApiError):
    """For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."""

    code, retriable, invalid_metadata = 6, True, True
    name = "NOT_LEADER_OR_FOLLOWER"


class RequestTimedOutError(ApiError):
    """The request timed out."""

    code, retriable, invalid_metadata = 7, True, False
    name = "REQUEST_TIMED_OUT"


class BrokerNotAvailableError(ApiError):
    """The broker is not available."""

    code, retriable, invalid_metadata = 8, False, False
    name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(ApiError):
    """The replica is not available for the requested topic-partition."""

    code, retriable, invalid_metadata = 9, True, True
    name = "REPLICA_NOT_AVAILABLE"


class MessageTooLargeError(ApiError):
    """The request included a message larger than the max message size the server will accept."""

    code, retriable, invalid_metadata = 10, False, False
    name = "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(ApiError):
    """The controller moved to another broker."""

    code, retriable, invalid_metadata = 11, False, False
    name = "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(ApiError):
    """The metadata field of the offset request was too large."""

    code, retriable, invalid_metadata = 12, False, False
    name = "OFFSET_METADATA_TOO_LARGE"


class NetworkError(ApiError):
    """The server disconnected before a response was received."""

    code, retriable, invalid_metadata = 13, True, True
    name = "NETWORK_EXCEPTION"


class CoordinatorLoadInProgressError(ApiError):
    """The coordinator is loading and hence can't process requests."""

    code, retriable, invalid_metadata = 14, True, False
    name = "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(ApiError):
    """The coordinator is not available."""

    code, retriable, invalid_metadata = 15, True, False
    name = "COORDINATOR_NOT_AVAILABLE"


class NotCoordinatorError(ApiError):
    """This is not the correct coordinator."""

    code, retriable, invalid_metadata = 16, True, False
    name = "NOT_COORDINATOR"


class InvalidTopicError(ApiError):
    """The request attempted to perform an operation on an invalid topic."""

    code, retriable, invalid_metadata = 17, False, False
    name = "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(ApiError):
    """The request included message batch larger than the configured segment size on the server."""

    code, retriable, invalid_metadata = 18, False, False
    name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(ApiError):
    """Messages are rejected since there are fewer in-sync replicas than required."""

    code, retriable, invalid_metadata = 19, True, False
    name = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(ApiError):
    """Messages are written to the log, but to fewer in-sync replicas than required."""

    code, retriable, invalid_metadata = 20, True, False
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class InvalidRequiredAcksError(ApiError):
    """Produce request specified an invalid value for required acks."""

    code, retriable, invalid_metadata = 21, False, False
    name = "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(ApiError):
    """Specified group generation id is not valid."""

    code, retriable, invalid_metadata = 22, False, False
    name = "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(ApiError):
    """The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."""

    code, retriable, invalid_metadata = 23, False, False
    name = "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(ApiError):
    """The configured groupId is invalid."""

    code, retriable, invalid_metadata = 24, False, False
    name = "INVALID_GROUP_ID"


class UnknownMemberIdError(ApiError):
    """The coordinator is not aware of this member."""

    code, retriable, invalid_metadata = 25, False, False
    name = "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(ApiError):
    """The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."""

    code, retriable, invalid_metadata = 26, False, False
    name = "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(ApiError):
    """The group is rebalancing, so a rejoin is needed."""

    code, retriable, invalid_metadata = 27, False, False
    name = "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(ApiError):
    """The committing offset data size is not valid."""

    code, retriable, invalid_metadata = 28, False, False
    name = "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(ApiError):
    """Topic authorization failed."""

    code, retriable, invalid_metadata = 29, False, False
    name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(ApiError):
    """Group authorization failed."""

    code, retriable, invalid_metadata = 30, False, False
    name = "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(ApiError):
    """Cluster authorization failed."""

    code, retriable, invalid_metadata = 31, False, False
    name = "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(ApiError):
    """The timestamp of the message is out of acceptable range."""

    code, retriable, invalid_metadata = 32, False, False
    name = "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(ApiError):
    """The broker does not support the requested SASL mechanism."""

    code, retriable, invalid_metadata = 33, False, False
    name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(ApiError):
    """Request is not valid given the current SASL state."""

    code, retriable, invalid_metadata = 34, False, False
    name = "ILLEGAL_SASL_STATE"


class UnsupportedVersionError(ApiError):
    """The version of API is not supported."""

    code, retriable, invalid_metadata = 35, False, False
    name = "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(ApiError):
    """Topic with this name already exists."""

    code, retriable, invalid_metadata = 36, False, False
    name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(ApiError):
    """Number of partitions is below 1."""

    code, retriable, invalid_metadata = 37, False, False
    name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(ApiError):
    """Replication factor is below 1 or larger than the number of available brokers."""

    code, retriable, invalid_metadata = 38, False, False
    name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(ApiError):
    """Replica assignment is invalid."""

    code, retriable, invalid_metadata = 39, False, False
    name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(ApiError):
    """Configuration is invalid."""

    code, retriable, invalid_metadata = 40, False, False
    name = "INVALID_CONFIG"


class NotControllerError(ApiError):
    """This is not the correct controller for this cluster."""

    code, retriable, invalid_metadata = 41, True, False
    name = "NOT_CONTROLLER"


class InvalidRequestError(ApiError):
    """This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."""

    code, retriable, invalid_metadata = 42, False, False
    name = "INVALID_REQUEST"


class UnsupportedForMessageFormatError(ApiError):
    """The message format version on the broker does not support the request."""

    code, retriable, invalid_metadata = 43, False, False
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(ApiError):
    """Request parameters do not satisfy the configured policy."""

    code, retriable, invalid_metadata = 44, False, False
    name = "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(ApiError):
    """The broker received an out of order sequence number."""

    code, retriable, invalid_metadata = 45, False, False
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(ApiError):
    """The broker received a duplicate sequence number."""

    code, retriable, invalid_metadata = 46, False, False
    name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(ApiError):
    """Producer attempted to produce with an old epoch."""

    code, retriable, invalid_metadata = 47, False, False
    name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(ApiError):
    """The producer attempted a transactional operation in an invalid state."""

    code, retriable, invalid_metadata = 48, False, False
    name = "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(ApiError):
    """The producer attempted to use a producer id which is not currently assigned to its transactional id."""

    code, retriable, invalid_metadata = 49, False, False
    name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(ApiError):
    """The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."""

    code, retriable, invalid_metadata = 50, False, False
    name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(ApiError):
    """The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."""

    code, retriable, invalid_metadata = 51, True, False
    name = "CONCURRENT_TRANSACTIONS"


class TransactionCoordinatorFencedError(ApiError):
    """Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."""

    code, retriable, invalid_metadata = 52, False, False
    name = "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(ApiError):
    """Transactional Id authorization failed."""

    code, retriable, invalid_metadata = 53, False, False
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(ApiError):
    """Security features are disabled."""

    code, retriable, invalid_metadata = 54, False, False
    name = "SECURITY_DISABLED"


class OperationNotAttemptedError(ApiError):
    """The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."""

    code, retriable, invalid_metadata = 55, False, False
    name = "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(ApiError):
    """Disk error when trying to access log file on the disk."""

    code, retriable, invalid_metadata = 56, True, True
    name = "KAFKA_STORAGE_ERROR"


class LogDirNotFoundError(ApiError):
    """The user-specified log directory is not found in the broker config."""

    code, retriable, invalid_metadata = 57, False, False
    name = "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(ApiError):
    """SASL Authentication failed."""

    code, retriable, invalid_metadata = 58, False, False
    name = "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(ApiError):
    """This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question."""

    code, retriable, invalid_metadata = 59, False, False
    name = "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(ApiError):
    """A partition reassignment is in progress."""

    code, retriable, invalid_metadata = 60, False, False
    name = "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(ApiError):
    """Delegation Token feature is not enabled."""

    code, retriable, invalid_metadata = 61, False, False
    name = "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(ApiError):
    """Delegation Token is not found on server."""

    code, retriable, invalid_metadata = 62, False, False
    name = "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(ApiError):
    """Specified Principal is not valid Owner/Renewer."""

    code, retriable, invalid_metadata = 63, False, False
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(ApiError):
    """Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."""

    code, retriable, invalid_metadata = 64, False, False
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(ApiError):
    """Delegation Token authorization failed."""

    code, retriable, invalid_metadata = 65, False, False
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(ApiError):
    """Delegation Token is expired."""

    code, retriable, invalid_metadata = 66, False, False
    name = "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(ApiError):
    """Supplied principalType is not supported."""

    code, retriable, invalid_metadata = 67, False, False
    name = "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(ApiError):
    """The group is not empty."""

    code, retriable, invalid_metadata = 68, False, False
    name = "NON_EMPTY_GROUP"


class GroupIdNotFoundError(ApiError):
    """The group id does not exist."""

    code, retriable, invalid_metadata = 69, False, False
    name = "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(ApiError):
    """The fetch session ID was not found."""

    code, retriable, invalid_metadata = 70, True, False
    name = "FETCH_SESSION_ID_NOT_FOUND"


class InvalidFetchSessionEpochError(ApiError):
    """The fetch session epoch is invalid."""

    code, retriable, invalid_metadata = 71, True, False
    name = "INVALID_FETCH_SESSION_EPOCH"


class ListenerNotFoundError(ApiError):
    """There is no listener on the leader broker that matches the listener on which metadata request was processed."""

    code, retriable, invalid_metadata = 72, True, True
    name = "LISTENER_NOT_FOUND"


class TopicDeletionDisabledError(ApiError):
    """Topic deletion is disabled."""

    code, retriable, invalid_metadata = 73, False, False
    name = "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(ApiError):
    """The leader epoch in the request is older than the epoch on the broker."""

    code, retriable, invalid_metadata = 74, True, True
    name = "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(ApiError):
    """The leader epoch in the request is newer than the epoch on the broker."""

    code, retriable, invalid_metadata = 75, True, True
    name = "UNKNOWN_LEADER_EPOCH"


class UnsupportedCompressionTypeError(ApiError):
    """The requesting client does not support the compression type of given partition."""

    code, retriable, invalid_metadata = 76, False, False
    name = "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(ApiError):
    """Broker epoch has changed."""

    code, retriable, invalid_metadata = 77, False, False
    name = "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(ApiError):
    """The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."""

    code, retriable, invalid_metadata = 78, True, False
    name = "OFFSET_NOT_AVAILABLE"


class MemberIdRequiredError(ApiError):
    """The group member needs to have a valid member id before actually entering a consumer group."""

    code, retriable, invalid_metadata = 79, False, False
    name = "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(ApiError):
    """The preferred leader was not available."""

    code, retriable, invalid_metadata = 80, True, True
    name = "PREFERRED_LEADER_NOT_AVAILABLE"


class GroupMaxSizeReachedError(ApiError):
    """The consumer group has reached its max size."""

    code, retriable, invalid_metadata = 81, False, False
    name = "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(ApiError):
    """The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."""

    code, retriable, invalid_metadata = 82, False, False
    name = "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(ApiError):
    """Eligible topic partition leaders are not available."""

    code, retriable, invalid_metadata = 83, True, True
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class ElectionNotNeededError(ApiError):
    """Leader election not needed for topic partition."""

    code, retriable, invalid_metadata = 84, True, True
    name = "ELECTION_NOT_NEEDED"


class NoReassignmentInProgressError(ApiError):
    """No partition reassignment is in progress."""

    code, retriable, invalid_metadata = 85, False, False
    name = "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(ApiError):
    """Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."""

    code, retriable, invalid_metadata = 86, False, False
    name = "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(ApiError):
    """This record has failed the validation on broker and hence will be rejected."""

    code, retriable, invalid_metadata = 87, False, False
    name = "INVALID_RECORD"


class UnstableOffsetCommitError(ApiError):
    """There are unstable offsets that need to be cleared."""

    code, retriable, invalid_metadata = 88, True, False
    name = "UNSTABLE_OFFSET_COMMIT"


class ThrottlingQuotaExceededError(ApiError):
    """The throttling quota has been exceeded."""

    code, retriable, invalid_metadata = 89, True, False
    name = "THROTTLING_QUOTA_EXCEEDED"


class ProducerFencedError(ApiError):
    """There is a newer producer with the same transactionalId which fences the current one."""

    code, retriable, invalid_metadata = 90, False, False
    name = "PRODUCER_FENCED"


class ResourceNotFoundError(ApiError):
    """A request illegally referred to a resource that does not exist."""

    code, retriable, invalid_metadata = 91, False, False
    name = "RESOURCE_NOT_FOUND"


class DuplicateResourceError(ApiError):
    """A request illegally referred to the same resource twice."""

    code, retriable, invalid_metadata = 92, False, False
    name = "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(ApiError):
    """Requested credential would not meet criteria for acceptability."""

    code, retriable, invalid_metadata = 93, False, False
    name = "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(ApiError):
    """Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."""

    code, retriable, invalid_metadata = 94, False, False
    name = "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(ApiError):
    """The given update version was invalid."""

    code, retriable, invalid_metadata = 95, False, False
    name = "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(ApiError):
    """Unable to update finalized features due to an unexpected server error."""

    code, retriable, invalid_metadata = 96, False, False
    name = "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(ApiError):
    """Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."""

    code, retriable, invalid_metadata = 97, False, False
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(ApiError):
    """Requested snapshot was not found."""

    code, retriable, invalid_metadata = 98, False, False
    name = "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(ApiError):
    """Requested position is not greater than or equal to zero, and less than the size of the snapshot."""

    code, retriable, invalid_metadata = 99, False, False
    name = "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(ApiError):
    """This server does not host this topic ID."""

    code, retriable, invalid_metadata = 100, True, True
    name = "UNKNOWN_TOPIC_ID"


class DuplicateBrokerRegistrationError(ApiError):
    """This broker ID is already in use."""

    code, retriable, invalid_metadata = 101, False, False
    name = "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(ApiError):
    """The given broker ID was not registered."""

    code, retriable, invalid_metadata = 102, False, False
    name = "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(ApiError):
    """The log's topic ID did not match the topic ID in the request."""

    code, retriable, invalid_metadata = 103, True, True
    name = "INCONSISTENT_TOPIC_ID"


class InconsistentClusterIdError(ApiError):
    """The clusterId in the request does not match that found on the server."""

    code, retriable, invalid_metadata = 104, False, False
    name = "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(ApiError):
    """The transactionalId could not be found."""

    code, retriable, invalid_metadata = 105, False, False
    name = "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(ApiError):
    """The fetch session encountered inconsistent topic ID usage."""

    code, retriable, invalid_metadata = 106, True, False
    name = "FETCH_SESSION_TOPIC_ID_ERROR"


class IneligibleReplicaError(ApiError):
    """The new ISR contains at least one ineligible replica."""

    code, retriable, invalid_metadata = 107, False, False
    name = "INELIGIBLE_REPLICA"


class NewLeaderElectedError(ApiError):
    """The AlterPartition request successfully updated the partition state but the leader has changed."""

    code, retriable, invalid_metadata = 108, False, False
    name = "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(ApiError):
    """The requested offset is moved to tiered storage."""

    code, retriable, invalid_metadata = 109, False, False
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(ApiError):
    """The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."""

    code, retriable, invalid_metadata = 110, False, False
    name = "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(ApiError):
    """The instance ID is still used by another member in the consumer group. That member must leave first."""

    code, retriable, invalid_metadata = 111, False, False
    name = "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(ApiError):
    """The assignor or its version range is not supported by the consumer group."""

    code, retriable, invalid_metadata = 112, False, False
    name = "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(ApiError):
    """The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."""

    code, retriable, invalid_metadata = 113, False, False
    name = "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(ApiError):
    """The request was sent to an endpoint of the wrong type."""

    code, retriable, invalid_metadata = 114, False, False
    name = "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(ApiError):
    """This endpoint type is not supported yet."""

    code, retriable, invalid_metadata = 115, False, False
    name = "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(ApiError):
    """This controller ID is not known."""

    code, retriable, invalid_metadata = 116, False, False
    name = "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(ApiError):
    """Client sent a push telemetry request with an invalid or outdated subscription ID."""

    code, retriable, invalid_metadata = 117, False, False
    name = "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(ApiError):
    """Client sent a push telemetry request larger than the maximum size the broker will accept."""

    code, retriable, invalid_metadata = 118, False, False
    name = "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(ApiError):
    """The controller has considered the broker registration to be invalid."""

    code, retriable, invalid_metadata = 119, False, False
    name = "INVALID_REGISTRATION"


class TransactionAbortableError(ApiError):
    """The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."""

    code, retriable, invalid_metadata = 120, False, False
    name = "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(ApiError):
    """The record state is invalid. The acknowledgement of delivery could not be completed."""

    code, retriable, invalid_metadata = 121, False, False
    name = "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(ApiError):
    """The share session was not found."""

    code, retriable, invalid_metadata = 122, True, False
    name = "SHARE_SESSION_NOT_FOUND"


class InvalidShareSessionEpochError(ApiError):
    """The share session epoch is invalid."""

    code, retriable, invalid_metadata = 123, True, False
    name = "INVALID_SHARE_SESSION_EPOCH"


class FencedStateEpochError(ApiError):
    """The share coordinator rejected the request because the share-group state epoch did not match."""

    code, retriable, invalid_metadata = 124, False, False
    name = "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(ApiError):
    """The voter key doesn't match the receiving replica's key."""

    code, retriable, invalid_metadata = 125, False, False
    name = "INVALID_VOTER_KEY"


class DuplicateVoterError(ApiError):
    """The voter is already part of the set of voters."""

    code, retriable, invalid_metadata = 126, False, False
    name = "DUPLICATE_VOTER"


class VoterNotFoundError(ApiError):
    """The voter is not part of the set of voters."""

    code, retriable, invalid_metadata = 127, False, False
    name = "VOTER_NOT_FOUND"


class InvalidRegularExpressionError(ApiError):
    """The regular expression is not valid."""

    code, retriable, invalid_metadata = 128, False, False
    name = "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(ApiError):
    """Client metadata is stale. The client should rebootstrap to obtain new metadata."""

    code, retriable, invalid_metadata = 129, False, False
    name = "REBOOTSTRAP_REQUIRED"


def error_for_code(code: int) -> type[ApiError] | None:
    """The ``ApiError`` class for a Kafka error code.

    Args:
        code: the int16 error code read from a response.

    Returns:
        ``None`` for 0 (no error), the registered class otherwise, and ``UnknownServerError``
        for a code this table does not know (a newer broker may send codes we predate).
    """
    if code == 0:
        return None
    return ERRORS_BY_CODE.get(code, UnknownServerError)


_LOGCORE_TABLE: tuple[tuple[type[BaseException], int], ...] | None = None


def _logcore_table() -> tuple[tuple[type[BaseException], int], ...]:
    # Imported lazily: logcore's package import loads the compiled storage engine, which
    # pylog.protocol (and anything that only needs error codes) must not require.
    global _LOGCORE_TABLE
    if _LOGCORE_TABLE is None:
        from logcore import errors as le

        _LOGCORE_TABLE = (
            (le.CorruptRecordError, CorruptMessageError.code),
            (le.RecordTooLargeError, MessageTooLargeError.code),
            (le.OffsetOutOfRangeError, OffsetOutOfRangeError.code),
            (le.InvalidTimestampError, InvalidTimestampError.code),
            (le.LogDirError, KafkaStorageError.code),
            (le.InvalidConfigError, InvalidConfigError.code),
            (le.InvalidProducerEpochError, InvalidProducerEpochError.code),
            (le.OutOfOrderSequenceError, OutOfOrderSequenceNumberError.code),
            (le.InvalidRecordError, InvalidRecordError.code),
            (le.InvalidTxnStateError, InvalidTxnStateError.code),
            (le.TransactionCoordinatorFencedError, TransactionCoordinatorFencedError.code),
        )
    return _LOGCORE_TABLE


def code_for_exception(exc: BaseException) -> int:
    """The Kafka error code for an exception (``Errors.forException``).

    Walks the exception's MRO from the most derived class: an ``ApiError`` subclass gives its
    own code, a ``RemoteProtocolError`` its ``error_code``, a ``logcore.errors`` class the code
    in the table here (the only such table). Anything else is ``UNKNOWN_SERVER_ERROR`` (-1);
    the dispatcher should log those as bugs.

    Args:
        exc: any exception instance.

    Returns:
        The int16 error code to put in a response.
    """
    if isinstance(exc, ApiError):
        return exc.code
    if isinstance(exc, RemoteProtocolError):
        return exc.error_code
    mro = type(exc).__mro__
    if any(c.__module__ == "logcore.errors" for c in mro):
        table = dict(_logcore_table())
        for klass in mro:
            code = table.get(klass)
            if code is not None:
                return code
    return UnknownServerError.code
