// The action names MongoDB spells in roles, privileges and rolesInfo (action_type.idl).

package auth

// Actions, MongoDB's ActionType values (their names are what roles and privileges spell).
const (
	AddShard Action = iota
	AdvanceClusterTime
	AllCollectionStats
	Analyze
	AnalyzeShardKey
	AnyAction
	AppendOplogNote
	ApplicationMessage
	ApplyOps
	AuditConfigure
	AuthSchemaUpgrade
	BypassDocumentValidation
	BypassWriteBlockingMode
	ChangeCustomData
	ChangeOwnCustomData
	ChangeOwnPassword
	ChangePassword
	ChangeStream
	CheckMetadataConsistency
	CleanupOrphaned
	CleanupStructuredEncryptionData
	ClearJumboFlag
	CollMod
	CollStats
	Compact
	CompactStructuredEncryptionData
	ConfigureQueryAnalyzer
	ConnPoolStats
	ConnPoolSync
	ConvertToCapped
	CreateCollection
	CreateIndex
	CreateRole
	CreateSearchIndexes
	CreateUser
	DbCheck
	DbHash
	DbStats
	DropCollection
	DropConnections
	DropDatabase
	DropIndex
	DropRole
	DropSearchIndex
	DropUser
	EnableProfiler
	EnableSharding
	ExportCollection
	Find
	FlushRouterConfig
	ForceUUID
	Fsync
	GetChangeStreamState
	GetClusterParameter
	GetCmdLineOpts
	GetDatabaseVersion
	GetDefaultRWConcern
	GetLog
	GetParameter
	GetShardMap
	GetShardVersion
	GrantRole
	HostInfo
	Impersonate
	ImportCollection
	IndexStats
	Inprog
	Insert
	Internal
	InvalidateUserCache
	IssueDirectShardOperations
	KillAnyCursor
	KillAnySession
	KillCursors
	Killop
	ListCachedAndActiveUsers
	ListCollections
	ListDatabases
	ListIndexes
	ListSampledQueries
	ListSearchIndexes
	ListSessions
	ListShards
	LogRotate
	MoveChunk
	MoveCollection
	Netstat
	OidReset
	OidcListKeys
	OidcRefreshKeys
	OperationMetrics
	PlanCacheIndexFilter
	PlanCacheRead
	PlanCacheWrite
	QuerySettings
	QueryStatsRead
	QueryStatsReadTransformed
	ReIndex
	RefineCollectionShardKey
	Remove
	RemoveShard
	RenameCollectionSameDB
	ReplSetConfigure
	ReplSetGetConfig
	ReplSetGetStatus
	ReplSetResizeOplog
	ReplSetStateChange
	ReshardCollection
	Resync
	RevokeRole
	RotateCertificates
	RunTenantMigration
	ServerStatus
	SetAuthenticationRestriction
	SetChangeStreamState
	SetClusterParameter
	SetDefaultRWConcern
	SetFeatureCompatibilityVersion
	SetParameter
	SetUserWriteBlockMode
	ShardedDataDistribution
	ShardingState
	Shutdown
	SplitChunk
	SplitVector
	StorageDetails
	Top
	Touch
	TrafficRecord
	TransitionFromDedicatedConfigServer
	TransitionToDedicatedConfigServer
	Unlock
	Update
	UpdateSearchIndex
	UseTenant
	UseUUID
	Validate
	ViewRole
	ViewUser
	numActions
)

var actionNames = [numActions]string{
	AddShard:                            "addShard",
	AdvanceClusterTime:                  "advanceClusterTime",
	AllCollectionStats:                  "allCollectionStats",
	Analyze:                             "analyze",
	AnalyzeShardKey:                     "analyzeShardKey",
	AnyAction:                           "anyAction",
	AppendOplogNote:                     "appendOplogNote",
	ApplicationMessage:                  "applicationMessage",
	ApplyOps:                            "applyOps",
	AuditConfigure:                      "auditConfigure",
	AuthSchemaUpgrade:                   "authSchemaUpgrade",
	BypassDocumentValidation:            "bypassDocumentValidation",
	BypassWriteBlockingMode:             "bypassWriteBlockingMode",
	ChangeCustomData:                    "changeCustomData",
	ChangeOwnCustomData:                 "changeOwnCustomData",
	ChangeOwnPassword:                   "changeOwnPassword",
	ChangePassword:                      "changePassword",
	ChangeStream:                        "changeStream",
	CheckMetadataConsistency:            "checkMetadataConsistency",
	CleanupOrphaned:                     "cleanupOrphaned",
	CleanupStructuredEncryptionData:     "cleanupStructuredEncryptionData",
	ClearJumboFlag:                      "clearJumboFlag",
	CollMod:                             "collMod",
	CollStats:                           "collStats",
	Compact:                             "compact",
	CompactStructuredEncryptionData:     "compactStructuredEncryptionData",
	ConfigureQueryAnalyzer:              "configureQueryAnalyzer",
	ConnPoolStats:                       "connPoolStats",
	ConnPoolSync:                        "connPoolSync",
	ConvertToCapped:                     "convertToCapped",
	CreateCollection:                    "createCollection",
	CreateIndex:                         "createIndex",
	CreateRole:                          "createRole",
	CreateSearchIndexes:                 "createSearchIndexes",
	CreateUser:                          "createUser",
	DbCheck:                             "dbCheck",
	DbHash:                              "dbHash",
	DbStats:                             "dbStats",
	DropCollection:                      "dropCollection",
	DropConnections:                     "dropConnections",
	DropDatabase:                        "dropDatabase",
	DropIndex:                           "dropIndex",
	DropRole:                            "dropRole",
	DropSearchIndex:                     "dropSearchIndex",
	DropUser:                            "dropUser",
	EnableProfiler:                      "enableProfiler",
	EnableSharding:                      "enableSharding",
	ExportCollection:                    "exportCollection",
	Find:                                "find",
	FlushRouterConfig:                   "flushRouterConfig",
	ForceUUID:                           "forceUUID",
	Fsync:                               "fsync",
	GetChangeStreamState:                "getChangeStreamState",
	GetClusterParameter:                 "getClusterParameter",
	GetCmdLineOpts:                      "getCmdLineOpts",
	GetDatabaseVersion:                  "getDatabaseVersion",
	GetDefaultRWConcern:                 "getDefaultRWConcern",
	GetLog:                              "getLog",
	GetParameter:                        "getParameter",
	GetShardMap:                         "getShardMap",
	GetShardVersion:                     "getShardVersion",
	GrantRole:                           "grantRole",
	HostInfo:                            "hostInfo",
	Impersonate:                         "impersonate",
	ImportCollection:                    "importCollection",
	IndexStats:                          "indexStats",
	Inprog:                              "inprog",
	Insert:                              "insert",
	Internal:                            "internal",
	InvalidateUserCache:                 "invalidateUserCache",
	IssueDirectShardOperations:          "issueDirectShardOperations",
	KillAnyCursor:                       "killAnyCursor",
	KillAnySession:                      "killAnySession",
	KillCursors:                         "killCursors",
	Killop:                              "killop",
	ListCachedAndActiveUsers:            "listCachedAndActiveUsers",
	ListCollections:                     "listCollections",
	ListDatabases:                       "listDatabases",
	ListIndexes:                         "listIndexes",
	ListSampledQueries:                  "listSampledQueries",
	ListSearchIndexes:                   "listSearchIndexes",
	ListSessions:                        "listSessions",
	ListShards:                          "listShards",
	LogRotate:                           "logRotate",
	MoveChunk:                           "moveChunk",
	MoveCollection:                      "moveCollection",
	Netstat:                             "netstat",
	OidReset:                            "oidReset",
	OidcListKeys:                        "oidcListKeys",
	OidcRefreshKeys:                     "oidcRefreshKeys",
	OperationMetrics:                    "operationMetrics",
	PlanCacheIndexFilter:                "planCacheIndexFilter",
	PlanCacheRead:                       "planCacheRead",
	PlanCacheWrite:                      "planCacheWrite",
	QuerySettings:                       "querySettings",
	QueryStatsRead:                      "queryStatsRead",
	QueryStatsReadTransformed:           "queryStatsReadTransformed",
	ReIndex:                             "reIndex",
	RefineCollectionShardKey:            "refineCollectionShardKey",
	Remove:                              "remove",
	RemoveShard:                         "removeShard",
	RenameCollectionSameDB:              "renameCollectionSameDB",
	ReplSetConfigure:                    "replSetConfigure",
	ReplSetGetConfig:                    "replSetGetConfig",
	ReplSetGetStatus:                    "replSetGetStatus",
	ReplSetResizeOplog:                  "replSetResizeOplog",
	ReplSetStateChange:                  "replSetStateChange",
	ReshardCollection:                   "reshardCollection",
	Resync:                              "resync",
	RevokeRole:                          "revokeRole",
	RotateCertificates:                  "rotateCertificates",
	RunTenantMigration:                  "runTenantMigration",
	ServerStatus:                        "serverStatus",
	SetAuthenticationRestriction:        "setAuthenticationRestriction",
	SetChangeStreamState:                "setChangeStreamState",
	SetClusterParameter:                 "setClusterParameter",
	SetDefaultRWConcern:                 "setDefaultRWConcern",
	SetFeatureCompatibilityVersion:      "setFeatureCompatibilityVersion",
	SetParameter:                        "setParameter",
	SetUserWriteBlockMode:               "setUserWriteBlockMode",
	ShardedDataDistribution:             "shardedDataDistribution",
	ShardingState:                       "shardingState",
	Shutdown:                            "shutdown",
	SplitChunk:                          "splitChunk",
	SplitVector:                         "splitVector",
	StorageDetails:                      "storageDetails",
	Top:                                 "top",
	Touch:                               "touch",
	TrafficRecord:                       "trafficRecord",
	TransitionFromDedicatedConfigServer: "transitionFromDedicatedConfigServer",
	TransitionToDedicatedConfigServer:   "transitionToDedicatedConfigServer",
	Unlock:                              "unlock",
	Update:                              "update",
	UpdateSearchIndex:                   "updateSearchIndex",
	UseTenant:                           "useTenant",
	UseUUID:                             "useUUID",
	Validate:                            "validate",
	ViewRole:                            "viewRole",
	ViewUser:                            "viewUser",
}
