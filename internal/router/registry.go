package router

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// NewRegistry returns humongos's command registry: the handshake and diagnostics it answers,
// and a refusal for every other command a mongos has (see unsupported). cmd/humongos builds
// it once and hands it to the server.
func NewRegistry() *service.Registry {
	r := service.NewRegistry()
	r.Register(helloCommand())
	r.Register(serverStatusCommand())
	r.Register(service.PingCommand())
	for _, c := range service.AuthCommands() {
		r.Register(c)
	}
	for _, c := range userManagementCommands() {
		r.Register(c)
	}
	r.Register(service.BuildInfoCommand(nil))
	r.Register(service.GetParameterCommand())
	r.Register(service.ListCommandsCommand())
	r.Register(service.EndSessionsCommand())
	r.Register(service.StartSessionCommand())
	r.Register(service.RefreshSessionsCommand())
	r.Register(service.WhatsMyURICommand())
	r.Register(service.HostInfoCommand())
	r.Register(service.GetLogCommand())
	r.Register(service.SetParameterCommand())
	r.Register(service.ShutdownCommand())
	r.Register(dbStatsCommand())
	r.Register(validateCommand())
	for _, c := range currentOpCommands() {
		r.Register(c)
	}
	r.Register(service.GetCmdLineOptsCommand())
	r.Register(service.LogRotateCommand())
	for _, c := range clusterCommands() {
		r.Register(c)
	}
	for _, c := range readCommands() {
		r.Register(c)
	}
	for _, c := range shardingDDLCommands() {
		r.Register(c)
	}
	addCatalogCommands(r)
	addTopologyCommands(r)
	r.Register(findAndModifyCommand())
	r.Register(killAllSessionsCommand())
	r.Register(killSessionsCommand())
	r.Register(service.ConfigureFailPointCommand())
	for _, c := range txnEndCommands() {
		r.Register(c)
	}
	for _, c := range ddlCommands() {
		r.Register(c)
	}
	for _, c := range writeCommands() {
		r.Register(c)
	}
	for _, c := range zoneCommands() {
		r.Register(c)
	}
	for _, c := range chunkMaintenanceCommands() {
		r.Register(c)
	}
	for _, c := range migrationCommands() {
		r.Register(c)
	}
	for _, name := range unsupported {
		r.Register(&service.Command{
			Name:    name,
			Handler: notSupported,
			Help:    "not supported by humongos until sharding lands",
			Auth:    unsupportedAuth[name],
			// Any member state: the refusal must be the same everywhere.
			Secondary: service.SecondaryAlways,
		})
	}
	return r
}

// unsupported are commands MongoDB 7.0's mongos has that humongos does not route yet. They
// are registered so a client learns the command exists but is not available here
// (CommandNotSupported), rather than CommandNotFound, which says no MongoDB has it. Names
// not listed still answer CommandNotFound.
var unsupported = []string{
	// CRUD and cursors.
	"bulkWrite",
	// Diagnostics and administration.
	"collStats", "dataSize",
	"setDefaultRWConcern",
	"getDefaultRWConcern", "setFeatureCompatibilityVersion",
	// Sharding administration.
	"reshardCollection",
	"getShardMap",
	"checkMetadataConsistency",
}

func notSupported(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return nil, mongoerr.Newf(mongoerr.CommandNotSupported,
		"command %s is not supported by humongos yet", env.Command.Name)
}

// ParamSpecs are the server parameters humongos declares: those its front end and handlers
// read, with mongos 7.0's defaults.
func ParamSpecs() []service.ParamSpec {
	return append([]service.ParamSpec{
		{Name: "cursorTimeoutMillis", Kind: service.ParamInt, Default: int64(600000), Runtime: true, Startup: true},
		{Name: "enableTestCommands", Kind: service.ParamBool, Default: false, Startup: true},
		{Name: "localLogicalSessionTimeoutMinutes", Kind: service.ParamInt, Default: int64(30), Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "logLevel", Kind: service.ParamInt, Default: int64(0), Runtime: true, Startup: true, Min: 0, Max: 5},
		{Name: "maxLogSizeKB", Kind: service.ParamInt, Default: int64(logv2.DefaultMaxAttributeSizeKB), Runtime: true, Startup: true, Min: 0, Max: math.MaxInt32},
		{Name: "maxSessions", Kind: service.ParamInt, Default: int64(1000000), Startup: true, Min: 1, Max: math.MaxInt32},
		{Name: "quiet", Kind: service.ParamBool, Default: false, Runtime: true, Startup: true},
	}, append(service.AuthParams(), service.ClusterTimeParams()...)...)
}
