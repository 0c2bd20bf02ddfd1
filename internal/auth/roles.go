package auth

// The built-in roles (MongoDB's builtin_roles.yml, 7.0 names and actions). A role's
// privileges are patterns relative to the database it is granted on: thisDB stands for it.

const thisDB = "\x00this"

type rolePriv struct {
	kind     Kind
	db, coll string
	actions  ActionSet
}

type builtinRole struct {
	adminOnly bool
	roles     []RoleName // granted roles; an empty DB is the role's own database
	privs     []rolePriv
}

func union(sets ...ActionSet) ActionSet {
	var s ActionSet
	for _, o := range sets {
		s.AddAll(o)
	}
	return s
}

var (
	readActions = Actions(ChangeStream, CollStats, DbHash, DbStats, Find, KillCursors,
		ListCollections, ListIndexes, ListSearchIndexes, PlanCacheRead)
	readWriteActions = union(readActions, Actions(CleanupStructuredEncryptionData,
		CompactStructuredEncryptionData, ConvertToCapped, CreateCollection, CreateIndex,
		CreateSearchIndexes, DropCollection, DropIndex, DropSearchIndex, Insert, Remove,
		RenameCollectionSameDB, Update, UpdateSearchIndex))
	userAdminActions = Actions(ChangeCustomData, ChangePassword, CreateUser, CreateRole,
		DropUser, DropRole, GrantRole, RevokeRole, SetAuthenticationRestriction, ViewUser, ViewRole)
	dbAdminActions = Actions(Analyze, BypassDocumentValidation, CollMod, CollStats, Compact,
		ConvertToCapped, CreateCollection, DbStats, DropCollection, DropDatabase, DropIndex,
		DropSearchIndex, CreateIndex, CreateSearchIndexes, EnableProfiler, ListCollections,
		ListIndexes, ListSearchIndexes, UpdateSearchIndex, PlanCacheIndexFilter, PlanCacheRead,
		PlanCacheWrite, ReIndex, RenameCollectionSameDB, StorageDetails, Validate,
		ConfigureQueryAnalyzer)
	profileActions            = union(readActions, Actions(ConvertToCapped, CreateCollection, DropCollection))
	readAndIndexActions       = union(readActions, Actions(CreateIndex, CreateSearchIndexes, DropIndex, DropSearchIndex))
	clusterMonitorClusterActs = Actions(ConnPoolStats, GetCmdLineOpts, GetDefaultRWConcern, GetLog,
		GetParameter, GetShardMap, HostInfo, ListDatabases, ListSampledQueries, ListSessions,
		ListShards, Netstat, OperationMetrics, ReplSetGetConfig, ReplSetGetStatus, ServerStatus,
		Top, UseUUID, Inprog, ShardingState, AllCollectionStats, ShardedDataDistribution)
	clusterMonitorDBActs   = Actions(CollStats, DbStats, GetDatabaseVersion, GetShardVersion, IndexStats)
	hostManagerClusterActs = Actions(ApplicationMessage, AuditConfigure, ConnPoolSync,
		DropConnections, LogRotate, OidReset, SetParameter, Shutdown, Touch, Unlock,
		FlushRouterConfig, Fsync, InvalidateUserCache, KillAnyCursor, KillAnySession, Killop,
		ReplSetResizeOplog, Resync, TrafficRecord, RotateCertificates, OidcListKeys, OidcRefreshKeys)
	clusterManagerClusterActs = Actions(AppendOplogNote, ApplicationMessage, ReplSetConfigure,
		ReplSetGetConfig, ReplSetGetStatus, ReplSetStateChange, Resync, AddShard, RemoveShard,
		ListSessions, ListShards, FlushRouterConfig, CleanupOrphaned, GetDefaultRWConcern,
		RunTenantMigration, SetDefaultRWConcern, SetFeatureCompatibilityVersion,
		SetClusterParameter, GetClusterParameter, SetChangeStreamState, GetChangeStreamState,
		QuerySettings, QueryStatsRead, QueryStatsReadTransformed, CheckMetadataConsistency,
		TransitionFromDedicatedConfigServer, TransitionToDedicatedConfigServer)
	clusterManagerDBActs = Actions(AnalyzeShardKey, ConfigureQueryAnalyzer, ClearJumboFlag,
		SplitChunk, MoveChunk, MoveCollection, EnableSharding, SplitVector,
		RefineCollectionShardKey, ReshardCollection)
	writeActs        = Actions(Insert, Update, Remove)
	restoreWriteActs = Actions(BypassDocumentValidation, CollMod, ConvertToCapped,
		CreateCollection, CreateIndex, CreateSearchIndexes, DropCollection, Insert, UpdateSearchIndex)
	findOnly = Actions(Find)
)

func onDB(db string, a ActionSet) rolePriv { return rolePriv{kind: KindDB, db: db, actions: a} }
func onNS(db, coll string, a ActionSet) rolePriv {
	return rolePriv{kind: KindNS, db: db, coll: coll, actions: a}
}
func onColl(coll string, a ActionSet) rolePriv {
	return rolePriv{kind: KindCollection, coll: coll, actions: a}
}
func onAnyNormal(a ActionSet) rolePriv { return rolePriv{kind: KindAnyNormal, actions: a} }
func onAny(a ActionSet) rolePriv       { return rolePriv{kind: KindAny, actions: a} }
func onCluster(a ActionSet) rolePriv   { return rolePriv{kind: KindCluster, actions: a} }

var builtinRoles = map[string]builtinRole{
	"read": {privs: []rolePriv{onDB(thisDB, readActions), onNS(thisDB, "system.js", readActions)}},
	"readWrite": {privs: []rolePriv{onDB(thisDB, readWriteActions),
		onNS(thisDB, "system.js", readWriteActions)}},
	"userAdmin": {privs: []rolePriv{onDB(thisDB, userAdminActions)}},
	"dbAdmin": {privs: []rolePriv{onDB(thisDB, dbAdminActions),
		onNS(thisDB, "system.profile", profileActions)}},
	"dbOwner": {roles: []RoleName{{Role: "readWrite"}, {Role: "dbAdmin"}, {Role: "userAdmin"}}},
	"enableSharding": {privs: []rolePriv{onAnyNormal(Actions(AnalyzeShardKey, EnableSharding,
		MoveCollection, RefineCollectionShardKey, ReshardCollection))}},
	"readAnyDatabase": {adminOnly: true, privs: []rolePriv{onAnyNormal(readActions),
		onCluster(Actions(ListDatabases)), onColl("system.js", readActions)}},
	"readWriteAnyDatabase": {adminOnly: true, roles: []RoleName{{Role: "readAnyDatabase"}},
		privs: []rolePriv{onAnyNormal(readWriteActions), onColl("system.js", readWriteActions)}},
	"userAdminAnyDatabase": {adminOnly: true, privs: []rolePriv{
		onAnyNormal(union(userAdminActions, Actions(ListCachedAndActiveUsers))),
		onDB("local", userAdminActions), onDB("config", userAdminActions),
		onCluster(Actions(ListDatabases, AuthSchemaUpgrade, InvalidateUserCache, ViewUser)),
		onNS("admin", "system.users", readAndIndexActions),
		onNS("admin", "system.roles", readAndIndexActions),
		onColl("system.users", readActions),
		onNS("admin", "system.version", readActions),
		onNS("admin", "system.backup_users", readActions)}},
	"dbAdminAnyDatabase": {adminOnly: true, privs: []rolePriv{
		onCluster(Actions(ListDatabases, ApplyOps)), onAnyNormal(dbAdminActions),
		onColl("system.profile", profileActions)}},
	"clusterMonitor": {adminOnly: true, roles: []RoleName{{Role: "read", DB: "config"}, {Role: "read", DB: "local"}},
		privs: []rolePriv{onCluster(clusterMonitorClusterActs), onAnyNormal(clusterMonitorDBActs),
			onDB("config", clusterMonitorDBActs), onNS("config", "system.sessions", clusterMonitorDBActs),
			onDB("local", clusterMonitorDBActs), onNS("local", "system.replset", findOnly),
			onNS("local", "replset.election", findOnly), onNS("local", "replset.minvalid", findOnly),
			onColl("system.profile", findOnly)}},
	"hostManager": {adminOnly: true, privs: []rolePriv{onCluster(hostManagerClusterActs),
		onAnyNormal(Actions(KillCursors))}},
	"clusterManager": {adminOnly: true, roles: []RoleName{{Role: "read", DB: "config"}},
		privs: []rolePriv{onCluster(clusterManagerClusterActs), onAnyNormal(clusterManagerDBActs),
			onDB("config", clusterManagerDBActs), onDB("local", clusterManagerDBActs),
			onNS("local", "system.replset", readActions), onAny(Actions(DbCheck)),
			onNS("local", "system.healthlog", readActions),
			onDB("config", writeActs), onDB("local", writeActs),
			onNS("local", "replset.election", writeActs), onNS("local", "replset.minvalid", writeActs)}},
	"clusterAdmin": {adminOnly: true, roles: []RoleName{{Role: "clusterMonitor"}, {Role: "hostManager"}, {Role: "clusterManager"}},
		privs: []rolePriv{onAnyNormal(Actions(DropDatabase)), onAny(Actions(ImportCollection, ExportCollection))}},
	"__queryableBackup": {adminOnly: true, privs: []rolePriv{
		onAny(Actions(CollStats, ListCollections, ListIndexes, ListSearchIndexes)),
		onAnyNormal(findOnly), onCluster(Actions(GetParameter, ListDatabases, UseUUID)),
		onDB("config", findOnly), onDB("local", findOnly),
		onNS("local", "replset.election", findOnly), onNS("local", "replset.minvalid", findOnly),
		onColl("system.js", findOnly), onColl("system.users", findOnly), onColl("system.profile", findOnly),
		onNS("admin", "system.backup_users", findOnly), onNS("admin", "system.roles", findOnly),
		onNS("admin", "system.version", findOnly), onNS("config", "settings", findOnly)}},
	"backup": {adminOnly: true, roles: []RoleName{{Role: "__queryableBackup"}},
		privs: []rolePriv{onCluster(Actions(AppendOplogNote, ServerStatus, SetUserWriteBlockMode)),
			onNS("config", "settings", Actions(Insert, Update))}},
	"restore": {adminOnly: true, privs: []rolePriv{
		onCluster(Actions(GetParameter, ForceUUID, UseUUID, BypassWriteBlockingMode, SetUserWriteBlockMode, ApplyOps)),
		onDB("local", restoreWriteActs), onDB("config", restoreWriteActs),
		onNS("local", "system.replset", restoreWriteActs), onNS("local", "replset.election", restoreWriteActs),
		onNS("local", "replset.minvalid", restoreWriteActs), onAny(Actions(ListCollections)),
		onAnyNormal(union(restoreWriteActs, userAdminActions)), onColl("system.js", restoreWriteActs),
		onNS("admin", "tempusers", findOnly), onNS("admin", "temproles", findOnly),
		onNS("admin", "system.backup_users", restoreWriteActs),
		onNS("admin", "system.version", union(restoreWriteActs, findOnly)),
		onColl("system.users", union(restoreWriteActs, Actions(Find, Update, Remove))),
		onNS("admin", "system.roles", Actions(CreateIndex))}},
	"root": {adminOnly: true, roles: []RoleName{{Role: "clusterAdmin"}, {Role: "userAdminAnyDatabase"},
		{Role: "dbAdminAnyDatabase"}, {Role: "readWriteAnyDatabase"}, {Role: "backup"}, {Role: "restore"},
		{Role: "directShardOperations"}},
		privs: []rolePriv{onAny(Actions(Validate)), onCluster(Actions(UseTenant)),
			onNS("config", "system.preimages", Actions(Find, Remove)),
			onNS("config", "system.change_collection", Actions(Find, Insert, Remove, Update))}},
	"directShardOperations": {adminOnly: true, privs: []rolePriv{onCluster(Actions(IssueDirectShardOperations))}},
	// __system holds every action on every resource (special-cased in MongoDB too).
	"__system": {adminOnly: true, privs: []rolePriv{onAny(AllActions())}},
}

// IsBuiltinRole reports whether r names a built-in role: a database role on any database,
// an admin-only role on admin.
func IsBuiltinRole(r RoleName) bool {
	br, ok := builtinRoles[r.Role]
	return ok && (!br.adminOnly || r.DB == "admin")
}

// BuiltinRoleNames returns the built-in roles that exist on db, for rolesInfo's
// showBuiltinRoles (the internal __system and __queryableBackup are left out, as mongod
// does for __system).
func BuiltinRoleNames(db string) []string {
	var out []string
	for name, br := range builtinRoles {
		if (br.adminOnly && db != "admin") || name == "__system" {
			continue
		}
		out = append(out, name)
	}
	return out
}

// builtinPrivileges returns a built-in role's own privileges on its database and the roles it
// grants (ok false if r is not built-in).
func builtinPrivileges(r RoleName) (privs []Privilege, roles []RoleName, ok bool) {
	if !IsBuiltinRole(r) {
		return nil, nil, false
	}
	br := builtinRoles[r.Role]
	for _, p := range br.privs {
		db := p.db
		if db == thisDB {
			db = r.DB
		}
		privs = append(privs, Privilege{Resource{Kind: p.kind, DB: db, Coll: p.coll}, p.actions})
	}
	for _, g := range br.roles {
		if g.DB == "" {
			g.DB = r.DB
		}
		roles = append(roles, g)
	}
	return privs, roles, true
}

// BuiltinGrants returns a built-in role's own privileges and the roles it grants (rolesInfo).
func BuiltinGrants(r RoleName) ([]Privilege, []RoleName) {
	p, rs, _ := builtinPrivileges(r)
	return p, rs
}
