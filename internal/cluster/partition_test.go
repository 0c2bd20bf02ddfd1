package cluster

// Issue 5's partition acceptance (spec/replication.md, "Elections": a primary that cannot see
// a majority steps down; "Rollback"): the primary's member links are cut (per-link proxies,
// partition.go) while the test's client still reaches it; it steps down, the majority side
// elects a new primary, and after the links heal the old primary rolls its w:1 writes back
// into <dbpath>/rollback files and every member ends with the same data.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cluster/proxy"
)

// partitionBudget bounds the whole test; every wait inside is a liveness guard.
const partitionBudget = 90 * time.Second

// isolatedWrites bounds the w:1 writes sent to the isolated primary before waiting for it to
// step down (it may refuse earlier).
const isolatedWrites = 200

func TestPartitionIsolatedPrimaryStepsDownAndRollsBack(t *testing.T) {
	start := time.Now()
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3},
		Options{ReplSetSettings: ShortElections, Partitionable: true})
	d.LogReplOnFailure(t, 60)
	t.Logf("partitionable replica set of 3 up in %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), partitionBudget)
	defer cancel()
	old, secondaries := waitPrimaryAndSecondaries(t, ctx, d)
	// Every member-to-member connection goes through the proxies: each link into the
	// primary carries a secondary's heartbeats and oplog fetching.
	for _, s := range secondaries {
		if _, accepted := d.Link(s, old).Stats(); accepted == 0 {
			t.Fatalf("no connection from %s to %s went through their link's proxy", s.Name(), old.Name())
		}
	}

	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	w1 := options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 1, Journal: boolPtr(true)})
	rbInsertBase(t, ctx, d, old, secondaries)

	// w:1 writes nobody fetches, whatever the timing: the secondaries' fetchers are parked
	// (stopReplProducer) while the primary takes them, and the links are cut before the
	// fetchers resume.
	for _, s := range secondaries {
		n := rbFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", true)
		rbWaitFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", n+1)
	}
	oldC := d.DirectClient(old).Database("app").Collection("c", w1)
	attempted := map[int]bool{}
	var acked []int
	for i := 100; i < 105; i++ {
		attempted[i] = true
		if _, err := oldC.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "old-branch"}}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, i)
	}
	rbidBefore := rbGetRBID(t, ctx, d.DirectClient(old), old)

	// Cut the primary off from the other members; the test's client still reaches it.
	cutAt := time.Now()
	if err := d.Isolate(old); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: cut %s at %s", time.Since(start).Round(time.Millisecond), d.CutLinks(), cutAt.UTC().Format(time.RFC3339Nano))
	for _, s := range secondaries {
		rbFailPoint(t, ctx, d.DirectClient(s), s, "stopReplProducer", false)
	}
	// The isolated primary takes w:1 writes until it notices it lost the majority and steps
	// down (how many before that is timing; each one it acknowledged must be rolled back).
	// A client of its own that polls hello (see ConnectReplicaSet for why not the streaming
	// monitor) and does not retry, so a refusal reaches the test.
	isoCl := rbConnect(t, old)
	isoC := isoCl.Database("app").Collection("c", w1)
	isolatedAcked := 0
	for i := 110; i < 110+isolatedWrites; i++ {
		attempted[i] = true
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := isoC.InsertOne(wctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "old-branch"}})
		wcancel()
		if err != nil {
			t.Logf("write %d on the isolated %s: %v", i, old.Name(), err)
			break
		}
		acked = append(acked, i)
		isolatedAcked++
	}
	stepCtx, stepCancel := context.WithTimeout(ctx, 30*time.Second)
	err := waitSteppedDown(stepCtx, isoCl, old)
	stepCancel()
	if err != nil {
		t.Fatalf("the isolated primary did not step down: %v", err)
	}
	steppedDown := time.Since(cutAt)
	if _, err := isoC.InsertOne(ctx, bson.D{{Key: "_id", Value: "refused"}}); rbCode(err) != 10107 {
		t.Fatalf("write on the stepped-down old primary: %v, want NotWritablePrimary (10107)", err)
	}
	// The old primary's majority reads never see its own unreplicated branch.
	rbRequireNoOldBranch(t, "majority read on the isolated old primary",
		rbFind(t, ctx, d.DirectClient(old), "c", readconcern.Majority()))

	newP, err := d.WaitForPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("isolated %s took %d more w:1 writes and was seen stepped down %v after the cut (%s); %s primary (seen %v after the cut)",
		old.Name(), isolatedAcked, steppedDown.Round(time.Millisecond), stepDownLogLine(old),
		newP.Name(), time.Since(cutAt).Round(time.Millisecond))
	if st, err := d.Status(ctx, old); err != nil || st.MyState == stateCode("PRIMARY") {
		t.Fatalf("isolated old primary: %+v %v", st, err)
	}

	// The majority side's branch, including an _id the old branch also inserted.
	newC := d.DirectClient(newP).Database("app").Collection("c", majority)
	for _, i := range []int{200, 201, 202, 100} {
		if _, err := newC.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "new-branch"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newC.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "new-branch"}}}}); err != nil {
		t.Fatal(err)
	}
	want := rbFind(t, ctx, d.DirectClient(newP), "c", readconcern.Majority())

	// Heal: the old primary hears of the new term, finds that its oplog diverged and rolls
	// back.
	healed := time.Now()
	if err := d.HealNetwork(); err != nil {
		t.Fatal(err)
	}
	oldCl := rbConnect(t, old)
	rbWaitRolledBack(t, ctx, d, oldCl, old, rbidBefore)
	t.Logf("%s rolled back and is SECONDARY %v after the heal", old.Name(), time.Since(healed).Round(time.Millisecond))
	rbRequireNoOldBranch(t, "the old primary after the rollback", rbWaitFind(t, ctx, oldCl, old, want))

	// Every w:1 write the old primary acknowledged is in its rollback files, and nothing that
	// was never attempted.
	saved := map[int]bool{}
	files := rbReadFiles(t, old, func(f string, doc bsoncore.Document) {
		id, ok := doc.Lookup("_id").AsInt64OK()
		v, _ := doc.Lookup("v").StringValueOK()
		if !ok || v != "old-branch" || !attempted[int(id)] {
			t.Fatalf("rollback file %s holds %s, which no write of the old branch attempted", f, rbDesc(doc))
		}
		saved[int(id)] = true
	})
	for _, id := range acked {
		if !saved[id] {
			t.Errorf("acknowledged w:1 write %d of the old primary is not in its rollback files %v", id, files)
		}
	}
	t.Logf("rollback files hold %d documents (%d acknowledged w:1 writes)", len(saved), len(acked))

	// All members converge.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	target, err := d.WaitCaughtUp(cctx)
	ccancel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CompareDBHashes(ctx, "app"); err != nil {
		t.Fatalf("members differ after catching up to %v: %v", target, err)
	}
	t.Logf("test took %v", time.Since(start).Round(time.Millisecond))
}

// Partition cuts exactly the links between groups, drops the connections open on them, and
// heals the rest; bad groups are errors. No humongod runs: the "members" are listeners.
func TestPartitionCutsLinksBetweenGroups(t *testing.T) {
	d := &Deployment{}
	ml := &memberLinks{links: map[linkKey]*proxy.Proxy{}, cut: map[linkKey]bool{}}
	// Cleanups run last-in first-out: the proxies close (ending the echoes' connections),
	// then the listeners, then this waits for the echo goroutines.
	var echoes sync.WaitGroup
	t.Cleanup(echoes.Wait)
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		echoes.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				echoes.Go(func() { defer c.Close(); _, _ = io.Copy(c, c) })
			}
		})
		p, err := NewProcess(ProcessOptions{Name: "n" + strconv.Itoa(i), Binary: "humongod", Dir: t.TempDir(),
			Port: ln.Addr().(*net.TCPAddr).Port})
		if err != nil {
			t.Fatal(err)
		}
		d.Nodes = append(d.Nodes, p)
	}
	for _, from := range d.Nodes {
		for _, to := range d.Nodes {
			if from != to {
				ml.links[linkKey{from, to}] = newProxy(t, to.Addr())
			}
		}
	}
	d.links = ml
	n0, n1, n2 := d.Nodes[0], d.Nodes[1], d.Nodes[2]

	// A connection open on n0→n1 before the cut.
	c, err := net.Dial("tcp", d.Link(n0, n1).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("echo through the open link: %v", err)
	}

	if err := d.Isolate(n0); err != nil {
		t.Fatal(err)
	}
	if got, want := d.CutLinks(), "n0→n1, n0→n2, n1→n0, n2→n0"; got != want {
		t.Fatalf("Isolate(n0) cut %q, want %q", got, want)
	}
	// The open connection was dropped: the read ends instead of waiting for an echo.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection open on a cut link was not dropped: %v", err)
	}
	// n1 and n2 are named, n0 is the rest.
	if err := d.Partition([]*Process{n1}, []*Process{n2}); err != nil {
		t.Fatal(err)
	}
	if got, want := d.CutLinks(), "n0→n1, n0→n2, n1→n0, n1→n2, n2→n0, n2→n1"; got != want {
		t.Fatalf("Partition({n1},{n2}) cut %q, want %q", got, want)
	}
	if err := d.Partition([]*Process{n0, n1}); err != nil {
		t.Fatal(err)
	}
	if got, want := d.CutLinks(), "n0→n2, n1→n2, n2→n0, n2→n1"; got != want {
		t.Fatalf("Partition({n0,n1}) cut %q, want %q", got, want)
	}
	if err := d.Partition([]*Process{n0}, []*Process{n0, n1}); err == nil {
		t.Fatal("a member in two groups was accepted")
	}
	stranger, err := NewProcess(ProcessOptions{Name: "x", Binary: "humongod", Dir: t.TempDir(), Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Isolate(stranger); err == nil {
		t.Fatal("isolating a process that is not a member was accepted")
	}
	if err := d.HealNetwork(); err != nil {
		t.Fatal(err)
	}
	if got := d.CutLinks(); got != "" {
		t.Fatalf("after HealNetwork: cut %q", got)
	}
	// A healed link carries traffic again.
	c2, err := net.Dial("tcp", d.Link(n2, n0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c2.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c2, make([]byte, 1)); err != nil {
		t.Fatalf("echo through the healed link: %v", err)
	}
	if (&Deployment{}).Partition() == nil || (&Deployment{}).HealNetwork() == nil {
		t.Fatal("a deployment without Options.Partitionable accepted a partition")
	}
}

// waitSteppedDown waits until node's hello, through cl, no longer reports it as a writable
// primary.
func waitSteppedDown(ctx context.Context, cl *mongo.Client, node *Process) error {
	var last error
	for {
		var h HelloReply
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Database("admin").RunCommand(hctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h)
		cancel()
		if err == nil {
			if !h.IsWritablePrimary {
				return nil
			}
			err = errors.New("still a writable primary")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to step down: %w (last: %v)", node.Name(), ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// stepDownLogLine is the timestamp and message of node's last step-down log line, for logs.
func stepDownLogLine(node *Process) string {
	b, err := os.ReadFile(node.LogPath())
	if err != nil {
		return err.Error()
	}
	var found string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "tepping down") || strings.Contains(l, "can't see a majority") {
			found = l
		}
	}
	if found == "" {
		return "no step-down line in its log"
	}
	var e struct {
		T struct {
			Date string `json:"$date"`
		} `json:"t"`
		Msg  string         `json:"msg"`
		Attr map[string]any `json:"attr"`
	}
	if json.Unmarshal([]byte(found), &e) != nil {
		return found
	}
	return fmt.Sprintf("logged at %s: %s %v", e.T.Date, e.Msg, e.Attr)
}
