// Package commands holds humongod's database commands, one file per command (cmd_hello.go,
// cmd_find.go, ...), each adding itself to the registry value NewRegistry builds; the
// handlers every role shares (ping, buildInfo, getParameter, listCommands, ...) live in
// internal/service, and humongos's in internal/router. Role implements service.Role for a
// data node: the replication gate, read and write concern, $clusterTime gossip, and the
// wiring of a member's replication (AttachReplication over repl/member).
//
// Per-server state is not kept here: the cursor manager is service.State.Cursors, the concern
// state service.State.Concern, the TTL monitor its node's index.Collections.TTLMonitor, and
// the read seam is operation.Context.OpenRead. (The compiled-validator cache is still an
// operation.DB decoration declared here, in valid_validator.go.)
//
// A handler receives the command body as raw BSON and a *service.Env, and returns the reply
// fields or an error; internal/server turns errors into replies at its single boundary (see
// internal/service). Handlers must not panic on any input.
//
// Command names are case-sensitive, as in MongoDB; the few historical spellings
// (isMaster/ismaster, buildinfo) are registered as aliases.
//
// There is no spec section for the command layer; behaviour follows MongoDB 7.0 mongod.
package commands

import "humongo/internal/service"

// secondaryByName classifies commands whose registration does not say where in a replica
// set they may run (or says it with the legacy SecondaryOk flag, which is too coarse).
// Values are MongoDB 7.0's secondaryAllowed for the command.
var secondaryByName = map[string]service.SecondaryAllowed{
	"find":      service.SecondaryOptIn,
	"aggregate": service.SecondaryOptIn,
	"getMore":   service.SecondaryAlways,
	"dbHash":    service.SecondaryAlways,
}

// add registers c into r after resolving its Secondary class from secondaryByName.
func add(r *service.Registry, c *service.Command) {
	if s, ok := secondaryByName[c.Name]; ok && c.Secondary == service.SecondaryUnset {
		c.Secondary = s
	}
	if collectionScoped[c.Name] {
		c.Handler = withOpNamespace(c.Handler)
	}
	r.Register(c)
}

// NewRegistry returns humongod's command registry: every mongod command, plus the handlers
// every role shares (internal/service). cmd/humongod builds it once and hands it to the
// server. Test-only commands are registered too; the server refuses them unless the
// enableTestCommands parameter was set at startup, as mongod does.
func NewRegistry() *service.Registry {
	r := service.NewRegistry()
	r.Register(service.PingCommand())
	for _, c := range service.AuthCommands() {
		r.Register(c)
	}
	r.Register(service.BuildInfoCommand([]string{"pebble"}))
	r.Register(service.GetParameterCommand())
	r.Register(service.ListCommandsCommand())
	r.Register(service.EndSessionsCommand())
	r.Register(service.GetCmdLineOptsCommand())
	r.Register(service.LogRotateCommand())
	addAggregate(r)
	addUserManagement(r)
	addApplyOps(r)
	addShardingDDL(r)
	addShardsvrDropCollection(r)
	addShardsvrRenameAndDropDatabase(r)
	addShardsvrCollMod(r) // cmd_shardsvrcollmod.go
	addMigration(r)
	addTxnCoordinator(r) // cmd_coordinatecommit.go
	addCollMod(r)
	addCollStats(r)
	addConfigureFailPoint(r)
	addAPIVersionTestCommands(r)
	addSearchIndexCommands(r)
	addCount(r)
	addCreate(r)
	addCreateIndexes(r)
	addCurrentOp(r)
	addDataSize(r)
	addDbHash(r)
	addDbStats(r)
	addDelete(r)
	addDistinct(r)
	addDrop(r)
	addDropDatabase(r)
	addDropIndexes(r)
	addExplain(r)
	addFind(r)
	addFindAndModify(r)
	add(r, service.GetLogCommand())
	addGetMore(r)
	addHello(r)
	add(r, service.HostInfoCommand())
	addInsert(r)
	addKillAllSessions(r)
	addKillCursors(r)
	addKillOp(r)
	addKillSessions(r)
	addTxnCommands(r)
	addListCollections(r)
	addListDatabases(r)
	addListIndexes(r)
	add(r, service.RefreshSessionsCommand())
	addRenameCollection(r)
	addReplSetFreeze(r)
	addReplSetGetConfig(r)
	addReplSetGetRBID(r)
	addReplSetGetStatus(r)
	addReplSetHeartbeat(r)
	addReplSetInitiate(r)
	addReplSetMaintenance(r)
	addReplSetReconfig(r)
	addReplSetRequestVotes(r)
	addReplSetResizeOplog(r)
	addReplSetStepDown(r)
	addReplSetStepUp(r)
	addReplSetSyncFrom(r)
	addReplSetUpdatePosition(r)
	addServerStatus(r)
	add(r, service.SetParameterCommand())
	add(r, service.ShutdownCommand())
	add(r, service.StartSessionCommand())
	addSessionCacheTestCommands(r)
	addTestingReplicaSetHostRewrites(r)
	addUpdate(r)
	addValidate(r)
	addWaitForFailPoint(r)
	add(r, service.WhatsMyURICommand())
	addVoteCommitIndexBuild(r)
	addGetDefaultRWConcern(r)
	addClusterParameters(r) // cmd_clusterparameter.go
	addClusterCommands(r)
	addGetShardVersion(r)
	addFlushRoutingTableCacheUpdates(r)
	addCleanupOrphaned(r) // cmd_cleanuporphaned.go
	addFlushDatabaseCacheUpdates(r)
	return r
}
