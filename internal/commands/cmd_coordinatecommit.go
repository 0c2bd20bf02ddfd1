package commands

// The shard primary's two-phase commit coordinator (spec: sharding.md "Two-phase Commit
// Protocol"; internal/sharding/txncoord): coordinateCommitTransaction, the service's wiring
// (its store over this node's config.transaction_coordinators, its sends over the shard
// registry's replica-set clients, its terms following the node's step-ups) and the
// twoPhaseCommitCoordinator serverStatus section.

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/txncoord"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/participant"
)

func addTxnCoordinator(r *service.Registry) {
	add(r, &service.Command{Name: "coordinateCommitTransaction", Auth: service.AuthInternal, Handler: runCoordinateCommitTransaction, AdminOnly: true,
		Writes: true, Secondary: service.SecondaryNever,
		Help: "Coordinates the commit for a transaction. Only called by mongos."})
}

type txnCoordKey struct{}

type txnCoordHolder struct{ svc *txncoord.Service }

// startTxnCoordinator builds a shard's coordinator service, run in each term in which the
// node is a writable primary; stop closes it.
func startTxnCoordinator(st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	if rc == nil {
		return func() {}
	}
	run := internalRunner(st, reg)
	store := txncoord.LocalStore{
		Run: txncoord.RunFunc(run),
		WaitMajority: func(ctx context.Context) error {
			_, err := waitMajority(ctx, &service.Env{State: st, Registry: reg}, emptyDoc)
			return err
		},
	}
	cluster := migrationCluster{st: st, reg: reg}
	send := func(ctx context.Context, shard string, cmd bsoncore.Document) (bsoncore.Document, error) {
		// One attempt is bounded: a dead primary makes the driver wait for a new one, and
		// the coordinator retries anyway.
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return cluster.RunOnShard(ctx, shard, "admin", cmd)
	}
	s := txncoord.NewService(store, send, st.Logger)
	s.ReturnImmediately = func() bool {
		return st.Params.Bool("coordinateCommitTransactionReturnImmediatelyAfterPersistingDecision")
	}
	st.Decorate(txnCoordKey{}, func() any { return &txnCoordHolder{svc: s} })
	stopWatch := s.Watch(rc)
	return func() {
		stopWatch()
		s.Close()
	}
}

func txnCoordOf(st *service.State) *txncoord.Service {
	h, _ := st.Decorate(txnCoordKey{}, func() any { return &txnCoordHolder{} }).(*txnCoordHolder)
	if h == nil {
		return nil
	}
	return h.svc
}

// appendTxnCoordinatorStatus appends serverStatus.twoPhaseCommitCoordinator on a shard.
func appendTxnCoordinatorStatus(b []byte, st *service.State) []byte {
	if s := txnCoordOf(st); s != nil {
		return s.AppendServerStatus(b)
	}
	return b
}

// parseCoordinateParticipants reads participants: [{shardId}], refusing duplicates.
func parseCoordinateParticipants(cmd bsoncore.Document) ([]string, error) {
	v := lookup(cmd, "participants")
	if v.Type == 0 {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'coordinateCommitTransaction.participants' is missing but a required field")
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch("coordinateCommitTransaction", "participants", v.Type, "array")
	}
	vals, _ := arr.Values()
	out := make([]string, 0, len(vals))
	seen := map[string]bool{}
	for _, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			return nil, typeMismatch("coordinateCommitTransaction.participants", "participants", e.Type, "object")
		}
		sv := d.Lookup("shardId")
		if sv.Type == 0 {
			return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'coordinateCommitTransaction.participants.shardId' is missing but a required field")
		}
		id, ok := sv.StringValueOK()
		if !ok {
			return nil, typeMismatch("coordinateCommitTransaction.participants", "shardId", sv.Type, "string")
		}
		if seen[id] {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "participant list contained duplicate shardId %s", id)
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}

// runCoordinateCommitTransaction is coordinateCommitTransaction: with participants it
// creates or joins the transaction's coordinator; with none (a commit retried through
// another router) it joins a running one or learns the outcome from this shard's own
// participant. It answers once the decision is durable and the client's write concern is
// satisfied; an abort decision is its error.
func runCoordinateCommitTransaction(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if _, err := requireShard(env, "coordinateCommitTransaction"); err != nil {
		return nil, err
	}
	if lookup(cmd, "txnNumber").Type == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "coordinateCommitTransaction must be run within a transaction")
	}
	key, txnNumber, err := parseTxnNumber(env, cmd)
	if err != nil {
		return nil, err
	}
	if ac := lookup(cmd, "autocommit"); ac.Type != bsoncore.TypeBoolean || ac.Boolean() {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Must specify autocommit=false on all operations of a multi-statement transaction.")
	}
	lsid, _ := lookup(cmd, "lsid").DocumentOK()
	participants, err := parseCoordinateParticipants(cmd)
	if err != nil {
		return nil, err
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	svc := txnCoordOf(env.State)
	if svc == nil {
		return nil, mongoerr.New(mongoerr.NoShardingEnabled, "coordinateCommitTransaction: this node runs no transaction coordinator")
	}
	var d txncoord.Decision
	if len(participants) > 0 {
		self, _ := requireShard(env, "coordinateCommitTransaction")
		d, err = svc.Coordinate(ctx, lsid, txnNumber, participants, func(ctx context.Context) (bool, error) {
			if !slices.Contains(participants, self) {
				return false, nil
			}
			return localOutcome(ctx, env, key, txnNumber)
		})
	} else {
		var found bool
		d, found, err = svc.Recover(ctx, lsid, txnNumber)
		if err == nil && !found {
			err = recoverFromLocalParticipant(ctx, env, key, txnNumber)
			if err != nil {
				return nil, err
			}
			return txnFinishConcern(ctx, env, wc, emptyDoc)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return txnFinishConcern(ctx, env, wc, emptyDoc)
}

// recoverFromLocalParticipant is recoverDecisionFromLocalParticipantOrAbortLocalParticipant:
// no coordinator runs here, so this shard's participant decides: committed answers ok; in
// progress is aborted (the coordinator gave up, or a newer primary has it) and, like an
// aborted or unknown transaction, answers NoSuchTransaction; prepared without a coordinator
// is a delayed or byzantine request.
func recoverFromLocalParticipant(ctx context.Context, env *service.Env, key lsc.Key, txnNumber int64) error {
	db, err := writeRequireDB(env)
	if err != nil {
		return err
	}
	p := env.State.Params
	stmt, err := participant.Of(db).Begin(ctx, participant.BeginArgs{
		Key: key, TxnNumber: txnNumber, Command: "coordinateCommitTransaction", Term: env.State.Repl.Term,
		Lifetime:    time.Duration(p.Int("transactionLifetimeLimitSeconds")) * time.Second,
		LockTimeout: time.Duration(p.Int("maxTransactionLockRequestTimeoutMillis")) * time.Millisecond,
	})
	switch {
	case mongoerr.Is(err, mongoerr.TransactionCommitted):
		return nil
	case mongoerr.Is(err, mongoerr.PreparedTransactionInProgress):
		return mongoerr.New(mongoerr.Location51021, "coordinateCommitTransaction command found local participant is prepared but no active coordinator exists")
	case err != nil:
		return err
	}
	state := stmt.Txn.State()
	if state == participant.InProgress {
		err = stmt.Abort(ctx)
	}
	stmt.End(nil)
	if err != nil && !mongoerr.Is(err, mongoerr.NoSuchTransaction) {
		return err
	}
	switch state {
	case participant.Committed:
		return nil
	case participant.Prepared:
		return mongoerr.New(mongoerr.Location51021, "coordinateCommitTransaction command found local participant is prepared but no active coordinator exists")
	}
	return mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
}

// localOutcome is the admission of a new coordinator on a shard that is one of the
// participants (the router picks its recovery shard): a transaction its participant already
// committed or aborted was coordinated before, and this is a retry (done, with the
// outcome as err); one in progress or prepared is coordinated now.
func localOutcome(ctx context.Context, env *service.Env, key lsc.Key, txnNumber int64) (done bool, err error) {
	db, err := writeRequireDB(env)
	if err != nil {
		return true, err
	}
	p := env.State.Params
	stmt, err := participant.Of(db).Begin(ctx, participant.BeginArgs{
		Key: key, TxnNumber: txnNumber, Command: "coordinateCommitTransaction", Term: env.State.Repl.Term,
		Lifetime:    time.Duration(p.Int("transactionLifetimeLimitSeconds")) * time.Second,
		LockTimeout: time.Duration(p.Int("maxTransactionLockRequestTimeoutMillis")) * time.Millisecond,
	})
	switch {
	case mongoerr.Is(err, mongoerr.TransactionCommitted):
		return true, nil
	case mongoerr.Is(err, mongoerr.PreparedTransactionInProgress):
		return false, nil
	case err != nil:
		return true, err
	}
	state := stmt.Txn.State()
	stmt.End(nil)
	switch state {
	case participant.Committed:
		return true, nil
	case participant.Aborted:
		return true, mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
	}
	return false, nil
}
