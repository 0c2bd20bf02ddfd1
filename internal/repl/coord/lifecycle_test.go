package coord_test

import (
	"context"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/recovery"
	"humongo/internal/repl/topology"
)

// memStore is a Store in memory.
type memStore struct {
	mu   sync.Mutex
	docs map[string]bsoncore.Document
}

func (s *memStore) Load(_ context.Context, ns string) (bsoncore.Document, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[ns], nil
}

func (s *memStore) Save(_ context.Context, ns string, doc bsoncore.Document, _ bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[ns] = doc
	return nil
}

func ts(secs uint32) optime.Timestamp { return optime.MakeTimestamp(secs, 1) }

// TestStartupStateFromMarkers: a restarted member's state once it loaded its stored config
// follows its oplog and its consistency markers (local.replset.minvalid): an empty oplog or
// the initial-sync flag → STARTUP2 (with a null lastApplied: a partial copy vouches for
// nothing), data behind minValid → RECOVERING (reads refused) until lastApplied reaches it,
// otherwise SECONDARY.
func TestStartupStateFromMarkers(t *testing.T) {
	self := "127.0.0.1:1"
	cfg := topology.NewDefaultConfig("rs0", self, "127.0.0.1:2", "127.0.0.1:3")
	markers := func(mv optime.OpTime, flag bool) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder().AppendString("_id", "minvalid").
			AppendTimestamp("ts", mv.TS.Secs(), mv.TS.Inc()).AppendInt64("t", mv.Term)
		if flag {
			b.AppendBoolean("doingInitialSync", true)
		}
		return b.Build()
	}
	top := optime.OpTime{TS: ts(100), Term: 1}
	cases := []struct {
		name    string
		top     optime.OpTime
		markers bsoncore.Document
		state   topology.MemberState
		applied optime.OpTime
	}{
		{"empty oplog", optime.OpTime{}, nil, topology.StateStartup2, optime.OpTime{}},
		{"data", top, nil, topology.StateSecondary, top},
		{"data, minValid reached", top, markers(top, false), topology.StateSecondary, top},
		{"data behind minValid", top, markers(optime.OpTime{TS: ts(200), Term: 1}, false), topology.StateRecovering, top},
		{"initial sync flag", top, markers(optime.OpTime{}, true), topology.StateStartup2, optime.OpTime{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &memStore{docs: map[string]bsoncore.Document{coord.ConfigNS: coord.ConfigDocument(cfg)}}
			if c.markers != nil {
				st.docs[recovery.MinValidNS] = c.markers
			}
			rc := coord.New(coord.Options{SetName: "rs0", Self: self, Store: st,
				TopOfOplog: func() (optime.OpTime, error) { return c.top, nil }})
			if err := rc.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			status, err := rc.Status()
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := status.Lookup("myState").AsInt64OK(); topology.MemberState(got) != c.state {
				t.Fatalf("state %v, want %v", topology.MemberState(got), c.state)
			}
			if got, want := rc.LastApplied(), c.applied; got != want {
				t.Fatalf("lastApplied %v, want %v", got, want)
			}
			if c.state == topology.StateSecondary {
				return
			}
			if err := rc.CheckCanServeReads("app", true); !mongoerr.Is(err, mongoerr.NotPrimaryOrSecondary) {
				t.Fatalf("read in %v: %v", c.state, err)
			}
			if rc.Hello().Secondary {
				t.Fatalf("hello reports a secondary in %v", c.state)
			}
			if c.state != topology.StateRecovering {
				return
			}
			// Applying up to minValid makes it a SECONDARY (the applier reports batches).
			rc.SetMyLastAppliedOpTime(optime.OpTime{TS: ts(150), Term: 1})
			if h := rc.Hello(); h.Secondary {
				t.Fatal("SECONDARY before minValid")
			}
			rc.SetMyLastAppliedOpTime(optime.OpTime{TS: ts(200), Term: 1})
			if !rc.Hello().Secondary || rc.CheckCanServeReads("app", true) != nil {
				t.Fatal("not a readable SECONDARY at minValid")
			}
		})
	}
}
