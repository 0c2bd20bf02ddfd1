// Package mongoerr is the only place MongoDB error codes, code names and error labels are
// spelled. Every layer returns *Error (or wraps one with %w); the server converts errors to the
// wire at exactly one boundary, where anything without a code becomes InternalError (1).
//
// Codes and names match MongoDB 7.0's error_codes.yml; categories follow its
// NotPrimaryError / RetriableError / ... groupings.
package mongoerr

import (
	"errors"
	"fmt"
)

// Code is a MongoDB error code.
type Code int32

// Error codes used by Humongo. Keep this list sorted by value; names come from codeNames.
const (
	OK                                                          Code = 0
	InternalError                                               Code = 1
	BadValue                                                    Code = 2
	NoSuchKey                                                   Code = 4
	GraphContainsCycle                                          Code = 5
	HostUnreachable                                             Code = 6
	HostNotFound                                                Code = 7
	UnknownError                                                Code = 8
	FailedToParse                                               Code = 9
	CannotMutateObject                                          Code = 10
	UserNotFound                                                Code = 11
	UnsupportedFormat                                           Code = 12
	Unauthorized                                                Code = 13
	TypeMismatch                                                Code = 14
	Overflow                                                    Code = 15
	InvalidLength                                               Code = 16
	ProtocolError                                               Code = 17
	AuthenticationFailed                                        Code = 18
	CannotReuseObject                                           Code = 19
	IllegalOperation                                            Code = 20
	EmptyArrayOperation                                         Code = 21
	InvalidBSON                                                 Code = 22
	AlreadyInitialized                                          Code = 23
	LockTimeout                                                 Code = 24
	RemoteValidationError                                       Code = 25
	NamespaceNotFound                                           Code = 26
	IndexNotFound                                               Code = 27
	PathNotViable                                               Code = 28
	NonExistentPath                                             Code = 29
	InvalidPath                                                 Code = 30
	RoleNotFound                                                Code = 31
	RolesNotRelated                                             Code = 32
	PrivilegeNotFound                                           Code = 33
	CannotBackfillArray                                         Code = 34
	UserModificationFailed                                      Code = 35
	RemoteChangeDetected                                        Code = 36
	FileRenameFailed                                            Code = 37
	FileNotOpen                                                 Code = 38
	FileStreamFailed                                            Code = 39
	ConflictingUpdateOperators                                  Code = 40
	FileAlreadyOpen                                             Code = 41
	LogWriteFailed                                              Code = 42
	CursorNotFound                                              Code = 43
	UserDataInconsistent                                        Code = 45
	LockBusy                                                    Code = 46
	NoMatchingDocument                                          Code = 47
	NamespaceExists                                             Code = 48
	InvalidRoleModification                                     Code = 49
	MaxTimeMSExpired                                            Code = 50
	ManualInterventionRequired                                  Code = 51
	DollarPrefixedFieldName                                     Code = 52
	InvalidIdField                                              Code = 53
	NotSingleValueField                                         Code = 54
	InvalidDBRef                                                Code = 55
	EmptyFieldName                                              Code = 56
	DottedFieldName                                             Code = 57
	RoleModificationFailed                                      Code = 58
	CommandNotFound                                             Code = 59
	ShardKeyNotFound                                            Code = 61
	OplogOperationUnsupported                                   Code = 62
	StaleShardVersion                                           Code = 63
	WriteConcernFailed                                          Code = 64
	MultipleErrorsOccurred                                      Code = 65
	ImmutableField                                              Code = 66
	CannotCreateIndex                                           Code = 67
	IndexAlreadyExists                                          Code = 68
	AuthSchemaIncompatible                                      Code = 69
	ShardNotFound                                               Code = 70
	ReplicaSetNotFound                                          Code = 71
	InvalidOptions                                              Code = 72
	InvalidNamespace                                            Code = 73
	NodeNotFound                                                Code = 74
	WriteConcernLegacyOK                                        Code = 75
	NoReplicationEnabled                                        Code = 76
	OperationIncomplete                                         Code = 77
	CommandResultSchemaViolation                                Code = 78
	UnknownReplWriteConcern                                     Code = 79
	RoleDataInconsistent                                        Code = 80
	NoMatchParseContext                                         Code = 81
	NoProgressMade                                              Code = 82
	RemoteResultsUnavailable                                    Code = 83
	IndexOptionsConflict                                        Code = 85
	IndexKeySpecsConflict                                       Code = 86
	CannotSplit                                                 Code = 87
	NetworkTimeout                                              Code = 89
	CallbackCanceled                                            Code = 90
	ShutdownInProgress                                          Code = 91
	SecondaryAheadOfPrimary                                     Code = 92
	InvalidReplicaSetConfig                                     Code = 93
	NotYetInitialized                                           Code = 94
	NotSecondary                                                Code = 95
	OperationFailed                                             Code = 96
	NoProjectionFound                                           Code = 97
	DBPathInUse                                                 Code = 98
	UnsatisfiableWriteConcern                                   Code = 100
	OutdatedClient                                              Code = 101
	IncompatibleAuditMetadata                                   Code = 102
	NewReplicaSetConfigurationIncompatible                      Code = 103
	NodeNotElectable                                            Code = 104
	IncompatibleShardingMetadata                                Code = 105
	DistributedClockSkewed                                      Code = 106
	LockFailed                                                  Code = 107
	InconsistentReplicaSetNames                                 Code = 108
	ConfigurationInProgress                                     Code = 109
	CannotInitializeNodeWithData                                Code = 110
	NotExactValueField                                          Code = 111
	WriteConflict                                               Code = 112
	InitialSyncFailure                                          Code = 113
	InitialSyncOplogSourceMissing                               Code = 114
	CommandNotSupported                                         Code = 115
	DocTooLargeForCapped                                        Code = 116
	ConflictingOperationInProgress                              Code = 117
	NamespaceNotSharded                                         Code = 118
	InvalidSyncSource                                           Code = 119
	OplogStartMissing                                           Code = 120
	DocumentValidationFailure                                   Code = 121
	NotAReplicaSet                                              Code = 123
	IncompatibleElectionProtocol                                Code = 124
	CommandFailed                                               Code = 125
	RPCProtocolNegotiationFailed                                Code = 126
	UnrecoverableRollbackError                                  Code = 127
	LockNotFound                                                Code = 128
	LockStateChangeFailed                                       Code = 129
	SymbolNotFound                                              Code = 130
	FailedToSatisfyReadPreference                               Code = 133
	ReadConcernMajorityNotAvailableYet                          Code = 134
	StaleTerm                                                   Code = 135
	CappedPositionLost                                          Code = 136
	IncompatibleShardingConfigVersion                           Code = 137
	RemoteOplogStale                                            Code = 138
	JSInterpreterFailure                                        Code = 139
	InvalidSSLConfiguration                                     Code = 140
	SSLHandshakeFailed                                          Code = 141
	JSUncatchableError                                          Code = 142
	CursorInUse                                                 Code = 143
	IncompatibleCatalogManager                                  Code = 144
	PooledConnectionsDropped                                    Code = 145
	ExceededMemoryLimit                                         Code = 146
	ZLibError                                                   Code = 147
	ReadConcernMajorityNotEnabled                               Code = 148
	NoConfigPrimary                                             Code = 149
	StaleEpoch                                                  Code = 150
	OperationCannotBeBatched                                    Code = 151
	OplogOutOfOrder                                             Code = 152
	ChunkTooBig                                                 Code = 153
	InconsistentShardIdentity                                   Code = 154
	CannotApplyOplogWhilePrimary                                Code = 155
	CanRepairToDowngrade                                        Code = 157
	MustUpgrade                                                 Code = 158
	DurationOverflow                                            Code = 159
	MaxStalenessOutOfRange                                      Code = 160
	IncompatibleCollationVersion                                Code = 161
	CollectionIsEmpty                                           Code = 162
	ZoneStillInUse                                              Code = 163
	InitialSyncActive                                           Code = 164
	ViewDepthLimitExceeded                                      Code = 165
	CommandNotSupportedOnView                                   Code = 166
	OptionNotSupportedOnView                                    Code = 167
	InvalidPipelineOperator                                     Code = 168
	CommandOnShardedViewNotSupportedOnMongod                    Code = 169
	TooManyMatchingDocuments                                    Code = 170
	CannotIndexParallelArrays                                   Code = 171
	TransportSessionClosed                                      Code = 172
	TransportSessionNotFound                                    Code = 173
	TransportSessionUnknown                                     Code = 174
	QueryPlanKilled                                             Code = 175
	FileOpenFailed                                              Code = 176
	ZoneNotFound                                                Code = 177
	RangeOverlapConflict                                        Code = 178
	WindowsPdhError                                             Code = 179
	BadPerfCounterPath                                          Code = 180
	AmbiguousIndexKeyPattern                                    Code = 181
	InvalidViewDefinition                                       Code = 182
	ClientMetadataMissingField                                  Code = 183
	ClientMetadataAppNameTooLarge                               Code = 184
	ClientMetadataDocumentTooLarge                              Code = 185
	ClientMetadataCannotBeMutated                               Code = 186
	LinearizableReadConcernError                                Code = 187
	IncompatibleServerVersion                                   Code = 188
	PrimarySteppedDown                                          Code = 189
	MasterSlaveConnectionFailure                                Code = 190
	FailPointEnabled                                            Code = 192
	NoShardingEnabled                                           Code = 193
	BalancerInterrupted                                         Code = 194
	ViewPipelineMaxSizeExceeded                                 Code = 195
	InvalidIndexSpecificationOption                             Code = 197
	ReplicaSetMonitorRemoved                                    Code = 199
	ChunkRangeCleanupPending                                    Code = 200
	CannotBuildIndexKeys                                        Code = 201
	NetworkInterfaceExceededTimeLimit                           Code = 202
	ShardingStateNotInitialized                                 Code = 203
	TimeProofMismatch                                           Code = 204
	ClusterTimeFailsRateLimiter                                 Code = 205
	NoSuchSession                                               Code = 206
	InvalidUUID                                                 Code = 207
	TooManyLocks                                                Code = 208
	StaleClusterTime                                            Code = 209
	CannotVerifyAndSignLogicalTime                              Code = 210
	KeyNotFound                                                 Code = 211
	IncompatibleRollbackAlgorithm                               Code = 212
	DuplicateSession                                            Code = 213
	AuthenticationRestrictionUnmet                              Code = 214
	DatabaseDropPending                                         Code = 215
	ElectionInProgress                                          Code = 216
	IncompleteTransactionHistory                                Code = 217
	UpdateOperationFailed                                       Code = 218
	FTDCPathNotSet                                              Code = 219
	FTDCPathAlreadySet                                          Code = 220
	IndexModified                                               Code = 221
	CloseChangeStream                                           Code = 222
	IllegalOpMsgFlag                                            Code = 223
	QueryFeatureNotAllowed                                      Code = 224
	TransactionTooOld                                           Code = 225
	AtomicityFailure                                            Code = 226
	CannotImplicitlyCreateCollection                            Code = 227
	SessionTransferIncomplete                                   Code = 228
	MustDowngrade                                               Code = 229
	DNSHostNotFound                                             Code = 230
	DNSProtocolError                                            Code = 231
	MaxSubPipelineDepthExceeded                                 Code = 232
	TooManyDocumentSequences                                    Code = 233
	RetryChangeStream                                           Code = 234
	InternalErrorNotSupported                                   Code = 235
	ForTestingErrorExtraInfo                                    Code = 236
	CursorKilled                                                Code = 237
	NotImplemented                                              Code = 238
	SnapshotTooOld                                              Code = 239
	DNSRecordTypeMismatch                                       Code = 240
	ConversionFailure                                           Code = 241
	CannotCreateCollection                                      Code = 242
	IncompatibleWithUpgradedServer                              Code = 243
	BrokenPromise                                               Code = 245
	SnapshotUnavailable                                         Code = 246
	ProducerConsumerQueueBatchTooLarge                          Code = 247
	ProducerConsumerQueueEndClosed                              Code = 248
	StaleDbVersion                                              Code = 249
	StaleChunkHistory                                           Code = 250
	NoSuchTransaction                                           Code = 251
	ReentrancyNotAllowed                                        Code = 252
	FreeMonHttpInFlight                                         Code = 253
	FreeMonHttpTemporaryFailure                                 Code = 254
	FreeMonHttpPermanentFailure                                 Code = 255
	TransactionCommitted                                        Code = 256
	TransactionTooLarge                                         Code = 257
	UnknownFeatureCompatibilityVersion                          Code = 258
	KeyedExecutorRetry                                          Code = 259
	InvalidResumeToken                                          Code = 260
	TooManyLogicalSessions                                      Code = 261
	ExceededTimeLimit                                           Code = 262
	OperationNotSupportedInTransaction                          Code = 263
	TooManyFilesOpen                                            Code = 264
	OrphanedRangeCleanUpFailed                                  Code = 265
	FailPointSetFailed                                          Code = 266
	PreparedTransactionInProgress                               Code = 267
	CannotBackup                                                Code = 268
	DataModifiedByRepair                                        Code = 269
	RepairedReplicaSetNode                                      Code = 270
	JSInterpreterFailureWithStack                               Code = 271
	MigrationConflict                                           Code = 272
	ProducerConsumerQueueProducerQueueDepthExceeded             Code = 273
	ProducerConsumerQueueConsumed                               Code = 274
	ExchangePassthrough                                         Code = 275
	IndexBuildAborted                                           Code = 276
	AlarmAlreadyFulfilled                                       Code = 277
	UnsatisfiableCommitQuorum                                   Code = 278
	ClientDisconnect                                            Code = 279
	ChangeStreamFatalError                                      Code = 280
	TransactionCoordinatorSteppingDown                          Code = 281
	TransactionCoordinatorReachedAbortDecision                  Code = 282
	WouldChangeOwningShard                                      Code = 283
	ForTestingErrorExtraInfoWithExtraInfoInNamespace            Code = 284
	IndexBuildAlreadyInProgress                                 Code = 285
	ChangeStreamHistoryLost                                     Code = 286
	TransactionCoordinatorDeadlineTaskCanceled                  Code = 287
	ChecksumMismatch                                            Code = 288
	WaitForMajorityServiceEarlierOpTimeAvailable                Code = 289
	TransactionExceededLifetimeLimitSeconds                     Code = 290
	NoQueryExecutionPlans                                       Code = 291
	QueryExceededMemoryLimitNoDiskUseAllowed                    Code = 292
	InvalidSeedList                                             Code = 293
	InvalidTopologyType                                         Code = 294
	InvalidHeartBeatFrequency                                   Code = 295
	TopologySetNameRequired                                     Code = 296
	HierarchicalAcquisitionLevelViolation                       Code = 297
	InvalidServerType                                           Code = 298
	OCSPCertificateStatusRevoked                                Code = 299
	RangeDeletionAbandonedBecauseCollectionWithUUIDDoesNotExist Code = 300
	DataCorruptionDetected                                      Code = 301
	OCSPCertificateStatusUnknown                                Code = 302
	SplitHorizonChange                                          Code = 303
	ShardInvalidatedForTargeting                                Code = 304
	ReadThroughCacheLookupCanceled                              Code = 306
	RangeDeletionAbandonedBecauseTaskDocumentDoesNotExist       Code = 307
	CurrentConfigNotCommittedYet                                Code = 308
	ExhaustCommandFinished                                      Code = 309
	PeriodicJobIsStopped                                        Code = 310
	TransactionCoordinatorCanceled                              Code = 311
	OperationIsKilledAndDelisted                                Code = 312
	ResumableRangeDeleterDisabled                               Code = 313
	ObjectIsBusy                                                Code = 314
	TooStaleToSyncFromSource                                    Code = 315
	QueryTrialRunCompleted                                      Code = 316
	ConnectionPoolExpired                                       Code = 317
	ForTestingOptionalErrorExtraInfo                            Code = 318
	MovePrimaryInProgress                                       Code = 319
	TenantMigrationConflict                                     Code = 320
	TenantMigrationCommitted                                    Code = 321
	APIVersionError                                             Code = 322
	APIStrictError                                              Code = 323
	APIDeprecationError                                         Code = 324
	TenantMigrationAborted                                      Code = 325
	OplogQueryMinTsMissing                                      Code = 326
	NoSuchTenantMigration                                       Code = 327
	TenantMigrationAccessBlockerShuttingDown                    Code = 328
	TenantMigrationInProgress                                   Code = 329
	SkipCommandExecution                                        Code = 330
	FailedToRunWithReplyBuilder                                 Code = 331
	CannotDowngrade                                             Code = 332
	ServiceExecutorInShutdown                                   Code = 333
	MechanismUnavailable                                        Code = 334
	TenantMigrationForgotten                                    Code = 335
	TimeseriesBucketCleared                                     Code = 339
	AuthenticationAbandoned                                     Code = 340
	ReshardCollectionInProgress                                 Code = 341
	NoSuchReshardCollection                                     Code = 342
	ReshardCollectionCommitted                                  Code = 343
	ReshardCollectionAborted                                    Code = 344
	ReshardingCriticalSectionTimeout                            Code = 345
	ShardCannotRefreshDueToLocksHeld                            Code = 347
	AuditingNotEnabled                                          Code = 348
	RuntimeAuditConfigurationNotEnabled                         Code = 349
	APIVersionHandshakeViolation                                Code = 350
	ShardingCriticalSectionTimeout                              Code = 351
	ChangeStreamInvalidated                                     Code = 355
	TemporarilyUnavailable                                      Code = 365
	NotWritablePrimary                                          Code = 10107
	BSONObjectTooLarge                                          Code = 10334
	DuplicateKey                                                Code = 11000
	InterruptedAtShutdown                                       Code = 11600
	Interrupted                                                 Code = 11601
	InterruptedDueToReplStateChange                             Code = 11602
	BackgroundOperationInProgressForDatabase                    Code = 12586
	BackgroundOperationInProgressForNamespace                   Code = 12587
	NotPrimaryOrSecondary                                       Code = 13436
	NotPrimaryNoSecondaryOk                                     Code = 13435
	StaleConfig                                                 Code = 13388
	DatabaseDifferCase                                          Code = 13297
	ShardKeyTooBig                                              Code = 13334
	Location16755                                               Code = 16755
	Location40324                                               Code = 40324
	Location40352                                               Code = 40352
	Location40353                                               Code = 40353
	IndexKeyTooLong                                             Code = 17280
	UnsupportedOpQueryCommand                                   Code = 352
	CannotConvertIndexToUnique                                  Code = 359
	CollectionUUIDMismatch                                      Code = 361
	// Location18656: mongod refuses to start with an unknown --storageEngine.
	Location18656 Code = 18656
	// Location40484: a gossiped vector clock component at the end of time.
	Location40484 Code = 40484
)

// codeNames maps each code to its MongoDB codeName. Location codes are named "Location<N>".
var codeNames = map[Code]string{}

func init() {
	for _, e := range codeTable {
		codeNames[e.code] = e.name
	}
}

type codeEntry struct {
	code Code
	name string
}

// Name returns the MongoDB codeName of c ("Location<N>" for uncatalogued codes).
func (c Code) Name() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", int32(c))
}

func (c Code) String() string { return c.Name() }

// Error is a MongoDB error: the code, its message and any error labels. It is what handlers
// return; the server turns it into {ok: 0, errmsg, code, codeName, errorLabels}.
type Error struct {
	Code   Code
	Msg    string
	Labels []string
	// Info is an optional extra document (errInfo, keyPattern/keyValue, ...) as raw BSON
	// fields appended to the reply by the wire boundary. Nil when absent.
	Info any
	// Err is an optional cause, kept for logs and errors.Is.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return fmt.Sprintf("%s (%d): %v", e.Code.Name(), e.Code, e.Err)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code.Name(), e.Code, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, &Error{Code: X}) match on code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Code == e.Code
}

// NewWriteConflict is the WriteConflict (112) MongoDB's WriteConflictException carries.
func NewWriteConflict() *Error {
	return New(WriteConflict, "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.")
}

// New returns an error with code c and message msg.
func New(c Code, msg string) *Error { return &Error{Code: c, Msg: msg} }

// Newf returns an error with code c and a formatted message. A %w verb keeps the cause.
func Newf(c Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: c, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// WithLabels returns e with labels appended.
func (e *Error) WithLabels(labels ...string) *Error {
	e.Labels = append(e.Labels, labels...)
	return e
}

// WithInfo returns e carrying extra reply fields.
func (e *Error) WithInfo(info any) *Error {
	e.Info = info
	return e
}

// As returns the *Error inside err, if any.
func As(err error) (*Error, bool) {
	var me *Error
	if errors.As(err, &me) {
		return me, true
	}
	return nil, false
}

// CodeOf returns the code of err: OK for nil, InternalError for errors without a code.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	if me, ok := As(err); ok {
		return me.Code
	}
	return InternalError
}

// Is reports whether err carries code c.
func Is(err error, c Code) bool { return err != nil && CodeOf(err) == c }

// Error labels.
const (
	LabelRetryableWrite           = "RetryableWriteError"
	LabelTransientTransaction     = "TransientTransactionError"
	LabelUnknownTransactionCommit = "UnknownTransactionCommitResult"
	LabelNonResumableChangeStream = "NonResumableChangeStreamError"
	LabelResumableChangeStream    = "ResumableChangeStreamError"
	LabelNoWritesPerformed        = "NoWritesPerformed"
)

// IsNotPrimaryError reports MongoDB's NotPrimaryError category.
func IsNotPrimaryError(c Code) bool {
	switch c {
	case NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary,
		InterruptedDueToReplStateChange, PrimarySteppedDown:
		return true
	}
	return false
}

// IsRetriableError reports MongoDB's RetriableError category (drivers retry these writes).
func IsRetriableError(c Code) bool {
	switch c {
	case HostUnreachable, HostNotFound, NetworkTimeout, SocketException,
		NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary,
		PrimarySteppedDown, InterruptedAtShutdown, InterruptedDueToReplStateChange,
		ShutdownInProgress, ExceededTimeLimit, RetryChangeStream:
		return true
	}
	return false
}

// IsShutdownError reports MongoDB's ShutdownError category.
func IsShutdownError(c Code) bool {
	return c == ShutdownInProgress || c == InterruptedAtShutdown
}

// SocketException is MongoDB's code for network errors seen by a server-side client.
const SocketException Code = 9001
