package commands

// Chunk migration on data nodes (spec: sharding.md "The live migration protocol";
// internal/sharding/migration): the donor's _shardsvrMoveRange, _migrateClone and
// _transferMods, the recipient's _recvChunkStart, _recvChunkStatus, _recvChunkCommit and
// _recvChunkAbort, and the config server's _configsvrMoveRange and
// _configsvrCommitChunkMigration (cmd_configsvrmigration.go). A shard's migration.Service is
// built when the shard role starts (its change tracker joins the write path then) and closed
// with the role.

import (
	"context"
	"humongo/internal/sharding/rangedel"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/concern"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/migration"
)

func addMigration(r *service.Registry) {
	for _, c := range []*service.Command{
		{Name: "_shardsvrMoveRange", Auth: service.AuthInternal, Handler: runShardsvrMoveRange, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "Internal command, which is sent by the config server to the donor shard. Do not call directly. Moves a range of a sharded collection to another shard."},
		{Name: "_recvChunkStart", Auth: service.AuthInternal, Handler: runRecvChunkStart, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_recvChunkStatus", Auth: service.AuthInternal, Handler: runRecvChunkStatus, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_recvChunkCommit", Auth: service.AuthInternal, Handler: runRecvChunkCommit, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_recvChunkAbort", Auth: service.AuthInternal, Handler: runRecvChunkAbort, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_migrateClone", Auth: service.AuthInternal, Handler: runMigrateClone, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_transferMods", Auth: service.AuthInternal, Handler: runTransferMods, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		{Name: "_getNextSessionMods", Auth: service.AuthInternal, Handler: runGetNextSessionMods, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "internal"},
		configsvrMoveRangeCommand(),
		configsvrCommitChunkMigrationCommand(),
		configsvrEnsureChunkVersionCommand(),
		configsvrSetAllowMigrationsCommand(),
		configsvrCommitRefineCommand(),
	} {
		add(r, c)
	}
}

type migrationKey struct{}

// migrationHolder is the node's migration service, once the shard role built it.
type migrationHolder struct{ svc *migration.Service }

// startMigrations builds a shard's migration service and joins its change tracker to the
// write path; stop closes it.
func startMigrations(st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	rt := filtering.Of(st.DB)
	if rt == nil {
		return func() {}
	}
	run := internalRunner(st, reg)
	tracker := &migration.Tracker{}
	s := &migration.Service{
		Self: func() string {
			id, _ := st.Sharding.Identity()
			return id.ShardName
		},
		Local:     &migration.Local{DB: st.DB, Tracker: tracker},
		Filtering: rt,
		Cluster:   migrationCluster{st: st, reg: reg},
		LocalRun:  migration.RunFunc(run),
		WaitMajority: func(ctx context.Context) error {
			_, err := waitMajority(ctx, &service.Env{State: st, Registry: reg}, emptyDoc)
			return err
		},
		WaitWriteConcern: func(ctx context.Context, wc bsoncore.Document) error {
			if wc == nil {
				wc = migrationThrottleWC(st)
			}
			parsed, err := concern.ParseWriteConcern(concernNode(st), bsoncore.NewDocumentBuilder().AppendDocument("writeConcern", wc).Build())
			if err != nil {
				return err
			}
			_, err = concern.WaitForWrite(ctx, concernNode(st), parsed, emptyDoc)
			return err
		},
		// The donor's cluster time after its own writes (MongoDB takes the donor's vector
		// clock), or the config server's if that is later.
		ValidAfter: func(ctx context.Context) bson.Timestamp {
			local := st.Concern.Clock.ClusterTime()
			v := bson.Timestamp{T: local.Secs(), I: local.Inc() + 1}
			if r, err := shardingDDLState(st, reg).remoteFor(st); err == nil {
				if c := ddl.ClusterTime(ctx, r); c.After(v) {
					v = c
				}
			}
			return v
		},
		EnsureCollection: func(ctx context.Context, ns string, uuid catalog.UUID, options bsoncore.Document, indexes []bsoncore.Document) error {
			return ensureMigratedCollection(ctx, st, reg, ns, uuid, options, indexes)
		},
		ConfigTime: func() bson.Timestamp {
			c := st.Concern.Clock.Time().Config
			return bson.Timestamp{T: c.Secs(), I: c.Inc()}
		},
		ConfigConnString: func() string {
			id, _ := st.Sharding.Identity()
			return id.ConfigsvrConnectionString
		},
		AdvanceConfigTime: func(t, i uint32) { st.Concern.Clock.TickConfigTo(optime.MakeTimestamp(t, i)) },
		RangeDeleter: func() migration.RangeDeleter {
			if d := rangedel.Of(st.DB); d != nil {
				return d
			}
			return nil
		},
		OtherBound: func(ctx context.Context, ns string, keyPattern, min, chunkMax bsoncore.Document, maxBytes int64) (bsoncore.Document, error) {
			// splitVector cuts pieces of half its maxChunkSizeBytes (none when the shard's
			// whole collection is smaller than that): the second cut ends a range of about
			// maxBytes, a lone first cut a smaller one.
			pts, err := ddl.SplitVector(ctx, ddl.RunFunc(run), st.Logger, ddl.SplitVectorRequest{NS: ns, KeyPattern: keyPattern,
				Min: min, Max: chunkMax, MaxChunkSizeBytes: maxBytes, MaxSplitPoints: 2})
			if err != nil || len(pts.Keys) == 0 {
				return nil, err
			}
			return pts.Keys[len(pts.Keys)-1], nil
		},
		RangeDeleterWait: func() time.Duration {
			return time.Duration(st.Params.Int("receiveChunkWaitForRangeDeleterTimeoutMS")) * time.Millisecond
		},
		Term: func() int64 {
			if st.Repl == nil {
				return 0
			}
			return st.Repl.Term()
		},
		Log: st.Logger,
	}
	s.Init()
	st.Decorate(migrationKey{}, func() any { return &migrationHolder{svc: s} })
	st.DB.Colls.SetDocListener(tracker)
	stopRecovery, removeHook := func() {}, func() {}
	if rc != nil {
		// Unfinished coordinators resume on each step-up, whose writes are judged by
		// metadata refreshed in the new term.
		stopRecovery = s.StartRecovery(rc)
		removeHook = rc.BeforeWritable(s.BeforeWritable)
	}
	return func() {
		removeHook()
		stopRecovery()
		st.DB.Colls.SetDocListener(nil)
		s.Close()
	}
}

// migrationOf returns the shard's migration service (NoShardingEnabled elsewhere).
func migrationOf(env *service.Env, name string) (*migration.Service, error) {
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	h, _ := env.State.Decorate(migrationKey{}, func() any { return &migrationHolder{} }).(*migrationHolder)
	if h == nil || h.svc == nil {
		return nil, mongoerr.Newf(mongoerr.NoShardingEnabled, "%s: this node does not run chunk migrations", name)
	}
	return h.svc, nil
}

// migrationCluster is the migration service's view of the cluster, over the shard's Remote.
type migrationCluster struct {
	st  *service.State
	reg *service.Registry
}

func (c migrationCluster) remote() (*ddl.Remote, error) {
	return shardingDDLState(c.st, c.reg).remoteFor(c.st)
}

func (c migrationCluster) RunOnShard(ctx context.Context, id, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	r, err := c.remote()
	if err != nil {
		return nil, err
	}
	rs, err := r.Shard(ctx, id)
	if err != nil {
		return nil, err
	}
	return ddl.Run(ctx, rs, db, cmd)
}

func (c migrationCluster) RunOnConfig(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	r, err := c.remote()
	if err != nil {
		return nil, err
	}
	return ddl.Run(ctx, r.Config(), db, cmd)
}

func (c migrationCluster) ShardHost(ctx context.Context, id string) (string, error) {
	r, err := c.remote()
	if err != nil {
		return "", err
	}
	s, err := r.Shards.Lookup(ctx, id)
	if err != nil {
		return "", err
	}
	return s.Host, nil
}

// ensureMigratedCollection creates ns with the donor's UUID and options unless it exists
// (with another UUID: NamespaceExists, nothing changed), then the donor's indexes it lacks.
func ensureMigratedCollection(ctx context.Context, st *service.State, reg *service.Registry, ns string, uuid catalog.UUID,
	options bsoncore.Document, indexes []bsoncore.Document) error {
	withUUID := bsoncore.NewDocumentBuilder()
	if elems, err := options.Elements(); err == nil {
		for _, e := range elems {
			if e.Key() != "uuid" {
				withUUID.AppendValue(e.Key(), e.Value())
			}
		}
	}
	withUUID.AppendBinary("uuid", 4, uuid[:])
	createOpts := withUUID.Build()
	db := st.DB
	op := db.NewOp(ctx)
	err := op.DDL(ctx, ns, func() error {
		if m, ok := db.Catalog.Latest().ByNS(ns); ok {
			if m.UUID == uuid {
				return nil
			}
			return mongoerr.Newf(mongoerr.NamespaceExists,
				"Cannot create collection %s because we already have an identically named collection with UUID %s, which differs from the donor's UUID %s. Manually drop the collection on this shard if it contains data from a previous incarnation of %s",
				ns, m.UUID, uuid, ns)
		}
		return ddlCreateCollection(op, ns, createOpts)
	})
	op.Close()
	if err != nil {
		return err
	}
	arr := bsoncore.NewArrayBuilder()
	n := 0
	for _, ix := range indexes {
		if name, _ := ix.Lookup("name").StringValueOK(); name == "_id_" {
			continue
		}
		arr.AppendDocument(ix)
		n++
	}
	if n > 0 {
		dbName, coll, _ := strings.Cut(ns, ".")
		create := bsoncore.NewDocumentBuilder().AppendString("createIndexes", coll).AppendArray("indexes", arr.Build()).Build()
		if _, err := internalRunner(st, reg)(ctx, dbName, create); err != nil {
			return err
		}
	}
	_, err = waitMajority(ctx, &service.Env{State: st, Registry: reg}, emptyDoc)
	return err
}

func sessionIDArg(cmd bsoncore.Document, name string) (string, error) {
	v, err := cmd.LookupErr("sessionId")
	if err != nil {
		return "", mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.sessionId' is missing but a required field", name)
	}
	s, ok := v.StringValueOK()
	if !ok {
		return "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.sessionId' is the wrong type '%s', expected type 'string'", name, v.Type)
	}
	return s, nil
}

// runShardsvrMoveRange is the donor primary's _shardsvrMoveRange.
func runShardsvrMoveRange(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_shardsvrMoveRange")
	if err != nil {
		return nil, err
	}
	req, err := migration.ParseShardsvrMoveRange(cmd)
	if err != nil {
		return nil, err
	}
	if err := s.MoveRange(ctx, req); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runRecvChunkStart(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_recvChunkStart")
	if err != nil {
		return nil, err
	}
	req, err := migration.ParseRecvChunkStart(cmd)
	if err != nil {
		return nil, err
	}
	if err := s.StartReceive(ctx, req); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendBoolean("started", true).Build(), nil
}

func runRecvChunkStatus(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_recvChunkStatus")
	if err != nil {
		return nil, err
	}
	sid, _ := cmd.Lookup("sessionId").StringValueOK()
	wait, _ := cmd.Lookup("waitForSteadyOrDone").BooleanOK()
	return s.RecvChunkStatus(ctx, sid, wait), nil
}

func runRecvChunkCommit(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_recvChunkCommit")
	if err != nil {
		return nil, err
	}
	sid, err := sessionIDArg(cmd, "_recvChunkCommit")
	if err != nil {
		return nil, err
	}
	if err := s.RecvChunkCommit(ctx, sid); err != nil {
		return nil, err
	}
	return s.RecvChunkStatus(ctx, sid, false), nil
}

func runRecvChunkAbort(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_recvChunkAbort")
	if err != nil {
		return nil, err
	}
	sid, err := sessionIDArg(cmd, "_recvChunkAbort")
	if err != nil {
		return nil, err
	}
	if err := s.RecvChunkAbort(ctx, sid); err != nil {
		return nil, err
	}
	return s.RecvChunkStatus(ctx, sid, false), nil
}

func migrationNS(cmd bsoncore.Document) string {
	ns, _ := cmd.Index(0).Value().StringValueOK()
	return ns
}

func runMigrateClone(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_migrateClone")
	if err != nil {
		return nil, err
	}
	sid, err := sessionIDArg(cmd, "_migrateClone")
	if err != nil {
		return nil, err
	}
	docs, err := s.MigrateClone(ctx, migrationNS(cmd), sid)
	if err != nil {
		return nil, err
	}
	arr := bsoncore.NewArrayBuilder()
	for _, d := range docs {
		arr.AppendDocument(d)
	}
	return bsoncore.NewDocumentBuilder().AppendArray("objects", arr.Build()).Build(), nil
}

func runTransferMods(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_transferMods")
	if err != nil {
		return nil, err
	}
	sid, err := sessionIDArg(cmd, "_transferMods")
	if err != nil {
		return nil, err
	}
	deleted, reload, err := s.TransferMods(ctx, migrationNS(cmd), sid)
	if err != nil {
		return nil, err
	}
	del := bsoncore.NewArrayBuilder()
	for _, id := range deleted {
		del.AppendDocument(bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build())
	}
	rel := bsoncore.NewArrayBuilder()
	size := 0
	for _, d := range reload {
		rel.AppendDocument(d)
		size += len(d)
	}
	return bsoncore.NewDocumentBuilder().AppendArray("deleted", del.Build()).AppendArray("reload", rel.Build()).
		AppendInt64("size", int64(size)).Build(), nil
}

// runGetNextSessionMods is the donor's _getNextSessionMods: the next batch of the migrated
// range's session history ({oplog: [entries]}; empty once drained after the commit began).
func runGetNextSessionMods(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	s, err := migrationOf(env, "_getNextSessionMods")
	if err != nil {
		return nil, err
	}
	sid, err := sessionIDArg(cmd, "_getNextSessionMods")
	if err != nil {
		return nil, err
	}
	entries, err := s.NextSessionMods(ctx, sid)
	if err != nil {
		return nil, err
	}
	arr := bsoncore.NewArrayBuilder()
	for _, e := range entries {
		arr.AppendDocument(e)
	}
	return bsoncore.NewDocumentBuilder().AppendArray("oplog", arr.Build()).Build(), nil
}

// appendMigrationStatistics appends serverStatus.shardingStatistics on a shard that runs
// migrations.
func appendMigrationStatistics(b []byte, st *service.State) []byte {
	h, _ := st.Decorate(migrationKey{}, func() any { return &migrationHolder{} }).(*migrationHolder)
	if h == nil || h.svc == nil {
		return b
	}
	return h.svc.AppendServerStatus(b)
}

// registerSplitOrMerge holds ns against a migration out of it for a split or merge of its
// chunks (ActiveMigrationsRegistry::registerSplitOrMergeChunk); a node that runs no
// migrations has nothing to serialize with.
func registerSplitOrMerge(ctx context.Context, st *service.State, ns string) (release func(), err error) {
	h, _ := st.Decorate(migrationKey{}, func() any { return &migrationHolder{} }).(*migrationHolder)
	if h == nil || h.svc == nil {
		return func() {}, nil
	}
	return h.svc.Registry.RegisterSplitOrMerge(ctx, ns)
}

// migrationThrottleWC is the secondaryThrottle write concern when the request names none
// (ChunkMoveWriteConcernOptions' default): {w: 2, wtimeout: 60000}, or w: 1 on a set of one
// member, which no second member could acknowledge.
func migrationThrottleWC(st *service.State) bsoncore.Document {
	members := 1
	if st.Repl != nil {
		if cfg, err := st.Repl.Config(); err == nil {
			if arr, ok := cfg.Lookup("members").ArrayOK(); ok {
				vals, _ := arr.Values()
				members = len(vals)
			}
		}
	}
	if members < 2 {
		return bsoncore.NewDocumentBuilder().AppendInt32("w", 1).Build()
	}
	return bsoncore.NewDocumentBuilder().AppendInt32("w", 2).AppendInt32("wtimeout", 60000).Build()
}
