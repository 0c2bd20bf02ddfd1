package commands

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/service"
)

// DefaultParamSpecs are mongod 7.0's commonly used parameters with their defaults.
func DefaultParamSpecs() []service.ParamSpec {
	fcv := func() bsoncore.Document {
		return bsoncore.NewDocumentBuilder().AppendString("version", "7.0").Build()
	}
	return append([]service.ParamSpec{
		// allowDiskUseByDefault (true since 6.0) lets blocking sorts and $group spill to disk
		// when a command does not say allowDiskUse.
		{Name: "allowDiskUseByDefault", Kind: service.ParamBool, Default: true, Runtime: true, Startup: true},
		// authSchemaVersion is the version of the user/role schema (5: SCRAM credentials since
		// 3.0); mongod reports it and refuses to set it.
		{Name: "authSchemaVersion", Kind: service.ParamInt, Default: int64(5)},
		{Name: "authenticationMechanisms", Kind: service.ParamString, Default: "SCRAM-SHA-1,SCRAM-SHA-256", Startup: true},
		// balancerMigrationsThrottlingMs (MongoDB's): the config server balancer's wait after a
		// round that scheduled migrations; balancerRoundIntervalMs (Humongo's; MongoDB has
		// only the overrideBalanceRoundInterval fail point): its wait after a round with
		// nothing to move (10 s).
		{Name: "balancerMigrationsThrottlingMs", Kind: service.ParamInt, Default: int64(1000), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "balancerRoundIntervalMs", Kind: service.ParamInt, Default: int64(10000), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "cursorTimeoutMillis", Kind: service.ParamInt, Default: int64(600000), Runtime: true, Startup: true},
		{Name: "disableLogicalSessionCacheRefresh", Kind: service.ParamBool, Default: false, Startup: true},
		{Name: "enableTestCommands", Kind: service.ParamBool, Default: false, Startup: true},
		{Name: "featureCompatibilityVersion", Kind: service.ParamDoc, Doc: fcv},
		{Name: "internalDocumentSourceGraphLookupMaxMemoryBytes", Kind: service.ParamInt, Default: int64(100 * 1024 * 1024), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt64},
		{Name: "internalDocumentSourceLookupCacheSizeBytes", Kind: service.ParamInt, Default: int64(100 * 1024 * 1024), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt64},
		{Name: "internalLookupStageIntermediateDocumentMaxSizeBytes", Kind: service.ParamInt, Default: int64(100 * 1024 * 1024), Runtime: true, Startup: true, Min: 16*1024*1024 + 16*1024, Max: math.MaxInt64},
		{Name: "internalQueryMaxBlockingSortMemoryUsageBytes", Kind: service.ParamInt, Default: int64(100 * 1024 * 1024), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt64},
		{Name: "journalCommitInterval", Kind: service.ParamInt, Default: int64(100), Runtime: true, Startup: true, Min: 1, Max: 500},
		{Name: "localLogicalSessionTimeoutMinutes", Kind: service.ParamInt, Default: int64(30), Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "logLevel", Kind: service.ParamInt, Default: int64(0), Runtime: true, Startup: true, Min: 0, Max: 5},
		{Name: "maxLogSizeKB", Kind: service.ParamInt, Default: int64(logv2.DefaultMaxAttributeSizeKB), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "logicalSessionRefreshMillis", Kind: service.ParamInt, Default: int64(300000), Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "maxIndexBuildMemoryUsageMegabytes", Kind: service.ParamInt, Default: int64(200), Runtime: true, Startup: true, Min: 50, Max: math.MaxInt32},
		{Name: "maxNumActiveUserIndexBuilds", Kind: service.ParamInt, Default: int64(3), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "maxSessions", Kind: service.ParamInt, Default: int64(1000000), Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "maxTransactionLockRequestTimeoutMillis", Kind: service.ParamInt, Default: int64(5), Runtime: true, Startup: true},
		// The transaction coordinator's (internal/sharding/txncoord).
		{Name: "coordinateCommitTransactionReturnImmediatelyAfterPersistingDecision", Kind: service.ParamBool, Default: true, Runtime: true, Startup: true},
		{Name: "notablescan", Kind: service.ParamBool, Default: false, Runtime: true, Startup: true},
		// The range deleter's (sharding_runtime_d_params.idl; internal/sharding/rangedel).
		{Name: "receiveChunkWaitForRangeDeleterTimeoutMS", Kind: service.ParamInt, Default: int64(10000), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "orphanCleanupDelaySecs", Kind: service.ParamInt, Default: int64(900), Runtime: true, Startup: true, Min: math.MinInt32, Max: math.MaxInt32},
		{Name: "quiet", Kind: service.ParamBool, Default: false, Runtime: true, Startup: true},
		{Name: "rangeDeleterBatchDelayMS", Kind: service.ParamInt, Default: int64(20), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "rangeDeleterBatchSize", Kind: service.ParamInt, Default: int64(math.MaxInt32), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "requireApiVersion", Kind: service.ParamBool, Default: false, Runtime: true, Startup: true},
		{Name: "storageEngineConcurrentReadTransactions", Kind: service.ParamInt, Default: int64(128), Runtime: true, Startup: true, Min: 5, Max: math.MaxInt32},
		{Name: "storageEngineConcurrentWriteTransactions", Kind: service.ParamInt, Default: int64(128), Runtime: true, Startup: true, Min: 5, Max: math.MaxInt32},
		{Name: "syncdelay", Kind: service.ParamDouble, Default: float64(60), Runtime: true, Startup: true, Min: 0, Max: 9.0 * 1000 * 1000},
		// transactionRecordMinimumLifetimeMinutes: the session reaper leaves config.transactions
		// entries written less than this long ago.
		{Name: "transactionRecordMinimumLifetimeMinutes", Kind: service.ParamInt, Default: int64(30), Startup: true, Min: 0, Max: math.MaxInt32},
		// MongoDB keeps 300 s of history behind the stable timestamp; Humongo keeps 5 s by
		// default (each second of history costs Pebble versions under update load).
		{Name: "minSnapshotHistoryWindowInSeconds", Kind: service.ParamInt, Default: int64(5), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "transactionLifetimeLimitSeconds", Kind: service.ParamInt, Default: int64(60), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "ttlMonitorEnabled", Kind: service.ParamBool, Default: true, Runtime: true, Startup: true},
		{Name: "ttlMonitorSleepSecs", Kind: service.ParamInt, Default: int64(60), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt32},
		// The periodic no-op writer (MongoDB's NoopWriter): an idle primary writes a no-op
		// this often, so change streams see time pass.
		{Name: "periodicNoopIntervalSecs", Kind: service.ParamInt, Default: int64(10), Startup: true, Min: 1, Max: 10},
		{Name: "writePeriodicNoops", Kind: service.ParamBool, Default: true, Runtime: true, Startup: true},
		// autoMergerIntervalSecs: the config server's AutoMerger runs a round this often.
		{Name: "autoMergerIntervalSecs", Kind: service.ParamInt, Default: int64(3600), Runtime: true, Startup: true, Min: 1, Max: math.MaxInt32},
	}, append(service.AuthParams(), service.ClusterTimeParams()...)...)
}
