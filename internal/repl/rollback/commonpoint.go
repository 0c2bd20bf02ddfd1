package rollback

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// Iterator walks an oplog from its newest entry towards its oldest.
type Iterator interface {
	// Next returns the next older entry; ok is false once the oldest entry was returned.
	// The document stays valid after later calls.
	Next(ctx context.Context) (entry bsoncore.Document, ok bool, err error)
	Close()
}

// CommonPoint is where our oplog and the sync source's stop differing.
type CommonPoint struct {
	// OpTime is the newest entry both oplogs have, with the same ts and term.
	OpTime optime.OpTime
	// RolledBack are our entries after OpTime, newest first.
	RolledBack []*oplog.Entry
	// RemoteScanned counts the source's entries read, the common point included.
	RemoteScanned int
}

// FindCommonPoint walks both oplogs backwards in step (MongoDB's
// syncRollBackLocalOperations): the iterator whose current entry is newer moves; an entry of
// ours that is newer than the source's current one, or at the same timestamp in another term,
// is not on the source's branch and is rolled back. The first (ts, t) both have is the common
// point. Running out of either oplog first is NoMatchingDocument: without a common point the
// node cannot get back onto the source's history (the caller treats it as unrecoverable).
func FindCommonPoint(ctx context.Context, local, remote Iterator) (CommonPoint, error) {
	var cp CommonPoint
	next := func(it Iterator, whose string) (bsoncore.Document, optime.OpTime, bool, error) {
		d, ok, err := it.Next(ctx)
		if err != nil || !ok {
			if err != nil {
				err = fmt.Errorf("reading %s oplog: %w", whose, err)
			}
			return nil, optime.OpTime{}, false, err
		}
		ot, err := oplog.EntryOpTime(d)
		if err != nil {
			return nil, optime.OpTime{}, false, fmt.Errorf("%s oplog: %w", whose, err)
		}
		return d, ot, true, nil
	}
	l, lot, lok, err := next(local, "our")
	if err != nil {
		return cp, err
	}
	_, rot, rok, err := next(remote, "the sync source's")
	if err != nil {
		return cp, err
	}
	if rok {
		cp.RemoteScanned++
	}
	for {
		switch {
		case !lok:
			return cp, mongoerr.Newf(mongoerr.NoMatchingDocument,
				"reached the beginning of our oplog without finding a common point with the sync source (rolled back %d entries, read %d of the source's)",
				len(cp.RolledBack), cp.RemoteScanned)
		case !rok:
			return cp, mongoerr.Newf(mongoerr.NoMatchingDocument,
				"reached the beginning of the sync source's oplog without finding a common point (our oldest entry examined %v)", lot)
		case lot.TS == rot.TS && lot.Term == rot.Term:
			cp.OpTime = lot
			return cp, nil
		}
		advanceLocal := lot.TS >= rot.TS
		advanceRemote := lot.TS <= rot.TS
		if advanceLocal {
			e, err := oplog.ParseEntry(l)
			if err != nil {
				return cp, fmt.Errorf("our oplog entry at %v: %w", lot, err)
			}
			cp.RolledBack = append(cp.RolledBack, e)
			if l, lot, lok, err = next(local, "our"); err != nil {
				return cp, err
			}
		}
		if advanceRemote {
			if _, rot, rok, err = next(remote, "the sync source's"); err != nil {
				return cp, err
			}
			if rok {
				cp.RemoteScanned++
			}
		}
	}
}

// SliceIterator iterates entries given oldest first, from the newest (tests, small oplogs).
type SliceIterator struct {
	entries []bsoncore.Document
	i       int
}

// NewSliceIterator returns an iterator over entries (oldest first).
func NewSliceIterator(entries []bsoncore.Document) *SliceIterator {
	return &SliceIterator{entries: entries, i: len(entries)}
}

// Next returns the next older entry.
func (s *SliceIterator) Next(context.Context) (bsoncore.Document, bool, error) {
	if s.i == 0 {
		return nil, false, nil
	}
	s.i--
	return s.entries[s.i], true, nil
}

// Close does nothing.
func (*SliceIterator) Close() {}
