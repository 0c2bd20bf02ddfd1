package router

// commitTransaction and abortTransaction through the router (spec: sharding.md "Committing a
// Transaction", "Aborting a Transaction"; MongoDB's cluster_commit_transaction_cmd,
// cluster_abort_transaction_cmd and TransactionRouter::Router::commitTransaction /
// abortTransaction). The commit path follows the participants: none → nothing to do; one →
// commitTransaction to it; one that wrote among read-only ones → commitTransaction to the
// read-only ones, then to the writer; none wrote → commitTransaction to each; else
// coordinateCommitTransaction with the participant list to the coordinator (the recovery
// shard), which runs two-phase commit. A router that does not know the transaction
// (the client recovers the decision through another router) sends coordinateCommitTransaction
// with no participants to the recovery shard its recoveryToken names.

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// txnEndCommands are commitTransaction and abortTransaction.
func txnEndCommands() []*service.Command {
	return []*service.Command{
		{Name: "commitTransaction", Auth: service.AuthAnyUser, Handler: runRouterCommit, AdminOnly: true, Writes: true,
			Help: "commit a multi-document transaction", Secondary: service.SecondaryAlways},
		{Name: "abortTransaction", Auth: service.AuthAnyUser, Handler: runRouterAbort, AdminOnly: true, Writes: true,
			Help: "abort a multi-document transaction", Secondary: service.SecondaryAlways},
	}
}

// clientWriteConcern is the command's writeConcern (nil when absent), passed to the shards.
func clientWriteConcern(name string, cmd bsoncore.Document) (bsoncore.Document, error) {
	return docArg(name, cmd, "writeConcern")
}

func runRouterCommit(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "commitTransaction"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if !inTxn(cmd) {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "commitTransaction must be run within a transaction")
	}
	wc, err := clientWriteConcern(name, cmd)
	if err != nil {
		return nil, err
	}
	token, err := docArg(name, cmd, "recoveryToken")
	if err != nil {
		return nil, err
	}
	t, err := beginTxn(env, c, cmd, txnCommit)
	if err != nil {
		return nil, err
	}
	reply, err := t.commit(ctx, c, wc, token)
	if err != nil {
		return nil, err
	}
	return t.appendRecoveryToken(reply), nil
}

// commit runs the transaction's commit path and returns the reply for the client.
func (t *routerTxn) commit(ctx context.Context, c *Cluster, wc, token bsoncore.Document) (bsoncore.Document, error) {
	t.mu.Lock()
	recovering := t.recovering
	first := !t.commitStarted
	t.commitStarted = true
	var readOnly, writers []string
	var unset string
	for _, p := range t.participants {
		switch p.readOnly {
		case readOnlyUnset:
			if unset == "" {
				unset = p.shard
			}
		case readOnlyYes:
			readOnly = append(readOnly, p.shard)
		default:
			writers = append(writers, p.shard)
		}
	}
	n := len(t.participants)
	all := make([]string, 0, n)
	for _, p := range t.participants {
		all = append(all, p.shard)
	}
	recovery := t.recovery
	t.mu.Unlock()

	if recovering {
		if token == nil {
			return nil, mongoerr.New(mongoerr.Location50940, "Cannot recover the transaction decision without a recoveryToken")
		}
		return t.commitWithToken(ctx, c, token, wc)
	}
	switch {
	case n == 0:
		// A transaction whose statements reached no shard (e.g. reads of a database that
		// does not exist).
		return emptyDoc, nil
	case unset != "":
		return nil, mongoerr.Newf(mongoerr.NoSuchTransaction,
			"%s:%d Failed to commit transaction because a previous statement on the transaction participant %s was unsuccessful.",
			t.desc, t.number, unset)
	case n == 1:
		return t.commitDirectly(ctx, c, all, wc)
	case len(writers) == 1:
		if !first {
			// A retried commit may follow a commit the write shard already decided: ask the
			// write shard (the recovery shard) for the outcome.
			tok := bsoncore.NewDocumentBuilder().AppendString("recoveryShardId", recovery).Build()
			return t.commitWithToken(ctx, c, tok, wc)
		}
		reply, err := t.commitDirectly(ctx, c, readOnly, wc)
		if err != nil {
			return nil, err
		}
		if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
			// The read-only shards' commit is not durable: the writer's commit must not start.
			code, _ := wce.Lookup("code").AsInt64OK()
			msg, _ := wce.Lookup("errmsg").StringValueOK()
			return nil, mongoerr.New(mongoerr.Code(code), msg)
		}
		return t.commitDirectly(ctx, c, writers, wc)
	case len(writers) == 0:
		return t.commitDirectly(ctx, c, readOnly, wc)
	}
	// The coordinator is the recovery shard (the first that wrote), not MongoDB's first
	// participant: a client that lost the commit's reply recovers through another router at
	// the shard its recoveryToken names, and only a coordinator there can answer while the
	// participants are prepared (a prepared participant without one is error 51021).
	coordinator := recovery
	if coordinator == "" {
		coordinator = all[0] // not reached: two writers made one of them the recovery shard
	}
	return t.coordinateCommit(ctx, c, coordinator, all, wc)
}

// commitDirectly sends commitTransaction to each shard and returns the first failure, else
// the first reply with a writeConcernError, else the last reply (sendCommitDirectlyToShards).
func (t *routerTxn) commitDirectly(ctx context.Context, c *Cluster, shards []string, wc bsoncore.Document) (bsoncore.Document, error) {
	b := bsoncore.NewDocumentBuilder().AppendInt32("commitTransaction", 1)
	if wc != nil {
		b.AppendDocument("writeConcern", wc)
	}
	cmd := b.Build()
	replies := make([]bsoncore.Document, len(shards))
	errs := make([]error, len(shards))
	fanOut(shards, func(i int, shard string) {
		replies[i], errs[i] = c.runTxnCommand(ctx, t, shard, cmd)
	})
	return firstTxnReply(replies, errs)
}

// firstTxnReply merges the shards' answers to a commit or abort as mongos: the first error,
// else the first reply with a writeConcernError, else the last reply (without the shards'
// connection fields).
func firstTxnReply(replies []bsoncore.Document, errs []error) (bsoncore.Document, error) {
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	last := emptyDoc
	for _, r := range replies {
		if r == nil {
			continue
		}
		if _, err := r.LookupErr("writeConcernError"); err == nil {
			return stripFields(r, replyNoise), nil
		}
		last = r
	}
	return stripFields(last, replyNoise), nil
}

// coordinateCommit hands the commit to coordinator (two-phase commit): from here on only the
// coordinator decides, so a failure does not abort the transaction implicitly.
func (t *routerTxn) coordinateCommit(ctx context.Context, c *Cluster, coordinator string, participants []string, wc bsoncore.Document) (bsoncore.Document, error) {
	ab := bsoncore.NewArrayBuilder()
	for _, s := range participants {
		ab.AppendDocument(bsoncore.NewDocumentBuilder().AppendString("shardId", s).Build())
	}
	b := bsoncore.NewDocumentBuilder().AppendInt32("coordinateCommitTransaction", 1).AppendArray("participants", ab.Build())
	if wc != nil {
		b.AppendDocument("writeConcern", wc)
	}
	reply, err := c.runTxnCommand(ctx, t, coordinator, b.Build())
	if err != nil {
		return nil, err
	}
	return stripFields(reply, replyNoise), nil
}

// commitWithToken learns (or joins) the decision from the recovery shard the token names
// (TransactionRouter::Router::_commitWithRecoveryToken).
func (t *routerTxn) commitWithToken(ctx context.Context, c *Cluster, token, wc bsoncore.Document) (bsoncore.Document, error) {
	v := token.Lookup("recoveryShardId")
	if v.Type == 0 || v.Type == bsoncore.TypeNull {
		return nil, mongoerr.New(mongoerr.NoSuchTransaction,
			"Recovery token is empty, meaning the transaction only performed reads and can be safely retried")
	}
	shard, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch,
			"BSON field 'TxnRecoveryToken.recoveryShardId' is the wrong type '%s', expected type 'string'", bsonutil.TypeName(v.Type))
	}
	t.mu.Lock()
	t.recovery = shard
	t.mu.Unlock()
	return t.coordinateCommit(ctx, c, shard, nil, wc)
}

func runRouterAbort(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "abortTransaction"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if !inTxn(cmd) {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "abortTransaction must be run within a transaction")
	}
	wc, err := clientWriteConcern(name, cmd)
	if err != nil {
		return nil, err
	}
	t, err := beginTxn(env, c, cmd, txnContinue)
	if err != nil {
		return nil, err
	}
	shards := t.shards()
	if len(shards) == 0 {
		return nil, mongoerr.New(mongoerr.NoSuchTransaction, "no known command has been sent by this router for this transaction")
	}
	replies, errs := t.abortOn(ctx, c, shards, wc)
	reply, err := firstTxnReply(replies, errs)
	if err != nil {
		return nil, err
	}
	return t.appendRecoveryToken(reply), nil
}

// String describes the transaction for logs.
func (t *routerTxn) String() string { return fmt.Sprintf("%s:%d", t.desc, t.number) }
