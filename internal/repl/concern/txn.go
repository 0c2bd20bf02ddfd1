package concern

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/storage"
)

// TxnSnapshot is where a transaction's snapshot reads: a storage read source and its
// timestamp (0 for the newest data).
type TxnSnapshot struct {
	Source storage.ReadSource
	TS     optime.Timestamp
	// AtClusterTime: read concern snapshot, TS is the transaction's atClusterTime (a shard
	// filters its reads by the chunk ownership of that time).
	AtClusterTime bool
}

// BeginTxn is Begin for a statement of a multi-document transaction: it gossips the
// $clusterTime in and, for the first statement, applies the transaction's read concern
// (only local, majority and snapshot; waiting for afterClusterTime / atClusterTime) and
// returns the snapshot the transaction reads. Later statements may not carry a readConcern.
// The statements' operations read through the transaction's unit, so the request's own read
// source stays empty.
func BeginTxn(ctx context.Context, n Node, cmd bsoncore.Document, first bool) (context.Context, *OpState, TxnSnapshot, error) {
	ctx, s, err := beginState(ctx, n, cmd)
	if err != nil {
		return ctx, s, TxnSnapshot{}, err
	}
	v := lookup(cmd, "readConcern")
	if !first {
		if v.Type != 0 {
			return ctx, s, TxnSnapshot{}, mongoerr.New(mongoerr.InvalidOptions,
				"Only the first command in a transaction may specify a readConcern")
		}
		return ctx, s, TxnSnapshot{}, nil
	}
	if v.Type != 0 {
		d, ok := v.DocumentOK()
		if !ok {
			return ctx, s, TxnSnapshot{}, mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'readConcern' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		var err error
		if s.rc, err = ParseReadConcern(d); err != nil {
			return ctx, s, TxnSnapshot{}, err
		}
	}
	switch s.rc.Level {
	case "", LevelLocal, LevelMajority, LevelSnapshot:
	default:
		return ctx, s, TxnSnapshot{}, mongoerr.Newf(mongoerr.InvalidOptions,
			"The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction. Current readConcern: %s", v.String())
	}
	if err := prepare(ctx, n, s); err != nil {
		return ctx, s, TxnSnapshot{}, err
	}
	snap := TxnSnapshot{Source: storage.ReadNoTimestamp}
	switch s.rc.Level {
	case LevelMajority, LevelSnapshot:
		snap = TxnSnapshot{Source: storage.ReadProvided, TS: s.req.ReadSource.TS, AtClusterTime: s.rc.Level == LevelSnapshot}
	}
	s.req.ReadSource = operation.ReadSource{}
	s.retAtCT = false
	return ctx, s, snap, nil
}
