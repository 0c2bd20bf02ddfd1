package migration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardkey"
)

// The recipient's states (MigrationDestinationManager::State, as _recvChunkStatus names them).
const (
	StateReady       = "ready"
	StateClone       = "clone"
	StateCatchup     = "catchup"
	StateSteady      = "steady"
	StateCommitStart = "commitStart"
	StateDone        = "done"
	StateFail        = "fail"
	StateAbort       = "abort"
)

// RecvChunkStart is _recvChunkStart's content.
type RecvChunkStart struct {
	NS                   string
	MigrationID, LSID    catalog.UUID
	TxnNumber            int64
	SessionID            string
	CollectionUUID       catalog.UUID
	From, FromShard, To  string
	Min, Max, KeyPattern bsoncore.Document
	MaxChunkSizeBytes    int64
	WaitForDelete        bool
	// SecondaryThrottle makes the recipient wait after each cloned batch for ThrottleWC
	// (nil: {w: 2, wtimeout: 60000}, w: 1 on a one-member set), MongoDB's
	// MigrationSecondaryThrottleOptions.
	SecondaryThrottle bool
	ThrottleWC        bsoncore.Document
}

// ParseRecvChunkStart reads a _recvChunkStart command.
func ParseRecvChunkStart(cmd bsoncore.Document) (RecvChunkStart, error) {
	const name = "_recvChunkStart"
	var r RecvChunkStart
	var ok bool
	if r.NS, ok = cmd.Index(0).Value().StringValueOK(); !ok || !strings.Contains(r.NS, ".") {
		return r, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	str := func(f string) (string, error) {
		v, err := cmd.LookupErr(f)
		if err != nil {
			return "", missingField(name, f)
		}
		s, ok := v.StringValueOK()
		if !ok {
			return "", wrongType(name, f, v.Type, "string")
		}
		return s, nil
	}
	doc := func(f string) (bsoncore.Document, error) {
		v, err := cmd.LookupErr(f)
		if err != nil {
			return nil, missingField(name, f)
		}
		d, ok := v.DocumentOK()
		if !ok {
			return nil, wrongType(name, f, v.Type, "object")
		}
		return d, nil
	}
	var err error
	if r.SessionID, err = str("sessionId"); err != nil {
		return r, err
	}
	if r.From, err = str("from"); err != nil {
		return r, err
	}
	if r.FromShard, err = str("fromShardName"); err != nil {
		return r, err
	}
	if r.To, err = str("toShardName"); err != nil {
		return r, err
	}
	if r.Min, err = doc("min"); err != nil {
		return r, err
	}
	if r.Max, err = doc("max"); err != nil {
		return r, err
	}
	if r.KeyPattern, err = doc("shardKeyPattern"); err != nil {
		return r, err
	}
	if r.MigrationID, ok = uuidField(cmd, "migrationId"); !ok {
		return r, missingField(name, "migrationId")
	}
	// The command's buffer is reused for the connection's next message: keep copies.
	r.Min, r.Max, r.KeyPattern = cloneDoc(r.Min), cloneDoc(r.Max), cloneDoc(r.KeyPattern)
	r.LSID, _ = uuidField(cmd, "lsid", "id")
	r.TxnNumber, _ = cmd.Lookup("txnNumber").AsInt64OK()
	r.CollectionUUID, _ = uuidField(cmd, "collectionUUID")
	r.MaxChunkSizeBytes, _ = cmd.Lookup("maxChunkSizeBytes").AsInt64OK()
	r.WaitForDelete, _ = cmd.Lookup("waitForDelete").BooleanOK()
	r.SecondaryThrottle, _ = cmd.Lookup("secondaryThrottle").BooleanOK()
	if wc, ok := cmd.Lookup("writeConcern").DocumentOK(); ok && r.SecondaryThrottle {
		r.ThrottleWC = cloneDoc(wc)
	}
	return r, nil
}

// Destination is the recipient's MigrationDestinationManager for one session.
type Destination struct {
	req   RecvChunkStart
	rng   Range
	stop  context.CancelFunc
	done  chan struct{} // closed when run returns
	wake  chan struct{} // closed on the first _recvChunkCommit
	wake1 sync.Once

	mu                        sync.Mutex
	state                     string
	errmsg                    string
	cloned, clonedBytes, mods int64
	sessionEntries            int64         // session migration entries written
	changed                   chan struct{} // closed and replaced on each state change
}

func (d *Destination) setState(st string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == StateFail || d.state == StateAbort || d.state == StateDone {
		return
	}
	d.state = st
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *Destination) fail(err error) {
	d.mu.Lock()
	d.errmsg = err.Error()
	d.mu.Unlock()
	d.setState(StateFail)
}

func (d *Destination) snapshot() (state, errmsg string, changed chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state, d.errmsg, d.changed
}

// StartReceive is _recvChunkStart: it registers the incoming migration and starts the
// recipient's session in a goroutine of the service.
func (s *Service) StartReceive(ctx context.Context, req RecvChunkStart) error {
	p, err := shardkey.Parse(req.KeyPattern)
	if err != nil {
		return err
	}
	if req.To != s.Self() {
		return mongoerr.Newf(mongoerr.IllegalOperation, "_recvChunkStart for shard %s was sent to shard %s", req.To, s.Self())
	}
	release, err := s.Registry.RegisterReceive(req.NS, fmt.Sprintf("[%s, %s)", bsonutil.FormatDoc(req.Min), bsonutil.FormatDoc(req.Max)), req.FromShard)
	if err != nil {
		return err
	}
	d := &Destination{req: req, rng: Range{Pattern: p, Min: req.Min, Max: req.Max}, state: StateReady,
		done: make(chan struct{}), wake: make(chan struct{}), changed: make(chan struct{})}
	s.mu.Lock()
	s.dest = d
	s.mu.Unlock()
	err = s.spawn(func(sctx context.Context) {
		defer release()
		defer close(d.done)
		rctx, cancel := context.WithCancel(sctx)
		d.mu.Lock()
		d.stop = cancel
		d.mu.Unlock()
		defer cancel()
		if err := s.receive(rctx, d); err != nil {
			if rctx.Err() != nil {
				d.setState(StateAbort)
			} else {
				d.fail(err)
			}
			s.Log.Info("Incoming migration failed", "ns", req.NS, "sessionId", req.SessionID, "error", err.Error())
		}
	})
	if err != nil {
		release()
	}
	return err
}

// receive runs the recipient's steps until done (or an error).
func (s *Service) receive(ctx context.Context, d *Destination) (err error) {
	req := d.req
	timing := s.newMoveTiming("to", req.NS, req.FromShard, s.Self(), req.Min, req.Max, 5)
	defer func() { timing.log(ctx, err) }()
	if err := s.ensureCollection(ctx, req); err != nil {
		return fmt.Errorf("create the collection from the donor's: %w", err)
	}
	wait := 10 * time.Second // receiveChunkWaitForRangeDeleterTimeoutMS's default
	if s.RangeDeleterWait != nil {
		wait = s.RangeDeleterWait()
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	err = s.waitOverlappingRangeDeletions(wctx, req)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return mongoerr.New(mongoerr.ExceededTimeLimit, "Exceeded deadline waiting for overlapping range deletion to finish")
		}
		return err
	}
	timing.step() // 1: the collection and its indexes exist, overlapping deletions done
	task := RangeDeletionTask{ID: req.MigrationID, NS: req.NS, CollectionUUID: req.CollectionUUID, Donor: req.FromShard,
		Min: req.Min, Max: req.Max, Pending: true, WhenToClean: "now", KeyPattern: req.KeyPattern}
	if err := (nodeSteps{s}).InsertRangeDeletion(ctx, task); err != nil && !mongoerr.Is(err, mongoerr.DuplicateKey) {
		return fmt.Errorf("persist the recipient's range deletion task: %w", err)
	}
	s.Stats.RecipientStarted.Add(1)
	timing.step() // 2: the range deletion task persisted (pending)
	// The session history is fetched from the start of the clone until the commit
	// (sessions.go); the goroutine is joined before receive returns.
	sctx, stopSessions := context.WithCancel(ctx)
	sm := s.startSessionMigration(sctx, d)
	defer func() {
		stopSessions()
		<-sm.done
	}()
	d.setState(StateClone)
	clone := bsoncore.NewDocumentBuilder().AppendString("_migrateClone", req.NS).AppendString("sessionId", req.SessionID).Build()
	for {
		reply, err := s.Cluster.RunOnShard(ctx, req.FromShard, "admin", clone)
		if err != nil {
			return fmt.Errorf("_migrateClone failed: %w", err)
		}
		arr, _ := reply.Lookup("objects").ArrayOK()
		vals, _ := arr.Values()
		if len(vals) == 0 {
			break
		}
		docs := make([]bsoncore.Document, 0, len(vals))
		var n int64
		for _, v := range vals {
			doc, _ := v.DocumentOK()
			docs = append(docs, doc)
			n += int64(len(doc))
		}
		if err := s.Local.Apply(ctx, req.NS, d.rng, nil, docs); err != nil {
			return fmt.Errorf("insert cloned documents: %w", err)
		}
		if req.SecondaryThrottle && s.WaitWriteConcern != nil {
			// As MongoDB's recipient: a timeout is only noted, the clone goes on.
			if err := s.WaitWriteConcern(ctx, req.ThrottleWC); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.Log.Warn("secondaryThrottle on, but doc insert timed out; continuing", "ns", req.NS, "error", err.Error())
			}
		}
		s.Stats.DocsClonedOnRecipient.Add(int64(len(docs)))
		s.Stats.BytesClonedOnRecip.Add(n)
		d.mu.Lock()
		d.cloned += int64(len(docs))
		d.clonedBytes += n
		d.mu.Unlock()
	}
	timing.step() // 3: cloned
	d.setState(StateCatchup)
	for {
		n, err := s.transferMods(ctx, d)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	// Before reporting steady, the cloned data is majority-committed here (MongoDB's
	// "Waiting for replication to catch up before entering critical section"): the donor's
	// critical section then only waits for the last changes.
	if err := s.waitMajority(ctx); err != nil {
		return fmt.Errorf("wait for the cloned documents to replicate: %w", err)
	}
	timing.step() // 4: caught up and majority-committed
	d.setState(StateSteady)
	commit := func() error {
		d.setState(StateCommitStart)
		for {
			n, err := s.transferMods(ctx, d)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
		// The session history drains too (the donor's writes are blocked).
		select {
		case <-sm.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if sm.err != nil {
			return fmt.Errorf("session migration: %w", sm.err)
		}
		// _flushPendingWrites: the commit is acknowledged only once every document and
		// session entry the recipient applied is majority-committed. Otherwise a failover
		// of the recipient after the donor's commit could roll back writes the donor
		// acknowledged (the nemesis test lost an acknowledged $inc that way).
		if err := s.waitMajority(ctx); err != nil {
			return fmt.Errorf("wait for the migrated changes to replicate: %w", err)
		}
		timing.step() // 5: the last changes and the session history applied, majority-committed
		d.setState(StateDone)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.wake:
			return commit()
		case <-sm.done:
			if sm.err != nil {
				return fmt.Errorf("session migration: %w", sm.err)
			}
			if d.committing() {
				// The session migration ends only after the commit arrived; both were
				// ready and select picked this one.
				return commit()
			}
			return fmt.Errorf("session migration ended before the commit")
		case <-time.After(10 * time.Millisecond):
			if _, err := s.transferMods(ctx, d); err != nil {
				return err
			}
		}
	}
}

// transferMods fetches and applies one _transferMods batch; it returns how many changes it
// held.
func (s *Service) transferMods(ctx context.Context, d *Destination) (int, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("_transferMods", d.req.NS).AppendString("sessionId", d.req.SessionID).Build()
	reply, err := s.Cluster.RunOnShard(ctx, d.req.FromShard, "admin", cmd)
	if err != nil {
		return 0, fmt.Errorf("_transferMods failed: %w", err)
	}
	var deleted []bsoncore.Value
	var reload []bsoncore.Document
	if arr, ok := reply.Lookup("deleted").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if doc, ok := v.DocumentOK(); ok {
				deleted = append(deleted, doc.Lookup("_id"))
			}
		}
	}
	if arr, ok := reply.Lookup("reload").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if doc, ok := v.DocumentOK(); ok {
				reload = append(reload, doc)
			}
		}
	}
	if err := s.Local.Apply(ctx, d.req.NS, d.rng, deleted, reload); err != nil {
		return 0, fmt.Errorf("apply transferred modifications: %w", err)
	}
	n := len(deleted) + len(reload)
	d.mu.Lock()
	d.mods += int64(n)
	d.mu.Unlock()
	return n, nil
}

// ensureCollection reads the collection's options and indexes from the donor and has the
// node create what it lacks, with the donor's UUID.
func (s *Service) ensureCollection(ctx context.Context, req RecvChunkStart) error {
	_, coll, _ := strings.Cut(req.NS, ".")
	db, _, _ := strings.Cut(req.NS, ".")
	lc := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("name", coll).Build()).Build()
	reply, err := s.Cluster.RunOnShard(ctx, req.FromShard, db, lc)
	if err != nil {
		return err
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s does not exist on the donor %s", req.NS, req.FromShard)
	}
	info, _ := vals[0].DocumentOK()
	uuid, ok := uuidField(info, "info", "uuid")
	if !ok {
		return mongoerr.Newf(mongoerr.InvalidUUID, "the donor's collection %s has no UUID", req.NS)
	}
	if req.CollectionUUID != (catalog.UUID{}) && uuid != req.CollectionUUID {
		return mongoerr.Newf(mongoerr.InvalidUUID, "the donor's collection %s has UUID %s, not %s", req.NS, uuid, req.CollectionUUID)
	}
	opts, _ := info.Lookup("options").DocumentOK()
	li := bsoncore.NewDocumentBuilder().AppendString("listIndexes", coll).Build()
	reply, err = s.Cluster.RunOnShard(ctx, req.FromShard, db, li)
	if err != nil {
		return err
	}
	var indexes []bsoncore.Document
	for field := "firstBatch"; ; {
		arr, _ := reply.Lookup("cursor", field).ArrayOK()
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				indexes = append(indexes, d)
			}
		}
		id, _ := reply.Lookup("cursor", "id").AsInt64OK()
		if id == 0 {
			break
		}
		field = "nextBatch"
		if reply, err = s.Cluster.RunOnShard(ctx, req.FromShard, db,
			bsoncore.NewDocumentBuilder().AppendInt64("getMore", id).AppendString("collection", coll).Build()); err != nil {
			return err
		}
	}
	return s.EnsureCollection(ctx, req.NS, uuid, opts, indexes)
}

// waitOverlappingRangeDeletions waits until no config.rangeDeletions task of another
// migration overlaps the incoming range (its orphans would mix with the cloned documents).
// It polls: the range deleter signals nothing this package can wait on yet.
func (s *Service) waitOverlappingRangeDeletions(ctx context.Context, req RecvChunkStart) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "rangeDeletions").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("nss", req.NS).Build()).Build()
	for {
		reply, err := s.LocalRun(ctx, "config", cmd)
		if err != nil {
			return fmt.Errorf("read config.rangeDeletions: %w", err)
		}
		arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		vals, _ := arr.Values()
		overlap := false
		for _, v := range vals {
			t, _ := v.DocumentOK()
			if id, _ := uuidField(t, "_id"); id == req.MigrationID {
				continue
			}
			min, _ := t.Lookup("range", "min").DocumentOK()
			max, _ := t.Lookup("range", "max").DocumentOK()
			if bsonutil.CompareDocuments(min, req.Max) < 0 && bsonutil.CompareDocuments(req.Min, max) < 0 {
				overlap = true
				break
			}
		}
		if !overlap {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dest returns the recipient's session sessionID.
func (s *Service) destination(sessionID string) (*Destination, error) {
	s.mu.Lock()
	d := s.dest
	s.mu.Unlock()
	if d == nil || (sessionID != "" && d.req.SessionID != sessionID) {
		return nil, mongoerr.Newf(mongoerr.OperationFailed, "migration session %s is not active", sessionID)
	}
	return d, nil
}

// RecvChunkStatus is _recvChunkStatus's reply (without ok); with waitForSteadyOrDone it
// waits (up to a second) for the state to change first.
func (s *Service) RecvChunkStatus(ctx context.Context, sessionID string, wait bool) bsoncore.Document {
	s.mu.Lock()
	d := s.dest
	s.mu.Unlock()
	if d == nil {
		return bsoncore.NewDocumentBuilder().AppendBoolean("active", false).AppendString("state", StateReady).Build()
	}
	state, _, changed := d.snapshot()
	if wait && state != StateSteady && state != StateDone && state != StateFail && state != StateAbort {
		select {
		case <-changed:
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	state, errmsg, _ := d.snapshot()
	d.mu.Lock()
	cloned, clonedBytes, mods, sessionEntries := d.cloned, d.clonedBytes, d.mods, d.sessionEntries
	d.mu.Unlock()
	active := true
	select {
	case <-d.done:
		active = false
	default:
	}
	b := bsoncore.NewDocumentBuilder().AppendBoolean("active", active).AppendString("sessionId", d.req.SessionID).
		AppendString("ns", d.req.NS).AppendString("from", d.req.From).AppendString("fromShardId", d.req.FromShard).
		AppendDocument("min", d.req.Min).AppendDocument("max", d.req.Max).AppendDocument("shardKeyPattern", d.req.KeyPattern).
		AppendBinary("migrationId", 4, d.req.MigrationID[:]).AppendString("state", state).
		AppendDocument("counts", bsoncore.NewDocumentBuilder().AppendInt64("cloned", cloned).AppendInt64("clonedBytes", clonedBytes).
			AppendInt64("catchup", mods).AppendInt64("steady", 0).Build()).
		AppendInt64("sessionOplogEntriesMigrated", sessionEntries)
	if errmsg != "" {
		b.AppendString("errmsg", errmsg)
	}
	return b.Build()
}

// RecvChunkCommit is _recvChunkCommit: the recipient drains the last modifications (the
// donor's writes are blocked) and answers once done.
func (s *Service) RecvChunkCommit(ctx context.Context, sessionID string) error {
	d, err := s.destination(sessionID)
	if err != nil {
		return err
	}
	d.wake1.Do(func() { close(d.wake) })
	select {
	case <-d.done:
	case <-ctx.Done():
		return mongoerr.Newf(mongoerr.Interrupted, "_recvChunkCommit interrupted: %v", context.Cause(ctx))
	}
	state, errmsg, _ := d.snapshot()
	if state != StateDone {
		return mongoerr.Newf(mongoerr.OperationFailed, "_recvChunkCommit failed! (%s: %s)", state, errmsg)
	}
	return nil
}

// RecvChunkAbort is _recvChunkAbort: the session stops (its copies stay until the
// coordinator's abort sequence marks the recipient's range deletion task ready).
func (s *Service) RecvChunkAbort(ctx context.Context, sessionID string) error {
	d, err := s.destination(sessionID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	stop := d.stop
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return mongoerr.Newf(mongoerr.Interrupted, "_recvChunkAbort interrupted: %v", context.Cause(ctx))
	}
}

// waitMajority waits until this node's last write is majority-committed (nothing to wait
// for without WaitMajority: tests of the protocol alone).
func (s *Service) waitMajority(ctx context.Context) error {
	if s.WaitMajority == nil {
		return nil
	}
	return s.WaitMajority(ctx)
}
