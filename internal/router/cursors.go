package router

// Router cursors (MongoDB's ClusterCursorManager over AsyncResultsMerger; spec sharding.md
// "Routing"): a router cursor is a cursor in the server's cursor manager (idle timeout
// cursorTimeoutMillis, killCursors, CursorNotFound for unknown ids, owned by the session
// that opened it) whose Source is a mergeSource pulling from the shards' cursors. Each shard
// cursor is opened and continued in its own driver session, so the shard's getMore session
// check passes whatever session the client used; closing the router cursor kills the shard
// cursors and ends those sessions.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// shardKillTimeout bounds the killCursors a closing router cursor sends each shard.
const shardKillTimeout = 2 * time.Second

// remote is one shard's client and the driver session the router's requests for one router
// cursor (or one scatter-gather command) run in.
type remote struct {
	shard string
	rs    *client.ReplicaSet
	sess  *mongo.Session
	// host, when set, is the member the request's read preference rp selected (readpref.go):
	// every request of the remote runs there, sess being a session of that host's client.
	host  string
	rp    *readpref.ReadPref
	hosts *client.Pool
}

func newRemote(ctx context.Context, c *Cluster, shard string) (*remote, error) {
	rs, err := c.Shard(ctx, shard)
	if err != nil {
		return nil, err
	}
	r := &remote{shard: shard, rs: rs, hosts: c.hosts}
	if readPrefFrom(ctx) != nil {
		if err := r.pin(ctx, c); err != nil {
			return nil, err
		}
		return r, nil
	}
	sess, err := rs.Client().StartSession()
	if err != nil {
		return nil, fmt.Errorf("start a session on shard %s: %w", shard, err)
	}
	r.sess = sess
	return r, nil
}

// run runs cmd on the shard's primary (or the pinned host) in the remote's session; a
// failure a shard answered is returned as a mongoerr (see shardError).
func (r *remote) run(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	// Through ReplicaSet.RunCommand, as every internal request (the driver takes the session
	// from the context), or the pool's client of the pinned host.
	var raw bson.Raw
	var err error
	t := txnFrom(ctx)
	if t != nil {
		cmd = t.attach(r.shard, cmd)
	} else {
		cmd = gossipReadTime(ctx, cmd)
	}
	if r.host != "" {
		raw, err = r.hosts.RunCommand(mongo.NewSessionContext(ctx, r.sess), r.host, db, bson.Raw(cmd), r.rp)
	} else {
		raw, err = r.rs.RunCommand(mongo.NewSessionContext(ctx, r.sess), db, bson.Raw(cmd), nil)
	}
	if err != nil {
		return nil, shardError(ctx, r.shard, err)
	}
	if t != nil {
		t.observe(r.shard, bsoncore.Document(raw))
	}
	return bsoncore.Document(raw), nil
}

func (r *remote) end() {
	if r.sess != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shardKillTimeout)
		r.sess.EndSession(ctx)
		cancel()
		r.sess = nil
	}
}

// replyFields are the fields of a shard's error reply the router answers with itself.
var replyFields = map[string]bool{"ok": true, "errmsg": true, "code": true, "codeName": true,
	"errorLabels": true, "$clusterTime": true, "operationTime": true, "$configTime": true, "$topologyTime": true}

// shardError turns a shard's error reply (a driver CommandError) into the mongoerr the
// router answers with: the shard's code and message, and its extra fields (StaleConfig's ns,
// vReceived, vWanted...) as Info, which is also what Cluster.NoteStale reads. A request that
// got no reply is HostUnreachable or FailedToSatisfyReadPreference (transportError).
func shardError(ctx context.Context, shard string, err error) error {
	if te := transportError(ctx, shard, err); te != nil {
		return te
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		e := mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
		if len(ce.Raw) > 0 {
			if info := filterDoc(bsoncore.Document(ce.Raw), func(k string) bool { return !replyFields[k] }); len(info) > 5 {
				e = e.WithInfo(info)
			}
		}
		return e.WithLabels(ce.Labels...)
	}
	if me, ok := mongoerr.As(err); ok {
		return me
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	return mongoerr.Newf(mongoerr.HostUnreachable, "error communicating with shard %s: %v", shard, err)
}

// filterDoc copies the elements of d whose key keep accepts.
func filterDoc(d bsoncore.Document, keep func(string) bool) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(nil)
	els, _ := d.Elements()
	for _, el := range els {
		if keep(el.Key()) {
			out = append(out, el...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// shardCursor is one shard's cursor inside a router cursor.
type shardCursor struct {
	*remote
	db, coll string // getMore's database and collection (from the cursor's ns)
	id       int64  // 0 once the shard exhausted it
	buf      []bsoncore.Document
	keys     [][]byte // sort keys of buf (sorted merges only)
	// pbrt is the postBatchResumeToken of the shard's first reply (change streams; nil
	// otherwise).
	pbrt bsoncore.Document
}

// parseCursorReply reads {cursor: {id, ns, firstBatch|nextBatch}}.
func parseCursorReply(reply bsoncore.Document) (id int64, ns string, docs []bsoncore.Document, err error) {
	cur, ok := reply.Lookup("cursor").DocumentOK()
	if !ok {
		return 0, "", nil, mongoerr.New(mongoerr.FailedToParse, "shard reply has no cursor document")
	}
	id, _ = cur.Lookup("id").AsInt64OK()
	ns, _ = cur.Lookup("ns").StringValueOK()
	batch, ok := cur.Lookup("firstBatch").ArrayOK()
	if !ok {
		batch, _ = cur.Lookup("nextBatch").ArrayOK()
	}
	vals, err := batch.Values()
	if err != nil {
		return 0, "", nil, mongoerr.Newf(mongoerr.FailedToParse, "shard reply batch: %v", err)
	}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return 0, "", nil, mongoerr.New(mongoerr.FailedToParse, "shard reply batch holds a non-document")
		}
		docs = append(docs, d)
	}
	return id, ns, docs, nil
}

// shardPBRT reads the postBatchResumeToken of a shard's cursor reply (nil without one).
func shardPBRT(reply bsoncore.Document) bsoncore.Document {
	cur, _ := reply.Lookup("cursor").DocumentOK()
	d, _ := cur.Lookup("postBatchResumeToken").DocumentOK()
	return d
}

// fetch runs one getMore on the shard's cursor.
func (s *shardCursor) fetch(ctx context.Context, batchSize int64) error {
	b := bsoncore.NewDocumentBuilder().AppendInt64("getMore", s.id).AppendString("collection", s.coll)
	if batchSize > 0 {
		b.AppendInt64("batchSize", batchSize)
	}
	reply, err := s.run(noDeadline{ctx}, s.db, b.Build())
	if err != nil {
		return err
	}
	id, _, docs, err := parseCursorReply(reply)
	if err != nil {
		return err
	}
	s.id, s.buf = id, append(s.buf, docs...)
	return nil
}

// noDeadline hides its context's deadline but not its cancellation: the driver turns a
// deadline into maxTimeMS, which a shard refuses on the getMore of a non-awaitData cursor;
// the router's own deadline still interrupts the getMore through Done.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// kill kills the shard's cursor if still open (best effort: the shard's own idle timeout
// reaps it otherwise) and ends the session.
func (s *shardCursor) kill() {
	if s.id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), shardKillTimeout)
		arr := bsoncore.NewArrayBuilder().AppendInt64(s.id).Build()
		_, _ = s.run(ctx, s.db, bsoncore.NewDocumentBuilder().AppendString("killCursors", s.coll).AppendArray("cursors", arr).Build())
		cancel()
		s.id = 0
	}
	s.end()
}

// splitNS cuts "db.coll" for getMore.
func splitNS(ns string) (db, coll string) {
	db, coll, _ = cut(ns)
	return db, coll
}

// routerCursorKey is the session a command runs in as the cursor manager stores it (lsid's
// id then uid), nil without one.
func routerCursorKey(cmd bsoncore.Document) []byte {
	v, err := cmd.LookupErr("lsid")
	if err != nil {
		return nil
	}
	k, err := service.ParseLsid(v)
	if err != nil {
		return nil
	}
	return append(append(make([]byte, 0, len(k.ID)+len(k.UID)), k.ID[:]...), k.UID[:]...)
}

// checkRouterCursorSession refuses a getMore from another session than the cursor's, with
// mongod's and mongos's codes (getmore_cmd's validateLSID).
func checkRouterCursorSession(cmd bsoncore.Document, id int64, c *cursor.Cursor) error {
	op := routerCursorKey(cmd)
	switch {
	case op != nil && c.LSID == nil:
		return mongoerr.Newf(mongoerr.Location50736,
			"Cannot run getMore on cursor %d, which was not created in a session, in session %x", id, op[:16])
	case op == nil && c.LSID != nil:
		return mongoerr.Newf(mongoerr.Location50737,
			"Cannot run getMore on cursor %d, which was created in session %x, without an lsid", id, c.LSID[:16])
	case op != nil && string(op) != string(c.LSID):
		return mongoerr.Newf(mongoerr.Location50738,
			"Cannot run getMore on cursor %d, which was created in session %x, in session %x", id, c.LSID[:16], op[:16])
	}
	return nil
}

// firstBatchReply fills the first batch of src (count documents; cursor.DefaultFirstBatch
// when batchSize is absent) and, when documents remain, registers a router cursor for ns
// owned by cmd's session. The reply is {cursor: {firstBatch, id, ns}}.
// routerCursorState is a router cursor's own state (cursor.Cursor.Extra).
type routerCursorState struct {
	// leftover is what remains of the opening command's maxTimeMS (0: none): the getMores
	// share it, as mongos's getLeftoverMaxTimeMicros.
	leftover time.Duration
}

// routerSource is a router cursor's source: the merge itself or a pipeline over it.
type routerSource interface {
	cursor.Source
	// exhausted reports that Next has nothing more to return.
	exhausted() bool
	// setBatchSize sets the batchSize of the shards' getMores (0: their default).
	setBatchSize(n int64)
}

func firstBatchReply(ctx context.Context, env *service.Env, cmd bsoncore.Document, ns string, src routerSource,
	count int64, singleBatch bool, beforeID bool) (bsoncore.Document, error) {
	c := &cursor.Cursor{NS: ns, Source: src, LSID: routerCursorKey(cmd), Command: append(bsoncore.Document(nil), cmd...),
		Users: env.Auth.Users()}
	b, exhausted, err := cursor.FillBatch(ctx, c, count)
	if err != nil {
		src.Close()
		return nil, err
	}
	var id int64
	if exhausted || singleBatch || src.exhausted() {
		src.Close()
	} else {
		st := &routerCursorState{}
		if dl, ok := ctx.Deadline(); ok && cmd.Lookup("maxTimeMS").Type != 0 {
			st.leftover = max(time.Until(dl), time.Millisecond)
		}
		c.Extra = st
		id = env.State.Cursors().Register(c)
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, ns, cursor.ReplyOptions{First: true, BatchBeforeID: beforeID}), nil
}

// cursorReapInterval is how often idle router cursors are reaped (mongos's
// clientCursorMonitorFrequencySecs, 4 s).
const cursorReapInterval = 4 * time.Second

// startCursorReaper reaps the server's idle router cursors (killing their shard cursors)
// until c closes; closing c also kills every router cursor, so no shard cursor outlives the
// router's connections.
func startCursorReaper(st *service.State, c *Cluster) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Cursors().Run(ctx, cursorReapInterval)
	}()
	c.mu.Lock()
	c.onClose = append(c.onClose, func() {
		cancel()
		<-done
		st.Cursors().Close()
	})
	c.mu.Unlock()
}
