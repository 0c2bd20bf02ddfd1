package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addGetMore(r *service.Registry) {
	add(r, &service.Command{
		Name:        "getMore",
		Auth:        service.AuthGetMore,
		Handler:     runGetMore,
		Help:        "retrieve more results from an existing cursor",
		SecondaryOk: true,
		Counter:     "getmore",
	})
}

// getMoreAwaitDefault is how long an awaitData getMore waits without maxTimeMS.
const getMoreAwaitDefault = time.Second

// failGetMoreAfterCursorCheckout is MongoDB's fail point of that name: a getMore fails with
// the data's errorCode once it has checked its cursor out (drivers' change-stream resume tests).
var failGetMoreAfterCursorCheckout = failpoint.Register("failGetMoreAfterCursorCheckout")

func runGetMore(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "getMore"
	if err := checkStrict(cmd, name, "collection", "batchSize", "term", "lastKnownCommittedOpTime", "includeQueryStatsMetrics"); err != nil {
		return nil, err
	}
	idv := commandArg(cmd)
	if idv.Type != bsoncore.TypeInt64 {
		return nil, typeMismatch(name, name, idv.Type, "long")
	}
	id := idv.Int64()
	collv := lookup(cmd, "collection")
	if collv.Type == 0 {
		return nil, mongoerr.Newf(codeMissingField, "BSON field 'getMore.collection' is missing but a required field")
	}
	if collv.Type != bsoncore.TypeString {
		return nil, typeMismatch(name, "collection", collv.Type, "string")
	}
	ns := env.DB + "." + collv.StringValue()
	if collv.StringValue() == "" {
		// getmore_cmd.cpp's Invocation: the namespace must be valid before the cursor is looked at.
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace for getMore: %s", ns)
	}
	batch, hasBatch, err := findNonNegative(name, "batchSize", lookup(cmd, "batchSize"))
	if err != nil {
		return nil, err
	}
	count := int64(cursor.Unlimited)
	if hasBatch && batch > 0 {
		count = batch
	}
	m := env.State.Cursors()
	c, err := m.Pin(id)
	if err != nil {
		return nil, err
	}
	if err := service.CheckGetMore(env, id, c); err != nil {
		m.Unpin(c, false)
		return nil, err
	}
	if err := checkCursorSession(ctx, id, c); err != nil {
		m.Unpin(c, false)
		return nil, err
	}
	if c.NS != ns {
		m.Unpin(c, false)
		return nil, mongoerr.Newf(mongoerr.Unauthorized,
			"Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.NS)
	}
	if lookup(cmd, "maxTimeMS").Type != 0 && !c.AwaitData {
		m.Unpin(c, false)
		return nil, mongoerr.New(mongoerr.BadValue, "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
	}
	if data, on := failGetMoreAfterCursorCheckout.Evaluate(func(data bsoncore.Document) bool {
		// As MongoDB: failCommand's client rules (a secondary's oplog fetcher is spared).
		return service.FailPointTargets(data, env.Conn)
	}); on {
		// As getmore_cmd.cpp: the error (InternalError without errorCode) is raised with the
		// cursor pinned, which kills it.
		code, ok := lookup(data, "errorCode").AsInt64OK()
		if !ok {
			code = int64(mongoerr.InternalError)
		}
		m.Unpin(c, true)
		err := error(mongoerr.New(mongoerr.Code(code), "Hit the 'failGetMoreAfterCursorCheckout' failpoint"))
		if _, ok := c.Source.(*csSource); ok {
			err = csError(err)
		}
		return nil, err
	}
	if src, ok := c.Source.(*csSource); ok {
		b, err := csGetMore(ctx, env, c, src, count)
		if err == nil && c.Killed() {
			err = mongoerr.Newf(mongoerr.CursorKilled, "cursor id %d was killed", id)
		}
		if err != nil {
			m.Unpin(c, true)
			return nil, csError(err)
		}
		done := src.s.Done()
		c.NReturned += int64(b.Len())
		m.Unpin(c, done)
		env.State.Counters.DocsReturned.Add(int64(b.Len()))
		outID := id
		if done {
			outID = 0
		}
		return cursor.AppendReply(b, outID, c.NS, cursor.ReplyOptions{BatchBeforeID: true,
			PostBatchResumeToken: src.s.PostBatchResumeToken()}), nil
	}
	b, exhausted, err := getMoreBatch(ctx, env, c, count)
	if err == nil && c.Killed() {
		err = mongoerr.Newf(mongoerr.CursorKilled, "cursor id %d was killed", id)
	}
	if err != nil {
		m.Unpin(c, true)
		return nil, err
	}
	done := exhausted && !c.Tailable
	if src, ok := c.Source.(*findSource); ok && !done {
		if lim := src.ex; lim != nil && lim.IsEOF() && !c.Tailable {
			done = true
		}
	}
	m.Unpin(c, done)
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	outID := id
	if done {
		outID = 0
	}
	return cursor.AppendReply(b, outID, c.NS, cursor.ReplyOptions{BatchBeforeID: true}), nil
}

// getMoreBatch re-locks the cursor's collection (for query cursors), re-resolves its read
// source, restores the plan, fills one batch and saves the plan again. An awaitData cursor
// with nothing new waits for a change to its collection (findWaitChan) and tries again,
// until shortly before its maxTimeMS (1 s without one) runs out.
func getMoreBatch(ctx context.Context, env *service.Env, c *cursor.Cursor, count int64) (*cursor.Batch, bool, error) {
	fill := func() (*cursor.Batch, bool, error) {
		src, ok := c.Source.(*findSource)
		if !ok {
			if err := c.Source.RestoreState(ctx); err != nil {
				return nil, false, err
			}
			b, ex, err := cursor.FillBatch(ctx, c, count)
			c.Source.SaveState()
			return b, ex, err
		}
		op := src.db.NewOp(ctx)
		defer op.Close()
		meta, _, release, err := op.ReadCollection(ctx, src.ns)
		if err != nil {
			return nil, false, err
		}
		defer release()
		src.meta = meta
		// The snapshot was abandoned by SaveState: the next one opens at the source's
		// current timestamp (a secondary's new lastApplied, the new committed snapshot).
		if err := rcReapply(env.State, &src.rs, src.ru); err != nil {
			return nil, false, err
		}
		if err := src.RestoreState(ctx); err != nil {
			return nil, false, err
		}
		b, ex, err := cursor.FillBatch(ctx, c, count)
		src.SaveState()
		return b, ex, err
	}
	if !c.AwaitData {
		return fill()
	}
	// Subscribe before reading: a change that lands between the read and the wait then
	// still wakes us.
	wake := findWaitChan(env.State, c.NS)
	b, exhausted, err := fill()
	if err != nil || b.Len() > 0 {
		return b, exhausted, err
	}
	wait := getMoreAwaitDefault
	if dl, ok := ctx.Deadline(); ok {
		// maxTimeMS is the await time for these cursors: return before it expires.
		wait = time.Until(dl) - 20*time.Millisecond
	}
	if wait <= 0 {
		return b, exhausted, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	stats := env.State.Cursors().AwaitStats()
	for {
		select {
		case <-wake:
			stats.Notified.Add(1)
		case <-t.C:
			stats.Expired.Add(1)
			return b, exhausted, nil
		case <-ctx.Done():
			if _, ok := ctx.Deadline(); ok && context.Cause(ctx) != nil && !mongoerr.Is(context.Cause(ctx), mongoerr.MaxTimeMSExpired) {
				return nil, false, context.Cause(ctx)
			}
			return b, exhausted, nil
		}
		// A wake-up is a hint, not a promise: an oplog entry committed behind a hole is not
		// visible yet, and the commit that fills the hole wakes us again.
		wake = findWaitChan(env.State, c.NS)
		if b, exhausted, err = fill(); err != nil || b.Len() > 0 {
			return b, exhausted, err
		}
	}
}
