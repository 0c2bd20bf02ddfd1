package cluster

// Causally consistent sessions running transactions keep working (issue 11, "$clusterTime /
// operationTime and causal consistency across statements"): a few sessions of one client,
// concurrently, each alternating read-only and writing snapshot transactions on its own
// document, with no fault and no conflict. Every transaction must commit. Each one after the
// first sends afterClusterTime = the session's operationTime, so a reply whose operationTime
// exceeds every $clusterTime the client was given makes the next transaction fail
// (InvalidOptions: afterClusterTime greater than the current clusterTime), and, once every
// session is in that state, nothing advances the server's clock any more.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestTxnCausalSessionsKeepCommitting(t *testing.T) {
	d := Start(t, Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}, Options{ReplSetSettings: ShortElections})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coll := d.Client.Database("causal").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if err := d.Client.Database("causal").CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	topts := options.Transaction().SetReadConcern(readconcern.Snapshot()).SetWriteConcern(writeconcern.Majority())
	const sessions, txns = 5, 60
	var committed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for g := range sessions {
		wg.Go(func() {
			sess, err := d.Client.StartSession() // causally consistent, the driver's default
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.EndSession(context.Background())
			for i := range txns {
				_, err := sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
					err := coll.FindOne(sc, bson.D{{Key: "_id", Value: g}}).Err()
					if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
						return nil, err
					}
					if i%2 == 0 {
						return nil, nil // read-only
					}
					_, err = coll.UpdateOne(sc, bson.D{{Key: "_id", Value: g}},
						bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
					return nil, err
				}, topts)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("session %d txn %d: %v", g, i, err))
					mu.Unlock()
					continue
				}
				committed.Add(1)
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d transactions failed; first: %s", len(failures), sessions*txns, failures[0])
	}
	var doc struct{ V int64 }
	for g := range sessions {
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: g}}).Decode(&doc); err != nil || doc.V != txns/2 {
			t.Errorf("document %d: v=%d (%v), want %d", g, doc.V, err, txns/2)
		}
	}
}
