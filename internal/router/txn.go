package router

// The router's transaction layer (spec: sharding.md "Transactions", "Committing a
// Transaction", "Aborting a Transaction"; MongoDB's TransactionRouter,
// src/mongo/s/transaction_router.cpp). A statement carrying autocommit: false runs in its
// session's transaction: txnStatement (wrapping the handlers of the commands allowed in a
// transaction) begins or continues the session's routerTxn and puts it in the context; every
// request the handler then sends to a shard (runOn, remote.run, runOnShards) goes through
// routerTxn.attach, which adds lsid, txnNumber and autocommit: false, and on the first
// request to a shard startTransaction: true and the transaction's readConcern (atClusterTime
// chosen from the router's clock for snapshot: the transaction's reads are then routed by
// the chunk ownership of that time, cmd_read.go's readsAt); the first participant is the
// coordinator (coordinator: true). Each shard reply's readOnly updates its participant; the
// first one that wrote is the recovery shard, named in the recoveryToken every reply in the
// transaction carries. A failed statement aborts the transaction on every participant
// (implicit abort); stale routing is retried only on the first statement with at most one
// participant. commitTransaction and abortTransaction are txn_commit.go.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/vclock"
)

// participant read-only states (TransactionRouter::Participant::ReadOnly).
const (
	readOnlyUnset int8 = iota // no successful reply yet
	readOnlyYes
	readOnlyNo // the shard wrote
)

// txnParticipant is one shard the transaction sent a statement to.
type txnParticipant struct {
	shard    string
	readOnly int8
	// createdAt is the statement that added the participant (a stale retry of the first
	// statement drops the participants it added).
	createdAt int
	// started: startTransaction was sent (it is sent once per participant).
	started bool
}

// routerTxn is one session's transaction as this router runs it.
type routerTxn struct {
	lsid   bsoncore.Value
	desc   string // the session id, for messages
	number int64

	mu sync.Mutex // a statement's requests to several shards run in parallel
	// readConcern is sent with startTransaction (nil: none).
	readConcern  bsoncore.Document
	participants []*txnParticipant
	recovery     string // the first shard that wrote
	stmt         int    // the current statement (0: the first)
	// commitStarted: a commit was sent (a retried commit takes the recovery path when the
	// commit was a single write shard's).
	commitStarted bool
	// recovering: this router learnt of the transaction by a commitTransaction (it runs
	// with the client's recoveryToken).
	recovering bool
	lastUsed   time.Time
}

// txnTable is the router's transactions by session (lsid bytes). An entry is replaced when
// the session starts a newer transaction and dropped once idle for the session timeout.
type txnTable struct {
	mu        sync.Mutex
	m         map[string]*routerTxn
	lastSweep time.Time
}

// txnIdle is how long an entry may stay unused (localLogicalSessionTimeoutMinutes' default:
// a session idle that long has expired on the shards too).
const txnIdle = 30 * time.Minute

func (tt *txnTable) get(key string) *routerTxn {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t := tt.m[key]
	if t != nil {
		t.lastUsed = time.Now()
	}
	return t
}

// drop forgets the transactions of the sessions match selects (killSessions).
func (tt *txnTable) drop(match func(lsc.Key) bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for key := range tt.m {
		k, err := service.ParseLsid(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: []byte(key)})
		if err == nil && match(k) {
			delete(tt.m, key)
		}
	}
}

func (tt *txnTable) put(key string, t *routerTxn) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	now := time.Now()
	if tt.m == nil {
		tt.m = map[string]*routerTxn{}
	}
	if now.Sub(tt.lastSweep) > time.Minute {
		tt.lastSweep = now
		for k, old := range tt.m {
			if now.Sub(old.lastUsed) > txnIdle {
				delete(tt.m, k)
			}
		}
	}
	t.lastUsed = now
	tt.m[key] = t
}

type txnCtxKey struct{}

// txnFrom returns the transaction the request in ctx runs in, or nil.
func txnFrom(ctx context.Context) *routerTxn {
	t, _ := ctx.Value(txnCtxKey{}).(*routerTxn)
	return t
}

// inTxn reports whether cmd is a statement of a multi-document transaction (it carries
// autocommit or startTransaction).
func inTxn(cmd bsoncore.Document) bool {
	if _, err := cmd.LookupErr("autocommit"); err == nil {
		return true
	}
	_, err := cmd.LookupErr("startTransaction")
	return err == nil
}

// txnAction is what a command does to its session's transaction.
type txnAction int

const (
	txnStart txnAction = iota
	txnContinue
	txnCommit
)

// txnSessionArgs parses and checks a transaction command's session fields.
func txnSessionArgs(cmd bsoncore.Document) (lsid bsoncore.Value, key string, number int64, start bool, err error) {
	ac, acErr := cmd.LookupErr("autocommit")
	st, stErr := cmd.LookupErr("startTransaction")
	if acErr != nil && stErr == nil {
		return lsid, "", 0, false, mongoerr.New(mongoerr.InvalidOptions, "'startTransaction' field requires 'autocommit' field to also be specified")
	}
	if acErr == nil {
		b, ok := ac.BooleanOK()
		if !ok {
			return lsid, "", 0, false, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.autocommit' is the wrong type '%s', expected type 'bool'", typeName(ac.Type))
		}
		if b {
			return lsid, "", 0, false, mongoerr.New(mongoerr.InvalidOptions, "Specifying autocommit=true is not allowed.")
		}
	}
	if stErr == nil {
		b, ok := st.BooleanOK()
		if !ok {
			return lsid, "", 0, false, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.startTransaction' is the wrong type '%s', expected type 'bool'", typeName(st.Type))
		}
		if !b {
			return lsid, "", 0, false, mongoerr.New(mongoerr.InvalidOptions, "Specifying startTransaction=false is not allowed.")
		}
		start = true
	}
	tv, terr := cmd.LookupErr("txnNumber")
	if terr != nil {
		return lsid, "", 0, false, mongoerr.New(mongoerr.InvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	}
	lsid, lerr := cmd.LookupErr("lsid")
	if lerr != nil {
		return lsid, "", 0, false, mongoerr.New(mongoerr.InvalidOptions, "Transaction number requires a session ID to also be specified")
	}
	if _, err := service.ParseLsid(lsid); err != nil {
		return lsid, "", 0, false, err
	}
	n, ok := tv.Int64OK()
	if !ok {
		return lsid, "", 0, false, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '%s', expected type 'long'", typeName(tv.Type))
	}
	// The request's buffer is reused once it is answered: the session outlives it.
	lsid = bsoncore.Value{Type: lsid.Type, Data: append([]byte(nil), lsid.Data...)}
	return lsid, string(lsid.Data), n, start, nil
}

// sessionDesc is the session's id for messages.
func sessionDesc(lsid bsoncore.Value) string {
	d, _ := lsid.DocumentOK()
	if _, data, ok := d.Lookup("id").BinaryOK(); ok {
		return fmt.Sprintf("%x", data)
	}
	return d.String()
}

// beginTxn starts or continues (or, for commit, recovers) cmd's transaction on the router
// (TransactionRouter::Router::beginOrContinueTxn).
func beginTxn(env *service.Env, c *Cluster, cmd bsoncore.Document, action txnAction) (*routerTxn, error) {
	lsid, key, number, start, err := txnSessionArgs(cmd)
	if err != nil {
		return nil, err
	}
	if start && action == txnContinue {
		action = txnStart
	}
	t := c.txns.get(key)
	current := int64(-1)
	if t != nil {
		current = t.number
	}
	desc := sessionDesc(lsid)
	rc, hasRC := cmd.Lookup("readConcern").DocumentOK()
	switch {
	case number < current:
		return nil, mongoerr.Newf(mongoerr.TransactionTooOld, "txnNumber %d is less than last txnNumber %d seen in session %s", number, current, desc)
	case number == current:
		switch action {
		case txnStart:
			return nil, mongoerr.Newf(mongoerr.ConflictingOperationInProgress, "txnNumber %d for session %s already started", number, desc)
		case txnContinue:
			if hasRC {
				return nil, mongoerr.New(mongoerr.InvalidOptions, "Only the first command in a transaction may specify a readConcern")
			}
			t.mu.Lock()
			if len(t.participants) > 0 {
				t.stmt++
			}
			t.mu.Unlock()
		}
		return t, nil
	}
	switch action {
	case txnContinue:
		return nil, mongoerr.Newf(mongoerr.NoSuchTransaction, "cannot continue txnId %d for session %s with txnRetryCounter 0", current, desc)
	case txnCommit:
		t = &routerTxn{lsid: lsid, desc: desc, number: number, recovering: true}
		c.txns.put(key, t)
		return t, nil
	}
	t = &routerTxn{lsid: lsid, desc: desc, number: number}
	if hasRC {
		if t.readConcern, err = txnReadConcern(env, rc); err != nil {
			return nil, err
		}
	}
	c.txns.put(key, t)
	return t, nil
}

// txnReadConcern checks the first statement's readConcern and returns what participants
// are sent: for snapshot, atClusterTime (the client's, else the later of its
// afterClusterTime and the router's cluster time now).
func txnReadConcern(env *service.Env, rc bsoncore.Document) (bsoncore.Document, error) {
	level, _ := rc.Lookup("level").StringValueOK()
	switch level {
	case "", "local", "majority", "snapshot":
	default:
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"The first command in a transaction cannot specify a readConcern level other than local, majority, or snapshot")
	}
	rc = append(bsoncore.Document(nil), rc...) // kept past the request
	if level != "snapshot" {
		return rc, nil
	}
	if _, err := rc.LookupErr("atClusterTime"); err == nil {
		return rc, nil
	}
	var ts, ti uint32
	if env != nil && env.State != nil {
		now := env.State.Concern.Clock.Time().Cluster
		ts, ti = now.Secs(), now.Inc()
	}
	if as, ai, ok := rc.Lookup("afterClusterTime").TimestampOK(); ok && (as > ts || as == ts && ai > ti) {
		ts, ti = as, ai
	}
	b := bsoncore.NewDocumentBuilder()
	els, _ := rc.Elements()
	for _, el := range els {
		if k := el.Key(); k != "afterClusterTime" && k != "atClusterTime" {
			b.AppendValue(k, el.Value())
		}
	}
	return b.AppendTimestamp("atClusterTime", ts, ti).Build(), nil
}

// atClusterTime is a snapshot transaction's atClusterTime (nil for another read concern):
// its reads are routed by the placement of that time.
func (t *routerTxn) atClusterTime() *bson.Timestamp {
	t.mu.Lock()
	rc := t.readConcern
	t.mu.Unlock()
	if rc == nil {
		return nil
	}
	return snapshotTime(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: rc})
}

// txnFields are the fields attach replaces in a request to a participant.
var txnFields = map[string]bool{"lsid": true, "txnNumber": true, "autocommit": true, "startTransaction": true,
	"readConcern": true, "coordinator": true, "stmtId": true, "stmtIds": true, "$clusterTime": true}

// attach returns cmd as sent to participant shard, adding the shard as a participant if new
// (TransactionRouter::Participant::attachTxnFieldsIfNeeded).
func (t *routerTxn) attach(shard string, cmd bsoncore.Document) bsoncore.Document {
	t.mu.Lock()
	p := t.participant(shard)
	if p == nil {
		p = &txnParticipant{shard: shard, createdAt: t.stmt}
		t.participants = append(t.participants, p)
	}
	start := !p.started
	p.started = true
	coordinator := t.participants[0] == p
	rc := t.readConcern
	t.mu.Unlock()
	return t.fields(cmd, start, coordinator, rc)
}

// fields returns cmd with the transaction's fields.
func (t *routerTxn) fields(cmd bsoncore.Document, start, coordinator bool, rc bsoncore.Document) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(cmd)+128))
	els, _ := cmd.Elements()
	for _, el := range els {
		if !txnFields[el.Key()] {
			out = append(out, el...)
		}
	}
	out = bsoncore.AppendValueElement(out, "lsid", t.lsid)
	out = bsoncore.AppendInt64Element(out, "txnNumber", t.number)
	out = bsoncore.AppendBooleanElement(out, "autocommit", false)
	if start {
		out = bsoncore.AppendBooleanElement(out, "startTransaction", true)
		if rc != nil {
			out = bsoncore.AppendDocumentElement(out, "readConcern", rc)
			// The participant's clock must reach atClusterTime or afterClusterTime (a
			// shard refuses an afterClusterTime past its clock, and its no-op write must
			// land after atClusterTime): gossip it as mongos gossips its cluster time (the
			// driver appends its own $clusterTime too; the shard takes the highest).
			for _, f := range []string{"atClusterTime", "afterClusterTime"} {
				if s, i, ok := rc.Lookup(f).TimestampOK(); ok {
					out = vclock.AppendClusterTime(out, optime.MakeTimestamp(s, i))
					break
				}
			}
		}
	}
	if coordinator {
		out = bsoncore.AppendBooleanElement(out, "coordinator", true)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

func (t *routerTxn) participant(shard string) *txnParticipant {
	for _, p := range t.participants {
		if p.shard == shard {
			return p
		}
	}
	return nil
}

// observe notes a participant's successful reply: its readOnly
// (TransactionRouter::Router::processParticipantResponse). A reply without the field (a
// shard that does not report it) counts as a write: the commit then never skips a shard
// that may have written.
func (t *routerTxn) observe(shard string, reply bsoncore.Document) {
	ro, ok := reply.Lookup("readOnly").BooleanOK()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.participant(shard)
	if p == nil {
		return
	}
	switch {
	case ok && ro:
		if p.readOnly == readOnlyUnset {
			p.readOnly = readOnlyYes
		}
	default:
		p.readOnly = readOnlyNo
		if t.recovery == "" {
			t.recovery = shard
		}
	}
}

// mayRetryStale reports whether a stale-routing error may be retried inside the transaction
// (TransactionRouter::Router::_errorAllowsRetryOnStaleShardOrDb: on the first statement with
// at most one participant); if so, it aborts and forgets the participants the statement
// added, so that the retry starts them again.
func (t *routerTxn) mayRetryStale(ctx context.Context, c *Cluster) bool {
	t.mu.Lock()
	if t.stmt != 0 || len(t.participants) > 1 {
		t.mu.Unlock()
		return false
	}
	var pending []string
	kept := t.participants[:0]
	for _, p := range t.participants {
		if p.createdAt == t.stmt {
			pending = append(pending, p.shard)
			continue
		}
		kept = append(kept, p)
	}
	t.participants = kept
	if t.recovery != "" && t.participant(t.recovery) == nil {
		t.recovery = ""
	}
	t.mu.Unlock()
	t.abortOn(ctx, c, pending, nil)
	return true
}

// shards returns the participants' shard ids in order.
func (t *routerTxn) shards() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.participants))
	for i, p := range t.participants {
		out[i] = p.shard
	}
	return out
}

// abortOn sends abortTransaction (with writeConcern wc, nil: none) to shards in parallel
// and returns their replies and errors in order.
func (t *routerTxn) abortOn(ctx context.Context, c *Cluster, shards []string, wc bsoncore.Document) ([]bsoncore.Document, []error) {
	replies := make([]bsoncore.Document, len(shards))
	errs := make([]error, len(shards))
	if len(shards) == 0 {
		return replies, errs
	}
	b := bsoncore.NewDocumentBuilder().AppendInt32("abortTransaction", 1)
	if wc != nil {
		b.AppendDocument("writeConcern", wc)
	}
	cmd := b.Build()
	fanOut(shards, func(i int, shard string) {
		replies[i], errs[i] = c.runTxnCommand(ctx, t, shard, cmd)
	})
	return replies, errs
}

// runTxnCommand runs commit/abort/coordinateCommit cmd on shard's primary in the
// transaction (lsid, txnNumber, autocommit: false), outside any statement.
func (c *Cluster) runTxnCommand(ctx context.Context, t *routerTxn, shard string, cmd bsoncore.Document) (bsoncore.Document, error) {
	return c.runOn(context.WithValue(ctx, txnCtxKey{}, nil), shard, "admin", t.fields(cmd, false, false, nil))
}

// implicitAbort aborts the transaction on every participant after a failed statement,
// ignoring the answers (TransactionRouter::Router::implicitlyAbortTransaction). Not once a
// commit was handed to a coordinator: the decision is then the coordinator's.
func (t *routerTxn) implicitAbort(ctx context.Context, c *Cluster) {
	t.mu.Lock()
	if t.commitStarted {
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	// The client's deadline may be what failed the statement: the abort gets its own.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shardKillTimeout)
	defer cancel()
	t.abortOn(actx, c, t.shards(), nil)
}

// appendRecoveryToken appends recoveryToken: {recoveryShardId} (empty while no participant
// wrote) to a reply in the transaction (TransactionRouter::Router::appendRecoveryToken).
func (t *routerTxn) appendRecoveryToken(reply bsoncore.Document) bsoncore.Document {
	t.mu.Lock()
	rec := t.recovery
	t.mu.Unlock()
	tok := bsoncore.NewDocumentBuilder()
	if rec != "" {
		tok.AppendString("recoveryShardId", rec)
	}
	if len(reply) < 5 {
		reply = emptyDoc
	}
	out := make([]byte, 0, len(reply)+48)
	out = append(out, reply[:len(reply)-1]...)
	out = bsoncore.AppendDocumentElement(out, "recoveryToken", tok.Build())
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// txnStatement wraps the handler of a command allowed in a transaction: without
// autocommit/startTransaction it runs h as is; with them, h runs as a statement of the
// session's transaction, and a failed statement aborts the transaction on every
// participant.
func txnStatement(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		if !inTxn(cmd) {
			return h(ctx, env, cmd)
		}
		c, err := cluster(env)
		if err != nil {
			return nil, err
		}
		t, err := beginTxn(env, c, cmd, txnContinue)
		if err != nil {
			return nil, err
		}
		reply, err := h(context.WithValue(ctx, txnCtxKey{}, t), env, cmd)
		if err != nil {
			t.implicitAbort(ctx, c)
			return nil, txnStatementError(err)
		}
		if _, werr := reply.LookupErr("writeErrors"); werr == nil {
			// The shard that failed the write aborted its part: abort the others'.
			t.implicitAbort(ctx, c)
			if err := transientWriteError(reply); err != nil {
				// As mongos's batch writer in a transaction: a transient write error is the
				// command's error, so the client retries the whole transaction.
				return nil, txnStatementError(err)
			}
		}
		return t.appendRecoveryToken(reply), nil
	}
}

// txnStatementError is a failed statement's error with the labels mongos gives it: the
// shard's, and TransientTransactionError when the whole transaction may be retried.
func txnStatementError(err error) error {
	me, ok := mongoerr.As(err)
	if !ok {
		return err
	}
	labels := append([]string(nil), me.Labels...)
	if transientTxnError(me.Code, false) && !containsLabel(labels, mongoerr.LabelTransientTransaction) {
		labels = append(labels, mongoerr.LabelTransientTransaction)
	}
	if labels == nil {
		labels = []string{} // decided here: the front end does not add its own
	}
	out := *me
	out.Labels = labels
	return &out
}

func containsLabel(labels []string, l string) bool {
	for _, x := range labels {
		if x == l {
			return true
		}
	}
	return false
}

// transientTxnError is MongoDB's isTransientTransactionError as mongos applies it: the
// codes whose transaction the client may run again from the start (a router adds the
// routing errors; a network error reaching a participant is one too).
func transientTxnError(code mongoerr.Code, commitOrAbort bool) bool {
	switch code {
	case mongoerr.WriteConflict, mongoerr.LockTimeout, mongoerr.PreparedTransactionInProgress,
		mongoerr.ShardCannotRefreshDueToLocksHeld, mongoerr.SnapshotTooOld, mongoerr.SnapshotUnavailable,
		mongoerr.StaleChunkHistory, mongoerr.MigrationConflict,
		mongoerr.StaleConfig, mongoerr.StaleEpoch, mongoerr.StaleDbVersion:
		return true
	case mongoerr.NoSuchTransaction:
		return true
	}
	return !commitOrAbort && mongoerr.IsRetriableError(code)
}

// txnMayRetryStale reports whether the request in ctx may retry after a stale-routing
// error: always outside a transaction; inside one, see routerTxn.mayRetryStale.
func txnMayRetryStale(ctx context.Context, c *Cluster) bool {
	t := txnFrom(ctx)
	return t == nil || t.mayRetryStale(ctx, c)
}

// transientWriteError returns the first write error of reply as an error when its code is a
// transient transaction error; nil otherwise.
func transientWriteError(reply bsoncore.Document) error {
	arr, ok := reply.Lookup("writeErrors").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil
	}
	d, ok := vals[0].DocumentOK()
	if !ok {
		return nil
	}
	code, _ := d.Lookup("code").AsInt64OK()
	if !transientTxnError(mongoerr.Code(code), false) {
		return nil
	}
	msg, _ := d.Lookup("errmsg").StringValueOK()
	return mongoerr.New(mongoerr.Code(code), msg)
}
