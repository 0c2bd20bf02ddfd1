package server

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/failpoint"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// result is the outcome of one command run.
type result struct {
	reply     bsoncore.Document // the full reply, `ok` included
	err       error             // the error the reply reports, nil on success
	exhaust   bool              // the handler asked to stream (Env.Exhaust)
	closeConn bool              // close without replying
}

// runCommand validates, dispatches and times one command, and is the one place where errors
// become replies.
// maxTimeAlwaysTimeOut makes every command with a maxTimeMS time out at once (MongoDB's fail
// point of the same name).
var maxTimeAlwaysTimeOut = failpoint.Register("maxTimeAlwaysTimeOut")

// closeConnectionAfterCommand (test-only, Humongo's own) runs a command named in its data's
// failCommands and then closes the connection instead of replying: the write is applied but
// the client never learns it, which is what a retryable write's retry must cope with.
// failCommand's closeConnection fails before the command runs.
var closeConnectionAfterCommand = failpoint.Register("closeConnectionAfterCommand")

// failCommand is MongoDB's failCommand fail point (configureFailPoint sets it by name): it
// makes matching commands fail, block or lose their connection before they run.
var failCommand = failpoint.Register("failCommand")

func (s *Server) runCommand(ctx context.Context, c *service.Conn, cmd bsoncore.Document, legacy, exhaustAllowed bool) result {
	start := time.Now()
	env := &service.Env{Conn: c, State: s.state, Registry: s.registry, Legacy: legacy, ExhaustAllowed: exhaustAllowed}
	var op any
	reply, err := s.dispatchRecovered(ctx, env, cmd, &op)
	if errors.Is(err, service.ErrCloseConnection) {
		return result{closeConn: true}
	}
	var res result
	if err != nil {
		countAssert(&s.state.Counters, err)
		res = result{reply: errorReply(err, cmd, s.topology()), err: err}
	} else {
		res = result{reply: reply, exhaust: env.Exhaust}
	}
	// The role decorates every reply (a replica-set member's $clusterTime and operationTime).
	res.reply = s.role.Decorate(env, op, res.reply)
	if d := time.Since(start); d >= s.state.SlowOpThreshold && !awaitable(cmd) {
		s.log.Info("Slow query", logv2.C(logv2.Command), logv2.ID(51803), logv2.Ctx(c.Desc()),
			"type", "command", "ns", env.DB+".$cmd", "appName", c.AppName(), "command", logv2.BSON(service.RedactSecrets(cmd)),
			"ok", err == nil, "errCode", int(mongoerr.CodeOf(err)), "protocol", protocolName(legacy),
			"durationMillis", d)
	}
	return res
}

// dispatchRecovered is dispatch with a last line of defence: a handler that panics on some
// input must not take the server down with every other client's operation. The panic becomes
// an InternalError reply and a logged stack trace (a bug to fix, found without an outage).
func (s *Server) dispatchRecovered(ctx context.Context, env *service.Env, cmd bsoncore.Document, op *any) (reply bsoncore.Document, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("Command panicked", logv2.C(logv2.Command), logv2.ID(23074), logv2.Ctx(env.Conn.Desc()),
				"command", env.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			reply, err = nil, mongoerr.Newf(mongoerr.InternalError, "internal error in command %s: %v", env.Name, p)
		}
	}()
	return s.dispatch(ctx, env, cmd, op)
}

// awaitable reports hellos that wait by design (maxAwaitTimeMS), which are never slow.
func awaitable(cmd bsoncore.Document) bool {
	_, err := cmd.LookupErr("maxAwaitTimeMS")
	return err == nil
}

func protocolName(legacy bool) string {
	if legacy {
		return "op_query"
	}
	return "op_msg"
}

// dispatch runs the checks every command goes through, then the handler. On success it
// returns the reply with `ok: 1` appended (and a failCommand writeConcernError, if any).
//
// opOut receives the role's token for the operation (Role.Begin), for Role.Decorate.
func (s *Server) dispatch(ctx context.Context, env *service.Env, cmd bsoncore.Document, opOut *any) (bsoncore.Document, error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Empty command document")
	}
	name := first.Key()
	env.Name = name
	c := s.registry.Lookup(name)
	if c == nil || (c.TestOnly && !s.state.Params.Bool("enableTestCommands")) {
		s.state.Counters.Command.Add(1)
		return nil, mongoerr.Newf(mongoerr.CommandNotFound, "no such command: '%s'", name)
	}
	env.Command = c
	if env.Legacy && !c.AllowedOnOpQuery {
		return nil, unsupportedOpQuery(name)
	}
	s.state.Counters.OpCounter(c.Counter).Add(1)
	// Framing validated the structure; strings must also be UTF-8, or documents could be
	// stored that no driver can read back.
	if err := bsonutil.ValidateUTF8(cmd); err != nil {
		return nil, err
	}

	dbv, err := cmd.LookupErr("$db")
	if err != nil {
		return nil, mongoerr.New(mongoerr.Location40571, "OP_MSG requests require a $db argument")
	}
	db, ok := dbv.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '$db' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(dbv.Type))
	}
	if err := checkCommandDBName(db); err != nil {
		return nil, err
	}
	env.DB = db
	if c.AdminOnly && db != "admin" {
		return nil, mongoerr.Newf(mongoerr.Unauthorized, "%s may only be run against the admin database.", name)
	}
	if c.LocalhostOnly && !env.Conn.Loopback && !s.state.Auth.Enabled {
		return nil, mongoerr.Newf(mongoerr.Unauthorized, "%s may only be run from localhost without authentication", name)
	}
	// Stable API parameters (initializeAPIParameters): before the command does anything.
	if err := service.CheckAPIParameters(c, cmd, s.state.Params.Bool("requireApiVersion"),
		s.state.Params.Bool("acceptApiVersion2"), env.Conn.IsInternal()); err != nil {
		return nil, err
	}
	// Authentication and the command's privileges (MongoDB's checkAuthorization).
	if s.state.Auth.Enabled {
		if err := s.state.Auth.Authorize(ctx, env, c, cmd); err != nil {
			return nil, err
		}
		cmd = service.WithSessionOwner(cmd, env.Auth)
	}
	if v, err := cmd.LookupErr("lsid"); err == nil && s.state.Sessions != nil {
		k, err := service.ParseLsid(v)
		if err != nil {
			return nil, err
		}
		if err := s.state.Sessions.Vivify(k, ""); err != nil {
			return nil, err
		}
	}
	timeout, err := requestTimeout(cmd)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		if _, on := maxTimeAlwaysTimeOut.Evaluate(nil); on {
			// MongoDB's fail point for deterministic maxTimeMS tests: the operation starts
			// with its time limit already spent.
			timeout = time.Nanosecond
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout,
			mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit"))
		defer cancel()
	}

	op, ctx := s.state.Clients.BeginOp(ctx, env.Conn, name, db, cmd)
	defer s.state.Clients.EndOp(op)
	env.Op = op

	wce, fcLabels, err := s.evalFailCommand(ctx, env, c, name)
	if err != nil {
		return nil, err
	}
	// The role's gate (a replica-set member: writes need a writable primary, reads
	// secondaryOk on a secondary).
	if err := s.role.Admit(env, c, cmd); err != nil {
		return nil, err
	}
	// The role's operation start: $clusterTime gossip, readConcern waits, read timestamp.
	ctx, tok, err := s.role.Begin(ctx, env, c, cmd)
	*opOut = tok
	if err != nil {
		return nil, err
	}
	reply, err := c.Handler(ctx, env, cmd)
	// The role's finish: write concern waits. A write whose write concern failed is ok: 1
	// with writeConcernError (roleWCE).
	reply, roleWCE, err := s.role.Finish(ctx, env, tok, reply, err)
	if roleWCE != nil {
		wce = roleWCE
	}
	if env.CloseConnection {
		return nil, service.ErrCloseConnection
	}
	if closeConnectionAfterCommand.Enabled() && c.Name != "configureFailPoint" {
		if _, on := closeConnectionAfterCommand.Evaluate(func(data bsoncore.Document) bool {
			return failCommandApplies(data, env, c, name)
		}); on {
			return nil, service.ErrCloseConnection
		}
	}
	if err != nil {
		// A handler that noticed its context end returns the context's error; report why it
		// ended (killOp, maxTimeMS, shutdown) instead.
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			err = context.Cause(ctx)
		}
		return nil, err
	}
	labels := wceLabels(cmd, wce)
	if fcLabels != nil {
		// failCommand's errorLabels replace the server's own, at the top level of the
		// reply as mongod's errorLabelsOverride does (never inside writeConcernError).
		labels = fcLabels
	}
	return finishReply(reply, wce, labels), nil
}

// wceLabels are the top-level errorLabels of a reply carrying writeConcernError wce: a
// retryable write whose write concern failed with a retriable code (the primary stepped down
// while it waited, 11602) is labelled RetryableWriteError, as mongod's getErrorLabels does.
// Drivers on wire version ≥ 9 retry on the label alone, so without it such a write fails to
// the application although a retry would succeed. A writeConcernError that already carries
// failCommand's errorLabels, when given, replace these (dispatch).
func wceLabels(cmd, wce bsoncore.Document) []string {
	if wce == nil {
		return nil
	}
	code, ok := wce.Lookup("code").AsInt64OK()
	if !ok {
		return nil
	}
	var labels []string
	if slices.Contains(errorLabelsFor(cmd, mongoerr.Code(code)), mongoerr.LabelRetryableWrite) {
		labels = append(labels, mongoerr.LabelRetryableWrite)
	}
	// A commit whose write concern failed may or may not stay committed (mongod labels it
	// UnknownTransactionCommitResult unless the write concern can never be satisfied).
	if first, err := cmd.IndexErr(0); err == nil && first.Key() == "commitTransaction" &&
		mongoerr.Code(code) != mongoerr.UnsatisfiableWriteConcern && mongoerr.Code(code) != mongoerr.UnknownReplWriteConcern {
		labels = append(labels, mongoerr.LabelUnknownTransactionCommit)
	}
	return labels
}

// finishReply appends `ok: 1.0` (and a writeConcernError with its errorLabels) to a
// handler's reply.
func finishReply(reply, wce bsoncore.Document, labels []string) bsoncore.Document {
	if len(reply) < 5 {
		reply = bsoncore.Document{5, 0, 0, 0, 0}
	}
	out := make([]byte, 0, len(reply)+len(wce)+32)
	idx, out := bsoncore.AppendDocumentStart(out)
	out = append(out, reply[4:len(reply)-1]...)
	if wce != nil {
		out = bsoncore.AppendDocumentElement(out, "writeConcernError", wce)
	}
	if len(labels) > 0 {
		ai, b := bsoncore.AppendArrayElementStart(out, "errorLabels")
		for i, l := range labels {
			b = bsoncore.AppendStringElement(b, itoa(i), l)
		}
		out, _ = bsoncore.AppendArrayEnd(b, ai)
	}
	out = bsoncore.AppendDoubleElement(out, "ok", 1)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

func unsupportedOpQuery(name string) error {
	return mongoerr.Newf(mongoerr.UnsupportedOpQueryCommand,
		"Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal", name)
}

// errorReply is the error boundary: {ok: 0, errmsg, code, codeName, errorLabels?, <info>}.
// Errors without a MongoDB code become InternalError. cmd (may be nil) decides the
// retryable-write and transaction labels.
func errorReply(err error, cmd bsoncore.Document, topo topology) bsoncore.Document {
	me, ok := mongoerr.As(err)
	if !ok {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			me = mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
		case errors.Is(err, context.Canceled):
			me = mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
		default:
			me = &mongoerr.Error{Code: mongoerr.InternalError, Msg: err.Error()}
		}
	}
	msg := me.Msg
	if msg == "" && me.Err != nil {
		msg = me.Err.Error()
	}
	// Messages echo user input (command names, field names, values); an invalid UTF-8 byte in
	// them would make the whole reply undecodable for drivers, so it becomes U+FFFD.
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	labels := me.Labels
	if labels == nil && cmd != nil {
		labels = errorLabelsFor(cmd, me.Code)
	}
	b := make([]byte, 0, 128+len(msg))
	idx, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendDoubleElement(b, "ok", 0)
	b = bsoncore.AppendStringElement(b, "errmsg", msg)
	b = bsoncore.AppendInt32Element(b, "code", int32(me.Code))
	b = bsoncore.AppendStringElement(b, "codeName", me.Code.Name())
	if len(labels) > 0 {
		ai, b2 := bsoncore.AppendArrayElementStart(b, "errorLabels")
		for i, l := range labels {
			b2 = bsoncore.AppendStringElement(b2, itoa(i), l)
		}
		b, _ = bsoncore.AppendArrayEnd(b2, ai)
	}
	// Not-primary errors carry the topologyVersion so drivers can tell a stale error from a
	// real state change (SDAM error handling). Shutdown errors carry it only while the server
	// really shuts down, as mongod's appendErrorLabelsAndTopologyVersion does (quiesce mode):
	// a ShutdownInProgress without one (failCommand's, say) makes drivers clear their pool.
	if topo.version != nil && (mongoerr.IsNotPrimaryError(me.Code) ||
		(topo.shuttingDown && mongoerr.IsShutdownError(me.Code))) {
		b = bsoncore.AppendDocumentElement(b, "topologyVersion", topo.version)
	}
	b = appendInfo(b, me.Info)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// topology is what an error reply needs to decide its topologyVersion.
type topology struct {
	version      bsoncore.Document // {processId, counter}
	shuttingDown bool
}

// topology returns this server's topologyVersion and whether it is shutting down. Entering
// shutdown is a topology change (mongod's quiesce mode increments the counter), so while
// shutting down the counter reads one higher: drivers then take the error as newer than
// what they know and mark the server unknown instead of discarding the error as stale.
func (s *Server) topology() topology {
	closing := s.isClosing()
	counter := s.role.TopologyVersion()
	if closing {
		counter++
	}
	return topology{
		version: bsoncore.NewDocumentBuilder().AppendObjectID("processId", s.state.ProcessID).
			AppendInt64("counter", counter).Build(),
		shuttingDown: closing,
	}
}

// appendInfo appends an error's extra reply fields: a raw document's elements, or any value
// the BSON marshaler turns into a document. Fields clashing with the envelope are skipped.
func appendInfo(b []byte, info any) []byte {
	if info == nil {
		return b
	}
	var d bsoncore.Document
	switch x := info.(type) {
	case bsoncore.Document:
		d = x
	case bson.Raw:
		d = bsoncore.Document(x)
	default:
		raw, err := bson.Marshal(x)
		if err != nil {
			return b
		}
		d = raw
	}
	elems, err := d.Elements()
	if err != nil {
		return b
	}
	for _, e := range elems {
		switch e.Key() {
		case "ok", "errmsg", "code", "codeName", "errorLabels":
			continue
		}
		b = append(b, e...)
	}
	return b
}

// Commands that are retryable writes when sent with a txnNumber outside a transaction.
var retryableWriteCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "findandmodify": true,
	"commitTransaction": true, "abortTransaction": true,
}

// errorLabelsFor decides labels as MongoDB's getErrorLabels does: RetryableWriteError for a
// retriable error of a retryable write (or of commit/abortTransaction), and
// TransientTransactionError for transient errors inside a multi-document transaction.
func errorLabelsFor(cmd bsoncore.Document, code mongoerr.Code) []string {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil
	}
	name := first.Key()
	_, hasTxn := cmd.LookupErr("txnNumber")
	ac, acErr := cmd.LookupErr("autocommit")
	inTxn := acErr == nil && ac.Type == bsoncore.TypeBoolean && !ac.Boolean()
	commitOrAbort := name == "commitTransaction" || name == "abortTransaction"
	if inTxn {
		// mongod's isTransientTransactionError: the whole transaction may be retried.
		var labels []string
		transient := false
		switch code {
		case mongoerr.WriteConflict, mongoerr.LockTimeout, mongoerr.PreparedTransactionInProgress,
			mongoerr.SnapshotTooOld, mongoerr.SnapshotUnavailable, mongoerr.NoSuchTransaction:
			transient = true
		}
		if !commitOrAbort && mongoerr.IsRetriableError(code) {
			transient = true
		}
		if transient {
			labels = append(labels, mongoerr.LabelTransientTransaction)
		}
		if commitOrAbort && mongoerr.IsRetriableError(code) {
			labels = append(labels, mongoerr.LabelRetryableWrite)
		}
		if name == "commitTransaction" && (mongoerr.IsRetriableError(code) || code == mongoerr.MaxTimeMSExpired) {
			labels = append(labels, mongoerr.LabelUnknownTransactionCommit)
		}
		return labels
	}
	if (hasTxn == nil) && retryableWriteCommands[name] && mongoerr.IsRetriableError(code) {
		return []string{mongoerr.LabelRetryableWrite}
	}
	return nil
}

// evalFailCommand applies the failCommand fail point to this command: it may close the
// connection, block, fail the command with a code, or return a writeConcernError to attach
// to a successful reply, with the errorLabels that replace the reply's own (non-nil, maybe
// empty, when the fail point's data lists errorLabels).
func (s *Server) evalFailCommand(ctx context.Context, env *service.Env, c *service.Command, name string) (wce bsoncore.Document, labels []string, err error) {
	fp := failCommand
	if !fp.Enabled() {
		return nil, nil, nil
	}
	// configureFailPoint must stay usable to turn the fail point off again.
	if c.Name == "configureFailPoint" {
		return nil, nil, nil
	}
	data, ok := fp.Evaluate(func(data bsoncore.Document) bool {
		return failCommandApplies(data, env, c, name)
	})
	if !ok {
		return nil, nil, nil
	}
	if truthy(data, "closeConnection") {
		s.log.Info("Failing command via 'failCommand' failpoint: closing connection",
			logv2.C(logv2.Command), logv2.ID(4721400), logv2.Ctx(env.Conn.Desc()), "command", name)
		return nil, nil, service.ErrCloseConnection
	}
	if truthy(data, "blockConnection") {
		ms, _ := lookupNumber(data, "blockTimeMS")
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, context.Cause(ctx)
		}
	}
	hasLabels := false
	if v, err := data.LookupErr("errorLabels"); err == nil {
		if arr, ok := v.ArrayOK(); ok {
			hasLabels = true
			labels = []string{} // an explicit empty list suppresses the server's labels
			vals, _ := arr.Values()
			for _, x := range vals {
				if str, ok := x.StringValueOK(); ok {
					labels = append(labels, str)
				}
			}
		}
	}
	if code, ok := lookupNumber(data, "errorCode"); ok {
		e := mongoerr.New(mongoerr.Code(code), "Failing command via 'failCommand' failpoint")
		if hasLabels {
			e.Labels = labels
		}
		if v, err := data.LookupErr("errorExtraInfo"); err == nil {
			if d, ok := v.DocumentOK(); ok {
				e.Info = d
			}
		}
		return nil, nil, e
	}
	if v, err := data.LookupErr("writeConcernError"); err == nil {
		if d, ok := v.DocumentOK(); ok {
			return d, labels, nil
		}
	}
	return nil, nil, nil
}

// failCommandApplies is failCommand's predicate (service.FailCommandApplies) for command c
// under the name it was called by.
func failCommandApplies(data bsoncore.Document, env *service.Env, c *service.Command, name string) bool {
	return service.FailCommandApplies(data, env.Conn, append([]string{name, c.Name}, c.Aliases...)...)
}

func truthy(d bsoncore.Document, key string) bool {
	v, err := d.LookupErr(key)
	if err != nil {
		return false
	}
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	}
	if f, ok := service.AsFloat(v); ok {
		return f != 0
	}
	return true
}

func lookupNumber(d bsoncore.Document, key string) (int64, bool) {
	v, err := d.LookupErr(key)
	if err != nil {
		return 0, false
	}
	f, ok := service.AsFloat(v)
	return int64(f), ok
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// checkCommandDBName refuses a $db that no command may run on, whatever it does with it:
// mongod builds a DatabaseName from $db first, and its constructor refuses a '.', a NUL and
// more than 63 bytes. Other characters mongod refuses (space, '/', '\', '"') are left to
// the command's namespace checks ("Invalid namespace specified 'a b.c'").
func checkCommandDBName(db string) error {
	switch {
	case db == "":
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: ''")
	case strings.Contains(db, "."):
		return mongoerr.Newf(mongoerr.InvalidNamespace, "'.' is an invalid character in a db name: %s", db)
	case strings.Contains(db, "\x00"):
		return mongoerr.New(mongoerr.InvalidNamespace, "database names cannot have embedded null characters")
	case len(db) > 63:
		return mongoerr.Newf(mongoerr.InvalidNamespace, "db name must be at most 63 characters, found: %d", len(db))
	}
	return nil
}

// countAssert counts a failed command in serverStatus.asserts: an internal error (a Go error
// that is no MongoDB error, or InternalError) is a "regular" assertion, any other MongoDB
// error a "user" one, as mongod counts uasserts.
func countAssert(c *service.Counters, err error) {
	if me, ok := mongoerr.As(err); ok && me.Code != mongoerr.InternalError {
		c.AssertsUser.Add(1)
		return
	}
	c.AssertsRegular.Add(1)
}
