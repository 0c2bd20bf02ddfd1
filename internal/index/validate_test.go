package index_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/storage"
	"humongo/internal/validate"
)

func mustDoc(t *testing.T, d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildThenValidate builds indexes under concurrent CRUD through the exported API and
// checks the result with internal/validate (index ↔ record consistency, unique and multikey).
func TestBuildThenValidate(t *testing.T) {
	ctx := context.Background()
	e, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cat, err := catalog.Open(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	if _, err := cat.CreateCollection(ru, "db.v", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.End()
	cs := index.NewCollections(e, cat)
	coll, err := cs.Get("db.v")
	if err != nil {
		t.Fatal(err)
	}
	n := 20000
	if testing.Short() {
		n = 4000
	}
	for start := 0; start < n; start += 1000 {
		if err := coll.Write(ctx, ru, func() error {
			for i := start; i < start+1000; i++ {
				if _, err := coll.InsertDocument(ru, mustDoc(t, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i % 100},
					{Key: "arr", Value: bson.A{i, i + 1}}, {Key: "u", Value: i}})); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	ru.Close()

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var next atomic.Int64
	next.Store(int64(n))
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			ru := e.NewRecoveryUnit()
			defer ru.Close()
			for wctx.Err() == nil {
				err := coll.Write(ctx, ru, func() error {
					id := rng.IntN(n)
					idv := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(id))}
					rid, old, found, err := coll.FindByID(ru, idv)
					if err != nil {
						return err
					}
					switch {
					case !found:
						k := next.Add(1)
						_, err = coll.InsertDocument(ru, mustDoc(t, bson.D{{Key: "_id", Value: k}, {Key: "x", Value: "s"}, {Key: "u", Value: k}}))
					case rng.IntN(2) == 0:
						err = coll.DeleteDocument(ru, rid, old)
					default:
						err = coll.UpdateDocument(ru, rid, old, mustDoc(t, bson.D{{Key: "_id", Value: id}, {Key: "x", Value: bson.A{-1, -2}}, {Key: "u", Value: id}}))
					}
					return err
				})
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		}(uint64(g))
	}
	for _, spec := range []bson.D{
		{{Key: "key", Value: bson.D{{Key: "x", Value: 1}, {Key: "arr", Value: -1}}}, {Key: "name", Value: "x_arr"}},
		{{Key: "key", Value: bson.D{{Key: "u", Value: 1}}}, {Key: "name", Value: "u_1"}, {Key: "unique", Value: true}},
		{{Key: "key", Value: bson.D{{Key: "u", Value: "hashed"}}}, {Key: "name", Value: "u_hashed"}},
	} {
		if _, _, err := index.Build(ctx, coll, mustDoc(t, spec), index.BuildOptions{MaxMemoryBytes: 256 << 10, TempDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	res, err := validate.Validate(ctx, e, cat, "db.v", true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("validate: errors %v warnings %v missing %d extra %d details %+v", res.Errors, res.Warnings,
			len(res.MissingIndexEntries), len(res.ExtraIndexEntries), res.IndexDetails)
	}
	t.Logf("validate: %d records, keys per index %v", res.NRecords, res.KeysPerIndex)
}
