package server

import (
	"slices"
	"testing"

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
	withOwn := bsoncore.NewDocumentBuilder().AppendInt32("code", int32(mongoerr.InterruptedDueToReplStateChange)).
		AppendArray("errorLabels", bsoncore.NewArrayBuilder().AppendString("X").Build()).Build()
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
		{"failCommand's own labels", retryable, withOwn, false},
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
