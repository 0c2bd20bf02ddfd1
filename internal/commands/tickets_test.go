package commands_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// serverStatus reports the admission-control pools where mongod 7.0 does
// (wiredTiger.concurrentTransactions.<read|write> with int32 out/available/totalTickets),
// setParameter resizes them, operations draw from them, and {wiredTiger: 0} leaves them out.
func TestServerStatusConcurrentTransactions(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	admin := ts.cl.Database("admin")

	pools := func(cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := admin.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatal(err)
		}
		v, err := raw.LookupErr("wiredTiger", "concurrentTransactions")
		if err != nil {
			t.Fatalf("no wiredTiger.concurrentTransactions in %v", raw)
		}
		return v.Document()
	}
	int32At := func(d bson.Raw, path ...string) int32 {
		t.Helper()
		v, err := d.LookupErr(path...)
		if err != nil {
			t.Fatalf("%v missing in %v", path, d)
		}
		n, ok := v.Int32OK()
		if !ok {
			t.Fatalf("%v is %v, want int32", path, v.Type)
		}
		return n
	}
	int64At := func(d bson.Raw, path ...string) int64 {
		t.Helper()
		v, err := d.LookupErr(path...)
		if err != nil {
			t.Fatalf("%v missing in %v", path, d)
		}
		return v.Int64()
	}

	ct := pools(bson.D{{Key: "serverStatus", Value: 1}})
	for _, kind := range []string{"read", "write"} {
		if n := int32At(ct, kind, "totalTickets"); n != 128 {
			t.Errorf("%s.totalTickets = %d, want 128", kind, n)
		}
		if out, avail := int32At(ct, kind, "out"), int32At(ct, kind, "available"); out+avail != 128 {
			t.Errorf("%s: out %d + available %d != 128", kind, out, avail)
		}
	}
	before := int64At(ct, "write", "startedProcessing")

	if _, err := ts.cl.Database("t").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1},
		{Key: "storageEngineConcurrentWriteTransactions", Value: 7}}).Err(); err != nil {
		t.Fatal(err)
	}
	ct = pools(bson.D{{Key: "serverStatus", Value: 1}})
	if n := int32At(ct, "write", "totalTickets"); n != 7 {
		t.Errorf("write.totalTickets after setParameter = %d, want 7", n)
	}
	if n := int32At(ct, "read", "totalTickets"); n != 128 {
		t.Errorf("read.totalTickets after setting the write pool = %d, want 128", n)
	}
	if after := int64At(ct, "write", "startedProcessing"); after <= before {
		t.Errorf("an insert took no write ticket: startedProcessing %d then %d", before, after)
	}

	raw, err := admin.RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}, {Key: "wiredTiger", Value: 0}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.LookupErr("wiredTiger"); err == nil {
		t.Error("{wiredTiger: 0} still reports the section")
	}
}
