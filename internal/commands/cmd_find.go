package commands

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

func addFind(r *service.Registry) {
	add(r, &service.Command{
		Name:        "find",
		Auth:        service.AuthFind,
		Handler:     runFind,
		Help:        "query for documents",
		SecondaryOk: true,
		Counter:     "query",
	})
}

func runFind(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db := env.State.DB
	if db == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "server has no storage")
	}
	// The request (filter, sort, projection, bounds) outlives this call in an open cursor,
	// but cmd aliases the connection's read buffer, which the next message overwrites: the
	// cursor must own its bytes.
	cmd = bytes.Clone(cmd)
	req, o, err := findParse(env, cmd)
	if err != nil {
		return nil, err
	}
	if _, _, isView, err := viewLookup(ctx, env, o.ns); err != nil {
		return nil, err
	} else if isView {
		// A find on a view runs as the view's pipeline plus the find's stages.
		r, err := viewReadRequest(env, "find", cmd)
		if err != nil {
			return nil, err
		}
		return aggCursorReply(ctx, env, r)
	}
	op := db.NewOp(ctx)
	defer op.Close()
	rd, release, err := op.OpenRead(ctx, o.ns, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		return nil, err
	}
	meta := rd.Meta()
	if o.tailable && meta != nil && !meta.Capped {
		release()
		return nil, mongoerr.Newf(mongoerr.BadValue, "error processing query: ns=%s tailable cursor requested on non capped collection", o.ns)
	}
	// The cursor's own RecoveryUnit outlives this command; op's holds only the locks.
	ru, ruRelease := db.CursorUnit(ctx)
	// readConcern's read source (repl/concern); every getMore re-resolves its timestamp.
	rs := findReadSource(ctx, o.ns)
	if err := applyReadSource(rs, ru); err != nil {
		release()
		ruRelease()
		return nil, err
	}
	ex, err := rd.Plan(ctx, ru, req)
	if err != nil {
		release()
		ruRelease()
		return nil, err
	}
	src := &findSource{db: db, ns: o.ns, ru: ru, ruRelease: ruRelease, ex: ex, meta: meta, rs: rs}
	c := &cursor.Cursor{NS: o.ns, Source: src, Tailable: o.tailable, AwaitData: o.awaitData,
		NoTimeout: o.noCursorTimeout, Command: append(bsoncore.Document(nil), cmd...)}
	n := int64(cursor.DefaultFirstBatch)
	if o.hasBatchSize {
		n = o.batchSize
	}
	if req.Limit > 0 && req.Limit < n {
		n = req.Limit
	}
	b, exhausted, err := cursor.FillBatch(ctx, c, n)
	if err != nil {
		release()
		src.Close()
		return nil, err
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	var id int64
	done := exhausted || o.singleBatch || (req.Limit > 0 && c.NReturned >= req.Limit) || meta == nil
	if o.tailable && meta != nil && !o.singleBatch {
		// A tailable cursor stays open at the end of the data (unless the collection is empty
		// and nothing was returned: MongoDB keeps it open too, and so do we).
		done = false
	}
	if done {
		release()
		src.Close()
	} else {
		src.SaveState()
		release()
		id = registerCursor(ctx, env, c)
	}
	return cursor.AppendReply(b, id, o.ns, cursor.ReplyOptions{First: true, BatchBeforeID: true}), nil
}

func findExplain(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	req, o, err := findParse(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	return explainPlan(ctx, env, o.ns, req, v)
}
