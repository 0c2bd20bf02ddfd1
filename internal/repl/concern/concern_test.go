package concern

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
)

func raw(t *testing.T, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseReadConcern(t *testing.T) {
	for _, tc := range []struct {
		rc   bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "level", Value: "majority"}}, 0},
		{bson.D{{Key: "level", Value: "bogus"}}, mongoerr.BadValue},
		{bson.D{{Key: "level", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}, 0},
		{bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{}}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "nope", Value: 1}}, codeUnknownField},
	} {
		_, err := ParseReadConcern(raw(t, tc.rc))
		if got := mongoerr.CodeOf(err); got != tc.code {
			t.Errorf("%v: code %d (%v), want %d", tc.rc, got, err, tc.code)
		}
	}
}

func TestParseWriteConcernStandalone(t *testing.T) {
	for _, tc := range []struct {
		wc   bson.D
		code mongoerr.Code
		want string
	}{
		{nil, 0, `{"w": {"$numberInt":"1"},"wtimeout": {"$numberInt":"0"},"provenance": "clientSupplied"}`},
		{bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}}, 0, `{"w": "majority","j": true,"wtimeout": {"$numberInt":"0"},"provenance": "clientSupplied"}`},
		{bson.D{{Key: "w", Value: 2}}, mongoerr.BadValue, ""},
		{bson.D{{Key: "w", Value: "tagged"}}, mongoerr.BadValue, ""},
		{bson.D{{Key: "w", Value: 51}}, mongoerr.FailedToParse, ""},
		{bson.D{{Key: "j", Value: true}, {Key: "fsync", Value: true}}, mongoerr.FailedToParse, ""},
	} {
		cmd := bson.D{{Key: "insert", Value: "c"}}
		if tc.wc != nil {
			cmd = append(cmd, bson.E{Key: "writeConcern", Value: tc.wc})
		}
		wc, err := ParseWriteConcern(Node{}, raw(t, cmd))
		if got := mongoerr.CodeOf(err); got != tc.code {
			t.Errorf("%v: code %d (%v), want %d", tc.wc, got, err, tc.code)
			continue
		}
		if err == nil {
			if got := wc.ToBSON().String(); got != tc.want {
				t.Errorf("%v: ToBSON %s, want %s", tc.wc, got, tc.want)
			}
		}
	}
}

// TestBeginStandalone: on a standalone, Begin attaches an operation.Request whose read source
// is newest data, and refuses the read concerns that need a replica set.
func TestBeginStandalone(t *testing.T) {
	n := Node{State: &ServerState{}}
	ctx, s, err := Begin(context.Background(), n, "find", raw(t, bson.D{{Key: "find", Value: "c"}}))
	if err != nil || s == nil {
		t.Fatalf("Begin: %v", err)
	}
	if r := operation.RequestOf(ctx); r == nil || r.ReadSource != (operation.ReadSource{IgnorePrepare: true}) {
		t.Fatalf("request = %+v, want one reading the newest data, ignoring prepare conflicts", r)
	}
	_, _, err = Begin(context.Background(), n, "find", raw(t, bson.D{{Key: "find", Value: "c"},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}))
	if !mongoerr.Is(err, mongoerr.NotAReplicaSet) {
		t.Fatalf("snapshot on a standalone: %v, want NotAReplicaSet", err)
	}
	// Commands without read concern support ignore levels other than snapshot.
	if _, _, err := Begin(context.Background(), n, "insert", raw(t, bson.D{{Key: "insert", Value: "c"},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}})); err != nil {
		t.Fatalf("insert with readConcern: %v", err)
	}
}

// Level snapshot outside a transaction is for find, aggregate and distinct only: writes and
// the list commands fail with InvalidOptions and MongoDB's message (the driver sessions
// spec's snapshot-sessions-unsupported-ops), on a standalone as on a replica set.
func TestSnapshotRefusedOutsideReads(t *testing.T) {
	n := Node{State: &ServerState{}}
	snap := bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}
	for _, tc := range []struct{ command, reason string }{
		{"insert", "read concern not supported"},
		{"update", "read concern not supported"},
		{"delete", "read concern not supported"},
		{"findAndModify", "read concern not supported"},
		{"listDatabases", "read concern not supported"},
		{"listCollections", "read concern snapshot not supported"},
		{"listIndexes", "read concern snapshot not supported"},
		{"count", "read concern snapshot not supported"},
	} {
		_, _, err := Begin(context.Background(), n, tc.command, raw(t, bson.D{{Key: tc.command, Value: "c"}, snap}))
		me, ok := mongoerr.As(err)
		want := "Command " + tc.command + ` does not support { readConcern: { level: "snapshot", provenance: "clientSupplied" } } :: caused by :: ` + tc.reason
		if !ok || me.Code != mongoerr.InvalidOptions || me.Msg != want {
			t.Errorf("%s: %v, want InvalidOptions %q", tc.command, err, want)
		}
	}
	// The reads that support it get past the support check (a standalone then refuses it).
	for _, c := range []string{"find", "aggregate", "distinct"} {
		_, _, err := Begin(context.Background(), n, c, raw(t, bson.D{{Key: c, Value: "c"}, snap}))
		if !mongoerr.Is(err, mongoerr.NotAReplicaSet) {
			t.Errorf("%s: %v, want NotAReplicaSet", c, err)
		}
	}
}

// $out and $merge refuse read concern linearizable (their supportsReadConcern), with the
// command-level message; other pipelines and levels pass the check.
func TestLinearizableWriteStagesRefused(t *testing.T) {
	n := Node{State: &ServerState{}}
	lin := bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "linearizable"}}}
	for _, stage := range []string{"$out", "$merge"} {
		_, _, err := Begin(context.Background(), n, "aggregate", raw(t, bson.D{{Key: "aggregate", Value: "c"},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: stage, Value: "out"}}}}, lin}))
		me, ok := mongoerr.As(err)
		want := `Command aggregate does not support { readConcern: { level: "linearizable", provenance: "clientSupplied" } } :: caused by :: ` +
			stage + " cannot be used with a 'linearizable' read concern level"
		if !ok || me.Code != mongoerr.InvalidOptions || me.Msg != want {
			t.Errorf("%s: %v, want %q", stage, err, want)
		}
	}
	// Without a write stage, linearizable reaches the standalone check.
	_, _, err := Begin(context.Background(), n, "aggregate", raw(t, bson.D{{Key: "aggregate", Value: "c"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}}}, lin}))
	if !mongoerr.Is(err, mongoerr.NotAReplicaSet) {
		t.Errorf("plain aggregate: %v, want NotAReplicaSet", err)
	}
}

// Which reads ignore prepare conflicts (MongoDB's canIgnorePrepareConflicts): local,
// available and majority without a cluster time; snapshot, linearizable and causally
// consistent reads wait (spec: replication.md "Prepare Conflicts").
func TestCanIgnorePrepareConflicts(t *testing.T) {
	for _, tc := range []struct {
		rc   ReadConcern
		want bool
	}{
		{ReadConcern{}, true},
		{ReadConcern{Level: LevelLocal}, true},
		{ReadConcern{Level: LevelAvailable}, true},
		{ReadConcern{Level: LevelMajority}, true},
		{ReadConcern{Level: LevelSnapshot}, false},
		{ReadConcern{Level: LevelLinearizable}, false},
		{ReadConcern{Level: LevelLocal, AfterClusterTime: 5}, false},
		{ReadConcern{AfterClusterTime: 5}, false},
		{ReadConcern{Level: LevelMajority, AfterClusterTime: 5}, false},
		{ReadConcern{Level: LevelSnapshot, AtClusterTime: 5}, false},
	} {
		if got := canIgnorePrepareConflicts(tc.rc); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.rc, got, tc.want)
		}
	}
}
