package commands

// The shard's range deleter (internal/sharding/rangedel) on humongod: started with a
// --shardsvr node's sharding role, it runs its executor while the node is the primary. Its
// parameters (orphanCleanupDelaySecs, rangeDeleterBatchSize, rangeDeleterBatchDelayMS) are
// read from the server's parameters; a change kicks it so a waiting task sees it at once.
// The migration code reaches it with rangedel.Of(st.DB); cleanupOrphaned waits on it
// (cmd_cleanuporphaned.go).

import (
	"context"

	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/rangedel"
)

// startRangeDeleter starts the range deleter of a shard and returns a stop that ends it and
// then runs prev.
func startRangeDeleter(ctx context.Context, st *service.State, rc *coord.Coordinator, prev func()) (stop func()) {
	if st.DB == nil {
		return prev
	}
	cfg := rangedel.Config{DB: st.DB, Log: st.Logger,
		Runtime: func() *filtering.Runtime { return filtering.Of(st.DB) }}
	if rc != nil {
		cfg.Node = rc
	}
	if st.Params != nil {
		cfg.Param = st.Params.Int
	}
	s := rangedel.Start(ctx, cfg)
	rangedel.Attach(st.DB, s)
	if st.Params != nil {
		for _, name := range []string{rangedel.ParamOrphanCleanupDelaySecs, rangedel.ParamBatchSize, rangedel.ParamBatchDelayMS} {
			st.Params.Watch(name, func(any) { s.Kick() })
		}
	}
	return func() {
		s.Stop()
		rangedel.Attach(st.DB, nil)
		prev()
	}
}
