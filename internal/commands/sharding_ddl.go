package commands

// Sharding DDL on data nodes (spec: sharding.md "Sharding a collection", "Chunks",
// "Splits"): the shard commands (_shardsvrCreateCollection,
// _shardsvrCreateCollectionParticipant, splitChunk, mergeChunks) over internal/sharding/ddl,
// and the config server's commits (_configsvrCommitShardCollection,
// _configsvrCommitChunkSplit, _configsvrCommitChunksMerge) over
// internal/sharding/configsvr's Committer. One file per command; this one registers them
// and holds what they share: the role checks, the shard's Remote (built on first use from
// its shard identity, closed with the role) and the config server's Committer.

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/shardstate"
	"humongo/internal/storage"
)

func addShardingDDL(r *service.Registry) {
	for _, c := range []*service.Command{
		shardsvrCreateCollectionCommand(),
		shardsvrCreateCollectionParticipantCommand(),
		splitChunkCommand(),
		splitVectorCommand(),
		mergeChunksCommand(),
		configsvrCommitShardCollectionCommand(),
		configsvrCommitChunkSplitCommand(),
		configsvrCommitChunksMergeCommand(),
		configsvrClearJumboFlagCommand(),
		configsvrCommitMergeAllChunksOnShardCommand(),
	} {
		add(r, c)
	}
}

// requireShard refuses a shard command on a node that is not a shard-aware shard server
// (ShardingState::canAcceptShardedCommands) and returns its shard id.
func requireShard(env *service.Env, name string) (string, error) {
	switch env.State.Sharding.Role() {
	case shardstate.RoleShardServer:
	case shardstate.RoleConfigServer:
		return "", mongoerr.Newf(mongoerr.IllegalOperation, "%s can only be run on shard servers", name)
	default:
		return "", mongoerr.New(mongoerr.NoShardingEnabled, "Cannot accept sharding commands if not started with --shardsvr")
	}
	id, aware := env.State.Sharding.Identity()
	if !aware {
		return "", mongoerr.Newf(mongoerr.ShardingStateNotInitialized, "Cannot accept sharding commands if sharding state has not been initialized with a shardIdentity document")
	}
	return id.ShardName, nil
}

// requireConfigServer refuses a config server command elsewhere.
func requireConfigServer(env *service.Env, name string) error {
	if env.State.Sharding.Role() != shardstate.RoleConfigServer {
		return mongoerr.Newf(mongoerr.IllegalOperation, "%s can only be run on config servers", name)
	}
	return nil
}

type shardingDDLKey struct{}

// shardingDDL is a node's sharding DDL state: the shard's coordinator and Remote, the config
// server's Committer.
type shardingDDL struct {
	mu        sync.Mutex
	remote    *ddl.Remote
	closed    bool
	coord     *ddl.Coordinator
	committer *configsvr.Committer
}

func shardingDDLOf(env *service.Env) *shardingDDL { return shardingDDLState(env.State, env.Registry) }

func shardingDDLState(st *service.State, reg *service.Registry) *shardingDDL {
	return st.Decorate(shardingDDLKey{}, func() any {
		s := &shardingDDL{}
		run := internalRunner(st, reg)
		s.committer = &configsvr.Committer{Run: configsvr.RunFunc(run)}
		s.coord = &ddl.Coordinator{Local: ddl.RunFunc(run), Remote: func() (*ddl.Remote, error) { return s.remoteFor(st) },
			DatabaseSections: func() (ddl.DatabaseCriticalSection, error) {
				rt, _, err := shardRuntime(&service.Env{State: st, Registry: reg})
				if err != nil {
					return nil, err
				}
				return rt, nil
			},
			LogEvent: func(ctx context.Context, ns string, desc bsoncore.Document) error {
				return ddlLogEvent(ctx, st, ns, desc)
			}}
		return s
	}).(*shardingDDL)
}

// remoteFor returns the shard's Remote, connecting to the config servers its identity names.
func (s *shardingDDL) remoteFor(st *service.State) (*ddl.Remote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
	}
	if s.remote != nil {
		return s.remote, nil
	}
	id, aware := st.Sharding.Identity()
	if !aware {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "sharding state is not initialized")
	}
	r, err := ddl.NewRemote(id.ConfigsvrConnectionString, shardClientOptions(st, "humongod-sharding", 15*time.Second))
	if err != nil {
		return nil, err
	}
	s.remote = r
	return r, nil
}

// closeShardingDDL wraps a role's stop so that it also disconnects the shard's Remote.
func closeShardingDDL(st *service.State, reg *service.Registry, stop func()) func() {
	return func() {
		stop()
		s := shardingDDLState(st, reg)
		s.mu.Lock()
		r := s.remote
		s.remote, s.closed = nil, true
		s.mu.Unlock()
		if r != nil {
			r.Close()
		}
	}
}

// waitMajority waits until this node's last write is majority-committed (the config
// server's commits and the participants' DDL answer only then).
func waitMajority(ctx context.Context, env *service.Env, reply bsoncore.Document) (bsoncore.Document, error) {
	wcDoc := bsoncore.NewDocumentBuilder().AppendDocument("writeConcern",
		bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	wc, err := concern.ParseWriteConcern(concernNode(env.State), wcDoc)
	if err != nil {
		return nil, err
	}
	return writeFinish(ctx, env, wc, reply)
}

// eventNoopLogger is the oplog writer's method for DDL events' no-op entries.
type eventNoopLogger interface {
	LogEventNoop(ru *storage.RecoveryUnit, ns string, ui *catalog.UUID, o, o2 bsoncore.Document) (optime.OpTime, error)
}

// ddlLogEvent writes ns's DDL event entry (ddl.Coordinator.LogEvent) in a unit of its own
// on this primary: o is {msg: {<op>: ns}}, o2 desc, whose first field names the operation.
func ddlLogEvent(ctx context.Context, st *service.State, ns string, desc bsoncore.Document) error {
	logger, ok := st.DB.Observer().(eventNoopLogger)
	if !ok {
		return nil // not a replica set member: no oplog, no change streams
	}
	els, err := desc.Elements()
	if err != nil || len(els) == 0 {
		return mongoerr.New(mongoerr.InternalError, "a DDL event needs a description")
	}
	msg := bsoncore.NewDocumentBuilder().AppendDocument("msg",
		bsoncore.NewDocumentBuilder().AppendString(els[0].Key(), ns).Build()).Build()
	op := st.DB.NewOp(ctx)
	defer op.Close()
	return op.WriteCollection(ctx, ns, false, func(coll *index.Collection) error {
		var ui *catalog.UUID
		if coll != nil {
			u := coll.UUID()
			ui = &u
		}
		_, err := logger.LogEventNoop(op.RU, ns, ui, msg, desc)
		return err
	})
}
