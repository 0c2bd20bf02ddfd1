package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// electionTimeout is ShortElections' electionTimeoutMillis.
const electionTimeout = 2 * time.Second

// failoverLiveness bounds how long a failover test waits for a new primary. It is a liveness
// guard, not the performance target (electionTimeout + 2 s), which the tests log.
const failoverLiveness = 20 * time.Second

// w1 is write concern w:1 for tests about elections and failover, not about replication: the
// server's default is w:"majority", which needs secondaries that apply the oplog.
var w1 = options.Collection().SetWriteConcern(writeconcern.W1())

func startSet(t *testing.T) *Deployment {
	t.Helper()
	start := time.Now()
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections})
	t.Logf("replica set of 3 up with a primary in %v", time.Since(start).Round(time.Millisecond))
	return d
}

// requireOnePrimary checks, from every running member's own replSetGetStatus, that the set
// has exactly one PRIMARY and the rest SECONDARY, and that all agree on who the primary is.
func requireOnePrimary(t *testing.T, ctx context.Context, d *Deployment, want int) *Process {
	t.Helper()
	var primary *Process
	for {
		primary = nil
		var problem error
		for _, n := range d.Nodes {
			if !n.Running() {
				continue
			}
			s, err := d.Status(ctx, n)
			if err != nil {
				problem = err
				break
			}
			if s.Count("PRIMARY") != 1 || s.Count("SECONDARY") != want-1 {
				problem = fmt.Errorf("%s sees %v", n.Name(), s.Members)
				break
			}
			for _, m := range s.Members {
				if m.StateStr != "PRIMARY" {
					continue
				}
				p := d.Node(m.Name)
				if primary != nil && p != primary {
					problem = fmt.Errorf("%s sees %s as primary, another member sees %s", n.Name(), m.Name, primary.Name())
				}
				primary = p
			}
		}
		if problem == nil {
			break
		}
		// Heartbeats spread state changes within heartbeatIntervalMillis; give them a few.
		select {
		case <-ctx.Done():
			t.Fatalf("set never settled on one PRIMARY and %d SECONDARY: %v", want-1, problem)
		case <-time.After(100 * time.Millisecond):
		}
	}
	hp, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hp != primary {
		t.Fatalf("hello says %s is primary, replSetGetStatus says %s", hp.Name(), primary.Name())
	}
	return primary
}

// logHellos logs every member's hello, to tell a server's view from the driver's.
func (d *Deployment) logHellos(t *testing.T) {
	for _, n := range d.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		raw, err := d.DirectClient(n).Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
		cancel()
		t.Logf("hello %s: %v %v", n.Name(), raw, err)
	}
}

// (a) Three members start; exactly one is PRIMARY and replSetGetStatus shows 1 PRIMARY and 2
// SECONDARY; the replica-set URI client writes to it.
func TestReplicaSetStarts(t *testing.T) {
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	primary := requireOnePrimary(t, ctx, d, 3)
	h, err := d.Hello(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	if h.SetName != "rs0" || len(h.Hosts) != 3 || h.Me != primary.Addr() || h.Primary != primary.Addr() {
		t.Errorf("hello on the primary: %+v", h)
	}
	for _, n := range d.Nodes {
		if n == primary {
			continue
		}
		h, err := d.Hello(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Secondary || h.IsWritablePrimary || h.Primary != primary.Addr() {
			t.Errorf("hello on %s: %+v", n.Name(), h)
		}
	}
	coll := d.Client.Database("test").Collection("c", w1)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert through the replica-set URI: %v", err)
	}
	if n, err := d.DirectClient(primary).Database("test").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("primary %s has %d documents (%v), want 1", primary.Name(), n, err)
	}
}

// writer inserts documents one at a time through the replica-set client until stopped,
// retrying failures (a failover makes writes fail until the driver finds the new primary),
// and records each acknowledged _id with the time of its acknowledgement, to compare with the
// failover.
type writer struct {
	mu     sync.Mutex
	acked  []int64
	ackAt  []time.Time
	failed int
}

func (w *writer) run(ctx context.Context, coll *mongo.Collection) {
	for i := int64(0); ctx.Err() == nil; i++ {
		// Each attempt is bounded so a write stuck on a dead primary cannot stall the loop.
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := coll.InsertOne(actx, bson.D{{Key: "_id", Value: i}})
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acked = append(w.acked, i)
			w.ackAt = append(w.ackAt, time.Now())
		} else {
			w.failed++
		}
		w.mu.Unlock()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// waitAcks waits until n writes were acknowledged after since, failing the test after within.
func (w *writer) waitAcks(t *testing.T, since time.Time, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, _ := w.acksAfter(since)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			w.mu.Lock()
			failed := w.failed
			w.mu.Unlock()
			t.Fatalf("%d writes acknowledged since %v, want %d within %v (%d failed attempts)", got, since.Format("15:04:05.000"), n, within, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acksAfter counts acknowledged writes after t.
func (w *writer) acksAfter(t time.Time) (n int, ids []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, at := range w.ackAt {
		if at.After(t) {
			n++
			ids = append(ids, w.acked[i])
		}
	}
	return n, ids
}

// (b) kill -9 the primary: a new primary is elected, the driver (replica-set URI, retrying)
// keeps writing to it, and the old primary, restarted, rejoins as a SECONDARY. The issue's
// target is electionTimeout + 2 s; the test logs the measured time against it but only
// fails past failoverLiveness, since timing must not decide a test on a loaded CI machine
// (a split vote alone costs another election timeout).
func TestReplicaSetKillPrimary(t *testing.T) {
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := requireOnePrimary(t, ctx, d, 3)

	coll := d.Client.Database("test").Collection("failover", w1)
	w := &writer{}
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx, coll) }()
	defer func() { stopWriter(); wg.Wait() }()

	// Some writes before the kill: the first ones wait for the driver's discovery and the
	// collection's creation, so wait for them rather than for a fixed time.
	w.waitAcks(t, time.Time{}, 10, 10*time.Second)
	killedAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(ctx, failoverLiveness)
	newPrimary, err := d.WaitForPrimary(ectx, old)
	ecancel()
	if err != nil {
		t.Fatalf("no new primary within %v of killing %s: %v", failoverLiveness, old.Name(), err)
	}
	elected := time.Since(killedAt)
	t.Logf("killed %s; %s primary after %v (target: electionTimeout + 2 s = %v)", old.Name(), newPrimary.Name(),
		elected.Round(time.Millisecond), electionTimeout+2*time.Second)

	// The driver must find the new primary by itself and keep writing.
	w.waitAcks(t, killedAt.Add(elected), 20, 10*time.Second)
	_, afterIDs := w.acksAfter(killedAt.Add(elected))
	// Writes acknowledged after the election went to the new primary.
	var doc bson.M
	last := afterIDs[len(afterIDs)-1]
	if err := d.DirectClient(newPrimary).Database("test").Collection("failover").
		FindOne(ctx, bson.D{{Key: "_id", Value: last}}).Decode(&doc); err != nil {
		t.Fatalf("write %d acknowledged after the failover is not on the new primary %s: %v", last, newPrimary.Name(), err)
	}

	// The old primary comes back on the same dbpath and port as a SECONDARY.
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	defer rcancel()
	if err := old.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForState(rctx, old, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	if p := requireOnePrimary(t, rctx, d, 3); p != newPrimary {
		t.Fatalf("primary changed to %s after %s rejoined", p.Name(), old.Name())
	}
	stopWriter()
	wg.Wait()
	acks, _ := w.acksAfter(time.Time{})
	t.Logf("%d writes acknowledged (w:1), %d failed attempts during the failover", acks, w.failed)
}

// (c) replSetStepDown: another member becomes primary within a few seconds, and the old one
// stays a SECONDARY (stepDownSecs keeps it from standing again).
func TestReplicaSetStepDown(t *testing.T) {
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	requireOnePrimary(t, ctx, d, 3)
	start := time.Now()
	// Not forced: secondaries replicate, so the step-down waits for one to catch up and
	// hands the election off to it (the target is ≤ 1 s, logged, not asserted).
	old, err := d.StepDown(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(ctx, failoverLiveness)
	newPrimary, err := d.WaitForPrimary(ectx, old)
	ecancel()
	if err != nil {
		t.Fatalf("no other primary within %v after %s stepped down: %v", failoverLiveness, old.Name(), err)
	}
	t.Logf("%s stepped down; %s primary after %v (target with handoff: 1 s)", old.Name(), newPrimary.Name(),
		time.Since(start).Round(time.Millisecond))
	if p := requireOnePrimary(t, ctx, d, 3); p != newPrimary {
		t.Fatalf("primary is %s, want %s", p.Name(), newPrimary.Name())
	}
	if err := d.WaitForState(ctx, old, "SECONDARY"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Database("test").Collection("c", w1).InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Errorf("insert after step-down: %v", err)
		d.logHellos(t)
	}
}
