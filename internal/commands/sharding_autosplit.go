package commands

// Auto-splitting on a shard primary (spec: sharding.md "Auto-splitting"): the node's
// ChunkSplitter (internal/sharding/ddl) is told the bytes each routed insert and update
// writes into its chunk; it splits chunks that grow past half the chunk size in the
// background. It lives as long as the node's sharding role (startChunkSplitter's stop).
// The config server's AutoMerger (internal/sharding/configsvr) likewise lives as long as
// the config server role.

import (
	"context"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/balancer"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/routing"
)

type chunkSplitterKey struct{}

// splitterHolder is the decoration: set once by startChunkSplitter, read by every write.
type splitterHolder struct {
	p atomic.Pointer[ddl.ChunkSplitter]
}

func splitterHolderOf(st *service.State) *splitterHolder {
	return st.Decorate(chunkSplitterKey{}, func() any { return &splitterHolder{} }).(*splitterHolder)
}

// startChunkSplitter gives a shard server its ChunkSplitter; stop ends its tasks.
func startChunkSplitter(st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	isPrimary := func() bool { return true }
	if rc != nil {
		isPrimary = rc.IsWritablePrimary
	}
	s := ddl.NewChunkSplitter(ddl.SplitterConfig{
		Local:  ddl.RunFunc(internalRunner(st, reg)),
		Remote: func() (*ddl.Remote, error) { return shardingDDLState(st, reg).remoteFor(st) },
		Metadata: func(ns string) (*routing.RoutingTable, string) {
			rt := filtering.Of(st.DB)
			if rt == nil {
				return nil, ""
			}
			m, ok := rt.Collection(ns)
			if !ok || !m.Sharded() {
				return nil, ""
			}
			return m.Table, m.Shard
		},
		Refresh: func(ctx context.Context, ns string) error {
			rt := filtering.Of(st.DB)
			if rt == nil {
				return nil
			}
			_, err := rt.RefreshCollection(ctx, ns)
			return err
		},
		IsPrimary: isPrimary,
		Guard: func(ctx context.Context, ns string) (func(), error) {
			return registerSplitOrMerge(ctx, st, ns)
		},
		Log: st.Logger,
	})
	h := splitterHolderOf(st)
	h.p.Store(s)
	return func() {
		h.p.Store(nil)
		s.Close()
	}
}

// startAutoMerger runs the config server's AutoMerger (configsvr.StartAutoMerger) over the
// node's Committer; stop ends it.
func startAutoMerger(ctx context.Context, st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	return configsvr.StartAutoMerger(ctx, configsvr.AutoMergerConfig{
		Node:      rc,
		Run:       internalRunner(st, reg),
		Committer: shardingDDLState(st, reg).committer,
		Interval:  func() time.Duration { return time.Duration(st.Params.Int("autoMergerIntervalSecs")) * time.Second },
		Oldest:    func() bson.Timestamp { return oldestSnapshotTimestamp(st) },
		Log:       st.Logger,
		BalancerAllows: func(d bsoncore.Document, now time.Time) bool {
			s, err := balancer.ParseBalancerSettings(d)
			return err == nil && s.Mode != balancer.ModeOff && s.Window.Contains(now)
		},
	})
}

// chunkSplitterOf is the node's ChunkSplitter (nil when it is not a shard server).
func chunkSplitterOf(st *service.State) *ddl.ChunkSplitter {
	if st.DB == nil {
		return nil
	}
	return splitterHolderOf(st).p.Load()
}

// autoSplitTracker returns what records a routed write's documents with the splitter (nil
// when op is not a routed, versioned write on a shard server's sharded collection).
func autoSplitTracker(st *service.State, op *operation.Context, ns string) func(docs []bsoncore.Document) {
	s := chunkSplitterOf(st)
	if s == nil || op.ShardVersion.Type == 0 {
		return nil
	}
	rt := filtering.Of(st.DB)
	if rt == nil {
		return nil
	}
	m, ok := rt.Collection(ns)
	if !ok || !m.Sharded() {
		return nil
	}
	p := m.Table.Pattern()
	return func(docs []bsoncore.Document) {
		keys := make([]bsoncore.Document, 0, len(docs))
		sizes := make([]int64, 0, len(docs))
		for _, d := range docs {
			k, err := p.ExtractKey(d)
			if err != nil {
				continue
			}
			keys = append(keys, k)
			sizes = append(sizes, int64(len(d)))
		}
		s.NoteWrites(ns, keys, sizes)
	}
}

// autoSplitNoteUpdate records a routed update that pins its shard key by equality: the
// update's size goes to the chunk of that key (as mongos estimates an update's bytes).
func autoSplitNoteUpdate(st *service.State, op *operation.Context, ns string, q bsoncore.Document, u bsoncore.Value) {
	s := chunkSplitterOf(st)
	if s == nil || op.ShardVersion.Type == 0 {
		return
	}
	rt := filtering.Of(st.DB)
	if rt == nil {
		return
	}
	m, ok := rt.Collection(ns)
	if !ok || !m.Sharded() {
		return
	}
	key, ok := ddl.ShardKeyOfEquality(m.Table.Pattern(), q)
	if !ok {
		return
	}
	s.NoteWrites(ns, []bsoncore.Document{key}, []int64{int64(len(u.Data))})
}
