package commands

// Retryable writes: the glue between the write commands and internal/txn/retryable. retryBegin
// validates a command's session arguments and checks its session out; the replay functions
// rebuild a command's reply for a statement that already ran, from its oplog entry (and the
// findAndModify image).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/participant"
	"humongo/internal/txn/retryable"
)

// parseTxnNumber validates a command's txnNumber (present) with its lsid as MongoDB's
// initializeOperationSessionInfo does, for retryable writes and transactions alike.
func parseTxnNumber(env *service.Env, cmd bsoncore.Document) (lsc.Key, int64, error) {
	lv, tv := lookup(cmd, "lsid"), lookup(cmd, "txnNumber")
	if lv.Type == 0 {
		return lsc.Key{}, 0, mongoerr.New(mongoerr.InvalidOptions, "Transaction number requires a session ID to also be specified")
	}
	if env.State == nil || env.State.Repl == nil {
		return lsc.Key{}, 0, mongoerr.New(mongoerr.IllegalOperation,
			"Transaction numbers are only allowed on a replica set member or mongos")
	}
	if tv.Type != bsoncore.TypeInt64 {
		return lsc.Key{}, 0, typeMismatch("OperationSessionInfo", "txnNumber", tv.Type, "long")
	}
	if tv.Int64() < 0 {
		return lsc.Key{}, 0, mongoerr.New(mongoerr.InvalidOptions, "Transaction number cannot be negative")
	}
	key, err := service.ParseLsid(lv)
	return key, tv.Int64(), err
}

// retryBegin validates the command's session arguments and, for a retryable write, checks
// the session out (the caller defers end). Outside a session or inside a multi-document
// transaction it returns nil.
func retryBegin(ctx context.Context, env *service.Env, cmd bsoncore.Document) (*retryable.Txn, error) {
	if lookup(cmd, "txnNumber").Type == 0 {
		return nil, nil
	}
	key, txn, err := parseTxnNumber(env, cmd)
	if err != nil {
		return nil, err
	}
	if txnStmtOf(ctx) != nil {
		return nil, nil // a transaction statement: the transaction records it at commit
	}
	if env.DB == "local" {
		// Writes to local are never logged, so there is nothing to record them by: like
		// mongod (no oplog for local, so no config.transactions entry), they run as plain
		// writes. Recording would also create config.transactions, a replicated write a
		// member that is not primary (say, in initial sync) must refuse.
		return nil, nil
	}
	db, err := writeRequireDB(env)
	if err != nil {
		return nil, err
	}
	base, ids, err := parseStmtIDs(cmd)
	if err != nil {
		return nil, err
	}
	if err := participant.BeforeRetryableWrite(ctx, db, key, txn); err != nil {
		return nil, err
	}
	t, err := retryable.Begin(ctx, db, key, txn, env.State.Repl.Term)
	if err != nil {
		return nil, err
	}
	t.SetStmtIDs(base, ids)
	return t, nil
}

// retryEnd checks a retryable write's session back in and passes on a fail point's request
// to close the client's connection (onPrimaryTransactionalWrite) to the server.
func retryEnd(env *service.Env, rc *retryable.Txn) {
	if rc.CloseRequested() {
		env.CloseConnection = true
	}
	rc.End()
}

// replayUpdate rebuilds the result of an update statement that already ran: an insert
// entry is an upsert, an update entry one modified document.
func retryReplayUpdate(ctx context.Context, s *retryable.Stmt) (writeUpdateResult, bool, error) {
	e, err := s.Entry(ctx)
	if err != nil || e == nil {
		return writeUpdateResult{}, false, err
	}
	res := writeUpdateResult{n: 1}
	switch lookup(e, "op").StringValue() {
	case "i":
		o, _ := lookup(e, "o").DocumentOK()
		res.upserted = lookup(o, "_id")
	case "u":
		res.nModified = 1
	default:
		return res, false, s.Mismatch("update")
	}
	return res, true, nil
}

// replayDelete rebuilds a delete statement that already ran: one document deleted.
func retryReplayDelete(ctx context.Context, s *retryable.Stmt) (writeDeleteResult, bool, error) {
	e, err := s.Entry(ctx)
	if err != nil || e == nil {
		return writeDeleteResult{}, false, err
	}
	if lookup(e, "op").StringValue() != "d" {
		return writeDeleteResult{}, false, s.Mismatch("delete")
	}
	return writeDeleteResult{n: 1}, true, nil
}

// retryFamResult is a findAndModify reply rebuilt for a retry.
type retryFamResult struct {
	n        int
	value    bsoncore.Document
	existed  bool
	upserted bsoncore.Value
}

// replayFam rebuilds a findAndModify that already ran from its oplog entry and, for an
// update or removal, the image stored with it (the value the first execution returned).
func retryReplayFam(ctx context.Context, s *retryable.Stmt, remove, returnNew bool) (*retryFamResult, error) {
	e, err := s.Entry(ctx)
	if err != nil || e == nil {
		return nil, err
	}
	op := lookup(e, "op").StringValue()
	switch {
	case op == "i" && !remove:
		o, _ := lookup(e, "o").DocumentOK()
		r := &retryFamResult{n: 1, upserted: lookup(o, "_id")}
		if returnNew {
			r.value = o
		}
		return r, nil
	case (op == "d" && remove) || (op == "u" && !remove):
	default:
		return nil, s.Mismatch("findAndModify")
	}
	value, err := s.Image(ctx, e)
	if err != nil {
		return nil, err
	}
	return &retryFamResult{n: 1, value: value, existed: !remove}, nil
}
