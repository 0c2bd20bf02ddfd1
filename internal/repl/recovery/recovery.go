// Package recovery is a replica-set member's startup recovery (spec/replication.md: "Startup
// Recovery"; MongoDB's ReplicationRecoveryImpl::recoverFromOplog). Run it once at startup,
// after the storage engine and catalog are open and before the replication coordinator starts
// or any client or background job can read or write:
//
//  1. truncate the oplog after oplogTruncateAfterPoint (set by the secondary's applier while
//     a batch is being written, cleared after): entries after it may have holes, and the
//     batch is refetched from the sync source;
//  2. recover to the stable timestamp (the recovery timestamp): every timestamped table
//     (user data, indexes, catalog, config.transactions) rolls back to it, while the oplog
//     and the rest of the `local` database, untimestamped, keep all their writes;
//  3. replay the oplog from just after the stable timestamp to its top, idempotently
//     (oplog.ModeRecovering), each entry at its own timestamp, so the data again holds the
//     whole history of the oplog;
//  4. restart the index builds recovery left unfinished (a build's completion may have been
//     rolled back with the catalog).
//
// A member with no oplog, or an empty one, or whose initial-sync flag is set (an initial sync
// that never finished: its data is a partial copy), skips recovery and goes through initial
// sync (spec: "If a node has an empty or non-existent oplog, or already has the initial sync
// flag set when starting up, then it will skip startup recovery"). A member without a stable
// timestamp (none was ever taken: the set never committed anything) skips steps 2 and 3: its
// data is the journal's consistent prefix.
//
// The consistency markers live in one document, local.replset.minvalid (MongoDB's
// ReplicationConsistencyMarkers): {_id: "minvalid", ts, t, doingInitialSync}.
//   - minValid ({ts, t}) is the optime the data must reach before the member is consistent,
//     set by whoever leaves the data inconsistent (rollback: the sync source's top; initial
//     sync: its stop point). Result.Consistent reports whether the top of the oplog reached
//     it; an inconsistent member is RECOVERING (no reads, no votes for itself) until it has
//     applied up to minValid (internal/repl/topology).
//   - doingInitialSync is the durable initial-sync flag: set before initial sync drops any
//     data, cleared once the copy is complete and journaled.
//
// ReplayOplog, the replay of step 3, is also rollback's (internal/repl/rollback): both apply
// the member's own oplog over data recovered to the stable timestamp.
//
// Invariant: after Recover, the data at every timestamp up to the top of the oplog is what
// applying the oplog up to that timestamp gives, and lastApplied = the top of the oplog.
package recovery

import (
	"context"
	"fmt"
	"log/slog"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// MinValidNS holds the minValid document.
const MinValidNS = "local.replset.minvalid"

// Config is what recovery needs from the node.
type Config struct {
	Engine  *storage.Engine
	Catalog *catalog.Catalog
	Colls   *index.Collections
	// TempDir holds index-build spill files (replayed createIndexes, restarted builds).
	TempDir string
	Log     *slog.Logger
}

// Result describes what Recover did.
type Result struct {
	// Skipped: no oplog, an empty one, or the initial-sync flag is set (initial sync
	// follows).
	Skipped bool
	// InitialSyncFlag: the initial-sync flag was set (an unfinished initial sync).
	InitialSyncFlag bool
	// TruncatedAfter is the oplogTruncateAfterPoint the oplog was truncated after (null if
	// none was set).
	TruncatedAfter optime.Timestamp
	// Stable is the recovery timestamp (null: no stable timestamp, no rollback or replay).
	Stable optime.Timestamp
	// Replayed is the number of oplog entries applied after the stable timestamp.
	Replayed int
	// Top is the top of the oplog after truncation: the member's lastApplied.
	Top optime.OpTime
	// MinValid is the persisted minValid optime (null when none).
	MinValid optime.OpTime
	// Consistent: Top has reached MinValid.
	Consistent bool
}

// Recover runs startup recovery (see the package comment).
func Recover(ctx context.Context, cfg Config) (Result, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With(logv2.C(logv2.Replication))
	e, cat, colls := cfg.Engine, cfg.Catalog, cfg.Colls
	var res Result
	meta, ok := cat.Latest().ByNS(oplog.NS)
	if !ok {
		res.Skipped = true
		return res, nil
	}
	ident := meta.Ident
	markers, err := LoadMarkers(e, cat, colls)
	if err != nil {
		return res, err
	}
	if markers.InitialSyncFlag {
		// The data is whatever an interrupted initial sync had copied: nothing to recover,
		// initial sync drops it and starts over.
		log.Info("Initial sync flag set; skipping startup recovery, initial sync will start over", logv2.ID(21540))
		res.Skipped, res.InitialSyncFlag = true, true
		return res, nil
	}

	tp, err := applier.OplogTruncateAfterPoint(e, cat, colls)
	if err != nil {
		return res, fmt.Errorf("read oplogTruncateAfterPoint: %w", err)
	}
	if !tp.IsNull() {
		log.Info("Removing unapplied oplog entries after oplogTruncateAfterPoint", logv2.ID(21553),
			"oplogTruncateAfterPoint", tp.String())
		if err := e.TruncateOplogAfter(ident, tp); err != nil {
			return res, fmt.Errorf("truncate the oplog after %v: %w", tp, err)
		}
		if err := applier.SetOplogTruncateAfterPoint(ctx, e, cat, colls, 0); err != nil {
			return res, fmt.Errorf("clear oplogTruncateAfterPoint: %w", err)
		}
		res.TruncatedAfter = tp
	}
	top, err := applier.TopOfOplog(e, ident)
	if err != nil {
		return res, fmt.Errorf("read the top of the oplog: %w", err)
	}
	if top.TS.IsNull() {
		res.Skipped = true
		return res, nil
	}
	res.Top = top
	res.MinValid = markers.MinValid
	res.Consistent = markers.Consistent(top)

	stable := e.StableTimestamp()
	res.Stable = stable
	a := oplog.NewApplier(oplog.Config{Engine: e, Catalog: cat, Colls: colls, TempDir: cfg.TempDir})
	if stable.IsNull() {
		log.Info("No stable timestamp to recover to; the data is the journal's", logv2.ID(21559),
			"topOfOplog", top.String())
		return res, reconstructPrepared(ctx, a, log)
	}
	if stable > top.TS {
		return res, fmt.Errorf("recovery timestamp %v is ahead of the top of the oplog %v: %w", stable, top, storage.ErrCorrupt)
	}
	log.Info("Recovering from stable timestamp", logv2.ID(21544), "stableTimestamp", stable.String(),
		"topOfOplog", top.String())
	// Handles cached for collections or indexes that recovery may remove are forgotten.
	var uuids []catalog.UUID
	for _, m := range cat.Latest().All() {
		uuids = append(uuids, m.UUID)
	}
	if _, err := e.RecoverToStable(); err != nil {
		return res, fmt.Errorf("recover to the stable timestamp: %w", err)
	}
	if err := cat.ReloadAfterRecovery(); err != nil {
		return res, fmt.Errorf("reload the catalog after recovery: %w", err)
	}
	for _, u := range uuids {
		colls.Forget(u)
	}
	n, err := ReplayOplog(ctx, e, a, ident, stable, top.TS)
	res.Replayed = n
	if err != nil {
		return res, err
	}
	if err := reconstructPrepared(ctx, a, log); err != nil {
		return res, err
	}
	if err := index.RestartUnfinishedBuilds(ctx, colls, index.BuildOptions{TempDir: cfg.TempDir, Log: log}); err != nil {
		return res, fmt.Errorf("restart index builds after recovery: %w", err)
	}
	if err := e.WaitUntilDurable(ctx); err != nil {
		return res, err
	}
	log.Info("Applied oplog entries during startup recovery", logv2.ID(21536), "numOpsApplied", n,
		"from", stable.String(), "to", top.String())
	return res, nil
}

// reconstructPrepared rebuilds the transactions left prepared (spec: "Startup Recovery":
// reconstruct prepared transactions after replaying the oplog).
func reconstructPrepared(ctx context.Context, a *oplog.Applier, log *slog.Logger) error {
	n, err := a.ReconstructPrepared(ctx)
	if err != nil {
		return fmt.Errorf("reconstruct prepared transactions: %w", err)
	}
	if n > 0 {
		log.Info("Reconstructed prepared transactions", "count", n)
	}
	return nil
}

// replayChunk bounds the oplog entries ReplayOplog holds in memory.
const replayChunk = 1000

// ReplayOplog applies the entries of the oplog table ident with from < ts <= to, in order,
// each in its own storage unit at its own timestamp, in oplog.ModeRecovering (idempotent: the
// data recovered to `from` may already reflect parts of them, e.g. a collection's creation),
// and returns how many it applied. Startup recovery and rollback both call it after
// recovering the data to the stable timestamp `from`.
//
// The entries are read at `to`, in chunks: a forward oplog cursor without a read timestamp
// stops at the oplog visibility point, which recovery moved back to the stable timestamp.
func ReplayOplog(ctx context.Context, e *storage.Engine, a *oplog.Applier, ident string, from, to optime.Timestamp) (int, error) {
	applied := 0
	for next := from + 1; next <= to; {
		chunk, err := readOplog(e, ident, next, to)
		if err != nil {
			return applied, err
		}
		if len(chunk) == 0 {
			break
		}
		for _, raw := range chunk {
			if err := ctx.Err(); err != nil {
				return applied, err
			}
			ru := e.NewRecoveryUnit()
			err := a.Apply(ctx, ru, raw, oplog.ModeRecovering)
			ru.Close()
			if err != nil {
				ot, _ := oplog.EntryOpTime(raw)
				return applied, fmt.Errorf("replay oplog entry %v: %w", ot, err)
			}
			applied++
		}
		last, err := oplog.EntryOpTime(chunk[len(chunk)-1])
		if err != nil {
			return applied, err
		}
		next = last.TS + 1
	}
	return applied, nil
}

// readOplog returns up to replayChunk entries with from <= ts <= to.
func readOplog(e *storage.Engine, ident string, from, to optime.Timestamp) ([]bsoncore.Document, error) {
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.SetReadSource(storage.ReadProvided, to); err != nil {
		return nil, err
	}
	c, err := ru.NewCursor(ident, storage.CursorOptions{Lower: recordid.Long(int64(from)).Key(),
		Upper: recordid.Long(int64(to) + 1).Key()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []bsoncore.Document
	for ok := c.First(); ok && len(out) < replayChunk; ok = c.Next() {
		out = append(out, append(bsoncore.Document(nil), c.Value()...))
	}
	return out, c.Err()
}

// Markers are the consistency markers of the local.replset.minvalid document.
type Markers struct {
	// MinValid is the optime the data must reach to be consistent (null: none).
	MinValid optime.OpTime
	// InitialSyncFlag: an initial sync started and has not finished.
	InitialSyncFlag bool
}

// ParseMarkers reads the markers from a local.replset.minvalid document (nil: none set).
func ParseMarkers(doc bsoncore.Document) (Markers, error) {
	var m Markers
	if doc == nil {
		return m, nil
	}
	if v, err := doc.LookupErr("ts"); err == nil {
		s, i, ok := v.TimestampOK()
		if !ok {
			return m, fmt.Errorf("%s: ts is not a timestamp: %w", MinValidNS, storage.ErrCorrupt)
		}
		t, _ := doc.Lookup("t").AsInt64OK()
		m.MinValid = optime.OpTime{TS: optime.MakeTimestamp(s, i), Term: t}
	}
	m.InitialSyncFlag, _ = doc.Lookup("doingInitialSync").BooleanOK()
	return m, nil
}

// Consistent reports whether data whose oplog ends at top has reached minValid (a null
// minValid always has: entries written before the first election have term -1, which
// compares below it).
func (m Markers) Consistent(top optime.OpTime) bool {
	return m.MinValid == (optime.OpTime{}) || !top.Less(m.MinValid)
}

func (m Markers) document() bsoncore.Document {
	b := m.MinValid.Append(bsoncore.NewDocumentBuilder().AppendString("_id", "minvalid"))
	if m.InitialSyncFlag {
		b.AppendBoolean("doingInitialSync", true)
	}
	return b.Build()
}

// LoadMarkers reads the persisted consistency markers.
func LoadMarkers(e *storage.Engine, cat *catalog.Catalog, colls *index.Collections) (Markers, error) {
	doc, err := applier.LoadLocalDoc(e, cat, colls, MinValidNS)
	if err != nil {
		return Markers{}, fmt.Errorf("read %s: %w", MinValidNS, err)
	}
	return ParseMarkers(doc)
}

// saveMarkers persists m and waits until it is journaled: the markers describe data that a
// crash must not make look consistent.
func saveMarkers(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, m Markers) error {
	if err := applier.SaveLocalDoc(ctx, e, cat, colls, MinValidNS, m.document()); err != nil {
		return err
	}
	return e.WaitUntilDurable(ctx)
}

// MinValid reads the persisted minValid optime (null when none was set).
func MinValid(e *storage.Engine, cat *catalog.Catalog, colls *index.Collections) (optime.OpTime, error) {
	m, err := LoadMarkers(e, cat, colls)
	return m.MinValid, err
}

// SetMinValid persists minValid = op (keeping the initial-sync flag) and waits until it is
// journaled: the member is not consistent until its lastApplied reaches op, even after a
// crash.
func SetMinValid(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, op optime.OpTime) error {
	m, err := LoadMarkers(e, cat, colls)
	if err != nil {
		return err
	}
	m.MinValid = op
	if err := saveMarkers(ctx, e, cat, colls, m); err != nil {
		return fmt.Errorf("set minValid: %w", err)
	}
	return nil
}

// SetInitialSyncFlag durably records that an initial sync is under way, before it drops any
// data: a restart while it is set redoes initial sync.
func SetInitialSyncFlag(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections) error {
	m, err := LoadMarkers(e, cat, colls)
	if err != nil {
		return err
	}
	m.InitialSyncFlag = true
	if err := saveMarkers(ctx, e, cat, colls, m); err != nil {
		return fmt.Errorf("set the initial sync flag: %w", err)
	}
	return nil
}

// ClearInitialSyncFlag durably ends an initial sync whose data is consistent at op: minValid
// becomes op and the flag is cleared in one write. The caller has made the copied data
// durable first (the journal is flushed again before this returns).
func ClearInitialSyncFlag(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, colls *index.Collections, op optime.OpTime) error {
	if err := saveMarkers(ctx, e, cat, colls, Markers{MinValid: op}); err != nil {
		return fmt.Errorf("clear the initial sync flag: %w", err)
	}
	return nil
}
