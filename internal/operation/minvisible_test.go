package operation_test

import (
	"context"
	"testing"
	"time"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
)

// TestReadBeforeCatalogChangeAfterRestart: metadata loaded from disk carries the load bound as
// its minimum valid snapshot, older than which the durable catalog decides: a read at a time
// the collection already existed (same UUID) goes ahead, one from before its creation fails
// with SnapshotUnavailable.
func TestReadBeforeCatalogChangeAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := operation.OpenDB(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(i uint32) optime.Timestamp { return optime.Timestamp(uint64(100)<<32 | uint64(i)) }
	db.Engine.SetOldestTimestamp(ts(1))
	op := db.NewOp(ctx)
	if err := op.DDL(ctx, "t.c", func() error {
		if err := op.RU.SetCommitTimestamp(ts(10)); err != nil {
			return err
		}
		_, err := db.Catalog.CreateCollection(op.RU, "t.c", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	op.Close()
	db.Engine.SetStableTimestamp(ts(20))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = operation.OpenDB(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	meta, ok := db.Catalog.Latest().ByNS("t.c")
	if !ok || !meta.MinValidLoaded || meta.MinValidSnapshot < ts(20) {
		t.Fatalf("loaded metadata %+v", meta)
	}
	read := func(at optime.Timestamp) error {
		r := &operation.Request{ReadSource: operation.ReadSource{Kind: operation.ReadProvided, TS: at}}
		op := db.NewOp(operation.WithRequest(ctx, r))
		defer op.Close()
		m, _, release, err := op.ReadCollection(ctx, "t.c")
		if err == nil {
			release()
			if m == nil {
				t.Fatalf("read at %v: no collection", at)
			}
		}
		return err
	}
	if err := read(ts(15)); err != nil {
		t.Fatalf("read at a time the collection existed: %v", err)
	}
	if err := read(ts(5)); !mongoerr.Is(err, mongoerr.SnapshotUnavailable) {
		t.Fatalf("read from before the collection's creation: %v, want SnapshotUnavailable", err)
	}
}

// TestMajorityReadWaitsForCatalogChange: a majority read whose point is older than its
// collection's creation waits until the commit point passes it, then reads there (the
// command's later reads too), instead of reading the new collection at the old point.
func TestMajorityReadWaitsForCatalogChange(t *testing.T) {
	ctx := context.Background()
	db, err := operation.OpenDB(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ts := func(i uint32) optime.Timestamp { return optime.Timestamp(uint64(100)<<32 | uint64(i)) }
	db.Engine.SetOldestTimestamp(ts(1))
	db.Engine.SetStableTimestamp(ts(5))
	op := db.NewOp(ctx)
	if err := op.DDL(ctx, "t.c", func() error {
		if err := op.RU.SetCommitTimestamp(ts(10)); err != nil {
			return err
		}
		_, err := db.Catalog.CreateCollection(op.RU, "t.c", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	op.Close()

	r := &operation.Request{ReadSource: operation.ReadSource{Kind: operation.ReadMajority, TS: ts(5)}}
	rctx := operation.WithRequest(ctx, r)
	// Interrupted while the commit point stays behind: the operation's error, no read.
	short, cancel := context.WithTimeout(rctx, 50*time.Millisecond)
	defer cancel()
	rop := db.NewOp(short)
	if _, _, _, err := rop.ReadCollection(short, "t.c"); err == nil {
		t.Fatal("a majority read older than the collection read it")
	}
	rop.Close()

	go func() {
		time.Sleep(50 * time.Millisecond)
		db.Engine.SetStableTimestamp(ts(12))
	}()
	rop = db.NewOp(rctx)
	defer rop.Close()
	m, _, release, err := rop.ReadCollection(rctx, "t.c")
	if err != nil || m == nil {
		t.Fatalf("majority read after the commit point passed the creation: %v, %v", m, err)
	}
	release()
	if rop.ReadSource.TS != ts(12) || r.ReadSource.TS != ts(12) {
		t.Fatalf("read point %v (request %v), want %v", rop.ReadSource.TS, r.ReadSource.TS, ts(12))
	}
}
