package configsvr

// The AutoMerger (MongoDB 7.0's AutoMergerPolicy, one of the balancer's action streams):
// on the config server primary, every autoMergerIntervalSecs, it merges the mergeable
// contiguous chunks of every collection on every shard (CommitMergeAllChunksOnShard) while
// auto-merging is on: config.settings {_id: "automerge", enabled} (default true), the
// balancer's mode is not "off" and the time is inside its activeWindow (config.settings
// {_id: "balancer"}; MongoDB's shouldBalanceForAutoMerge), and the collection has not disabled it (config.collections
// enableAutoMerge: false). A round runs at each step-up and then once per interval; it
// stops when the node steps down (its context ends with the topology change).

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
)

// autoMergeMaxChunks bounds one commit's merged chunks (MongoDB's
// MAX_NUMBER_OF_CHUNKS_TO_MERGE).
const autoMergeMaxChunks = 1000

// AutoMergerConfig configures StartAutoMerger.
type AutoMergerConfig struct {
	Node      Node
	Run       RunFunc
	Committer *Committer
	// Interval is autoMergerIntervalSecs, read before each wait.
	Interval func() time.Duration
	// Oldest is the oldest timestamp snapshot reads may still use (chunks placed since
	// are not merged).
	Oldest func() bson.Timestamp
	Log    *slog.Logger
	// Merged, when set, is told each namespace and shard whose chunks a round merged.
	Merged func(ns, shard string, n int)
	// BalancerAllows, when set, judges config.settings's balancer document: whether its mode
	// and activeWindow allow auto-merging now (MongoDB's shouldBalanceForAutoMerge: mode not
	// off and the time inside the balancing window). Unset: only the mode is checked.
	BalancerAllows func(balancerDoc bsoncore.Document, now time.Time) bool
}

// StartAutoMerger runs the AutoMerger until stop, which waits for it.
func StartAutoMerger(ctx context.Context, cfg AutoMergerConfig) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		roundTerm := int64(-1)
		var last time.Time // the end of the last round of this term (zero: none yet)
		for {
			_, changed := cfg.Node.TopologyVersion()
			var wait <-chan time.Time
			var timer *time.Timer
			if cfg.Node.IsWritablePrimary() {
				if term := cfg.Node.Term(); term != roundTerm {
					roundTerm, last = term, time.Time{}
				}
				// The interval is read each time: a new autoMergerIntervalSecs applies to
				// the wait in progress.
				d := time.Until(last.Add(cfg.Interval()))
				if last.IsZero() || d <= 0 {
					roundCtx, endRound := context.WithCancel(ctx)
					go func() {
						select {
						case <-changed:
							endRound()
						case <-roundCtx.Done():
						}
					}()
					cfg.round(roundCtx, roundTerm)
					endRound()
					last = time.Now()
					continue
				}
				timer = time.NewTimer(min(d, time.Second))
				wait = timer.C
			}
			select {
			case <-ctx.Done():
			case <-changed:
			case <-wait:
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

// BalancerSettingsID is config.settings's balancer document _id (the balancer package reads
// the whole document; auto-merging only its mode).
const BalancerSettingsID = "balancer"

// enabled reports whether auto-merging is on (automerge setting and the balancer's mode).
func (cfg AutoMergerConfig) enabled(ctx context.Context) (bool, error) {
	docs, err := FindAll(ctx, cfg.Run, "settings", bsoncore.NewDocumentBuilder().AppendDocument("_id",
		bsoncore.NewDocumentBuilder().AppendArray("$in", bsoncore.NewArrayBuilder().
			AppendString("automerge").AppendString(BalancerSettingsID).Build()).Build()).Build(), nil)
	if err != nil {
		return false, err
	}
	for _, d := range docs {
		switch id, _ := d.Lookup("_id").StringValueOK(); id {
		case "automerge":
			if on, ok := d.Lookup("enabled").BooleanOK(); ok && !on {
				return false, nil
			}
		case BalancerSettingsID:
			if cfg.BalancerAllows != nil {
				if !cfg.BalancerAllows(d, time.Now()) {
					return false, nil
				}
				continue
			}
			if mode, ok := d.Lookup("mode").StringValueOK(); ok && mode == "off" {
				return false, nil
			}
			if stopped, ok := d.Lookup("stopped").BooleanOK(); ok && stopped {
				return false, nil
			}
		}
	}
	return true, nil
}

// round merges what can be merged, collection by collection and shard by shard, while the
// node stays primary in term.
func (cfg AutoMergerConfig) round(ctx context.Context, term int64) {
	logErr := func(msg string, err error) {
		if cfg.Log != nil && ctx.Err() == nil {
			cfg.Log.Warn(msg, logv2.C(logv2.Sharding), "error", err.Error())
		}
	}
	on, err := cfg.enabled(ctx)
	if err != nil {
		logErr("The auto-merger could not read its settings", err)
		return
	}
	if !on {
		return
	}
	colls, err := FindAll(ctx, cfg.Run, "collections", bsoncore.NewDocumentBuilder().AppendDocument("enableAutoMerge",
		bsoncore.NewDocumentBuilder().AppendBoolean("$ne", false).Build()).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build())
	if err != nil {
		logErr("The auto-merger could not list the sharded collections", err)
		return
	}
	shards, err := FindAll(ctx, cfg.Run, "shards", bsoncore.NewDocumentBuilder().Build(), bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build())
	if err != nil {
		logErr("The auto-merger could not list the shards", err)
		return
	}
	for _, c := range colls {
		ns, _ := c.Lookup("_id").StringValueOK()
		for _, s := range shards {
			if ctx.Err() != nil || !cfg.Node.IsWritablePrimary() || cfg.Node.Term() != term {
				return
			}
			shard, _ := s.Lookup("_id").StringValueOK()
			res, err := cfg.Committer.CommitMergeAllChunksOnShard(ctx, ns, shard, autoMergeMaxChunks, cfg.Oldest())
			if err != nil {
				logErr("The auto-merger could not merge chunks", err)
				continue
			}
			if res.Merged > 0 {
				if cfg.Log != nil {
					cfg.Log.Info("Auto-merged chunks", logv2.C(logv2.Sharding), "namespace", ns, "shard", shard, "numMergedChunks", res.Merged)
				}
				if cfg.Merged != nil {
					cfg.Merged(ns, shard, res.Merged)
				}
			}
		}
	}
}
