package commands

// Foreign reads of an aggregation ($lookup, $graphLookup, $unionWith; issue 10): streamed in
// bounded chunks through the read seam, so neither a whole foreign collection nor a lock
// outlives one chunk.
//
// A foreignReader plans its query once over a RecoveryUnit of its own and reads the plan in
// chunks of foreignChunkDocs documents or foreignChunkBytes bytes. Each chunk takes the
// collection lock (through aggResolver.op: the input's Locker while the input holds its lock,
// see aggResolver), restores the plan, reads, saves the plan and gives the lock and the
// snapshot back, as the pipeline's own input does between batches. A chunk is therefore a
// yield point: a long $unionWith or a large $lookup match never pins a snapshot across
// getMores, and memory is bounded by one chunk rather than by the foreign collection.

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// Chunk bounds of a foreignReader.
const (
	foreignChunkDocs  = 1024
	foreignChunkBytes = 4 << 20
)

// foreignReader streams one plan over a foreign collection (an agg.Source).
type foreignReader struct {
	r         *aggResolver
	ns        string
	req       plan.Request
	rs        operation.ReadSource
	ru        *storage.RecoveryUnit // nil until the first chunk
	ruRelease func()
	ex        *plan.Executor // nil until the first chunk, and for a missing collection
	buf       []bsoncore.Document
	i         int
	eof       bool
	// index is the index the plan uses ("" for a collection scan), known after the first
	// chunk.
	index string
}

func (r *aggResolver) newForeignReader(ctx context.Context, ns string, filter bsoncore.Document) *foreignReader {
	req := plan.Request{NS: ns, Filter: filter, Collation: r.coll, CollationSet: true}
	findFillRequestDefaults(r.env, &req)
	return &foreignReader{r: r, ns: ns, req: req, rs: findReadSource(ctx, ns)}
}

func (f *foreignReader) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if f.i >= len(f.buf) {
		if f.eof {
			return nil, false, nil
		}
		if err := f.fill(ctx); err != nil {
			return nil, false, err
		}
		if len(f.buf) == 0 {
			return nil, false, nil
		}
	}
	d := f.buf[f.i]
	f.buf[f.i] = nil
	f.i++
	return d, true, nil
}

// fill reads the next chunk under the collection lock.
func (f *foreignReader) fill(ctx context.Context) (err error) {
	f.buf, f.i = f.buf[:0], 0
	op, done := f.r.op(ctx)
	defer done()
	if f.ru == nil {
		rd, release, err := op.OpenRead(ctx, f.ns, operation.ReadOwned) // the read seam (operation/read.go)
		if err != nil {
			return err
		}
		defer release()
		if rd.Meta() == nil {
			f.eof = true
			return nil
		}
		f.ru, f.ruRelease = f.r.env.State.DB.CursorUnit(ctx)
		if err := applyReadSource(f.rs, f.ru); err != nil {
			return err
		}
		if f.ex, err = rd.Plan(ctx, f.ru, f.req); err != nil {
			return err
		}
		f.index = f.ex.IndexName()
	} else {
		meta, _, release, err := op.ReadCollection(ctx, f.ns)
		if err != nil {
			return err
		}
		defer release()
		if err := rcReapply(f.r.env.State, &f.rs, f.ru); err != nil {
			return err
		}
		if err := f.ex.Restore(meta); err != nil {
			return err
		}
	}
	defer func() {
		f.ex.Save()
		f.ru.AbandonSnapshot()
	}()
	size := 0
	for len(f.buf) < foreignChunkDocs && size < foreignChunkBytes {
		if err := op.CheckForInterrupt(); err != nil {
			return err
		}
		_, d, ok, err := f.ex.Next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			f.eof = true
			return nil
		}
		size += len(d)
		f.buf = append(f.buf, bytes.Clone(d))
	}
	return nil
}

func (f *foreignReader) Close() {
	f.buf, f.eof = nil, true
	if f.ex != nil {
		f.ex.Close()
		f.ex = nil
	}
	if f.ru != nil {
		f.ruRelease()
		f.ru = nil
	}
}

// Query runs filter over db.coll through the query planner (agg.Querier), so an index on
// the queried field serves $lookup's per-document reads. A view runs its pipeline followed by
// a $match of filter over its streamed backing collection (no index: "").
func (r *aggResolver) Query(ctx context.Context, db, coll string, filter bsoncore.Document) (agg.Source, string, error) {
	ns := db + "." + coll
	backing, pipe, isView, err := r.resolveView(ctx, ns)
	if err != nil {
		return nil, "", err
	}
	if !isView {
		fr := r.newForeignReader(ctx, ns, filter)
		// The first chunk plans the query, which tells the caller which index serves it.
		if err := fr.fill(ctx); err != nil {
			fr.Close()
			return nil, "", err
		}
		return fr, fr.index, nil
	}
	full := append(append([]bsoncore.Document{}, pipe...), bsoncore.NewDocumentBuilder().AppendDocument("$match", filter).Build())
	pl, err := agg.Parse(full, agg.ParseContext{DB: db, Collator: r.coll})
	if err != nil {
		return nil, "", err
	}
	src, err := pl.Run(ctx, r.newForeignReader(ctx, backing, nil), r.subContext())
	return src, "", err
}

// subContext is the agg.Context of a foreign view's pipeline.
func (r *aggResolver) subContext() *agg.Context {
	ac := aggLookupLimits(r.env)
	ac.Resolver, ac.TempDir = r, r.env.State.DB.TempDir
	return ac
}

// aggLookupLimits is an agg.Context carrying the $lookup family's memory bounds from the
// server parameters.
func aggLookupLimits(env *service.Env) *agg.Context {
	ac := &agg.Context{}
	if p := env.State.Params; p != nil {
		ac.LookupCacheBytes = p.Int("internalDocumentSourceLookupCacheSizeBytes")
		ac.LookupMaxResultBytes = p.Int("internalLookupStageIntermediateDocumentMaxSizeBytes")
		ac.GraphLookupMaxMemoryBytes = p.Int("internalDocumentSourceGraphLookupMaxMemoryBytes")
	}
	if ac.LookupMaxResultBytes <= 0 {
		ac.LookupMaxResultBytes = 100 << 20
	}
	return ac
}
