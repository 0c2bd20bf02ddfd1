package vclock

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

func ts(s, i uint32) optime.Timestamp { return optime.MakeTimestamp(s, i) }

func TestAdvanceNeverMovesBack(t *testing.T) {
	var c Clock
	c.Now = func() time.Time { return time.Unix(1000, 0) }
	if err := c.Advance(Time{Cluster: ts(10, 5), Config: ts(9, 1), Topology: ts(8, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(Time{Cluster: ts(10, 4), Config: ts(9, 0), Topology: ts(7, 9)}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Time(), (Time{ts(10, 5), ts(9, 1), ts(8, 1)}); got != want {
		t.Fatalf("time %v, want %v", got, want)
	}
}

// A larger lower component raises the ones above it: ClusterTime >= ConfigTime >= TopologyTime.
func TestTicksKeepTheRelation(t *testing.T) {
	var c Clock
	c.TickTopologyTo(ts(20, 1))
	if got := c.Time(); got.Config != ts(20, 1) || got.Cluster != ts(20, 1) {
		t.Fatalf("after topology tick: %v", got)
	}
	c.TickConfigTo(ts(30, 2))
	c.AdvanceCluster(ts(25, 0))
	if got := c.Time(); got != (Time{ts(30, 2), ts(30, 2), ts(20, 1)}) {
		t.Fatalf("after config tick: %v", got)
	}
}

// Concurrent advances never show a snapshot that breaks the relation.
func TestSnapshotsAreConsistent(t *testing.T) {
	var c Clock
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := uint32(1); i < 20000; i++ {
				switch r.IntN(3) {
				case 0:
					c.AdvanceCluster(ts(i, 0))
				case 1:
					c.TickConfigTo(ts(i, 0))
				default:
					c.TickTopologyTo(ts(i/2, 0))
				}
			}
		})
	}
	var bad error
	var rd sync.WaitGroup
	rd.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := c.Time(); s.Cluster < s.Config || s.Config < s.Topology {
				bad = errors.New(s.String())
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	rd.Wait()
	if bad != nil {
		t.Fatalf("inconsistent snapshot %v", bad)
	}
}

func TestRateLimiter(t *testing.T) {
	var c Clock
	c.Now = func() time.Time { return time.Unix(1_000_000, 0) }
	far := ts(1_000_000+DefaultMaxDriftSecs+10, 1)
	err := c.Advance(Time{Cluster: far})
	if e, ok := errors.AsType[*mongoerr.Error](err); !ok || e.Code != mongoerr.ClusterTimeFailsRateLimiter {
		t.Fatalf("far cluster time: %v", err)
	}
	if !c.Time().Cluster.IsNull() {
		t.Fatal("a refused time moved the clock")
	}
	c.MaxDriftSecs.Store(5)
	if err := c.Advance(Time{Config: ts(1_000_010, 0)}); err == nil {
		t.Fatal("configTime 10 s ahead passed a 5 s limit")
	}
	if err := c.Advance(Time{Config: ts(1_000_004, 0)}); err != nil {
		t.Fatal(err)
	}
}

func TestGossipWireForms(t *testing.T) {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("find", 1).
		AppendDocument("$clusterTime", bsoncore.NewDocumentBuilder().AppendTimestamp("clusterTime", 7, 3).Build()).Build()
	if g := ReadGossip(cmd); g.Internal || g.Cluster != ts(7, 3) {
		t.Fatalf("driver request: %+v", g)
	}
	cmd = WithMemberGossip(cmd, Time{Config: ts(6, 1), Topology: ts(5, 0)})
	g := ReadGossip(cmd)
	if !g.Internal || g.Cluster != ts(7, 3) || g.Config != ts(6, 1) || g.Topology != ts(5, 0) {
		t.Fatalf("member request: %+v (%v)", g, cmd)
	}
	if err := cmd.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A router's transaction request carries its own $clusterTime (atClusterTime) before the one
// its driver appends: the highest counts, wherever it is.
func TestGossipRepeatedClusterTime(t *testing.T) {
	for _, order := range [][2]uint32{{9, 2}, {2, 9}} {
		out := bsoncore.AppendInt32Element(nil, "find", 1)
		out = AppendClusterTime(out, ts(order[0], 0))
		out = AppendClusterTime(out, ts(order[1], 0))
		doc := bsoncore.BuildDocument(nil, out)
		if g := ReadGossip(doc); g.Cluster != ts(9, 0) {
			t.Errorf("$clusterTime %d then %d: read %v, want the highest", order[0], order[1], g.Cluster)
		}
	}
}
