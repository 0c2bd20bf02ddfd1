package rollback

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// Remote is the sync source's side of rollback.
type Remote interface {
	// OplogNewestFirst opens an iterator over the source's oplog from its newest entry.
	OplogNewestFirst(ctx context.Context) (Iterator, error)
}

// Local is the rolling-back node's storage (Node implements it over the storage engine).
type Local interface {
	DocumentReader
	// OplogNewestFirst opens an iterator over our oplog from its newest entry. It must be
	// closed before RecoverToStable (it holds a storage snapshot).
	OplogNewestFirst(ctx context.Context) (Iterator, error)
	// StableTimestamp is the timestamp RecoverToStable recovers to.
	StableTimestamp() optime.Timestamp
	// LockForRecovery excludes every other user of the data (the global lock in X) until
	// unlock is called.
	LockForRecovery(ctx context.Context) (unlock func(), err error)
	// SetOplogTruncateAfterPoint persists oplogTruncateAfterPoint (null clears it).
	SetOplogTruncateAfterPoint(ctx context.Context, ts optime.Timestamp) error
	// RecoverToStable rolls the data back to the stable timestamp and reloads what is kept
	// in memory about it (catalog, collection handles); it returns the stable timestamp.
	RecoverToStable(ctx context.Context) (optime.Timestamp, error)
	// TruncateOplogAfter removes our oplog entries with a timestamp after ts.
	TruncateOplogAfter(ctx context.Context, ts optime.Timestamp) error
	// ReplayOplog applies our oplog entries with from < ts <= to again, in order, and
	// returns how many it applied.
	ReplayOplog(ctx context.Context, from, to optime.Timestamp) (int, error)
	// SetMinValid durably records the optime our data must reach before it is consistent.
	SetMinValid(ctx context.Context, op optime.OpTime) error
	// ResetOplogTop tells the oplog writer that op is the top of our oplog again (its
	// LastWritten only moves forward by itself).
	ResetOplogTop(op optime.OpTime)
}

// Config configures Run.
type Config struct {
	Local  Local
	Remote Remote
	// CommitPoint is this node's majority commit point: the common point may not be before
	// it (that would roll back majority-committed writes).
	CommitPoint optime.OpTime
	// IncrementRBID persists and publishes the next rollback id and returns it.
	IncrementRBID func(ctx context.Context) (int32, error)
	// Dir is <dbpath>/rollback, where the rollback data files go; "" writes none
	// (createRollbackDataFiles: false).
	Dir string
	// Now names the rollback files (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Result describes a finished rollback.
type Result struct {
	CommonPoint optime.OpTime
	// MinValid is the sync source's newest entry when rollback read its oplog: our data is
	// not consistent until we have applied that far (persisted as minValid).
	MinValid optime.OpTime
	// Stable is the timestamp the data was recovered to.
	Stable optime.Timestamp
	// RolledBack is the number of our oplog entries removed.
	RolledBack int
	// Replayed is the number of our entries in (Stable, CommonPoint] applied again.
	Replayed int
	RBID     int32
	Files    []File
}

// IsUnrecoverable reports whether err from Run means the node must shut down rather than try
// again: no common point, a common point before the stable timestamp or the commit point, or a
// failure after data modification began (UnrecoverableRollbackError, 127).
func IsUnrecoverable(err error) bool { return mongoerr.Is(err, mongoerr.UnrecoverableRollbackError) }

func unrecoverable(format string, args ...any) error {
	return mongoerr.Newf(mongoerr.UnrecoverableRollbackError, format, args...)
}

// Run rolls our data back onto the sync source's branch (see the package comment). The caller
// has moved the member to ROLLBACK and stopped oplog application. An error that is not
// IsUnrecoverable left the data untouched, and rollback may be attempted again.
func Run(ctx context.Context, cfg Config) (Result, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With(logv2.C(logv2.Replication))
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	var res Result
	start := time.Now()

	cp, err := findCommonPoint(ctx, cfg)
	if err != nil {
		if mongoerr.Is(err, mongoerr.NoMatchingDocument) {
			return res, unrecoverable("rollback: no common point with the sync source: %w", err)
		}
		return res, fmt.Errorf("rollback: finding the common point: %w", err)
	}
	res.CommonPoint, res.RolledBack, res.MinValid = cp.OpTime, len(cp.RolledBack), cp.remoteTop
	if len(cp.RolledBack) == 0 {
		// Our newest entry is on the source's branch (a stale request: the source rolled
		// forward since, or another source was checked): nothing to do.
		log.Info("Rollback not needed: our newest oplog entry is in the sync source's oplog", logv2.ID(21608),
			"commonPoint", cp.OpTime.String())
		return res, nil
	}
	stable := cfg.Local.StableTimestamp()
	log.Info("Rollback common point", logv2.ID(21607), "commonPoint", cp.OpTime.String(),
		"entriesToRollBack", len(cp.RolledBack), "stableTimestamp", stable.String())
	switch {
	case stable.IsNull():
		return res, unrecoverable("rollback: no stable timestamp to recover to (common point %v)", cp.OpTime)
	case cp.OpTime.TS < stable:
		return res, unrecoverable("rollback: common point %v is before the stable timestamp %v; rolling back would lose majority-committed writes",
			cp.OpTime, stable)
	case cp.OpTime.TS < cfg.CommitPoint.TS:
		return res, unrecoverable("rollback: common point %v is before the majority commit point %v", cp.OpTime, cfg.CommitPoint)
	}
	if cfg.IncrementRBID != nil {
		if res.RBID, err = cfg.IncrementRBID(ctx); err != nil {
			return res, fmt.Errorf("rollback: incrementing the rollback id: %w", err)
		}
	}
	unlock, err := cfg.Local.LockForRecovery(ctx)
	if err != nil {
		return res, fmt.Errorf("rollback: taking the global lock: %w", err)
	}
	defer unlock()

	// Data modification: a failure from here on leaves data the node cannot vouch for.
	if cfg.Dir != "" {
		res.Files, err = WriteFiles(ctx, cfg.Dir, now(), cfg.Local, TouchedDocuments(cp.RolledBack))
		if err != nil {
			return res, unrecoverable("rollback: writing rollback data files: %w", err)
		}
		for _, f := range res.Files {
			log.Info("Wrote rollback data file", logv2.ID(20329), "file", f.Path, "uuid", f.Collection.String(), "documents", f.Docs)
		}
	}
	// From here on our data is on no consistent point of the source's branch until we have
	// applied the source's oplog up to its top as read above (MongoDB sets minValid to it):
	// the member stays RECOVERING until then, also after a crash.
	if err := cfg.Local.SetMinValid(ctx, res.MinValid); err != nil {
		return res, unrecoverable("rollback: setting minValid: %w", err)
	}
	// A crash from here until the end leaves the oplog to be truncated back to the common
	// point at the next start (applier.RecoverTruncatePoint).
	if err := cfg.Local.SetOplogTruncateAfterPoint(ctx, cp.OpTime.TS); err != nil {
		return res, unrecoverable("rollback: setting oplogTruncateAfterPoint: %w", err)
	}
	if res.Stable, err = cfg.Local.RecoverToStable(ctx); err != nil {
		return res, unrecoverable("rollback: recovering to the stable timestamp %v: %w", stable, err)
	}
	if err := cfg.Local.TruncateOplogAfter(ctx, cp.OpTime.TS); err != nil {
		return res, unrecoverable("rollback: truncating the oplog after %v: %w", cp.OpTime, err)
	}
	if res.Replayed, err = cfg.Local.ReplayOplog(ctx, res.Stable, cp.OpTime.TS); err != nil {
		return res, unrecoverable("rollback: applying the oplog from %v to %v: %w", res.Stable, cp.OpTime, err)
	}
	if err := cfg.Local.SetOplogTruncateAfterPoint(ctx, 0); err != nil {
		return res, unrecoverable("rollback: clearing oplogTruncateAfterPoint: %w", err)
	}
	// The optimes derived from the oplog's top (operationTime, the optime a write concern
	// waits for) must not stay on the branch we left.
	cfg.Local.ResetOplogTop(cp.OpTime)
	log.Info("Rollback summary", logv2.ID(21612), "commonPoint", cp.OpTime.String(), "stableTimestamp", res.Stable.String(),
		"rolledBackEntries", res.RolledBack, "replayedEntries", res.Replayed, "minValid", res.MinValid.String(), "rbid", res.RBID,
		"rollbackFiles", len(res.Files), "durationMillis", time.Since(start).Milliseconds())
	return res, nil
}

// commonPoint is FindCommonPoint's result plus the source's top of oplog.
type commonPoint struct {
	CommonPoint
	remoteTop optime.OpTime
}

// findCommonPoint opens both iterators and closes them before returning: ours holds a storage
// snapshot, which recovery does not allow. The source's first (newest) entry is its top of
// oplog, rollback's minValid.
func findCommonPoint(ctx context.Context, cfg Config) (commonPoint, error) {
	local, err := cfg.Local.OplogNewestFirst(ctx)
	if err != nil {
		return commonPoint{}, err
	}
	defer local.Close()
	remote, err := cfg.Remote.OplogNewestFirst(ctx)
	if err != nil {
		return commonPoint{}, err
	}
	defer remote.Close()
	top := &topRecorder{Iterator: remote}
	cp, err := FindCommonPoint(ctx, local, top)
	return commonPoint{CommonPoint: cp, remoteTop: top.top}, err
}

// topRecorder remembers the optime of the first entry its iterator returns.
type topRecorder struct {
	Iterator
	top  optime.OpTime
	seen bool
}

func (r *topRecorder) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	d, ok, err := r.Iterator.Next(ctx)
	if ok && err == nil && !r.seen {
		r.seen = true
		r.top, _ = oplog.EntryOpTime(d) // a malformed entry fails FindCommonPoint itself
	}
	return d, ok, err
}
