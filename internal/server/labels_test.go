package server

import (
	"errors"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// A retryable write whose write concern failed with a retriable code gets a top-level
// RetryableWriteError label (drivers on wire version ≥ 9 retry only on the label); other
// writeConcernErrors, and writes that are not retryable, get none.
func TestWriteConcernErrorLabels(t *testing.T) {
	wce := func(code mongoerr.Code) bsoncore.Document {
		return bsoncore.NewDocumentBuilder().AppendInt32("code", int32(code)).AppendString("errmsg", "x").Build()
	}
	retryable := bsoncore.NewDocumentBuilder().AppendString("insert", "c").AppendInt64("txnNumber", 1).Build()
	plain := bsoncore.NewDocumentBuilder().AppendString("insert", "c").Build()
	find := bsoncore.NewDocumentBuilder().AppendString("find", "c").AppendInt64("txnNumber", 1).Build()
	cases := []struct {
		name string
		cmd  bsoncore.Document
		wce  bsoncore.Document
		want bool
	}{
		{"stepped down while waiting", retryable, wce(mongoerr.InterruptedDueToReplStateChange), true},
		{"shutdown while waiting", retryable, wce(mongoerr.InterruptedAtShutdown), true},
		{"wtimeout", retryable, wce(mongoerr.WriteConcernFailed), false},
		{"not a retryable write", plain, wce(mongoerr.InterruptedDueToReplStateChange), false},
		{"not a write", find, wce(mongoerr.InterruptedDueToReplStateChange), false},
		{"no writeConcernError", retryable, nil, false},
	}
	for _, c := range cases {
		labels := wceLabels(c.cmd, c.wce)
		if got := slices.Contains(labels, mongoerr.LabelRetryableWrite); got != c.want {
			t.Errorf("%s: labels %v, want RetryableWriteError=%v", c.name, labels, c.want)
		}
		reply := finishReply(bsoncore.NewDocumentBuilder().AppendInt32("n", 1).Build(), c.wce, labels)
		_, err := reply.LookupErr("errorLabels")
		if (err == nil) != c.want {
			t.Errorf("%s: reply %v", c.name, reply)
		}
	}
}

// failCommand's errorLabels with a writeConcernError go to the top level of the reply (where
// drivers read them), replacing the server's own, and never inside writeConcernError; a
// ShutdownInProgress from failCommand carries no topologyVersion (the server is not shutting
// down, and drivers clear their pool only on an error without one), a not-primary error does.
func TestFailCommandLabelsAndTopologyVersion(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "Replication is being shut down"}}},
			{Key: "errorLabels", Value: bson.A{"RetryableWriteError", "Foo"}}}}})
	_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) {
		t.Fatalf("want a write concern error, got %v", err)
	}
	r := bsoncore.Document(we.Raw)
	wce, ok := r.Lookup("writeConcernError").DocumentOK()
	if !ok || wce.Lookup("code").AsInt64() != 91 {
		t.Fatalf("writeConcernError missing: %v", r)
	}
	if _, err := wce.LookupErr("errorLabels"); err == nil {
		t.Errorf("errorLabels inside writeConcernError: %v", r)
	}
	vals, _ := r.Lookup("errorLabels").Array().Values()
	if len(vals) != 2 || vals[0].StringValue() != "RetryableWriteError" || vals[1].StringValue() != "Foo" {
		t.Errorf("top-level errorLabels: %v", r)
	}

	for _, c := range []struct {
		code mongoerr.Code
		want bool
	}{{mongoerr.ShutdownInProgress, false}, {mongoerr.InterruptedAtShutdown, false}, {mongoerr.NotWritablePrimary, true}} {
		mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: int32(c.code)}}}})
		_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
		ce := wantCode(t, err, c.code)
		if got := ce.Raw.Lookup("topologyVersion").Type == bson.TypeEmbeddedDocument; got != c.want {
			t.Errorf("%s: topologyVersion present %v, want %v: %v", c.code.Name(), got, c.want, ce.Raw)
		}
	}
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
}

// While the server shuts down, shutdown errors do carry a topologyVersion, newer than the
// one hello reported, so drivers take it as a state change rather than a stale error.
func TestShutdownErrorTopologyVersion(t *testing.T) {
	tv := func(counter int64) bsoncore.Document {
		return bsoncore.NewDocumentBuilder().AppendInt64("counter", counter).Build()
	}
	err := mongoerr.New(mongoerr.InterruptedAtShutdown, "interrupted at shutdown")
	if r := errorReply(err, nil, topology{version: tv(1)}); r.Lookup("topologyVersion").Type != 0 {
		t.Errorf("not shutting down: %v", r)
	}
	if r := errorReply(err, nil, topology{version: tv(2), shuttingDown: true}); r.Lookup("topologyVersion").Type == 0 {
		t.Errorf("shutting down: %v", r)
	}
	s := startServer(t)
	before := s.topology()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	after := s.topology()
	s.mu.Lock()
	s.closing = false
	s.mu.Unlock()
	if before.shuttingDown || !after.shuttingDown ||
		after.version.Lookup("counter").AsInt64() <= before.version.Lookup("counter").AsInt64() {
		t.Errorf("topology before %v, while closing %v", before, after)
	}
}
