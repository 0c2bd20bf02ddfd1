package concern

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/storage"
	"humongo/internal/vclock"
)

// Read concern levels.
const (
	LevelLocal        = "local"
	LevelAvailable    = "available"
	LevelMajority     = "majority"
	LevelLinearizable = "linearizable"
	LevelSnapshot     = "snapshot"
)

// codeUnknownField is the IDL parser's unknown-field error.
const codeUnknownField = mongoerr.Location40415

// ReadConcern is a parsed readConcern document.
type ReadConcern struct {
	Level            string // "" when absent (local)
	AfterClusterTime uint64 // optime.Timestamp encoding; 0 when absent
	AtClusterTime    uint64
	AfterOpTimeSet   bool
	AfterOpTime      optime.OpTime
}

// ParseReadConcern parses a readConcern document (ReadConcernArgs::parse).
func ParseReadConcern(d bsoncore.Document) (ReadConcern, error) {
	var rc ReadConcern
	elems, err := d.Elements()
	if err != nil {
		return rc, mongoerr.Newf(mongoerr.InvalidBSON, "invalid readConcern: %v", err)
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "level":
			s, ok := v.StringValueOK()
			if !ok {
				return rc, typeMismatch("readConcern", "level", v.Type, "string")
			}
			switch s {
			case LevelLocal, LevelAvailable, LevelMajority, LevelLinearizable, LevelSnapshot:
				rc.Level = s
			default:
				return rc, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field 'readConcern.level' is not a valid value.", s)
			}
		case "afterClusterTime", "atClusterTime":
			t, i, ok := v.TimestampOK()
			if !ok {
				return rc, typeMismatch("readConcern", e.Key(), v.Type, "timestamp")
			}
			if t == 0 && i == 0 {
				return rc, mongoerr.Newf(mongoerr.InvalidOptions, "%s cannot be a null timestamp", e.Key())
			}
			ts := uint64(t)<<32 | uint64(i)
			if e.Key() == "afterClusterTime" {
				rc.AfterClusterTime = ts
			} else {
				rc.AtClusterTime = ts
			}
		case "afterOpTime":
			od, ok := v.DocumentOK()
			if !ok {
				return rc, typeMismatch("readConcern", "afterOpTime", v.Type, "object")
			}
			t, i, _ := lookup(od, "ts").TimestampOK()
			term := asFloat(lookup(od, "t"))
			rc.AfterOpTimeSet = true
			rc.AfterOpTime = optime.OpTime{TS: optime.MakeTimestamp(t, i), Term: int64(term)}
		case "provenance", "allowTransactionTableSnapshot", "waitLastStableRecoveryTimestamp":
		default:
			return rc, mongoerr.Newf(codeUnknownField, "BSON field 'readConcern.%s' is an unknown field.", e.Key())
		}
	}
	switch {
	case rc.AfterClusterTime != 0 && rc.AtClusterTime != 0:
		return rc, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterClusterTime and atClusterTime")
	case rc.AfterOpTimeSet && (rc.AfterClusterTime != 0 || rc.AtClusterTime != 0):
		return rc, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterOpTime and afterClusterTime")
	case rc.AtClusterTime != 0 && rc.Level != LevelSnapshot:
		return rc, mongoerr.New(mongoerr.InvalidOptions, "readConcern.atClusterTime can only be used with readConcern level snapshot")
	case rc.AfterClusterTime != 0 && rc.Level != "" && rc.Level != LevelLocal && rc.Level != LevelMajority && rc.Level != LevelSnapshot:
		return rc, mongoerr.Newf(mongoerr.InvalidOptions,
			"readConcern.afterClusterTime can only be used with read concern levels local, majority or snapshot; found: %s", rc.Level)
	}
	return rc, nil
}

// readCommands are the commands whose readConcern is honoured (getMore inherits).
var readCommands = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}

// snapshotCommands may read at level snapshot outside a transaction besides find, aggregate
// and distinct (readCommands without count): MongoDB's dbHash (test builds) and explain of
// those reads.
var snapshotCommands = map[string]bool{"dbHash": true, "explain": true}

// snapshotOnlyRefused are the commands MongoDB lets read at every level but snapshot ("read
// concern snapshot not supported"); the others support only local ("read concern not
// supported": the writes, listDatabases, ...).
var snapshotOnlyRefused = map[string]bool{"count": true, "listCollections": true, "listIndexes": true}

// RefuseSnapshot is service_entry_point_common's read concern support check for readConcern
// level snapshot outside a transaction: only find, aggregate and distinct (and dbHash) read
// at a snapshot; any other command (a write, listCollections, ...) fails with InvalidOptions
// instead of silently reading or writing the latest data. Other levels on commands that
// ignore them stay accepted, as before.
func RefuseSnapshot(command string, cmd bsoncore.Document) error {
	if snapshotCommands[command] {
		return nil
	}
	d, ok := lookup(cmd, "readConcern").DocumentOK()
	if !ok {
		return nil
	}
	if lvl, _ := lookup(d, "level").StringValueOK(); lvl != LevelSnapshot {
		return nil
	}
	reason := "read concern not supported"
	if snapshotOnlyRefused[command] {
		reason = "read concern snapshot not supported"
	}
	return readConcernNotSupported(command, d, reason)
}

// readConcernNotSupported is the command-level refusal of a read concern (InvalidOptions
// "Command <name> does not support <readConcern> :: caused by :: <reason>").
func readConcernNotSupported(command string, d bsoncore.Document, reason string) error {
	lvl, _ := lookup(d, "level").StringValueOK()
	args := fmt.Sprintf("level: %q", lvl)
	for _, f := range []string{"afterClusterTime", "atClusterTime"} {
		if t, i, ok := lookup(d, f).TimestampOK(); ok {
			args += fmt.Sprintf(", %s: Timestamp(%d, %d)", f, t, i)
		}
	}
	return mongoerr.Newf(mongoerr.InvalidOptions, "Command %s does not support { readConcern: { %s, provenance: \"clientSupplied\" } } :: caused by :: %s",
		command, args, reason)
}

// refuseLinearizableWrite refuses an aggregate writing with $out or $merge at read concern
// linearizable, as those stages' supportsReadConcern do.
func refuseLinearizableWrite(command string, cmd bsoncore.Document) error {
	d, ok := lookup(cmd, "readConcern").DocumentOK()
	if !ok || command != "aggregate" {
		return nil
	}
	if lvl, _ := lookup(d, "level").StringValueOK(); lvl != LevelLinearizable {
		return nil
	}
	arr, ok := lookup(cmd, "pipeline").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		st, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if first, err := st.IndexErr(0); err == nil && (first.Key() == "$out" || first.Key() == "$merge") {
			return readConcernNotSupported(command, d, first.Key()+" cannot be used with a 'linearizable' read concern level")
		}
	}
	return nil
}

// OpState is one command's read/write concern state, carried in its context.
type OpState struct {
	req     *operation.Request // the command's request: read concern sets its ReadSource
	opTime  atomic.Uint64
	rc      ReadConcern
	retAtCT bool // snapshot without atClusterTime: report the chosen one
	member  bool // the request came from a cluster member (it carried $configTime)
}

type stateKey struct{}

func stateOf(ctx context.Context) *OpState {
	s, _ := ctx.Value(stateKey{}).(*OpState)
	return s
}

// NoteOperationTime records ts as the command's operationTime (the newest wins).
func NoteOperationTime(ctx context.Context, ts optime.Timestamp) {
	s := stateOf(ctx)
	if s == nil {
		return
	}
	v := uint64(ts)
	for {
		cur := s.opTime.Load()
		if v <= cur || s.opTime.CompareAndSwap(cur, v) {
			return
		}
	}
}

// ApplyReadSource makes ru read at the command's read-concern timestamp (none without one)
// with its prepare conflict behaviour. Call it before ru's first read.
func ApplyReadSource(ctx context.Context, ru *storage.RecoveryUnit) error {
	return operation.ReadSourceOf(ctx).Apply(ru)
}

// canIgnorePrepareConflicts is MongoDB's rule (read_concern_mongod.cpp) for the commands that
// may ignore prepare conflicts (the read commands Begin applies a read concern to, whose
// getMores inherit it): reads at local, available or majority without afterClusterTime or
// atClusterTime return the data as it was before a prepared transaction wrote it; snapshot,
// linearizable and causally consistent reads wait for the transaction to commit or abort
// (spec: replication.md "Prepare Conflicts"). Transactions never ignore them (BeginTxn).
func canIgnorePrepareConflicts(r ReadConcern) bool {
	switch r.Level {
	case "", LevelLocal, LevelAvailable, LevelMajority:
	default:
		return false
	}
	return r.AfterClusterTime == 0 && r.AtClusterTime == 0
}

// lastAppliedTS is the timestamp reads on a member that cannot accept writes use: its
// lastApplied, which moves only at applier batch boundaries (0: newest data, on a writable
// primary or before anything was applied).
func (n Node) lastAppliedTS() optime.Timestamp {
	rc := n.Repl
	if rc == nil || rc.IsWritablePrimary() {
		return 0
	}
	if ts, ok := rc.SecondaryReadTimestamp(); ok {
		return ts
	}
	// A primary that is not writable yet (catch-up, drain) reads at its lastApplied too.
	if la := rc.LastApplied(); !la.IsNull() {
		return la.TS
	}
	return 0
}

// Reapply points ru (between snapshots: after SaveState, before RestoreState) at the read
// source's current timestamp: a getMore's. lastApplied and majority move on; a provided
// timestamp stays. The committed snapshot never moves back, so a majority cursor never
// returns to older data.
func Reapply(n Node, r *operation.ReadSource, ru *storage.RecoveryUnit) error {
	switch r.Kind {
	case operation.ReadLastApplied:
		r.TS = n.lastAppliedTS()
	case operation.ReadMajority:
		if st := n.DB.Engine.StableTimestamp(); st > r.TS {
			r.TS = st
		}
	case operation.ReadNewest, operation.ReadProvided:
		return ru.SetPrepareConflictBehavior(r.PrepareConflictBehavior())
	}
	if err := ru.SetPrepareConflictBehavior(r.PrepareConflictBehavior()); err != nil {
		return err
	}
	if r.TS == 0 {
		return ru.SetReadSource(storage.ReadNoTimestamp, 0)
	}
	return ru.SetReadSource(storage.ReadProvided, r.TS)
}

// Begin gossips cmd's $clusterTime in and, for the read commands, applies their readConcern
// (wait, read timestamp). The returned context carries the state the read paths and Finish
// use; the operations it starts read from the chosen source (the ReadSource of ctx's
// operation.Request, which Begin adds when ctx has none).
// command is the command's canonical name ("" when unknown).
func Begin(ctx context.Context, n Node, command string, cmd bsoncore.Document) (context.Context, *OpState, error) {
	ctx, s, err := beginState(ctx, n, cmd)
	if err != nil {
		return ctx, s, err
	}
	rc := n.Repl
	if !readCommands[command] {
		return ctx, s, RefuseSnapshot(command, cmd)
	}
	if command == "count" {
		if err := RefuseSnapshot(command, cmd); err != nil {
			return ctx, s, err
		}
	}
	if err := refuseLinearizableWrite(command, cmd); err != nil {
		return ctx, s, err
	}
	v := lookup(cmd, "readConcern")
	if v.Type == 0 {
		if rc != nil {
			if lvl := n.State.defaults(n.DB).get().rcLevel; lvl != "" {
				s.rc.Level = lvl
			}
		}
	} else {
		d, ok := v.DocumentOK()
		if !ok {
			return ctx, s, mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'readConcern' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		var err error
		if s.rc, err = ParseReadConcern(d); err != nil {
			return ctx, s, err
		}
	}
	if err := prepare(ctx, n, s); err != nil {
		return ctx, s, err
	}
	s.req.ReadSource.IgnorePrepare = canIgnorePrepareConflicts(s.rc)
	return ctx, s, nil
}

// prepare waits for the read concern's preconditions and picks the read timestamp.
func prepare(ctx context.Context, n Node, s *OpState) error {
	rc := n.Repl
	r := s.rc
	if rc == nil {
		switch {
		case r.Level == LevelLinearizable:
			return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use read concern")
		case r.Level == LevelSnapshot:
			return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use readConcern: snapshot")
		case r.AfterClusterTime != 0 || r.AfterOpTimeSet:
			return mongoerr.New(mongoerr.IllegalOperation, "Cannot specify afterClusterTime readConcern without replication enabled")
		}
		return nil
	}
	eng := n.DB.Engine
	if r.Level == LevelLinearizable {
		if r.AfterClusterTime != 0 || r.AfterOpTimeSet {
			return mongoerr.New(mongoerr.InvalidOptions, "afterClusterTime is not allowed with readConcern level linearizable")
		}
		if !rc.IsWritablePrimary() {
			return mongoerr.New(mongoerr.NotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
		}
		return nil
	}
	// afterClusterTime / atClusterTime / afterOpTime: wait for this node to get there.
	after := r.AfterClusterTime
	if r.AtClusterTime != 0 {
		after = r.AtClusterTime
	}
	if r.AfterOpTimeSet {
		after = uint64(r.AfterOpTime.TS)
	}
	if after != 0 {
		if ct := n.clusterTimeNow(); after > ct && r.AtClusterTime == 0 {
			return mongoerr.Newf(mongoerr.InvalidOptions,
				"readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: %s; current clusterTime: %s",
				tsString(after), tsString(ct))
		}
		if r.AtClusterTime != 0 && r.AtClusterTime < uint64(eng.OldestTimestamp()) {
			return mongoerr.Newf(mongoerr.SnapshotTooOld,
				"Read timestamp %s is older than the oldest available timestamp.", tsString(r.AtClusterTime))
		}
		ts := optime.Timestamp(after)
		// A primary that has written nothing up to the requested time writes a no-op so its
		// lastApplied gets there (makeNoopWriteIfNeeded).
		if rc.IsWritablePrimary() && uint64(n.lastOpTS()) < after {
			if w, ok := n.DB.Observer().(noopWriter); ok {
				if _, err := w.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", "read concern: advance cluster time").Build()); err != nil {
					return err
				}
			}
		}
		if err := rc.WaitUntilTimestamp(ctx, ts, r.Level == LevelMajority); err != nil {
			return err
		}
		if r.Level == LevelMajority {
			// The read is at the majority snapshot (the stable timestamp), which must cover
			// afterClusterTime too, not only the commit point (waitUntilOpTime waits for the
			// committed snapshot).
			if _, err := eng.WaitStable(ctx, ts); err != nil {
				return err
			}
		}
	}
	switch r.Level {
	case LevelMajority:
		st := eng.StableTimestamp()
		if st == 0 {
			return mongoerr.New(mongoerr.ReadConcernMajorityNotAvailableYet,
				"Read concern majority reads are currently not possible.")
		}
		s.req.ReadSource = operation.ReadSource{Kind: operation.ReadMajority, TS: st}
	case LevelSnapshot:
		s.req.ReadSource.Kind = operation.ReadProvided
		if r.AtClusterTime != 0 {
			s.req.ReadSource.TS = optime.Timestamp(r.AtClusterTime)
		} else {
			s.req.ReadSource.TS = snapshotReadTS(n)
			s.retAtCT = true
		}
	case LevelLinearizable:
	default:
		// A secondary reads at lastApplied: never half an applier batch.
		s.req.ReadSource = operation.ReadSource{Kind: operation.ReadLastApplied, TS: n.lastAppliedTS()}
	}
	if s.req.ReadSource.TS != 0 {
		NoteOperationTime(ctx, optime.Timestamp(s.req.ReadSource.TS))
	}
	return nil
}

// beginState starts a command's concern state in ctx (and its operation.Request when ctx
// has none) and gossips the command's vector clock in on a replica-set member: $clusterTime
// from anyone (signed, under authorization, when it is ahead of the node's and the sender may
// not advance the clock: vclock.Clock.GossipIn), $configTime and $topologyTime only on a
// sharded-cluster member and from another member (vclock.Peer, which the caller put in ctx).
// A gossiped time the validator or the rate limiter refuses fails the command, and moves
// nothing.
func beginState(ctx context.Context, n Node, cmd bsoncore.Document) (context.Context, *OpState, error) {
	s := &OpState{req: operation.RequestOf(ctx)}
	if s.req == nil {
		s.req = &operation.Request{Admission: new(lock.Admission)}
		ctx = operation.WithRequest(ctx, s.req)
	}
	ctx = context.WithValue(ctx, stateKey{}, s)
	if n.Repl == nil {
		return ctx, s, nil
	}
	g := vclock.ReadGossip(cmd)
	p := vclock.PeerOf(ctx)
	s.member = n.Member && p.IsMember(g)
	if !s.member {
		g.Time = vclock.Time{Cluster: g.Cluster}
	}
	return ctx, s, n.State.Clock.GossipIn(ctx, g, p)
}

// noopWriter is the oplog writer's no-op API.
type noopWriter interface {
	LogNoop(ctx context.Context, msg bsoncore.Document) (optime.OpTime, error)
}

// Finish completes the read concern after a successful handler: linearizable reads write a
// no-op and wait for a majority to have it (the node was primary throughout), and a snapshot
// read without atClusterTime reports the timestamp it read at in `cursor`.
func Finish(ctx context.Context, n Node, s *OpState, reply bsoncore.Document) (bsoncore.Document, error) {
	if s == nil {
		return reply, nil
	}
	rc := n.Repl
	if rc != nil && s.rc.Level == LevelLinearizable {
		w, ok := n.DB.Observer().(noopWriter)
		if !ok {
			return nil, mongoerr.New(mongoerr.LinearizableReadConcernError, "no oplog to write the linearizable read no-op")
		}
		ot, err := w.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", "linearizable read").Build())
		if err != nil {
			return nil, err
		}
		op := ot
		NoteOperationTime(ctx, op.TS)
		if err := rc.WaitForWriteConcern(ctx, op, coordMajority()); err != nil {
			if mongoerr.Is(err, mongoerr.PrimarySteppedDown) {
				return nil, mongoerr.New(mongoerr.NotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
			}
			return nil, err
		}
	}
	if s.retAtCT {
		reply = AddAtClusterTime(reply, uint64(s.req.ReadSource.TS))
	}
	return reply, nil
}

// AddAtClusterTime appends atClusterTime to the reply's cursor document, or to the reply
// itself when it has no cursor (distinct, as distinct.cpp does): drivers take a snapshot
// session's time from the first read's reply either way.
func AddAtClusterTime(reply bsoncore.Document, ts uint64) bsoncore.Document {
	elems, err := reply.Elements()
	if err != nil {
		return reply
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(reply)+32))
	if _, ok := reply.Lookup("cursor").DocumentOK(); !ok {
		out = append(out, reply[4:len(reply)-1]...)
		out = bsoncore.AppendTimestampElement(out, "atClusterTime", uint32(ts>>32), uint32(ts))
		out, _ = bsoncore.AppendDocumentEnd(out, idx)
		return out
	}
	for _, e := range elems {
		cd, ok := e.Value().DocumentOK()
		if e.Key() != "cursor" || !ok {
			out = append(out, e...)
			continue
		}
		ci, o2 := bsoncore.AppendDocumentElementStart(out, "cursor")
		o2 = append(o2, cd[4:len(cd)-1]...)
		o2 = bsoncore.AppendTimestampElement(o2, "atClusterTime", uint32(ts>>32), uint32(ts))
		out, _ = bsoncore.AppendDocumentEnd(o2, ci)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// lastVisible is the oplog writer's newest visible entry of its own (a primary's lastApplied).
type lastVisible interface{ LastVisible() optime.OpTime }

// snapshotReadTS is where a snapshot read without atClusterTime reads: the all-durable point,
// except that a writable primary reads at its newest visible oplog entry when that is older.
// Commits that log nothing (a read-only transaction's, writes to local) move the all-durable
// point past every entry; a snapshot read there would report an operationTime no member's
// oplog reaches, and a causally consistent read on a secondary after it would wait for the
// primary's next write. Every commit at or below the entry is done, so the view is the same
// for replicated data.
func snapshotReadTS(n Node) optime.Timestamp {
	ts := n.DB.Engine.AllDurableTimestamp()
	if n.Repl == nil || !n.Repl.IsWritablePrimary() {
		return ts
	}
	if lv, ok := n.DB.Observer().(lastVisible); ok {
		if v := lv.LastVisible().TS; v != 0 && v < ts {
			return v
		}
	}
	return ts
}
