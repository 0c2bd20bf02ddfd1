package router

// getMore and killCursors on router cursors (MongoDB's ClusterGetMoreCmd/ClusterFind::runGetMore
// and ClusterKillCursorsCmd).

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/changestream"
	"humongo/internal/cursor"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// failGetMoreAfterCursorCheckout is MongoDB's fail point of that name on mongos: a getMore
// fails with data.errorCode once its cursor is checked out.
var failGetMoreAfterCursorCheckout = failpoint.Register("failGetMoreAfterCursorCheckout")

func runGetMore(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "getMore"
	idv := firstArg(cmd)
	if idv.Type != bsoncore.TypeInt64 {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", bsonutil.TypeName(idv.Type))
	}
	id := idv.Int64()
	collv := cmd.Lookup("collection")
	if collv.Type == 0 {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'getMore.collection' is missing but a required field")
	}
	coll, ok := collv.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'getMore.collection' is the wrong type '%s', expected type 'string'", bsonutil.TypeName(collv.Type))
	}
	ns := env.DB + "." + coll
	if coll == "" {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace for getMore: %s", ns)
	}
	batch, hasBatch, err := nonNegative(name, cmd, "batchSize")
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
	if err := checkRouterCursorSession(cmd, id, c); err != nil {
		m.Unpin(c, false)
		return nil, err
	}
	if c.NS != ns {
		m.Unpin(c, false)
		return nil, mongoerr.Newf(mongoerr.Unauthorized,
			"Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.NS)
	}
	if data, on := failGetMoreAfterCursorCheckout.Evaluate(func(data bsoncore.Document) bool {
		return service.FailPointTargets(data, env.Conn)
	}); on {
		// As cluster_getmore_cmd: the error (InternalError without errorCode) is raised with
		// the cursor checked out, which kills it; a change stream's carries its labels.
		code, ok := data.Lookup("errorCode").AsInt64OK()
		if !ok {
			code = int64(mongoerr.InternalError)
		}
		m.Unpin(c, true)
		err := error(mongoerr.New(mongoerr.Code(code), "Hit the 'failGetMoreAfterCursorCheckout' failpoint"))
		if _, ok := c.Source.(*csSource); ok {
			err = changestream.ResumableError(err)
		}
		return nil, err
	}
	if src, ok := c.Source.(*csSource); ok {
		// A change stream's getMore: maxTimeMS is its await time.
		var n int64
		if hasBatch {
			n = batch
		}
		b, err := csGetMore(ctx, c, src, count, n)
		if err == nil && c.Killed() {
			err = mongoerr.Newf(mongoerr.CursorKilled, "cursor id %d was killed", id)
		}
		if err != nil {
			m.Unpin(c, true)
			return nil, err
		}
		done, pbrt := src.exhausted(), src.postBatchResumeToken()
		m.Unpin(c, done)
		env.State.Counters.DocsReturned.Add(int64(b.Len()))
		if done {
			id = 0
		}
		return cursor.AppendReply(b, id, c.NS, cursor.ReplyOptions{BatchBeforeID: true, PostBatchResumeToken: pbrt}), nil
	}
	if cmd.Lookup("maxTimeMS").Type != 0 {
		// Only change stream router cursors are tailable (ClusterFind::runGetMore).
		m.Unpin(c, false)
		return nil, mongoerr.New(mongoerr.BadValue, "maxTimeMS can only be used with getMore for tailable, awaitData cursors")
	}
	src, _ := c.Source.(routerSource)
	if src != nil {
		src.setBatchSize(0)
		if hasBatch && batch > 0 {
			src.setBatchSize(batch)
		}
	}
	st, _ := c.Extra.(*routerCursorState)
	var cancel context.CancelFunc = func() {}
	start := time.Now()
	if st != nil && st.leftover > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, st.leftover, mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit"))
	}
	b, exhausted, err := cursor.FillBatch(ctx, c, count)
	if err != nil && errors.Is(context.Cause(ctx), mongoerr.New(mongoerr.MaxTimeMSExpired, "")) {
		err = context.Cause(ctx)
	}
	cancel()
	if st != nil && st.leftover > 0 {
		st.leftover = max(st.leftover-time.Since(start), time.Millisecond)
	}
	if err == nil && c.Killed() {
		err = mongoerr.Newf(mongoerr.CursorKilled, "cursor id %d was killed", id)
	}
	if err != nil {
		m.Unpin(c, true)
		return nil, err
	}
	done := exhausted || src != nil && src.exhausted()
	m.Unpin(c, done)
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	if done {
		id = 0
	}
	return cursor.AppendReply(b, id, c.NS, cursor.ReplyOptions{BatchBeforeID: true}), nil
}

// runKillCursors kills router cursors of the namespace; closing one kills its shards'
// cursors (mergeSource.Close).
func runKillCursors(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "killCursors"
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	cv := cmd.Lookup("cursors")
	if cv.Type == 0 {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'killCursors.cursors' is missing but a required field")
	}
	arr, ok := cv.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'", bsonutil.TypeName(cv.Type))
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid cursors array: %v", err)
	}
	m := env.State.Cursors()
	var ids, wrongNS []int64
	for i, v := range vals {
		if v.Type != bsoncore.TypeInt64 {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.cursors.%d' is the wrong type '%s', expected type 'long'", name, i, bsonutil.TypeName(v.Type))
		}
		if c, ok := m.Get(v.Int64()); ok && c.NS != ns {
			wrongNS = append(wrongNS, v.Int64())
			continue
		}
		ids = append(ids, v.Int64())
	}
	if err := service.CheckKillCursors(env, cmd, ns, ids); err != nil {
		return nil, err
	}
	killed, notFound, alive, unknown := m.Kill(ids)
	notFound = append(notFound, wrongNS...)
	b := bsoncore.NewDocumentBuilder()
	for _, f := range []struct {
		k   string
		ids []int64
	}{{"cursorsKilled", killed}, {"cursorsNotFound", notFound}, {"cursorsAlive", alive}, {"cursorsUnknown", unknown}} {
		ab := bsoncore.NewArrayBuilder()
		for _, id := range f.ids {
			ab.AppendInt64(id)
		}
		b.AppendArray(f.k, ab.Build())
	}
	return b.Build(), nil
}
