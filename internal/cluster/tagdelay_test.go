package cluster

// Issue 5, scope items 1 and 6 on real processes: a custom write concern mode over member
// tags (settings.getLastErrorModes) waits for members covering enough distinct tag values,
// and a delayed member (secondaryDelaySecs) applies each entry no earlier than its delay after
// the entry's wall time while staying readable with secondaryOk.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

const tagDelaySecs = 3

// tagDelayReconfig reconfigures the set through primary: primary {dc: east}, delayed
// {dc: east, priority 0, hidden, secondaryDelaySecs}, west {dc: west}, and the mode
// multiDC: {dc: 2}, which needs the west member. Member _ids are kept from the current
// config. A reconfig can fail transiently (the previous config not yet committed), so it is
// retried until ctx ends.
func tagDelayReconfig(ctx context.Context, d *Deployment, primary, delayed, west *Process) (int64, error) {
	admin := d.DirectClient(primary).Database("admin")
	var last error
	for {
		var got struct {
			Config struct {
				Version int64 `bson:"version"`
				Members []struct {
					ID   int    `bson:"_id"`
					Host string `bson:"host"`
				} `bson:"members"`
			} `bson:"config"`
		}
		last = admin.RunCommand(ctx, bson.D{{Key: "replSetGetConfig", Value: 1}}).Decode(&got)
		if last == nil {
			members := bson.A{}
			for _, m := range got.Config.Members {
				md := bson.D{{Key: "_id", Value: m.ID}, {Key: "host", Value: m.Host}}
				switch m.Host {
				case primary.Addr():
					md = append(md, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}})
				case delayed.Addr():
					md = append(md, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}},
						bson.E{Key: "priority", Value: 0}, bson.E{Key: "hidden", Value: true},
						bson.E{Key: "secondaryDelaySecs", Value: tagDelaySecs})
				case west.Addr():
					md = append(md, bson.E{Key: "tags", Value: bson.D{{Key: "dc", Value: "west"}}})
				}
				members = append(members, md)
			}
			settings := append(append(bson.D{}, ShortElections...), bson.E{Key: "getLastErrorModes",
				Value: bson.D{{Key: "multiDC", Value: bson.D{{Key: "dc", Value: 2}}}}})
			version := got.Config.Version + 1
			cfg := bson.D{{Key: "_id", Value: d.Topology.Name}, {Key: "version", Value: version},
				{Key: "members", Value: members}, {Key: "settings", Value: settings}}
			last = admin.RunCommand(ctx, bson.D{{Key: "replSetReconfig", Value: cfg}}).Err()
			if last == nil {
				return version, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("reconfig: %w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tagDelayInsert inserts doc on primary with write concern wc and returns the
// writeConcernError's code (0: none) and errInfo; any other failure fails the test.
func tagDelayInsert(t *testing.T, ctx context.Context, cl *mongo.Client, id string, wc bson.D) (int, bson.Raw) {
	t.Helper()
	raw, err := cl.Database("tagdelay").RunCommand(ctx, bson.D{{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "writeConcern", Value: wc}}).Raw()
	var we mongo.WriteException
	switch {
	case err == nil:
		if n, _ := raw.Lookup("n").AsInt64OK(); n != 1 {
			t.Fatalf("insert %s: %v", id, raw)
		}
		return 0, nil
	case errors.As(err, &we) && we.WriteConcernError != nil && len(we.WriteErrors) == 0:
		return we.WriteConcernError.Code, we.WriteConcernError.Details
	}
	t.Fatalf("insert %s: %v", id, err)
	return 0, nil
}

func TestReplicaSetTagModesAndDelay(t *testing.T) {
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var delayed, west *Process
	for _, n := range d.Nodes {
		switch {
		case n == primary:
		case delayed == nil:
			delayed = n
		default:
			west = n
		}
	}
	version, err := tagDelayReconfig(ctx, d, primary, delayed, west)
	if err != nil {
		t.Fatal(err)
	}
	// Every member learns the config (by heartbeat) before the modes are used.
	for _, n := range d.Nodes {
		for {
			var got struct {
				Config struct {
					Version int64 `bson:"version"`
				} `bson:"config"`
			}
			err := d.DirectClient(n).Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetConfig", Value: 1}}).Decode(&got)
			if err == nil && got.Config.Version >= version {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never installed config version %d: %v", n.Name(), version, err)
			case <-time.After(pollInterval):
			}
		}
	}
	pc := d.DirectClient(primary)

	// 1. multiDC is satisfied once the west member has the write.
	start := time.Now()
	if code, info := tagDelayInsert(t, ctx, pc, "a", bson.D{{Key: "w", Value: "multiDC"}, {Key: "wtimeout", Value: 30000}}); code != 0 {
		t.Fatalf("w:multiDC with every member up: writeConcernError %d %v", code, info)
	}
	t.Logf("w:multiDC satisfied in %v", time.Since(start))

	// 2. With the west member paused, the east members alone never satisfy it: wtimeout.
	if err := west.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = west.Resume()
		}
	}()
	code, info := tagDelayInsert(t, ctx, pc, "b", bson.D{{Key: "w", Value: "multiDC"}, {Key: "wtimeout", Value: 1000}})
	if code != 64 {
		t.Fatalf("w:multiDC with west paused: writeConcernError %d %v, want 64 WriteConcernFailed", code, info)
	}
	if wt, _ := info.Lookup("wtimeout").BooleanOK(); !wt {
		t.Fatalf("errInfo %v: want wtimeout: true", info)
	}
	if w, _ := info.Lookup("writeConcern", "w").StringValueOK(); w != "multiDC" {
		t.Fatalf("errInfo %v: want writeConcern.w multiDC", info)
	}

	// 3. Resumed, the west member catches up and the mode is satisfied again.
	if err := west.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	start = time.Now()
	if code, info := tagDelayInsert(t, ctx, pc, "c", bson.D{{Key: "w", Value: "multiDC"}, {Key: "wtimeout", Value: 30000}}); code != 0 {
		t.Fatalf("w:multiDC after resume: writeConcernError %d %v", code, info)
	}
	t.Logf("w:multiDC satisfied %v after resuming the west member", time.Since(start))

	// 4. The delayed member applies a w:1 write no earlier than tagDelaySecs after the
	// entry's wall time: whenever its replSetGetStatus shows the entry applied, its own
	// clock ("date", taken after applying) is at least the delay past the entry's wall.
	if code, info := tagDelayInsert(t, ctx, pc, "d", bson.D{{Key: "w", Value: 1}}); code != 0 {
		t.Fatalf("w:1 insert: %d %v", code, info)
	}
	var entry struct {
		TS   bson.Timestamp `bson:"ts"`
		T    int64          `bson:"t"`
		Wall time.Time      `bson:"wall"`
	}
	if err := pc.Database("local").Collection("oplog.rs").FindOne(ctx,
		bson.D{{Key: "ns", Value: "tagdelay.c"}, {Key: "o._id", Value: "d"}}).Decode(&entry); err != nil {
		t.Fatalf("oplog entry of d: %v", err)
	}
	op := OpTime{TS: entry.TS, T: entry.T}
	secondaryOk := d.DirectClient(delayed).Database("tagdelay", options.Database().SetReadPreference(readpref.SecondaryPreferred())).Collection("c")
	sawAbsent := false
	for {
		var st struct {
			Date    time.Time `bson:"date"`
			Optimes struct {
				Applied OpTime `bson:"appliedOpTime"`
			} `bson:"optimes"`
		}
		if err := d.DirectClient(delayed).Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if !st.Optimes.Applied.Less(op) {
			lag := st.Date.Sub(entry.Wall)
			t.Logf("delayed member applied the entry; its clock is %v past the entry's wall time (saw it absent before: %v)", lag, sawAbsent)
			if lag < tagDelaySecs*time.Second {
				t.Fatalf("delayed member applied an entry %v after its wall time, before its %ds delay", lag, tagDelaySecs)
			}
			break
		}
		n, err := secondaryOk.CountDocuments(ctx, bson.D{{Key: "_id", Value: "d"}})
		if err != nil {
			t.Fatalf("secondaryOk read on the delayed member: %v", err)
		}
		sawAbsent = sawAbsent || n == 0
		select {
		case <-ctx.Done():
			t.Fatalf("the delayed member never applied %v", op)
		case <-time.After(pollInterval):
		}
	}
	// Once applied it is readable there with secondaryOk.
	if n, err := secondaryOk.CountDocuments(ctx, bson.D{{Key: "_id", Value: "d"}}); err != nil || n != 1 {
		t.Fatalf("secondaryOk read of d on the delayed member: %d, %v", n, err)
	}
	// Others never choose the delayed member as sync source while the primary qualifies.
	var ws struct {
		SyncSourceHost string `bson:"syncSourceHost"`
	}
	if err := d.DirectClient(west).Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&ws); err != nil {
		t.Fatal(err)
	}
	t.Logf("west member syncs from %q", ws.SyncSourceHost)
}
