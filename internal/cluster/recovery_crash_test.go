package cluster

// Startup recovery of a replica-set member after kill -9 (spec/replication.md "Startup
// Recovery", internal/repl/recovery): a one-member set takes w:1, j:true inserts and $inc
// updates, is killed and restarted on the same dbpath several times; every acknowledged write
// must be there after each restart, the counter must lie between its acknowledged and
// attempted increments, and the log must show the recovery (recover to stable, replay).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestReplicaSetMemberKillNineRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 cycles of a real humongod")
	}
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 1}, Options{ReplSetSettings: ShortElections})
	node := d.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	journaled := options.Collection().SetWriteConcern(writeconcern.Journaled())
	coll := d.DirectClient(node).Database("test").Collection("recovery", journaled)

	var (
		mu          sync.Mutex
		acked       []string
		incAcked    atomic.Int64
		incAttempts atomic.Int64
		seq         atomic.Int64
	)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "counter"}, {Key: "n", Value: int64(0)}}); err != nil {
		t.Fatal(err)
	}
	const cycles = 3
	for cycle := range cycles {
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					if w == 0 {
						incAttempts.Add(1)
						octx, ocancel := context.WithTimeout(wctx, 5*time.Second)
						_, err := coll.UpdateOne(octx, bson.D{{Key: "_id", Value: "counter"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}})
						ocancel()
						if err == nil {
							incAcked.Add(1)
						}
						continue
					}
					id := fmt.Sprintf("c%d-%d", cycle, seq.Add(1))
					octx, ocancel := context.WithTimeout(wctx, 5*time.Second)
					_, err := coll.InsertOne(octx, bson.D{{Key: "_id", Value: id}, {Key: "pad", Value: strings.Repeat("x", 200)}})
					ocancel()
					if err == nil {
						mu.Lock()
						acked = append(acked, id)
						mu.Unlock()
					}
				}
			}()
		}
		// Let some writes be acknowledged, then kill in the middle of the load.
		for deadline := time.Now().Add(20 * time.Second); ; {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= (cycle+1)*50 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := node.Kill(); err != nil {
			t.Fatal(err)
		}
		stop()
		wg.Wait()
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		if err := node.Restart(rctx); err != nil {
			rcancel()
			t.Fatalf("restart after kill -9 #%d: %v", cycle+1, err)
		}
		if err := d.WaitForState(rctx, node, "PRIMARY"); err != nil {
			rcancel()
			t.Fatalf("not PRIMARY after restart #%d: %v", cycle+1, err)
		}
		rcancel()
		recovered := ""
		for _, line := range node.Tail(5000) {
			if strings.Contains(line, "Applied oplog entries during startup recovery") ||
				strings.Contains(line, "No stable timestamp to recover to") {
				recovered = line
			}
		}
		if recovered == "" {
			t.Fatalf("restart #%d: no startup recovery in the log", cycle+1)
		}
		t.Logf("restart #%d: %s", cycle+1, recovered)

		mu.Lock()
		ids := append([]string(nil), acked...)
		mu.Unlock()
		got := map[string]bool{}
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var counter int64 = -1
		for cur.Next(ctx) {
			var doc struct {
				ID string `bson:"_id"`
				N  int64  `bson:"n"`
			}
			if err := cur.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			got[doc.ID] = true
			if doc.ID == "counter" {
				counter = doc.N
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		_ = cur.Close(ctx)
		lost := 0
		for _, id := range ids {
			if !got[id] {
				lost++
				if lost <= 5 {
					t.Errorf("restart #%d: acknowledged insert %s lost", cycle+1, id)
				}
			}
		}
		if lost > 0 {
			t.Fatalf("restart #%d: %d of %d acknowledged inserts lost", cycle+1, lost, len(ids))
		}
		if counter < incAcked.Load() || counter > incAttempts.Load() {
			t.Fatalf("restart #%d: counter %d outside [acknowledged %d, attempted %d]", cycle+1, counter, incAcked.Load(), incAttempts.Load())
		}
		t.Logf("kill -9 #%d: %d acknowledged inserts present, counter %d (acknowledged %d, attempted %d)",
			cycle+1, len(ids), counter, incAcked.Load(), incAttempts.Load())
	}
}
