package commands

// Cursor plumbing shared by the cursor-returning commands (QUERY engineer): the Source that runs a query plan across getMores, the first-batch helper
// for other cursor commands (listCollections, listIndexes), and what awaitData getMores wait
// on: the cursor manager's capped-collection insert notifier, or on a replica-set member the oplog writer's
// visibility signal (spec/replication.md "Oplog Fetching": the fetcher's long poll must end
// as soon as an entry can be read, not at maxTimeMS).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/query/plan"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/storage"
	"humongo/internal/wire"
)

// cursorFirstBatch answers a cursor-returning command whose results are src: it fills the
// first batch (batchSize documents, or 101 when batchSize < 0, always within 16 MiB),
// registers a cursor for the rest when there is any, and returns
// {cursor: {id, ns, firstBatch}} (the list commands' field order). For listCollections and
// listIndexes: cursorFirstBatch(ctx, env, db+".$cmd.listCollections", cursor.SliceSource(docs), bs).
func cursorFirstBatch(ctx context.Context, env *service.Env, ns string, src cursor.Source, batchSize int64) (bsoncore.Document, error) {
	if batchSize < 0 {
		batchSize = cursor.DefaultFirstBatch
	}
	c := &cursor.Cursor{NS: ns, Source: src, Command: append(bsoncore.Document(nil), opCmd(env)...)}
	b, exhausted, err := cursor.FillBatch(ctx, c, batchSize)
	if err != nil {
		src.Close()
		return nil, err
	}
	var id int64
	if exhausted {
		src.Close()
	} else {
		src.SaveState()
		id = registerCursor(ctx, env, c)
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, ns, cursor.ReplyOptions{First: true}), nil
}

// opCmd is the command being run, for the cursor's originating command.
func opCmd(env *service.Env) bsoncore.Document {
	if env.Op != nil {
		return env.Op.Cmd
	}
	return nil
}

// findSource runs a query plan as a cursor Source. It owns a RecoveryUnit that lives as long
// as the cursor; between commands the snapshot is abandoned and no locks are held. A getMore
// re-locks the collection (findRelock) before RestoreState.
type findSource struct {
	db *operation.DB
	ns string
	ru *storage.RecoveryUnit
	// ruRelease releases ru when the cursor closes (nothing for a transaction's unit).
	ruRelease func()
	ex        *plan.Executor
	limit     int64 // remaining documents for a negative-limit/ntoreturn style cap (0 = none)
	meta      *catalog.CollectionMeta
	counts    *service.Counters
	// rs is the read concern's read source; each getMore re-resolves its timestamp
	// (rcReapply) before RestoreState opens a new snapshot.
	rs operation.ReadSource
}

// findReadSource is the read source of a find on ns: the read concern's, except that on a
// secondary, collections the applier does not write in batches (unreplicated ones other than
// the oplog) are read without a timestamp, as MongoDB's shouldReadAtLastApplied decides.
func findReadSource(ctx context.Context, ns string) operation.ReadSource {
	rs := operation.ReadSourceOf(ctx)
	if rs.Kind == operation.ReadLastApplied && !opobserver.IsReplicatedNS(ns) && ns != oplog.NS {
		return operation.ReadSource{IgnorePrepare: rs.IgnorePrepare}
	}
	return rs
}

// applyReadSource points a cursor's unit at its read source's timestamp and prepare conflict
// behaviour (before its first read).
func applyReadSource(r operation.ReadSource, ru *storage.RecoveryUnit) error {
	return r.Apply(ru)
}

func (s *findSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	_, doc, ok, err := s.ex.Next(ctx)
	if err != nil || !ok {
		return nil, ok, err
	}
	if len(doc) > wire.MaxBSONInternalSize { // a projection can build one (aggResultTooLarge)
		return nil, false, aggResultTooLarge(doc)
	}
	return doc, true, nil
}

func (s *findSource) SaveState() {
	s.ex.Save()
	s.ru.AbandonSnapshot()
}

func (s *findSource) RestoreState(context.Context) error { return s.ex.Restore(s.meta) }

func (s *findSource) Close() {
	s.ex.Close()
	s.ruRelease()
}

// oplogVisibility is the oplog writer's wake-up for readers (oplog.Writer.VisibilityChanged):
// closed once new entries may be readable, which on a primary is when the all-durable point
// passes them (no holes) and on a secondary when lastApplied moves.
type oplogVisibility interface {
	VisibilityChanged() <-chan struct{}
}

// findWaitChan returns a channel closed at the next change an awaitData cursor on ns waits
// for. Take it before reading, so a change between the read and the wait is not missed. On a
// replica-set member every write to a replicated collection is also an oplog entry, made
// readable (on a secondary: at lastApplied) no later than the oplog writer's signal, so
// tailable cursors on those collections wait on the oplog's signal too.
func findWaitChan(st *service.State, ns string) <-chan struct{} {
	if st.DB != nil && (ns == oplog.NS || opobserver.IsReplicatedNS(ns)) {
		if v, ok := st.DB.Observer().(oplogVisibility); ok {
			return v.VisibilityChanged()
		}
	}
	return st.Cursors().WaitInsert(ns)
}

// findCursorNotFound is getMore's error for an unknown id.
func findCursorNotFound(id int64) error { return cursor.NotFound(id) }

var _ = mongoerr.CursorNotFound
