package router

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"humongo/internal/client"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
)

// A driver's network error is a CommandError without a code: the router answers it as
// HostUnreachable (retriable), not as code 0; the request's own deadline stays what it is.
func TestTransportErrorCodes(t *testing.T) {
	ctx := context.Background()
	netErr := mongo.CommandError{Message: "connection closed", Labels: []string{"NetworkError"}}
	for _, conv := range []func(error) error{
		func(err error) error { return shardError(ctx, "shard0", err) },
		func(err error) error { return writeShardError(ctx, err, "shard0") },
	} {
		if err := conv(netErr); !mongoerr.Is(err, mongoerr.HostUnreachable) || !retriableCode(err) {
			t.Errorf("network error: %v (code %v)", err, mongoerr.CodeOf(err))
		}
		if err := conv(mongo.CommandError{Code: int32(mongoerr.NotWritablePrimary), Message: "not primary"}); !mongoerr.Is(err, mongoerr.NotWritablePrimary) || !retriableCode(err) {
			t.Errorf("a shard's NotWritablePrimary: %v", err)
		}
		if err := conv(mongo.CommandError{Code: int32(mongoerr.BadValue), Message: "bad"}); !mongoerr.Is(err, mongoerr.BadValue) || retriableCode(err) {
			t.Errorf("a shard's BadValue: %v", err)
		}
	}
	// A request not sent because another one's network error cleared the member's pool: the
	// driver's error has no code and no network label, only its pool error inside.
	cleared := mongo.CommandError{Message: "connection pool for 127.0.0.1:1 was cleared because another operation failed with: EOF",
		Wrapped: driver.Error{Message: "cleared", Wrapped: poolClearedErr{}}}
	for _, conv := range []func(error) error{
		func(err error) error { return shardError(ctx, "shard0", err) },
		func(err error) error { return writeShardError(ctx, err, "shard0") },
	} {
		if err := conv(cleared); !mongoerr.Is(err, mongoerr.HostUnreachable) || !retriableCode(err) {
			t.Errorf("pool cleared: %v (code %v), want HostUnreachable", err, mongoerr.CodeOf(err))
		}
	}
	if !retriable(netErr) {
		t.Errorf("the config server client's retriable: a network error is retriable")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := transportError(done, "shard0", netErr); err != nil {
		t.Errorf("a network error after the request's context ended: %v, want it left alone", err)
	}

	// No member to select within the client's server selection timeout:
	// FailedToSatisfyReadPreference, as mongos's replica set monitor answers.
	rs, err := client.NewReplicaSet(client.ReplicaSetHosts{SetName: "gone", Seeds: []string{"127.0.0.1:1"}},
		client.Options{AppName: "humongos-test", ServerSelectionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(ctx) }()
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	_, err = rs.RunCommand(rctx, "admin", bson.D{{Key: "ping", Value: 1}}, nil)
	if got := shardError(rctx, "gone", err); !mongoerr.Is(got, mongoerr.FailedToSatisfyReadPreference) {
		t.Errorf("server selection timeout: %v (from %v)", got, err)
	}
}

func TestRetryFailedHost(t *testing.T) {
	ctx := context.Background()
	attempts := func(errs ...error) (int, error) {
		n := 0
		err := retryFailedHost(ctx, func() error {
			n++
			if n <= len(errs) {
				return errs[n-1]
			}
			return nil
		})
		return n, err
	}
	down := mongoerr.New(mongoerr.HostUnreachable, "down")
	if n, err := attempts(down, mongoerr.New(mongoerr.InterruptedDueToReplStateChange, "stepped down")); n != 3 || err != nil {
		t.Errorf("two retriable errors: %d attempts, %v", n, err)
	}
	if n, err := attempts(mongoerr.New(mongoerr.BadValue, "no")); n != 1 || !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("a non-retriable error: %d attempts, %v", n, err)
	}
	if n, err := attempts(down, down, down, down, down); n != 1+maxFailedHostRetries || !mongoerr.Is(err, mongoerr.HostUnreachable) {
		t.Errorf("always failing: %d attempts, %v; want %d", n, err, 1+maxFailedHostRetries)
	}
	if !writesOutput(mustDoc(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$out", Value: "x"}}}}})) ||
		writesOutput(mustDoc(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}}}})) ||
		writesOutput(mustDoc(bson.D{{Key: "find", Value: "c"}})) {
		t.Errorf("writesOutput")
	}
}

// A shard whose primary steps down (NotWritablePrimary) or drops the connection under a
// request: the router sends reads and retryable writes again, as mongos's kIdempotent
// policy, and the client sees nothing; a write that is not retryable is not sent twice and
// its error (HostUnreachable) reaches the client; a failure that outlasts the retries
// reaches it with the shard's code.
func TestRouterRetriesFailedHost(t *testing.T) {
	rc := startReadCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fp := failpoint.Get("failCommand")
	t.Cleanup(fp.Disable)
	// Only the router's connections to its shards carry this appName; they are internal
	// (a member's handshake), which failCommand spares unless told otherwise.
	fail := func(times int64, cmds bson.A, how bson.E) {
		fp.Configure(failpoint.Times, times, 0, mustDoc(bson.D{{Key: "failCommands", Value: cmds},
			{Key: "appName", Value: "humongos-test"}, {Key: "failInternalCommands", Value: true}, how}))
	}
	notPrimary := bson.E{Key: "errorCode", Value: int32(mongoerr.NotWritablePrimary)}
	closeConn := bson.E{Key: "closeConnection", Value: true}
	reads := bson.A{"find", "count", "distinct", "aggregate"}
	for _, how := range []bson.E{notPrimary, closeConn} {
		before := fp.TimesEntered()
		fail(2, reads, how)
		var cnt struct{ N int64 }
		if err := rc.app.RunCommand(ctx, bson.D{{Key: "count", Value: "s"}}).Decode(&cnt); err != nil || cnt.N != readDocs {
			t.Fatalf("%v: count: %+v %v", how, cnt, err)
		}
		fail(2, reads, how)
		if err := rc.app.RunCommand(ctx, bson.D{{Key: "distinct", Value: "s"}, {Key: "key", Value: "g"}}).Err(); err != nil {
			t.Fatalf("%v: distinct: %v", how, err)
		}
		fail(2, reads, how)
		n, err := rc.app.Collection("s").CountDocuments(ctx, bson.D{}) // aggregate
		if err != nil || n != readDocs {
			t.Fatalf("%v: aggregate: %d %v", how, n, err)
		}
		fail(2, reads, how)
		if err := rc.app.RunCommand(ctx, bson.D{{Key: "find", Value: "s"}, {Key: "filter", Value: bson.D{{Key: "k", Value: 3}}}}).Err(); err != nil {
			t.Fatalf("%v: find: %v", how, err)
		}
		if entered := fp.TimesEntered() - before; entered != 8 {
			t.Errorf("%v: the fail point was entered %d times, want 8", how, entered)
		}
	}

	// A retryable write (lsid and txnNumber) is sent again and applied once.
	sess, err := rc.router.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	insert := func(id int, txn int64) (bson.Raw, error) {
		cmd := bson.D{{Key: "insert", Value: "u"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}}
		if txn > 0 {
			cmd = append(cmd, bson.E{Key: "txnNumber", Value: txn})
		}
		return rc.app.RunCommand(sctx, cmd).Raw()
	}
	for i, how := range []bson.E{notPrimary, closeConn} {
		fail(2, bson.A{"insert"}, how)
		reply, err := insert(1000+i, 1<<40+int64(i))
		if err != nil || reply.Lookup("n").Int32() != 1 {
			t.Fatalf("%v: retryable insert: %v %v", how, reply, err)
		}
	}
	if n, err := rc.sh0.Client.Database("app").Collection("u").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1000, 1001}}}}}); err != nil || n != 2 {
		t.Fatalf("retried inserts on the shard: %d %v", n, err)
	}
	// Not retryable: sent once, its error is the statement's.
	before := fp.TimesEntered()
	fail(1, bson.A{"insert"}, closeConn)
	_, err = insert(1002, 0)
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != int(mongoerr.HostUnreachable) {
		t.Errorf("a non-retryable insert whose shard dropped the connection: %v, want a HostUnreachable write error", err)
	}
	if entered := fp.TimesEntered() - before; entered != 1 {
		t.Errorf("a non-retryable insert was sent %d times", entered)
	}
	// More failures than retries: the shard's code reaches the client. (Not a "not primary"
	// one: the test's driver would mark the router unknown until its next heartbeat.)
	fail(1+maxFailedHostRetries, reads, bson.E{Key: "errorCode", Value: int32(mongoerr.HostUnreachable)})
	var ce mongo.CommandError
	if err := rc.app.RunCommand(ctx, bson.D{{Key: "count", Value: "u"}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.HostUnreachable) {
		t.Errorf("count failing more often than the retries: %v", err)
	}
}

// poolClearedErr stands for the driver's unexported poolClearedError (a RetryablePoolError).
type poolClearedErr struct{}

func (poolClearedErr) Error() string   { return "connection pool cleared" }
func (poolClearedErr) Retryable() bool { return true }
