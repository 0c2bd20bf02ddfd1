package configsvr

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/logv2"
)

// Node is what the watcher needs of the replication coordinator: its topology changes,
// whether this node is a writable primary (drain complete), and the term, which tells one
// primary stint from the next even when the watcher never saw the node step down between.
type Node interface {
	TopologyVersion() (counter int64, changed <-chan struct{})
	IsWritablePrimary() bool
	Term() int64
}

// Config configures Start.
type Config struct {
	Node Node
	Run  RunFunc
	Log  *slog.Logger
	// Initialized is told the cluster id each time the catalog is found or made complete
	// (the config server becomes shard-aware with it); may be nil.
	Initialized func(clusterID bson.ObjectID)
	// Retry is the wait before trying again after a failure while still primary (default 1 s).
	Retry time.Duration
}

// Start runs the catalog initialisation on every step-up of this config server (MongoDB
// runs initializeConfigDatabaseIfNeeded in the config server's onStepUpComplete): once per
// term in which the node is a writable primary, retried while it fails and the node is
// still primary. stop ends the watcher and waits for it.
func Start(ctx context.Context, cfg Config) (stop func()) {
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		doneTerm := int64(-1) // the term whose primary stint has been initialised
		for {
			_, changed := cfg.Node.TopologyVersion()
			var timer *time.Timer
			var retry <-chan time.Time
			if term := cfg.Node.Term(); cfg.Node.IsWritablePrimary() && term != doneTerm {
				id, err := InitCatalog(ctx, cfg.Run)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					if cfg.Log != nil {
						cfg.Log.Warn("Failed to initialize the config server's catalog; retrying",
							logv2.C(logv2.Sharding), logv2.ID(9120001), "error", err.Error())
					}
					timer = time.NewTimer(cfg.Retry)
					retry = timer.C
				} else {
					doneTerm = term
					if cfg.Initialized != nil {
						cfg.Initialized(id)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-changed:
			case <-retry:
			}
			if timer != nil {
				timer.Stop()
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
