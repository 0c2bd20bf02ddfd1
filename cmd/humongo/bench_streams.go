package main

// `humongo bench --change-streams N [--rate R]`: the cost and latency of change streams
// (issue 15's benchmark). N streams watch the benchmark's collection while the workload runs;
// the first measures each insert's or update's event latency, from the write's
// acknowledgement to the client (the wrapped Store sees it) to the event's delivery by the
// stream. --rate paces the workload so the latency is measured at a known write rate rather
// than at saturation.

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/bench"
)

// streamWatch owns the streams of one run: start opens them, stop closes them and waits.
type streamWatch struct {
	n      int
	client *mongo.Client
	coll   *mongo.Collection

	mu      sync.Mutex
	acked   map[string]time.Time // key → acknowledgement, not yet delivered
	arrived map[string]time.Time // key → delivery, not yet acknowledged
	hist    *bench.Histogram
	events  []atomic.Int64 // per stream
	errs    []error        // per stream, the error that ended it (not the stop)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStreamWatch(ctx context.Context, uri, db, coll string, n int, timeout time.Duration) (*streamWatch, error) {
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetMaxPoolSize(uint64(n + 2)))
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cl.Ping(pctx, nil); err != nil {
		_ = cl.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("--change-streams: %w", err)
	}
	return &streamWatch{n: n, client: cl, coll: cl.Database(db).Collection(coll),
		acked: map[string]time.Time{}, arrived: map[string]time.Time{}, hist: bench.NewHistogram(),
		events: make([]atomic.Int64, n), errs: make([]error, n)}, nil
}

// start opens the streams (each has delivered its first batch when start returns, so no
// write of the workload can precede it) and consumes them until stop.
func (w *streamWatch) start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range w.n {
		cs, err := w.coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			w.stop()
			return fmt.Errorf("--change-streams: open stream %d: %w", i, err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() { _ = cs.Close(context.WithoutCancel(ctx)) }()
			for cs.Next(ctx) {
				w.events[i].Add(1)
				if i == 0 {
					w.delivered(cs.Current)
				}
			}
			if err := cs.Err(); err != nil && ctx.Err() == nil {
				w.errs[i] = err
			}
		}()
	}
	return nil
}

// delivered notes the first stream's event for a benchmark record.
func (w *streamWatch) delivered(ev bson.Raw) {
	now := time.Now()
	key, ok := ev.Lookup("documentKey", "_id").StringValueOK()
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.acked[key]; ok {
		delete(w.acked, key)
		w.hist.RecordDuration(now.Sub(t))
		return
	}
	w.arrived[key] = now
}

// ack notes a write's acknowledgement to the benchmark client.
func (w *streamWatch) ack(key string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.arrived[key]; ok {
		// The event came first (its commit was majority-visible before the reply reached the
		// writer): no delay to report.
		delete(w.arrived, key)
		w.hist.Record(0)
		return
	}
	w.acked[key] = now
}

// stop closes the streams after a grace period for the last events, and the client.
func (w *streamWatch) stop() {
	// Until stream 0 has every acknowledged write's event and the others as many events.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		pending := len(w.acked)
		w.mu.Unlock()
		behind := false
		for i := 1; i < w.n; i++ {
			behind = behind || w.events[i].Load() < w.events[0].Load()
		}
		if pending == 0 && !behind {
			break
		}
		time.Sleep(10 * time.Millisecond) // a CLI's wait for the tail, not server code
	}
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
	_ = w.client.Disconnect(context.Background())
}

func (w *streamWatch) writeReport(out io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total int64
	for i := range w.events {
		total += w.events[i].Load()
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	fmt.Fprintf(out, "[CHANGE-STREAMS] Streams, %d\n", w.n)
	fmt.Fprintf(out, "[CHANGE-STREAMS] Events delivered (all streams), %d\n", total)
	fmt.Fprintf(out, "[CHANGE-STREAMS] Latency measured (stream 0), %d\n", w.hist.Count())
	fmt.Fprintf(out, "[CHANGE-STREAMS] Latency never delivered (stream 0), %d\n", len(w.acked))
	if w.hist.Count() > 0 {
		fmt.Fprintf(out, "[CHANGE-STREAMS] Latency p50 (ms), %.2f\n", ms(w.hist.Quantile(0.50)))
		fmt.Fprintf(out, "[CHANGE-STREAMS] Latency p99 (ms), %.2f\n", ms(w.hist.Quantile(0.99)))
		fmt.Fprintf(out, "[CHANGE-STREAMS] Latency max (ms), %.2f\n", ms(w.hist.Max()))
	}
	for i, err := range w.errs {
		if err != nil {
			fmt.Fprintf(out, "[CHANGE-STREAMS] Stream %d ended with, %v\n", i, err)
		}
	}
}

// watchedStore reports each acknowledged insert and update to the streams' latency
// measurement and, with a rate, paces the operations: operation i starts no earlier than
// i/rate after the first.
type watchedStore struct {
	bench.Store
	watch *streamWatch // nil: no latency measurement
	rate  float64      // operations per second, 0: unpaced
	start time.Time
	n     atomic.Int64
}

func (s *watchedStore) pace(ctx context.Context) error {
	if s.rate <= 0 {
		return nil
	}
	i := s.n.Add(1) - 1
	at := s.start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *watchedStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	err := s.Store.Insert(ctx, key, fields)
	if err == nil && s.watch != nil {
		s.watch.ack(key)
	}
	return err
}

func (s *watchedStore) Update(ctx context.Context, key, field string, value []byte) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	err := s.Store.Update(ctx, key, field, value)
	if err == nil && s.watch != nil {
		s.watch.ack(key)
	}
	return err
}

func (s *watchedStore) Read(ctx context.Context, key string) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	return s.Store.Read(ctx, key)
}
