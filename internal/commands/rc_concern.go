package commands

// Read concern of find, aggregate, count and distinct (getMore inherits its cursor's read
// source), and the cluster time every replica-set reply carries (spec/replication.md
// "Read Concern"; MongoDB 7.0's read_concern_mongod.cpp and VectorClock gossip).
//
// The dispatcher calls BeginOperation before a command (it gossips the incoming $clusterTime
// in and, for the read commands, validates readConcern, waits for afterClusterTime /
// atClusterTime and picks the read timestamp), the read paths call rcApplyRU on every
// RecoveryUnit they read through, FinishOperation after the handler (linearizable's no-op
// write confirmed by a majority, snapshot's atClusterTime in the cursor reply), and
// AppendClusterTime on every reply of a replica-set member.
//
// Read timestamps (storage ReadProvided), MongoDB's RecoveryUnit::ReadSource:
//
//	local/available  primary: newest data (no timestamp); secondary: lastApplied, so a read
//	                 never sees half an applier batch (kLastApplied)
//	majority         the committed snapshot: the storage stable timestamp, which the
//	                 coordinator sets to min(commit point, lastApplied) (kMajorityCommitted)
//	snapshot         atClusterTime, or the all-durable point when absent (returned as
//	                 cursor.atClusterTime) (kProvided)
//	linearizable     newest data on a writable primary, then a majority-confirmed no-op
//
// A cursor keeps its read source, not its first timestamp: every getMore picks the source's
// timestamp again (rcReadSource.reapply), as MongoDB's getMore does (applyCursorReadConcern
// sets kMajorityCommitted again; AutoGetCollectionForRead picks kLastApplied again). So a
// majority cursor's later batches come from the newest committed snapshot (never from
// uncommitted data), a secondary's cursor follows lastApplied (a tailable oplog cursor of a
// chained secondary sees new entries), and neither pins history until the oldest timestamp
// passes it (SnapshotTooOld). Only snapshot reads stay at one timestamp. (Find cursors do
// this; aggregation cursors still keep their first timestamp.)
//
// A count without a predicate answers from the collection's record count, which is not
// versioned (as MongoDB's fast count): on a secondary it may include a batch in progress.
//
// On a standalone (as MongoDB 7.0 on a standalone): local, available and majority read the
// newest data; snapshot and linearizable fail with NotAReplicaSet, afterClusterTime with
// IllegalOperation.

import (
	"context"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/topology"
	"humongo/internal/storage"
)

// Read concern levels.
const (
	rcLocal        = "local"
	rcAvailable    = "available"
	rcMajority     = "majority"
	rcLinearizable = "linearizable"
	rcSnapshot     = "snapshot"
)

// readConcern is a parsed readConcern document.
type readConcern struct {
	level            string // "" when absent (local)
	afterClusterTime uint64 // storage.Timestamp encoding; 0 when absent
	atClusterTime    uint64
	afterOpTimeSet   bool
	afterOpTime      topology.OpTime
}

// rcParse parses a readConcern document (ReadConcernArgs::parse).
func rcParse(d bsoncore.Document) (readConcern, error) {
	var rc readConcern
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
			case rcLocal, rcAvailable, rcMajority, rcLinearizable, rcSnapshot:
				rc.level = s
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
				rc.afterClusterTime = ts
			} else {
				rc.atClusterTime = ts
			}
		case "afterOpTime":
			od, ok := v.DocumentOK()
			if !ok {
				return rc, typeMismatch("readConcern", "afterOpTime", v.Type, "object")
			}
			t, i, _ := lookup(od, "ts").TimestampOK()
			term, _ := AsFloat(lookup(od, "t"))
			rc.afterOpTimeSet = true
			rc.afterOpTime = topology.OpTime{TS: topology.Timestamp{Secs: t, Inc: i}, Term: int64(term)}
		case "provenance", "allowTransactionTableSnapshot", "waitLastStableRecoveryTimestamp":
		default:
			return rc, mongoerr.Newf(codeUnknownField, "BSON field 'readConcern.%s' is an unknown field.", e.Key())
		}
	}
	switch {
	case rc.afterClusterTime != 0 && rc.atClusterTime != 0:
		return rc, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterClusterTime and atClusterTime")
	case rc.afterOpTimeSet && (rc.afterClusterTime != 0 || rc.atClusterTime != 0):
		return rc, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterOpTime and afterClusterTime")
	case rc.atClusterTime != 0 && rc.level != rcSnapshot:
		return rc, mongoerr.New(mongoerr.InvalidOptions, "readConcern.atClusterTime can only be used with readConcern level snapshot")
	case rc.afterClusterTime != 0 && rc.level != "" && rc.level != rcLocal && rc.level != rcMajority && rc.level != rcSnapshot:
		return rc, mongoerr.Newf(mongoerr.InvalidOptions,
			"readConcern.afterClusterTime can only be used with read concern levels local, majority or snapshot; found: %s", rc.level)
	}
	return rc, nil
}

// rcCommands are the commands whose readConcern this file honours (getMore inherits).
var rcCommands = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}

// rcSourceKind is how a read picks its timestamp.
type rcSourceKind uint8

const (
	rcSrcNewest      rcSourceKind = iota // newest data, no timestamp
	rcSrcLastApplied                     // a non-writable member's lastApplied
	rcSrcMajority                        // the committed snapshot (stable timestamp)
	rcSrcProvided                        // a fixed timestamp (snapshot reads)
)

// rcReadSource is a read's source and the timestamp it resolved to (0: newest data).
type rcReadSource struct {
	kind rcSourceKind
	ts   uint64
}

// OpState is one command's read/write concern state, carried in its context.
type OpState struct {
	readTS  uint64 // storage read timestamp for ReadProvided; 0: newest data
	src     rcSourceKind
	opTime  atomic.Uint64
	rc      readConcern
	retAtCT bool // snapshot without atClusterTime: report the chosen one
}

type rcKey struct{}

func rcStateOf(ctx context.Context) *OpState {
	s, _ := ctx.Value(rcKey{}).(*OpState)
	return s
}

// rcNoteOperationTime records ts as the command's operationTime (the newest wins).
func rcNoteOperationTime(ctx context.Context, ts topology.Timestamp) {
	s := rcStateOf(ctx)
	if s == nil {
		return
	}
	v := uint64(ts.Secs)<<32 | uint64(ts.Inc)
	for {
		cur := s.opTime.Load()
		if v <= cur || s.opTime.CompareAndSwap(cur, v) {
			return
		}
	}
}

// rcApplyRU makes ru read at the command's read-concern timestamp (no-op without one). Call
// it before ru's first read.
func rcApplyRU(ctx context.Context, ru *storage.RecoveryUnit) error {
	s := rcStateOf(ctx)
	if s == nil || s.readTS == 0 {
		return nil
	}
	return ru.SetReadSource(storage.ReadProvided, storage.Timestamp(s.readTS))
}

// rcReadSourceOf is the command's read source, for a cursor to keep (the zero value, newest
// data, without read-concern state).
func rcReadSourceOf(ctx context.Context) rcReadSource {
	s := rcStateOf(ctx)
	if s == nil {
		return rcReadSource{}
	}
	return rcReadSource{kind: s.src, ts: s.readTS}
}

// rcLastAppliedTS is the timestamp reads on a member that cannot accept writes use: its
// lastApplied, which moves only at applier batch boundaries (0: newest data, on a writable
// primary or before anything was applied).
func rcLastAppliedTS(env *Env) uint64 {
	rc := env.State.Repl
	if rc == nil || rc.IsWritablePrimary() {
		return 0
	}
	if ts, ok := rc.SecondaryReadTimestamp(); ok {
		return uint64(ts)
	}
	// A primary that is not writable yet (catch-up, drain) reads at its lastApplied too.
	if la := rc.LastApplied(); !la.IsNull() {
		return uint64(la.TS.Secs)<<32 | uint64(la.TS.Inc)
	}
	return 0
}

// reapply points ru (between snapshots: after SaveState, before RestoreState) at the read
// source's current timestamp: a getMore's. lastApplied and majority move on; a provided
// timestamp stays. The committed snapshot never moves back, so a majority cursor never
// returns to older data.
func (r *rcReadSource) reapply(env *Env, ru *storage.RecoveryUnit) error {
	switch r.kind {
	case rcSrcLastApplied:
		r.ts = rcLastAppliedTS(env)
	case rcSrcMajority:
		if st := uint64(env.State.DB.Engine.StableTimestamp()); st > r.ts {
			r.ts = st
		}
	case rcSrcNewest, rcSrcProvided:
		return nil
	}
	if r.ts == 0 {
		return ru.SetReadSource(storage.ReadNoTimestamp, 0)
	}
	return ru.SetReadSource(storage.ReadProvided, storage.Timestamp(r.ts))
}

// BeginOperation gossips cmd's $clusterTime in and, for the read commands, applies their
// readConcern (wait, read timestamp). The returned context carries the state the read paths
// and FinishOperation use.
func BeginOperation(ctx context.Context, env *Env, c *Command, cmd bsoncore.Document) (context.Context, *OpState, error) {
	s := &OpState{}
	ctx = context.WithValue(ctx, rcKey{}, s)
	rc := env.State.Repl
	if rc != nil {
		if ct, ok := lookup(cmd, "$clusterTime").DocumentOK(); ok {
			if t, i, ok := lookup(ct, "clusterTime").TimestampOK(); ok {
				clusterTimeAdvance(env.State, uint64(t)<<32|uint64(i))
			}
		}
	}
	if c == nil || !rcCommands[c.Name] {
		return ctx, s, nil
	}
	v := lookup(cmd, "readConcern")
	if v.Type == 0 {
		if rc != nil {
			if lvl := rwDefaultsFor(env.State).get().rcLevel; lvl != "" {
				s.rc.level = lvl
			}
		}
	} else {
		d, ok := v.DocumentOK()
		if !ok {
			return ctx, s, mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'readConcern' is the wrong type '%s', expected type 'object'", TypeName(v.Type))
		}
		var err error
		if s.rc, err = rcParse(d); err != nil {
			return ctx, s, err
		}
	}
	return ctx, s, rcPrepare(ctx, env, s)
}

// rcPrepare waits for the read concern's preconditions and picks the read timestamp.
func rcPrepare(ctx context.Context, env *Env, s *OpState) error {
	rc := env.State.Repl
	r := s.rc
	if rc == nil {
		switch {
		case r.level == rcLinearizable:
			return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use read concern")
		case r.level == rcSnapshot:
			return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use readConcern: snapshot")
		case r.afterClusterTime != 0 || r.afterOpTimeSet:
			return mongoerr.New(mongoerr.IllegalOperation, "Cannot specify afterClusterTime readConcern without replication enabled")
		}
		return nil
	}
	eng := env.State.DB.Engine
	if r.level == rcLinearizable {
		if r.afterClusterTime != 0 || r.afterOpTimeSet {
			return mongoerr.New(mongoerr.InvalidOptions, "afterClusterTime is not allowed with readConcern level linearizable")
		}
		if !rc.IsWritablePrimary() {
			return mongoerr.New(mongoerr.NotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
		}
		return nil
	}
	// afterClusterTime / atClusterTime / afterOpTime: wait for this node to get there.
	after := r.afterClusterTime
	if r.atClusterTime != 0 {
		after = r.atClusterTime
	}
	if r.afterOpTimeSet {
		after = uint64(r.afterOpTime.TS.Secs)<<32 | uint64(r.afterOpTime.TS.Inc)
	}
	if after != 0 {
		if ct := clusterTimeNow(env); after > ct && r.atClusterTime == 0 {
			return mongoerr.Newf(mongoerr.InvalidOptions,
				"readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: %s; current clusterTime: %s",
				tsString(after), tsString(ct))
		}
		if r.atClusterTime != 0 && r.atClusterTime < uint64(eng.OldestTimestamp()) {
			return mongoerr.Newf(mongoerr.SnapshotTooOld,
				"Read timestamp %s is older than the oldest available timestamp.", tsString(r.atClusterTime))
		}
		ts := topology.Timestamp{Secs: uint32(after >> 32), Inc: uint32(after)}
		// A primary that has written nothing up to the requested time writes a no-op so its
		// lastApplied gets there (makeNoopWriteIfNeeded).
		if rc.IsWritablePrimary() && uint64(wcLastOpTS(env)) < after {
			if n, ok := env.State.DB.Observer().(rcNoopWriter); ok {
				if _, err := n.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", "read concern: advance cluster time").Build()); err != nil {
					return err
				}
			}
		}
		if err := rc.WaitUntilTimestamp(ctx, ts, r.level == rcMajority); err != nil {
			return err
		}
	}
	switch r.level {
	case rcMajority:
		st := uint64(eng.StableTimestamp())
		if st == 0 {
			return mongoerr.New(mongoerr.ReadConcernMajorityNotAvailableYet,
				"Read concern majority reads are currently not possible.")
		}
		s.src, s.readTS = rcSrcMajority, st
	case rcSnapshot:
		s.src = rcSrcProvided
		if r.atClusterTime != 0 {
			s.readTS = r.atClusterTime
		} else {
			s.readTS = uint64(eng.AllDurableTimestamp())
			s.retAtCT = true
		}
	case rcLinearizable:
	default:
		// A secondary reads at lastApplied: never half an applier batch.
		s.src, s.readTS = rcSrcLastApplied, rcLastAppliedTS(env)
	}
	if s.readTS != 0 {
		rcNoteOperationTime(ctx, topology.Timestamp{Secs: uint32(s.readTS >> 32), Inc: uint32(s.readTS)})
	}
	return nil
}

// rcNoopWriter is the oplog writer's no-op API.
type rcNoopWriter interface {
	LogNoop(ctx context.Context, msg bsoncore.Document) (oplog.OpTime, error)
}

// FinishOperation completes the read concern after a successful handler: linearizable reads
// write a no-op and wait for a majority to have it (the node was primary throughout), and a
// snapshot read without atClusterTime reports the timestamp it read at in `cursor`.
func FinishOperation(ctx context.Context, env *Env, s *OpState, reply bsoncore.Document) (bsoncore.Document, error) {
	if s == nil {
		return reply, nil
	}
	rc := env.State.Repl
	if rc != nil && s.rc.level == rcLinearizable {
		n, ok := env.State.DB.Observer().(rcNoopWriter)
		if !ok {
			return nil, mongoerr.New(mongoerr.LinearizableReadConcernError, "no oplog to write the linearizable read no-op")
		}
		ot, err := n.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", "linearizable read").Build())
		if err != nil {
			return nil, err
		}
		op := topology.OpTime{TS: topology.Timestamp{Secs: ot.TS.Secs(), Inc: ot.TS.Inc()}, Term: ot.Term}
		rcNoteOperationTime(ctx, op.TS)
		if err := rc.WaitForWriteConcern(ctx, op, coordMajority()); err != nil {
			if mongoerr.Is(err, mongoerr.PrimarySteppedDown) {
				return nil, mongoerr.New(mongoerr.NotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
			}
			return nil, err
		}
	}
	if s.retAtCT {
		reply = rcAddAtClusterTime(reply, s.readTS)
	}
	return reply, nil
}

// rcAddAtClusterTime appends atClusterTime to the reply's cursor document.
func rcAddAtClusterTime(reply bsoncore.Document, ts uint64) bsoncore.Document {
	elems, err := reply.Elements()
	if err != nil {
		return reply
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(reply)+32))
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

// clusterTimeVar is the server's gossiped cluster time.
func clusterTimeVar(st *State) *atomic.Uint64 { return &st.local.clusterTime }

// clusterTimeAdvance moves the node's cluster time forward to ts (never back).
func clusterTimeAdvance(st *State, ts uint64) {
	v := clusterTimeVar(st)
	for {
		cur := v.Load()
		if ts <= cur || v.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// clusterTimeNow is the node's cluster time: the newest of what it gossiped in and its own
// newest oplog entry.
func clusterTimeNow(env *Env) uint64 {
	ts := uint64(wcLastOpTS(env))
	clusterTimeAdvance(env.State, ts)
	return clusterTimeVar(env.State).Load()
}

// wcLastOpTS is the timestamp of the node's newest oplog entry without taking the
// coordinator's mutex.
func wcLastOpTS(env *Env) storage.Timestamp {
	if env.State.DB != nil {
		if lw, ok := env.State.DB.Observer().(wcLastWritten); ok {
			return lw.LastWritten().TS
		}
	}
	return 0
}

// AppendClusterTime appends `$clusterTime` (unsigned: a zero hash and keyId 0 until signing
// keys exist) and `operationTime` to a replica-set member's reply; standalone replies are
// returned unchanged.
func AppendClusterTime(env *Env, s *OpState, reply bsoncore.Document) bsoncore.Document {
	if env == nil || env.State == nil || env.State.Repl == nil || len(reply) < 5 {
		return reply
	}
	ct := clusterTimeNow(env)
	opTime := uint64(0)
	if s != nil {
		opTime = s.opTime.Load()
	}
	if opTime == 0 {
		opTime = uint64(wcLastOpTS(env))
	}
	out := make([]byte, 0, len(reply)+96)
	out = append(out, reply[:len(reply)-1]...)
	ci, out := bsoncore.AppendDocumentElementStart(out, "$clusterTime")
	out = bsoncore.AppendTimestampElement(out, "clusterTime", uint32(ct>>32), uint32(ct))
	si, out := bsoncore.AppendDocumentElementStart(out, "signature")
	out = bsoncore.AppendBinaryElement(out, "hash", 0, make([]byte, 20))
	out = bsoncore.AppendInt64Element(out, "keyId", 0)
	out, _ = bsoncore.AppendDocumentEnd(out, si)
	out, _ = bsoncore.AppendDocumentEnd(out, ci)
	out = bsoncore.AppendTimestampElement(out, "operationTime", uint32(opTime>>32), uint32(opTime))
	out = append(out, 0)
	bsoncore.UpdateLength(out, 0, int32(len(out)))
	return out
}

func tsString(ts uint64) string {
	return "Timestamp(" + itoa(int64(ts>>32)) + ", " + itoa(int64(uint32(ts))) + ")"
}

// coordMajority is {w: "majority"} for the coordinator.
func coordMajority() coord.WriteConcern { return coord.WriteConcern{Majority: true} }
