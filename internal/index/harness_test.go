package index

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// env is a real storage engine and catalog (in memory) with one collection.
type env struct {
	t    testing.TB
	e    *storage.Engine
	cat  *catalog.Catalog
	cs   *Collections
	coll *Collection
	ns   string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cat.Close()
		e.Close()
	})
	v := &env{t: t, e: e, cat: cat, ns: "test.c"}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	if _, err := cat.CreateCollection(ru, v.ns, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.End()
	v.cs = NewCollections(e, cat)
	if v.coll, err = v.cs.Get(v.ns); err != nil {
		t.Fatal(err)
	}
	return v
}

// write runs f in a retried unit through the collection's gate.
func (v *env) write(f func(ru *storage.RecoveryUnit) error) error {
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	return v.coll.Write(context.Background(), ru, func() error { return f(ru) })
}

func (v *env) insert(docs ...bsoncore.Document) ([]recordid.ID, error) {
	var rids []recordid.ID
	err := v.write(func(ru *storage.RecoveryUnit) error {
		var err error
		rids, err = v.coll.InsertDocuments(ru, docs)
		return err
	})
	return rids, err
}

// addReadyIndex adds an index on the (empty or not) collection with a build.
func (v *env) build(spec d, opts BuildOptions) (*catalog.IndexMeta, BuildStats, error) {
	return Build(context.Background(), v.coll, doc(v.t, spec), opts)
}

// indexEntries returns the raw (key, value) pairs of an ident.
func (v *env) indexEntries(ident string) (keys, vals []string) {
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(ident, storage.CursorOptions{})
	if err != nil {
		v.t.Fatal(err)
	}
	defer c.Close()
	for ok := c.First(); ok; ok = c.Next() {
		keys = append(keys, string(c.Key()))
		vals = append(vals, string(c.Value()))
	}
	if c.Err() != nil {
		v.t.Fatal(c.Err())
	}
	return keys, vals
}

// expectedEntries regenerates the keys of every document in the collection for ix.
func (v *env) expectedEntries(ix *Index) map[string]string {
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	cur, err := v.coll.rs.NewCursor(ru, false)
	if err != nil {
		v.t.Fatal(err)
	}
	defer cur.Close()
	out := map[string]string{}
	s := getScratch()
	defer putScratch(s)
	for {
		rid, dd, ok := cur.Next()
		if !ok {
			break
		}
		k := &s.k[0]
		if err := ix.genKeys(s, dd, rid, k); err != nil {
			v.t.Fatal(err)
		}
		for _, e := range k.list {
			out[string(k.full(e))] = string(k.typeBits(e))
		}
	}
	if cur.Err() != nil {
		v.t.Fatal(cur.Err())
	}
	return out
}
