package commands

// $changeStream: an aggregate whose first stage is $changeStream opens a tailable, awaitData
// cursor over internal/changestream's Stream; its getMores wait for the majority point to
// move (MongoDB's document_source_change_stream*.cpp, change_stream_proxy; spec:
// execution.md "Oplog Visibility", replication.md "Read Concern").

import (
	"bytes"
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/changestream"
	"humongo/internal/changestream/event"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
)

// csAllowedStages are the stages a change stream's pipeline may hold after $changeStream
// (DocumentSource constraints' isAllowedInChangeStream).
var csAllowedStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// isChangeStream reports whether the pipeline starts with $changeStream.
func isChangeStream(pipeline []bsoncore.Document) bool {
	if len(pipeline) == 0 {
		return false
	}
	el, err := pipeline[0].IndexErr(0)
	return err == nil && el.Key() == "$changeStream"
}

// csSource is a change stream cursor's source. The stream holds no snapshot or lock between
// batches, so saving and restoring are free.
type csSource struct {
	s *changestream.Stream
}

func (c *csSource) Next(ctx context.Context) (bsoncore.Document, bool, error) { return c.s.Next(ctx) }
func (c *csSource) SaveState()                                                {}
func (c *csSource) RestoreState(context.Context) error                        { return nil }
func (c *csSource) Close()                                                    {}

// aggChangeStream opens a change stream and answers with its first batch.
func aggChangeStream(ctx context.Context, env *service.Env, r *aggRequest) (bsoncore.Document, error) {
	el, err := r.pipeline[0].IndexErr(0)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $changeStream stage: %v", err)
	}
	spec, err := changestream.ParseSpec(el.Value())
	if err != nil {
		return nil, err
	}
	st := env.State
	if st.Repl == nil {
		return nil, mongoerr.New(mongoerr.Location40573, "The $changeStream stage is only supported on replica sets")
	}
	db, coll := r.db, ""
	if !r.collectionless {
		coll = r.ns[len(r.db)+1:]
	}
	if err := spec.Check(db, coll, false); err != nil {
		return nil, err
	}
	if operation.TxnOf(ctx) != nil {
		return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
			"Operation not permitted in transaction :: caused by :: $changeStream is not permitted in a multi-document transaction")
	}
	pl, split, err := csUserPipeline(r)
	if err != nil {
		return nil, err
	}
	if r.explain {
		return csExplain(env, r)
	}
	scope := event.Scope{Kind: event.ScopeCollection, DB: db, Coll: coll}
	switch {
	case spec.AllChangesForCluster:
		scope = event.Scope{Kind: event.ScopeCluster}
	case coll == "":
		scope.Kind = event.ScopeDatabase
	}
	meta, ok := st.DB.Catalog.Latest().ByNS(oplog.NS)
	if !ok || meta == nil {
		return nil, mongoerr.New(mongoerr.Location40573, "The $changeStream stage is only supported on replica sets")
	}
	eng := st.DB.Engine
	ac := aggLookupLimits(env)
	ac.Now, ac.TempDir = time.Now(), st.DB.TempDir
	cfg := changestream.Config{
		Engine:     eng,
		OplogIdent: meta.Ident,
		Majority:   eng.StableTimestamp,
		Spec:       spec,
		Scope:      scope,
		Start:      st.Repl.LastApplied().TS + 1,
		Pipeline:   pl,
		AggContext: ac,
		// An event over 16 MB fails the stream unless the pipeline ends with the split stage.
		SplitLargeEvents: split,
		LookupPost: func(ctx context.Context, ev *event.Event) (bsoncore.Document, error) {
			return csLookup(ctx, env, ev)
		},
	}
	csImages(env, &cfg)
	s, err := changestream.Open(cfg)
	if err != nil {
		return nil, err
	}
	src := &csSource{s: s}
	c := &cursor.Cursor{NS: r.ns, Source: src, Command: r.cmd, Tailable: true, AwaitData: true}
	n := r.batchSize
	if n < 0 {
		n = cursor.DefaultFirstBatch
	}
	b, err := csFill(ctx, s, n)
	if err != nil {
		return nil, csError(err)
	}
	var id int64
	if !s.Done() {
		id = registerCursor(ctx, env, c)
	}
	c.NReturned += int64(b.Len())
	st.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, r.ns, cursor.ReplyOptions{First: true, BatchBeforeID: true,
		PostBatchResumeToken: s.PostBatchResumeToken()}), nil
}

// csUserPipeline parses the stages after $changeStream and checks each may run in a stream.
func csUserPipeline(r *aggRequest) (pl *agg.Pipeline, split bool, err error) {
	rest := r.pipeline[1:]
	for i, st := range rest {
		el, err := st.IndexErr(0)
		if err != nil {
			continue
		}
		switch el.Key() {
		case "$changeStream":
			return nil, false, mongoerr.New(mongoerr.Location40602, "$changeStream is only valid as the first stage in a pipeline")
		case csSplitStage:
			if d, ok := el.Value().DocumentOK(); !ok || len(d) != 5 {
				return nil, false, mongoerr.New(mongoerr.Location7182800, "$changeStreamSplitLargeEvent spec should be an empty object")
			}
			if i != len(rest)-1 {
				return nil, false, mongoerr.New(mongoerr.Location7182802, "$changeStreamSplitLargeEvent must be the last stage in the pipeline")
			}
			// The stream splits the pipeline's output itself (changestream.Config).
			rest, split = rest[:i], true
		}
	}
	if len(rest) == 0 {
		return nil, split, nil
	}
	pl, err = agg.Parse(rest, agg.ParseContext{DB: r.db, Collator: r.coll})
	if err != nil {
		return nil, false, err
	}
	for _, st := range rest {
		el, _ := st.IndexErr(0)
		if !csAllowedStages[el.Key()] {
			return nil, false, mongoerr.Newf(mongoerr.IllegalOperation, "%s is not permitted in a $changeStream pipeline", el.Key())
		}
	}
	return pl, split, nil
}

// csSplitStage ends a change stream pipeline whose large events come as fragments.
const csSplitStage = "$changeStreamSplitLargeEvent"

// csExplain describes the stream's stages (its expansion is not shown).
func csExplain(env *service.Env, r *aggRequest) (bsoncore.Document, error) {
	inner := ddlWithout(r.cmd, "explain", "lsid", "$clusterTime", "$readPreference")
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "explainVersion", "1")
		ai, bb := bsoncore.AppendArrayElementStart(b, "stages")
		for i, st := range r.pipeline {
			bb = bsoncore.AppendDocumentElement(bb, itoa(int64(i)), st)
		}
		b, _ = bsoncore.AppendArrayEnd(bb, ai)
		b = bsoncore.AppendDocumentElement(b, "command", inner)
		b = bsoncore.AppendDocumentElement(b, "serverInfo", findServerInfo(env))
		return b
	}), nil
}

// csFill reads up to count events into a batch, handing back one that does not fit.
func csFill(ctx context.Context, s *changestream.Stream, count int64) (*cursor.Batch, error) {
	b := &cursor.Batch{}
	for int64(b.Len()) < count {
		d, ok, err := s.Next(ctx)
		if err != nil {
			return b, err
		}
		if !ok {
			break
		}
		if !b.Add(d) {
			s.Unread(d)
			break
		}
	}
	return b, nil
}

// csGetMore fills a change stream's next batch: when nothing is there it waits for the
// majority point to pass what the stream has scanned, until shortly before maxTimeMS (1 s
// without one) runs out.
func csGetMore(ctx context.Context, env *service.Env, c *cursor.Cursor, src *csSource, count int64) (*cursor.Batch, error) {
	s := src.s
	b, err := csFill(ctx, s, count)
	if err != nil || b.Len() > 0 || s.Done() {
		return b, err
	}
	wait := getMoreAwaitDefault
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) - 20*time.Millisecond
	}
	if wait <= 0 {
		return b, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	eng := env.State.DB.Engine
	stats := env.State.Cursors().AwaitStats()
	for {
		if _, err := eng.WaitStable(wctx, s.Scanned()); err != nil {
			if ctx.Err() != nil {
				if _, ok := ctx.Deadline(); ok && !mongoerr.Is(context.Cause(ctx), mongoerr.MaxTimeMSExpired) {
					return nil, context.Cause(ctx)
				}
			}
			stats.Expired.Add(1)
			return b, nil
		}
		stats.Notified.Add(1)
		if b, err = csFill(ctx, s, count); err != nil || b.Len() > 0 || s.Done() {
			return b, err
		}
	}
}

// csError labels a change stream's error as drivers expect: resumable for the errors a new
// stream on another member can get past (MongoDB's isResumableChangeStreamError).
func csError(err error) error { return changestream.ResumableError(err) }

// csLookup reads the current, majority-committed version of an update's document by its
// documentKey (fullDocument: updateLookup); nil when it is gone or its collection is not the
// event's any more.
func csLookup(ctx context.Context, env *service.Env, ev *event.Event) (bsoncore.Document, error) {
	st := env.State
	meta, ok := st.DB.Catalog.Latest().ByNS(ev.NS)
	if !ok || meta == nil || (ev.HasUUID && meta.UUID != ev.UUID) {
		return nil, nil
	}
	req := &operation.Request{ReadSource: operation.ReadSource{Kind: operation.ReadMajority, TS: st.DB.Engine.StableTimestamp()}}
	if r := operation.RequestOf(ctx); r != nil {
		req.Admission = r.Admission
	}
	lctx := operation.WithRequest(ctx, req)
	q := plan.Request{NS: ev.NS, Filter: ev.DocumentKey, Limit: 1, CollationSet: true}
	findFillRequestDefaults(env, &q)
	in, err := aggOpenInput(lctx, st, ev.NS, q)
	if err != nil {
		if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return nil, nil
		}
		return nil, err
	}
	defer in.Close()
	d, ok, err := in.Next(lctx)
	if err != nil || !ok {
		return nil, err
	}
	return bytes.Clone(d), nil
}
