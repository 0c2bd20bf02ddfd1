package router

// The merging half of a scatter-gather read (MongoDB's AsyncResultsMerger and RouterExecStage
// pipeline: RouterStageSkip, RouterStageLimit, the sort-key merge). Our shards do not emit
// {$meta: "sortKey"}, so a sorted merge computes each document's sort key on the router from
// the document itself (expr.SortKey: the same KeyString sort key, with the query's collation,
// the shards sorted by); find sends the shards no projection that could drop sort fields and
// projects on the router instead.

import (
	"bytes"
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// mergeSource is a cursor.Source over the shards' cursors: a k-way merge on sort when set,
// else the shards' documents in turn; then skip, limit and project applied on the router.
type mergeSource struct {
	cursors  []*shardCursor
	sort     *expr.SortKey
	collator *collation.Collator
	skip     int64
	limit    int64 // 0: none
	returned int64
	project  func(bsoncore.Document) (bsoncore.Document, error)
	// keep, when set, drops the documents it refuses before skip and limit (the
	// collections an authorizedCollections listCollections may not show).
	keep      func(bsoncore.Document) bool
	batchSize int64 // the shards' getMore batchSize (0: the shard's default)
	cur       int   // unsorted: the cursor being drained
}

// Next implements cursor.Source.
func (m *mergeSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	for {
		if m.limit > 0 && m.returned >= m.limit {
			return nil, false, nil
		}
		doc, ok, err := m.pull(ctx)
		if err != nil || !ok {
			return nil, false, err
		}
		if m.keep != nil && !m.keep(doc) {
			continue
		}
		if m.skip > 0 {
			m.skip--
			continue
		}
		m.returned++
		if m.project != nil {
			if doc, err = m.project(doc); err != nil {
				return nil, false, err
			}
		}
		return doc, true, nil
	}
}

// pull returns the next document of the merge, fetching from shards as needed.
func (m *mergeSource) pull(ctx context.Context) (bsoncore.Document, bool, error) {
	if m.sort == nil {
		for m.cur < len(m.cursors) {
			s := m.cursors[m.cur]
			if len(s.buf) > 0 {
				d := s.buf[0]
				s.buf = s.buf[1:]
				return d, true, nil
			}
			if s.id == 0 {
				m.cur++
				continue
			}
			if err := s.fetch(ctx, m.batchSize); err != nil {
				return nil, false, err
			}
		}
		return nil, false, nil
	}
	best := -1
	for i, s := range m.cursors {
		for len(s.buf) == 0 && s.id != 0 {
			if err := s.fetch(ctx, m.batchSize); err != nil {
				return nil, false, err
			}
		}
		if len(s.buf) == 0 {
			continue
		}
		for len(s.keys) < len(s.buf) {
			s.keys = append(s.keys, m.sort.Key(s.buf[len(s.keys)], m.collator))
		}
		// Ties go to the earlier shard, so equal keys keep a stable order.
		if best < 0 || bytes.Compare(s.keys[0], m.cursors[best].keys[0]) < 0 {
			best = i
		}
	}
	if best < 0 {
		return nil, false, nil
	}
	s := m.cursors[best]
	d := s.buf[0]
	s.buf, s.keys = s.buf[1:], s.keys[1:]
	return d, true, nil
}

// exhausted reports that Next can return nothing more without asking a shard.
func (m *mergeSource) exhausted() bool {
	if m.limit > 0 && m.returned >= m.limit {
		return true
	}
	for _, s := range m.cursors {
		if len(s.buf) > 0 || s.id != 0 {
			return false
		}
	}
	return true
}

func (m *mergeSource) setBatchSize(n int64) { m.batchSize = n }

// SaveState implements cursor.Source: nothing is tied to a snapshot on the router.
func (m *mergeSource) SaveState() {}

// RestoreState implements cursor.Source.
func (m *mergeSource) RestoreState(context.Context) error { return nil }

// Close implements cursor.Source: kills the shards' open cursors and ends their sessions.
func (m *mergeSource) Close() {
	for _, s := range m.cursors {
		s.kill()
	}
	m.cursors = nil
}

// openCursors sends each shard its command (cmds[shard], already versioned) in parallel and
// returns the shards' cursors in the order of shards. On any failure the cursors opened are
// killed and the first error (a stale-version one preferred, so WithRouting retries) returned.
// A shard that failed retriably is asked again (retryFailedHost), unless the command writes
// ($out, $merge).
func openCursors(ctx context.Context, c *Cluster, db string, shards []string, cmds map[string]bsoncore.Document) ([]*shardCursor, error) {
	out := make([]*shardCursor, len(shards))
	errs := make([]error, len(shards))
	open := func(i int, shard string) {
		// $out and $merge follow the read preference too, as mongos's since MongoDB 5.0: a
		// secondary runs them and writes through its primary (commands/agg_remote.go).
		rctx := ctx
		r, err := newRemote(rctx, c, shard)
		if err != nil {
			errs[i] = err
			return
		}
		sc := &shardCursor{remote: r}
		out[i] = sc
		var reply bsoncore.Document
		tries := 0
		send := func() (err error) {
			if tries++; tries > 1 && r.host != "" {
				// The member the read preference picked failed: pick again.
				if err := r.pin(rctx, c); err != nil {
					return err
				}
			}
			reply, err = r.run(rctx, db, cmds[shard])
			return err
		}
		if writesOutput(cmds[shard]) {
			err = send()
		} else {
			err = retryFailedHost(ctx, send)
		}
		if err != nil {
			errs[i] = err
			return
		}
		noteShardAtClusterTime(ctx, reply) // a snapshot read's time the shard chose (readsAt)
		var ns string
		var docs []bsoncore.Document
		if sc.id, ns, docs, err = parseCursorReply(reply); err != nil {
			errs[i] = err
			return
		}
		sc.db, sc.coll = splitNS(ns)
		sc.buf, sc.pbrt = docs, shardPBRT(reply)
	}
	fanOut(shards, open)
	var first error
	for i, err := range errs {
		if err != nil && (first == nil || c.isStale(err) && !c.isStale(first)) {
			first = errs[i]
		}
	}
	if first != nil {
		for _, sc := range out {
			if sc != nil {
				sc.kill()
			}
		}
		return nil, first
	}
	return out, nil
}

// runOnShards runs one command per shard in parallel (count, distinct, explain) and returns
// the replies in the order of shards, or the first error (a stale-version one preferred). They
// are all reads: a shard that failed retriably is asked again (retryFailedHost).
func runOnShards(ctx context.Context, c *Cluster, db string, shards []string, cmds map[string]bsoncore.Document) ([]bsoncore.Document, error) {
	out := make([]bsoncore.Document, len(shards))
	errs := make([]error, len(shards))
	fanOut(shards, func(i int, shard string) {
		errs[i] = retryFailedHost(ctx, func() error {
			rs, err := c.Shard(ctx, shard)
			if err != nil {
				return err
			}
			// A one-shot read: the driver selects the member by the read preference itself.
			cmd := cmds[shard]
			t := txnFrom(ctx)
			if t != nil {
				cmd = t.attach(shard, cmd)
			} else {
				cmd = gossipReadTime(ctx, cmd)
			}
			raw, err := rs.RunCommand(ctx, db, rawDoc(cmd), readPrefFrom(ctx))
			if err != nil {
				return shardError(ctx, shard, err)
			}
			if t != nil {
				t.observe(shard, bsoncore.Document(raw))
			}
			out[i] = bsoncore.Document(raw)
			return nil
		})
	})
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || c.isStale(err) && !c.isStale(first)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}

// fanOut runs f for every shard in parallel and returns when all have returned. A single
// shard (every targeted read) runs in the caller's goroutine: a goroutine and a channel
// handoff per request are measurable latency on a loaded machine (docs/benchmarks.md, issue 12).
func fanOut(shards []string, f func(i int, shard string)) {
	if len(shards) == 1 {
		f(0, shards[0])
		return
	}
	var wg sync.WaitGroup
	for i, shard := range shards {
		wg.Go(func() { f(i, shard) })
	}
	wg.Wait()
}

// isStale reports whether err is a stale-version answer.
func (c *Cluster) isStale(err error) bool {
	code, _ := errorCodeAndReply(err)
	switch code {
	case mongoerr.StaleConfig, mongoerr.StaleEpoch, mongoerr.StaleDbVersion:
		return true
	}
	return false
}
