package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/bench"
)

// chunkMover is `humongo bench --move-chunks`: while the workload runs, it moves a chunk of
// the benchmark collection to another shard through the router every interval, so the
// report shows the workload's latencies while chunks move (issue 13's "YCSB A slowdown").
// Chunks are taken round robin in config.chunks' min order, each to the shard after its
// owner in config.shards' _id order, so with two shards they go back and forth. Moves run
// one at a time: one that outlasts the interval delays the next (the ticker drops ticks).
// Moves send _waitForDelete: the donor deletes the moved range now and the move returns when
// it is clean. Without it the donor's range deletion waits orphanCleanupDelaySecs (900 s, as
// MongoDB), and moving the chunk back within that delay fails on the recipient after 10 s
// ("waiting for overlapping range deletion"): so a move's duration includes the deletion.
type chunkMover struct {
	client   *mongo.Client
	ns       string
	interval time.Duration

	// Written by the mover's goroutine only, read after stop.
	done, failed int
	firstErr     string
	durations    *bench.Histogram
}

// newChunkMover connects to uri, refuses a target that is not a router, and checks that
// ns is sharded. A collection of one chunk (--shard-key range) is split at the middle of
// the key space first, so both shards hold data and chunks go both ways.
func newChunkMover(ctx context.Context, uri, ns string, interval, timeout time.Duration) (*chunkMover, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(timeout).SetMaxPoolSize(1))
	if err != nil {
		return nil, fmt.Errorf("--move-chunks: %w", err)
	}
	m := &chunkMover{client: client, ns: ns, interval: interval, durations: bench.NewHistogram()}
	if err := m.prepare(ctx, timeout); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return m, nil
}

func (m *chunkMover) prepare(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admin := m.client.Database("admin")
	var hello struct {
		Msg string `bson:"msg"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("--move-chunks: hello: %w", err)
	}
	if hello.Msg != "isdbgrid" {
		return errors.New("--move-chunks moves chunks through a router: the target must be a router (humongos or mongos); this server's hello has no msg \"isdbgrid\"")
	}
	coll, chunks, _, err := m.catalog(ctx)
	if err != nil {
		return err
	}
	if len(chunks) > 1 {
		return nil
	}
	// One chunk: split it in the middle of the key space. Range keys are YCSB's
	// "user<decimal FNV hash>", whose first digit is about uniform; hashed keys are int64s.
	middle := bson.D{{Key: "_id", Value: "user5"}}
	if len(coll.Key) == 1 && coll.Key[0].Value == "hashed" {
		middle = bson.D{{Key: "_id", Value: int64(0)}}
	} else if len(coll.Key) != 1 || coll.Key[0].Key != "_id" {
		return fmt.Errorf("--move-chunks: %s has one chunk and shard key %v: split it first (or shard it with --shard-key)", m.ns, coll.Key)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: m.ns}, {Key: "middle", Value: middle}}).Err(); err != nil {
		return fmt.Errorf("--move-chunks: %s has one chunk; split at %v: %w", m.ns, middle, err)
	}
	return nil
}

type moverColl struct {
	UUID bson.Binary `bson:"uuid"`
	Key  bson.D      `bson:"key"`
}

type moverChunk struct {
	Min   bson.Raw `bson:"min"`
	Max   bson.Raw `bson:"max"`
	Shard string   `bson:"shard"`
}

// catalog reads the collection's entry, its chunks (in min order) and the shard names.
func (m *chunkMover) catalog(ctx context.Context) (moverColl, []moverChunk, []string, error) {
	config := m.client.Database("config")
	var coll moverColl
	if err := config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: m.ns}}).Decode(&coll); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			err = errors.New("not in config.collections (shard it with --shard-key)")
		}
		return coll, nil, nil, fmt.Errorf("--move-chunks: %s is not sharded: %w", m.ns, err)
	}
	var chunks []moverChunk
	cur, err := config.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll.UUID}},
		options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err == nil {
		err = cur.All(ctx, &chunks)
	}
	if err != nil {
		return coll, nil, nil, fmt.Errorf("--move-chunks: config.chunks: %w", err)
	}
	var shards []struct {
		ID string `bson:"_id"`
	}
	cur, err = config.Collection("shards").Find(ctx, bson.D{})
	if err == nil {
		err = cur.All(ctx, &shards)
	}
	if err != nil {
		return coll, nil, nil, fmt.Errorf("--move-chunks: config.shards: %w", err)
	}
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.ID
	}
	slices.Sort(names)
	if len(chunks) == 0 || len(names) < 2 {
		return coll, nil, nil, fmt.Errorf("--move-chunks: %s has %d chunks on a cluster of %d shards: nothing to move", m.ns, len(chunks), len(names))
	}
	return coll, chunks, names, nil
}

// start runs the mover until stop is called; moves use ctx, so stop lets a move in flight
// finish (its time belongs to the report) while an interrupt (ctx) aborts it.
func (m *chunkMover) start(ctx context.Context) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		for next := 0; ; next++ {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := m.moveOne(ctx, next); err != nil && ctx.Err() == nil {
				m.failed++
				if m.firstErr == "" {
					m.firstErr = err.Error()
				}
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
		_ = m.client.Disconnect(context.WithoutCancel(ctx))
	}
}

// moveOne moves chunk n (modulo the chunk count) to the shard after its owner.
func (m *chunkMover) moveOne(ctx context.Context, n int) error {
	_, chunks, shards, err := m.catalog(ctx)
	if err != nil {
		return err
	}
	c := chunks[n%len(chunks)]
	to := shards[(slices.Index(shards, c.Shard)+1)%len(shards)]
	start := time.Now()
	err = m.client.Database("admin").RunCommand(ctx, bson.D{{Key: "moveChunk", Value: m.ns},
		{Key: "bounds", Value: bson.A{c.Min, c.Max}}, {Key: "to", Value: to}, {Key: "_waitForDelete", Value: true}}).Err()
	if err != nil {
		return fmt.Errorf("moveChunk [%s, %s) %s -> %s: %w", c.Min, c.Max, c.Shard, to, err)
	}
	m.durations.RecordDuration(time.Since(start))
	m.done++
	return nil
}

// moveReport is the report's "moves" section (durations in milliseconds).
type moveReport struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	Done            int     `json:"done"`
	Failed          int     `json:"failed"`
	FirstError      string  `json:"firstError,omitempty"`
	P50Millis       float64 `json:"p50Millis"`
	P99Millis       float64 `json:"p99Millis"`
	MaxMillis       float64 `json:"maxMillis"`
}

func (m *chunkMover) report() *moveReport {
	ms := func(ns int64) float64 { return math.Round(float64(ns)/1e5) / 10 }
	r := &moveReport{IntervalSeconds: m.interval.Seconds(), Done: m.done, Failed: m.failed, FirstError: m.firstErr}
	if m.done > 0 {
		r.P50Millis, r.P99Millis, r.MaxMillis = ms(m.durations.Quantile(0.5)), ms(m.durations.Quantile(0.99)), ms(m.durations.Max())
	}
	return r
}

func (r *moveReport) writeTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, "\nchunk moves (every %s): %d done, %d failed; duration p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		time.Duration(r.IntervalSeconds*float64(time.Second)), r.Done, r.Failed, r.P50Millis, r.P99Millis, r.MaxMillis)
	if err == nil && r.FirstError != "" {
		_, err = fmt.Fprintf(w, "first move error: %s\n", r.FirstError)
	}
	return err
}
