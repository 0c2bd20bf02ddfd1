package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// loadDocs inserts n documents {_id: i, u: i, v: i, g: i % 7, pad: ...} in batches.
func (v *env) loadDocs(n int) {
	v.t.Helper()
	const batch = 1000
	for start := 0; start < n; start += batch {
		var docs []bsoncore.Document
		for i := start; i < min(n, start+batch); i++ {
			docs = append(docs, doc(v.t, d{{"_id", i}, {"u", i}, {"v", i}, {"g", i % 7}, {"pad", "xxxxxxxxxxxxxxxx"}}))
		}
		if _, err := v.insert(docs...); err != nil {
			v.t.Fatal(err)
		}
	}
}

// checkIndexExact asserts that the index's entries are exactly the keys generated from the
// collection's documents (no missing, no extra keys, same TypeBits).
func (v *env) checkIndexExact(name string) int {
	v.t.Helper()
	ix, ok, err := v.coll.Index(name)
	if err != nil || !ok {
		v.t.Fatalf("index %s not ready: %v", name, err)
	}
	keys, vals := v.indexEntries(ix.ident)
	exp := v.expectedEntries(ix)
	for i, k := range keys {
		tb, ok := exp[k]
		if !ok {
			v.t.Fatalf("extra index key %x", k)
		}
		if tb != vals[i] {
			v.t.Fatalf("key %x has TypeBits %x, want %x", k, vals[i], tb)
		}
		delete(exp, k)
	}
	for k := range exp {
		v.t.Fatalf("missing index key %x", k)
	}
	return len(keys)
}

func (v *env) noTempIdents() {
	v.t.Helper()
	for _, id := range v.e.ListIdents() {
		if strings.HasPrefix(id, "internal-") {
			v.t.Fatalf("temporary ident %s left behind", id)
		}
	}
}

// TestHybridBuildUnderLoad is the acceptance test: a unique index built on 100,000 documents
// while writers insert and delete, ending with exactly the expected keys; then a build during
// which a duplicate is inserted (and left) fails with DuplicateKey and leaves no index.
func TestHybridBuildUnderLoad(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	v := newEnv(t)
	t0 := time.Now()
	v.loadDocs(n)
	t.Logf("loaded %d docs in %v", n, time.Since(t0))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var inserts, deletes, errs atomic.Int64
	var nextID atomic.Int64
	nextID.Store(int64(n))
	writer := func(seed uint64) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for ctx.Err() == nil {
			var err error
			if rng.IntN(2) == 0 {
				id := nextID.Add(1)
				_, err = v.insert(doc(t, d{{"_id", id}, {"u", id}, {"v", id}, {"g", a{1, 2}}}))
				if err == nil {
					inserts.Add(1)
				}
			} else {
				id := int32(rng.IntN(n))
				err = v.write(func(ru *storage.RecoveryUnit) error {
					rid, dd, found, err := v.coll.FindByID(ru, value(t, id))
					if err != nil || !found {
						return err
					}
					deletes.Add(1)
					return v.coll.DeleteDocument(ru, rid, dd)
				})
			}
			if err != nil {
				errs.Add(1)
				t.Errorf("writer: %v", err)
				return
			}
			// Leave the build some CPU on a 2-core machine: concurrent CRUD, not a flood.
			time.Sleep(200 * time.Microsecond)
		}
	}
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go writer(uint64(i))
	}
	// Let the writers get going before the build starts.
	for inserts.Load()+deletes.Load() < 50 && errs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	t1 := time.Now()
	_, stats, err := v.build(d{{"key", d{{"u", 1}, {"g", -1}}}, {"name", "u_g"}, {"unique", true}},
		BuildOptions{MaxMemoryBytes: 64 << 10, TempDir: t.TempDir(), YieldEvery: 500,
			Hook: func(p string) {
				t.Logf("%v phase %s (writers: %d inserts, %d deletes)", time.Since(t1), p, inserts.Load(), deletes.Load())
			}})
	buildTime := time.Since(t1)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build: %v, %+v; writers: %d inserts, %d deletes", buildTime, stats, inserts.Load(), deletes.Load())
	if stats.Spills < 2 {
		t.Errorf("expected the sorter to spill with a 64 KiB limit: %+v", stats)
	}
	if stats.SideWrites == 0 {
		t.Errorf("no side writes were drained; the test did not exercise the interceptor")
	}
	keys := v.checkIndexExact("u_g")
	t.Logf("index holds %d keys", keys)
	m, _ := v.cat.Latest().ByNS(v.ns)
	im, _ := m.Index("u_g")
	if !im.Ready || !im.Multikey || !im.MultikeyPaths[1][0] || im.MultikeyPaths[0][0] {
		t.Fatalf("catalog state after build: %+v", im)
	}
	v.noTempIdents()

	// Second build: a duplicate of v is inserted during the build and left there.
	if _, err := v.insert(doc(t, d{{"_id", "orig"}, {"u", "orig"}, {"v", "twin"}})); err != nil {
		t.Fatal(err)
	}
	hook := func(phase string) {
		if phase == "loaded" {
			if _, err := v.insert(doc(t, d{{"_id", "dup"}, {"u", "dup"}, {"v", "twin"}})); err != nil {
				t.Errorf("inserting the duplicate: %v", err)
			}
		}
	}
	_, _, err = v.build(d{{"key", d{{"v", 1}}}, {"name", "v_1"}, {"unique", true}}, BuildOptions{Hook: hook})
	me, ok := mongoerr.As(err)
	if !ok || me.Code != mongoerr.DuplicateKey || !strings.Contains(me.Msg, `index: v_1 dup key: { v: "twin" }`) {
		t.Fatalf("second build: %v, want DuplicateKey on v: \"twin\"", err)
	}
	m, _ = v.cat.Latest().ByNS(v.ns)
	if _, ok := m.Index("v_1"); ok {
		t.Fatal("failed build left its index in the catalog")
	}
	v.noTempIdents()
	// Inserting the same duplicate still works (no stale unique index enforced).
	if _, err := v.insert(doc(t, d{{"_id", "dup2"}, {"u", "dup2"}, {"v", "twin"}})); err != nil {
		t.Fatal(err)
	}
}

// TestBuildTransientDuplicate: a duplicate inserted and deleted during the build is fine.
func TestBuildTransientDuplicate(t *testing.T) {
	v := newEnv(t)
	v.loadDocs(2000)
	hook := func(phase string) {
		switch phase {
		case "registered":
			if _, err := v.insert(doc(t, d{{"_id", "dup"}, {"v", 5}})); err != nil {
				t.Error(err)
			}
		case "loaded":
			if err := v.write(func(ru *storage.RecoveryUnit) error {
				rid, dd, _, err := v.coll.FindByID(ru, value(t, "dup"))
				if err != nil {
					return err
				}
				return v.coll.DeleteDocument(ru, rid, dd)
			}); err != nil {
				t.Error(err)
			}
		}
	}
	if _, _, err := v.build(d{{"key", d{{"v", 1}}}, {"name", "v_1"}, {"unique", true}}, BuildOptions{Hook: hook, BatchSize: 100}); err != nil {
		t.Fatal(err)
	}
	v.checkIndexExact("v_1")
	if _, err := v.insert(doc(t, d{{"_id", "dup3"}, {"v", 5}})); !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Fatalf("ready unique index not enforced: %v", err)
	}
}

// TestBuildSkippedRecords: parallel arrays fail the build with 171 unless fixed before commit.
func TestBuildSkippedRecords(t *testing.T) {
	for _, fix := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fix), func(t *testing.T) {
			v := newEnv(t)
			v.loadDocs(500)
			bad := doc(t, d{{"_id", "bad"}, {"u", a{1, 2, 3}}, {"g", a{4, 5, 6}}})
			if _, err := v.insert(bad); err != nil {
				t.Fatal(err)
			}
			hook := func(phase string) {
				if phase == "scanned" && fix {
					if err := v.write(func(ru *storage.RecoveryUnit) error {
						rid, dd, _, err := v.coll.FindByID(ru, value(t, "bad"))
						if err != nil {
							return err
						}
						return v.coll.UpdateDocument(ru, rid, dd, doc(t, d{{"_id", "bad"}, {"u", a{1, 2, 3}}, {"g", 4}}))
					}); err != nil {
						t.Error(err)
					}
				}
			}
			_, stats, err := v.build(d{{"key", d{{"u", 1}, {"g", 1}}}, {"name", "u_g"}}, BuildOptions{Hook: hook})
			if stats.Skipped != 1 {
				t.Errorf("skipped = %d, want 1", stats.Skipped)
			}
			if !fix {
				if mongoerr.CodeOf(err) != mongoerr.CannotIndexParallelArrays {
					t.Fatalf("got %v, want CannotIndexParallelArrays", err)
				}
				v.noTempIdents()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v.checkIndexExact("u_g")
		})
	}
}

// TestBuildCancel: a cancelled build removes its index.
func TestBuildCancel(t *testing.T) {
	v := newEnv(t)
	v.loadDocs(3000)
	ctx, cancel := context.WithCancel(context.Background())
	hook := func(phase string) {
		if phase == "registered" {
			cancel()
		}
	}
	_, _, err := Build(ctx, v.coll, doc(t, d{{"key", d{{"v", 1}}}, {"name", "v_1"}}), BuildOptions{Hook: hook, YieldEvery: 100})
	if err == nil {
		t.Fatal("cancelled build succeeded")
	}
	m, _ := v.cat.Latest().ByNS(v.ns)
	if _, ok := m.Index("v_1"); ok {
		t.Fatal("cancelled build left its index")
	}
	v.noTempIdents()
}

// TestLockManagerBlockWrites: a build using the lock manager waits for a writer's MODE_IX.
func TestLockManagerBlockWrites(t *testing.T) {
	v := newEnv(t)
	v.loadDocs(100)
	mgr := lock.NewManager()
	writer := mgr.NewLocker()
	s, err := writer.CollectionLock(context.Background(), v.ns, lock.ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	registered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := v.build(d{{"key", d{{"v", 1}}}, {"name", "v_1"}}, BuildOptions{
			BlockWrites: LockManagerBlockWrites(mgr, v.ns),
			Hook: func(p string) {
				if p == "registered" {
					close(registered)
				}
			}})
		done <- err
	}()
	select {
	case <-registered:
		t.Fatal("build registered while a writer held MODE_IX")
	case <-time.After(100 * time.Millisecond):
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	v.checkIndexExact("v_1")
}
