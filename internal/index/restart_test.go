package index_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/storage"
	"humongo/internal/validate"
)

// TestRestartUnfinishedBuild: a build killed after its bulk load (the goroutine dies where a
// process would, with no cleanup) leaves a not-ready index and temporary tables; after reopening
// engine and catalog from the same directory, RestartUnfinishedBuilds rebuilds the index from
// scratch, including documents written after the restart, and the collection validates.
func TestRestartUnfinishedBuild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() (*storage.Engine, *catalog.Catalog, *index.Collections) {
		t.Helper()
		e, err := storage.Open(storage.Options{Dir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		cat, err := catalog.OpenWithConfig(ctx, e, catalog.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return e, cat, index.NewCollections(e, cat)
	}
	insert := func(e *storage.Engine, coll *index.Collection, from, to int) {
		t.Helper()
		ru := e.NewRecoveryUnit()
		defer ru.Close()
		if err := coll.Write(ctx, ru, func() error {
			for i := from; i < to; i++ {
				if _, err := coll.InsertDocument(ru, mustDoc(t, bson.D{{Key: "_id", Value: i},
					{Key: "u", Value: i}, {Key: "arr", Value: bson.A{i, -i}}})); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	e, cat, cs := open()
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	if _, err := cat.CreateCollection(ru, "db.r", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.End()
	ru.Close()
	coll, err := cs.Get("db.r")
	if err != nil {
		t.Fatal(err)
	}
	insert(e, coll, 0, 3000)

	spec := bson.D{{Key: "key", Value: bson.D{{Key: "u", Value: 1}, {Key: "arr", Value: 1}}},
		{Key: "name", Value: "u_arr"}, {Key: "unique", Value: true}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = index.Build(ctx, coll, mustDoc(t, spec), index.BuildOptions{BatchSize: 500,
			Hook: func(phase string) {
				if phase == "loaded" {
					runtime.Goexit() // the build dies here: no abort, no cleanup
				}
			}})
		t.Error("the build was not killed")
	}()
	<-done
	meta, _ := cat.Latest().ByNS("db.r")
	im, ok := meta.Index("u_arr")
	if !ok || im.Ready || im.BuildUUID == nil {
		t.Fatalf("after the kill: index present=%v meta=%+v", ok, im)
	}
	buildUUID := *im.BuildUUID
	temps := 0
	for _, id := range e.ListIdents() {
		if strings.HasPrefix(id, catalog.TemporaryIdentPrefix) {
			temps++
		}
	}
	if temps != 3 {
		t.Fatalf("%d temporary tables after the kill, want 3", temps)
	}
	_ = cat.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e, cat, cs = open()
	defer e.Close()
	defer cat.Close()
	coll, err = cs.Get("db.r")
	if err != nil {
		t.Fatal(err)
	}
	// Written after the restart, before the rebuild: the unfinished index receives no writes,
	// the rebuild must find these documents.
	insert(e, coll, 3000, 3500)
	var logs strings.Builder
	if err := index.RestartUnfinishedBuilds(ctx, cs, index.BuildOptions{
		Log: slog.New(slog.NewTextHandler(&logs, nil)), TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "restarting unfinished index build") || !strings.Contains(logs.String(), "u_arr") ||
		!strings.Contains(logs.String(), buildUUID.String()) {
		t.Fatalf("restart not logged: %s", logs.String())
	}
	meta, _ = cat.Latest().ByNS("db.r")
	im, ok = meta.Index("u_arr")
	if !ok || !im.Ready || !im.Unique || !im.Multikey {
		t.Fatalf("after the restart: index present=%v meta=%+v", ok, im)
	}
	for _, id := range e.ListIdents() {
		if strings.HasPrefix(id, catalog.TemporaryIdentPrefix) {
			t.Fatalf("temporary table %s left", id)
		}
	}
	res, err := validate.Validate(ctx, e, cat, "db.r", true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("validate: errors %v missing %d extra %d", res.Errors, len(res.MissingIndexEntries), len(res.ExtraIndexEntries))
	}
	// Two keys per document, except _id 0 whose array [0, -0] gives one.
	if got := res.KeysPerIndex["u_arr"]; got != 2*3500-1 {
		t.Fatalf("u_arr has %d keys, want %d (keys per index %v)", got, 2*3500-1, res.KeysPerIndex)
	}
	// The rebuilt index is enforced.
	ru = e.NewRecoveryUnit()
	defer ru.Close()
	err = coll.Write(ctx, ru, func() error {
		_, err := coll.InsertDocument(ru, mustDoc(t, bson.D{{Key: "_id", Value: -1}, {Key: "u", Value: 5}, {Key: "arr", Value: 5}}))
		return err
	})
	if err == nil {
		t.Fatal("duplicate accepted by the rebuilt unique index")
	}
	// Nothing is left to restart.
	if err := index.RestartUnfinishedBuilds(ctx, cs, index.BuildOptions{Log: quiet}); err != nil {
		t.Fatal(err)
	}
}
