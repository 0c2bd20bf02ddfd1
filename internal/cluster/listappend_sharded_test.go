package cluster

// Issue 14's process-level acceptance for cross-shard transactions (spec/sharding.md,
// "Distributed transactions"): the list-append workload of listappend_txn_test.go through two
// routers over two shards of 3, while the nemesis kills -9 and restarts a shard's primary, the
// config server's primary (a single member restarted on its dbpath) or a router. elle.lists
// is sharded on _id with k0..k2 on shard0 and k3..k5 on shard1, and every transaction has 2 to
// 5 micro-operations, so most touch both shards and commit through the coordinator's two-phase
// commit. Clients use a URI with both routers (the driver moves to the other router when one
// dies and recovers a commit's outcome with the recoveryToken) or one router alone. Checked:
// no G0, G1a, G1b, G1c or G-single, no lost committed append (the final lists are read through
// a router), every shard's config.transaction_coordinators drains, and each shard's members
// end up with the same data. HUMONGO_LISTAPPEND_SHARDED_CYCLES sets the number of faults
// (default 4: each kind once), HUMONGO_SEED the seed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"

	"humongo/internal/cluster/checker"
)

// lsFault is what one cycle of the sharded nemesis kills.
type lsFault int

const (
	lsShard0 lsFault = iota // shard0's primary
	lsShard1                // shard1's primary
	lsConfig                // the config server's primary (its only member)
	lsRouter                // one of the routers
	lsFaults
)

func (f lsFault) String() string {
	return [...]string{"shard0 primary", "shard1 primary", "config primary", "router"}[f]
}

func TestListAppendShardedTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster of 2 shards of 3 members and 2 routers")
	}
	cycles := envCount(t, "HUMONGO_LISTAPPEND_SHARDED_CYCLES", int(lsFaults))
	seed := envSeed(t)
	t.Logf("seed %d, %d fault cycles (HUMONGO_SEED, HUMONGO_LISTAPPEND_SHARDED_CYCLES)", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 3))
	start := time.Now()
	d := Start(t, Topology{Kind: Sharded, Shards: 2, Members: 3, ConfigMembers: 1, Routers: 2},
		Options{ReplSetSettings: ShortElections, StartTimeout: time.Minute})
	for _, s := range d.Shards {
		s.LogReplOnFailure(t, 40)
	}
	lsKeepLogs(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cycles)*40*time.Second+90*time.Second)
	defer cancel()

	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	runAdmin(t, ctx, d.Client, bson.D{{Key: "balancerStop", Value: 1}}) // the chunks stay where the test puts them
	runAdmin(t, ctx, d.Client, bson.D{{Key: "enableSharding", Value: laDB}, {Key: "primaryShard", Value: s0}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "shardCollection", Value: laDB + "." + laColl}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "split", Value: laDB + "." + laColl}, {Key: "middle", Value: bson.D{{Key: "_id", Value: "k3"}}}})
	runAdmin(t, ctx, d.Client, bson.D{{Key: "moveChunk", Value: laDB + "." + laColl}, {Key: "find", Value: bson.D{{Key: "_id", Value: "k3"}}},
		{Key: "to", Value: s1}, {Key: "_waitForDelete", Value: true}})
	if err := laSeedLists(ctx, d.Client); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v up and elle.lists split over %s and %s in %v", d.Topology, s0, s1, time.Since(start).Round(time.Millisecond))

	clients := []*mongo.Client{laConnect(t, d.URI), laConnect(t, d.Routers[0].URI()), laConnect(t, d.Routers[1].URI())}
	if err := lsGossipSeed(ctx, d.Client, clients); err != nil {
		t.Fatal(err)
	}
	both := clients[0]
	h, stop := laRunClients(t, ctx, seed, 2, clients...)

	first := lsFault(rng.IntN(int(lsFaults)))
	for cycle := range cycles {
		kind := (first + lsFault(cycle)) % lsFaults
		h.waitCommits(t, ctx, "transactions before the fault", laPerPhase, majElect)
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		at := time.Now()
		what := kind.String()
		switch kind {
		case lsShard0, lsShard1:
			s := d.Shards[kind-lsShard0]
			f, err := s.FailPrimary(ctx, FaultKill, majElect)
			if err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			if err := s.Heal(ctx, f, majRejoin); err != nil {
				t.Fatalf("cycle %d: heal: %v", cycle, err)
			}
			what = fmt.Sprintf("%s: %v", s.Topology.Name, f)
		case lsConfig:
			p := d.Config.Nodes[0]
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := p.Restart(ctx); err != nil {
				t.Fatalf("cycle %d: restart %s: %v", cycle, p.Name(), err)
			}
			ectx, ecancel := context.WithTimeout(ctx, majElect)
			_, err := d.Config.WaitForPrimary(ectx)
			ecancel()
			if err != nil {
				t.Fatalf("cycle %d: %s not primary again after its restart: %v", cycle, p.Name(), err)
			}
			what = fmt.Sprintf("kill -9 of config primary %s, primary again after %v", p.Name(), time.Since(at).Round(time.Millisecond))
		case lsRouter:
			r := d.Routers[rng.IntN(len(d.Routers))]
			if err := r.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := r.Restart(ctx); err != nil {
				t.Fatalf("cycle %d: restart %s: %v", cycle, r.Name(), err)
			}
			what = fmt.Sprintf("kill -9 of %s, restarted after %v", r.Name(), time.Since(at).Round(time.Millisecond))
		}
		h.waitCommits(t, ctx, "transactions committing after the fault", laPerPhase, majElect)
		t.Logf("cycle %d at %s: %s; transactions committing again %v after the fault", cycle, at.UTC().Format("15:04:05.000"), what, time.Since(at).Round(time.Millisecond))
	}
	stop()

	// Every coordinator finished (a commit it could not finish would hold its participants'
	// prepared transactions, and their documents' locks, forever).
	for _, s := range d.Shards {
		if err := lsCoordinatorsDrained(ctx, s); err != nil {
			t.Errorf("%s: %v", s.Topology.Name, err)
		}
	}
	// Each shard's members caught up hold the same data; a shard whose members do not catch
	// up fails the test, but the history is still checked.
	for _, s := range d.Shards {
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		target, err := s.WaitCaughtUp(cctx)
		ccancel()
		if err != nil {
			t.Errorf("%s: members did not catch up: %v", s.Topology.Name, err)
		} else if _, err := s.CompareDBHashes(ctx, laDB); err != nil {
			t.Errorf("%s: members differ after catch-up to %v: %v", s.Topology.Name, target, err)
		}
	}
	final, err := laReadFinal(ctx, both.Database(laDB).Collection(laColl, options.Collection().SetReadConcern(readconcern.Majority())))
	if err != nil {
		t.Fatalf("final read through the routers: %v", err)
	}
	if len(final) != laKeys {
		t.Fatalf("final read through the routers: %d lists, want %d: %v", len(final), laKeys, final)
	}
	// Two-phase commits happened: committed transactions that appended on both shards.
	h.mu.Lock()
	twoPC := 0
	for _, tx := range h.txns {
		var on [2]bool
		for _, m := range tx.Ops {
			if m.Kind == checker.MopAppend {
				on[btoi(m.Key >= "k3")] = true
			}
		}
		if tx.Outcome == checker.Committed && on[0] && on[1] {
			twoPC++
		}
	}
	h.mu.Unlock()
	t.Logf("%d committed transactions appended on both shards (two-phase commit)", twoPC)
	if twoPC == 0 {
		t.Errorf("no committed transaction wrote on both shards")
	}
	laCheck(t, h, final, seed, fmt.Sprintf("%d cycles in %v", cycles, time.Since(start).Round(time.Millisecond)))
}

// lsGossipSeed makes every workload client's cluster time reach the lists' creation, read
// back through seeder: a router picks a snapshot transaction's atClusterTime from its own
// clock, and a router that never saw the inserts (the seeder used the other one) may pick a
// snapshot without the lists, in which a $push matches nothing. Snapshot isolation allows
// that stale snapshot; the workload is about lists that exist. A client gossips its cluster
// time with every request, so whichever router serves it then has seen the creation.
func lsGossipSeed(ctx context.Context, seeder *mongo.Client, clients []*mongo.Client) error {
	sess, err := seeder.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(ctx)
	if err := seeder.Database(laDB).Collection(laColl).FindOne(mongo.NewSessionContext(ctx, sess), bson.D{}).Err(); err != nil {
		return fmt.Errorf("read the lists back: %w", err)
	}
	ct := sess.ClusterTime()
	for _, cl := range clients {
		s, err := cl.StartSession()
		if err != nil {
			return err
		}
		err = s.AdvanceClusterTime(ct)
		if err == nil {
			err = cl.Database(laDB).RunCommand(mongo.NewSessionContext(ctx, s), bson.D{{Key: "ping", Value: 1}}).Err()
		}
		s.EndSession(ctx)
		if err != nil {
			return fmt.Errorf("gossip the cluster time: %w", err)
		}
	}
	return nil
}

// lsCoordinatorsDrained waits (30 s) for shard s's config.transaction_coordinators to be
// empty; the error names the documents left and the coordinator service's counters.
func lsCoordinatorsDrained(ctx context.Context, s *Deployment) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := s.WaitForPrimary(ctx)
		if err != nil {
			return err
		}
		cl := s.DirectClient(p)
		n, err := coordinatorDocs(ctx, cl)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var docs []bson.M
			if cur, ferr := cl.Database("config").Collection("transaction_coordinators").Find(ctx, bson.D{}); ferr == nil {
				_ = cur.All(ctx, &docs)
			}
			var status bson.M
			_ = cl.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&status)
			return fmt.Errorf("config.transaction_coordinators on %s still holds %d documents (%v) after 30 s: %v; twoPhaseCommitCoordinator %v",
				p.Name(), n, err, docs, status["twoPhaseCommitCoordinator"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lsKeepLogs copies every process's log to $HUMONGO_KEEP_LOGS/<test>/ when the test ends, if
// that variable is set (the processes' directories are removed with the test's).
func lsKeepLogs(t *testing.T, d *Deployment) {
	dir := os.Getenv("HUMONGO_KEEP_LOGS")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		out := filepath.Join(dir, t.Name())
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Log(err)
			return
		}
		for _, p := range append(append([]*Process{}, d.Nodes...), d.Routers...) {
			if b, err := os.ReadFile(p.LogPath()); err == nil {
				_ = os.WriteFile(filepath.Join(out, p.Name()+".log"), b, 0o644)
			}
		}
		t.Logf("logs kept in %s", out)
	})
}
