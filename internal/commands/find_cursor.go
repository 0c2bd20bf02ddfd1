package commands

// Cursor plumbing shared by the cursor-returning commands (QUERY engineer): the per-server
// cursor manager, the Source that runs a query plan across getMores, the first-batch helper
// for other cursor commands (listCollections, listIndexes), and the capped-collection insert
// notifier awaitData getMores wait on.

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
	"humongo/internal/storage"
)

// findManagers holds one cursor manager per server State (env.go is the lead's; a State field
// would replace this map).
var findManagers sync.Map // *State → *cursor.Manager

// cursorManager returns the server's cursor manager, creating it on first use. Its idle
// timeout follows the cursorTimeoutMillis parameter and it keeps serverStatus
// metrics.cursor up to date.
func cursorManager(st *State) *cursor.Manager {
	if m, ok := findManagers.Load(st); ok {
		return m.(*cursor.Manager)
	}
	c := &st.Counters
	m := cursor.NewManager(cursor.Options{
		Timeout: func() time.Duration {
			if st.Params == nil {
				return 10 * time.Minute
			}
			return time.Duration(st.Params.Int("cursorTimeoutMillis")) * time.Millisecond
		},
		Metrics: cursor.Metrics{
			Open: &c.CursorsOpenTotal, OpenNoTimeout: &c.CursorsOpenNoTimeout,
			OpenPinned: &c.CursorsOpenPinned, TimedOut: &c.CursorsTimedOut, TotalOpened: &c.CursorsTotalOpened,
		},
	})
	actual, _ := findManagers.LoadOrStore(st, m)
	return actual.(*cursor.Manager)
}

// cursorFirstBatch answers a cursor-returning command whose results are src: it fills the
// first batch (batchSize documents, or 101 when batchSize < 0, always within 16 MiB),
// registers a cursor for the rest when there is any, and returns
// {cursor: {id, ns, firstBatch}} (the list commands' field order). For listCollections and
// listIndexes: cursorFirstBatch(ctx, env, db+".$cmd.listCollections", cursor.SliceSource(docs), bs).
func cursorFirstBatch(ctx context.Context, env *Env, ns string, src cursor.Source, batchSize int64) (bsoncore.Document, error) {
	if batchSize < 0 {
		batchSize = cursor.DefaultFirstBatch
	}
	c := &cursor.Cursor{NS: ns, Source: src, Command: append(bsoncore.Document(nil), env.opCmd()...)}
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
		id = cursorManager(env.State).Register(c)
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, ns, cursor.ReplyOptions{First: true}), nil
}

// opCmd is the command being run, for the cursor's originating command.
func (env *Env) opCmd() bsoncore.Document {
	if env.Op != nil {
		return env.Op.Cmd
	}
	return nil
}

// findSource runs a query plan as a cursor Source. It owns a RecoveryUnit that lives as long
// as the cursor; between commands the snapshot is abandoned and no locks are held. A getMore
// re-locks the collection (findRelock) before RestoreState.
type findSource struct {
	db     *DB
	ns     string
	ru     *storage.RecoveryUnit
	ex     *plan.Executor
	limit  int64 // remaining documents for a negative-limit/ntoreturn style cap (0 = none)
	meta   *catalog.CollectionMeta
	counts *Counters
}

func (s *findSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	_, doc, ok, err := s.ex.Next(ctx)
	if err != nil || !ok {
		return nil, ok, err
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
	s.ru.Close()
}

// findNotifier wakes awaitData getMores when documents are inserted into a capped
// collection. The write path calls findNotifyInsert after an insert commits.
type findNotifier struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

var findNotifiers sync.Map // *State → *findNotifier

func findNotifierFor(st *State) *findNotifier {
	n, _ := findNotifiers.LoadOrStore(st, &findNotifier{ch: map[string]chan struct{}{}})
	return n.(*findNotifier)
}

// wait returns a channel closed at the next insert into ns.
func (n *findNotifier) wait(ns string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.ch[ns]
	if !ok {
		c = make(chan struct{})
		n.ch[ns] = c
	}
	return c
}

// findNotifyInsert wakes the awaitData cursors of ns (call it from an OnCommit hook of inserts
// into capped collections; cheap when nobody waits).
func findNotifyInsert(st *State, ns string) {
	n := findNotifierFor(st)
	n.mu.Lock()
	if c, ok := n.ch[ns]; ok {
		close(c)
		delete(n.ch, ns)
	}
	n.mu.Unlock()
}

// findAwait blocks until an insert into ns, the await deadline or ctx's end.
func findAwait(ctx context.Context, st *State, ns string, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-findNotifierFor(st).wait(ns):
	case <-t.C:
	case <-ctx.Done():
	}
}

// findCursorNotFound is getMore's error for an unknown id.
func findCursorNotFound(id int64) error { return cursor.NotFound(id) }

var _ = mongoerr.CursorNotFound
