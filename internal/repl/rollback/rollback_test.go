package rollback_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/repl/rollback"
)

var (
	collA = catalog.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	collB = catalog.UUID{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
)

// op is a compact description of an oplog entry for the tests.
type op struct {
	secs, term int
	kind       string // i, u, d, c, n
	coll       catalog.UUID
	id         int32
	ns         string // default app.c
}

func (o op) optime() optime.OpTime {
	return optime.OpTime{TS: optime.MakeTimestamp(uint32(o.secs), 1), Term: int64(o.term)}
}

func (o op) raw() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendTimestamp("ts", uint32(o.secs), 1).AppendInt64("t", int64(o.term)).
		AppendString("op", o.kind)
	idDoc := bsoncore.NewDocumentBuilder().AppendInt32("_id", o.id).Build()
	ns := o.ns
	if ns == "" {
		ns = "app.c"
	}
	switch o.kind {
	case "n":
		return b.AppendString("ns", "").AppendDocument("o", bsoncore.NewDocumentBuilder().AppendString("msg", "x").Build()).Build()
	case "c":
		return b.AppendString("ns", "app.$cmd").AppendBinary("ui", 4, o.coll[:]).
			AppendDocument("o", bsoncore.NewDocumentBuilder().AppendString("create", "c").Build()).Build()
	case "u":
		return b.AppendString("ns", ns).AppendBinary("ui", 4, o.coll[:]).
			AppendDocument("o", bsoncore.NewDocumentBuilder().AppendDocument("$set",
				bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()).Build()).
			AppendDocument("o2", idDoc).Build()
	}
	return b.AppendString("ns", ns).AppendBinary("ui", 4, o.coll[:]).AppendDocument("o", idDoc).Build()
}

func raws(ops ...op) []bsoncore.Document {
	out := make([]bsoncore.Document, len(ops))
	for i, o := range ops {
		out[i] = o.raw()
	}
	return out
}

func ins(secs, term int, id int32) op {
	return op{secs: secs, term: term, kind: "i", coll: collA, id: id}
}

func TestFindCommonPoint(t *testing.T) {
	base := []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3)}
	cases := []struct {
		name           string
		local, remote  []op
		want           optime.OpTime
		wantRolledBack []int // secs of the rolled-back entries, newest first
	}{
		{"our newer entries diverge", append(base[:3:3], ins(4, 1, 4), ins(5, 1, 5)),
			append(base[:3:3], ins(6, 2, 6), ins(7, 2, 7)), base[2].optime(), []int{5, 4}},
		{"timestamps interleave across the branches", append(base[:3:3], ins(5, 1, 5), ins(8, 1, 8)),
			append(base[:3:3], ins(4, 2, 4), ins(6, 2, 6), ins(9, 2, 9)), base[2].optime(), []int{8, 5}},
		{"same timestamp in another term", append(base[:3:3], ins(4, 1, 4)),
			append(base[:3:3], ins(4, 2, 40)), base[2].optime(), []int{4}},
		{"ours is a prefix of the source's", base, append(base[:3:3], ins(4, 2, 4)), base[2].optime(), nil},
		{"the source has a prefix of ours", append(base[:3:3], ins(9, 1, 9)),
			base[:2], base[1].optime(), []int{9, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, err := rollback.FindCommonPoint(context.Background(),
				rollback.NewSliceIterator(raws(c.local...)), rollback.NewSliceIterator(raws(c.remote...)))
			if err != nil {
				t.Fatal(err)
			}
			if cp.OpTime != c.want {
				t.Fatalf("common point %v, want %v", cp.OpTime, c.want)
			}
			var got []int
			for _, e := range cp.RolledBack {
				got = append(got, int(e.OpTime.TS.Secs()))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.wantRolledBack) {
				t.Fatalf("rolled back %v, want %v", got, c.wantRolledBack)
			}
		})
	}
}

func TestFindCommonPointNone(t *testing.T) {
	cases := []struct {
		name          string
		local, remote []op
		msg           string
	}{
		{"our oplog runs out", []op{ins(5, 1, 5), ins(6, 1, 6)}, []op{ins(1, 2, 1), ins(2, 2, 2), ins(7, 2, 7)}, "beginning of our oplog"},
		{"the source's oplog runs out", []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3)}, []op{ins(4, 2, 4), ins(5, 2, 5)}, "beginning of the sync source's oplog"},
		{"same timestamps, other terms", []op{ins(1, 1, 1), ins(2, 1, 2)}, []op{ins(1, 2, 1), ins(2, 2, 2)}, "beginning of"},
		{"empty source", []op{ins(1, 1, 1)}, nil, "beginning of the sync source's oplog"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rollback.FindCommonPoint(context.Background(),
				rollback.NewSliceIterator(raws(c.local...)), rollback.NewSliceIterator(raws(c.remote...)))
			if !mongoerr.Is(err, mongoerr.NoMatchingDocument) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want NoMatchingDocument mentioning %q", err, c.msg)
			}
		})
	}
}

// failingIterator fails after n entries.
type failingIterator struct {
	rollback.Iterator
	n int
}

var errNetwork = errors.New("connection reset")

func (f *failingIterator) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if f.n == 0 {
		return nil, false, errNetwork
	}
	f.n--
	return f.Iterator.Next(ctx)
}

// fakeLocal records the calls Run makes, in order.
type fakeLocal struct {
	oplog   []bsoncore.Document
	stable  optime.Timestamp
	docs    map[string]bsoncore.Document // by collection UUID + _id
	calls   []string
	failAt  string
	openIts int
}

func docKey(u catalog.UUID, id bsoncore.Value) string { return string(u[:]) + string(id.Data) }

func (f *fakeLocal) note(call string) error {
	f.calls = append(f.calls, call)
	if call == f.failAt || strings.HasPrefix(call, f.failAt+"(") && f.failAt != "" {
		return errors.New("injected failure in " + call)
	}
	return nil
}

type closeCounter struct {
	*rollback.SliceIterator
	f *fakeLocal
}

func (c closeCounter) Close() { c.f.openIts-- }

func (f *fakeLocal) OplogNewestFirst(context.Context) (rollback.Iterator, error) {
	f.openIts++
	return closeCounter{rollback.NewSliceIterator(f.oplog), f}, nil
}
func (f *fakeLocal) StableTimestamp() optime.Timestamp { return f.stable }
func (f *fakeLocal) CurrentDocument(_ context.Context, u catalog.UUID, id bsoncore.Value) (bsoncore.Document, bool, error) {
	d, ok := f.docs[docKey(u, id)]
	return d, ok, nil
}
func (f *fakeLocal) LockForRecovery(context.Context) (func(), error) {
	if f.openIts != 0 {
		return nil, errors.New("our oplog iterator is still open")
	}
	if err := f.note("lock"); err != nil {
		return nil, err
	}
	return func() { f.calls = append(f.calls, "unlock") }, nil
}
func (f *fakeLocal) SetOplogTruncateAfterPoint(_ context.Context, ts optime.Timestamp) error {
	return f.note(fmt.Sprintf("truncatePoint(%d)", ts.Secs()))
}
func (f *fakeLocal) RecoverToStable(context.Context) (optime.Timestamp, error) {
	return f.stable, f.note("recover")
}
func (f *fakeLocal) TruncateOplogAfter(_ context.Context, ts optime.Timestamp) error {
	return f.note(fmt.Sprintf("truncateOplog(%d)", ts.Secs()))
}
func (f *fakeLocal) ReplayOplog(_ context.Context, from, to optime.Timestamp) (int, error) {
	return 1, f.note(fmt.Sprintf("replay(%d,%d)", from.Secs(), to.Secs()))
}
func (f *fakeLocal) SetMinValid(_ context.Context, op optime.OpTime) error {
	return f.note(fmt.Sprintf("minValid(%d,t%d)", op.TS.Secs(), op.Term))
}
func (f *fakeLocal) ResetOplogTop(op optime.OpTime) {
	f.calls = append(f.calls, fmt.Sprintf("resetTop(%d)", op.TS.Secs()))
}

type sliceRemote struct {
	entries []bsoncore.Document
	failAt  int // fail after this many entries (-1: never)
}

func (r sliceRemote) OplogNewestFirst(context.Context) (rollback.Iterator, error) {
	it := rollback.Iterator(rollback.NewSliceIterator(r.entries))
	if r.failAt >= 0 {
		it = &failingIterator{Iterator: it, n: r.failAt}
	}
	return it, nil
}

func idValue(id int32) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)}
}

func TestRunSafetyChecks(t *testing.T) {
	local := []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3), ins(4, 1, 4), ins(5, 1, 5)}
	remote := []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3), ins(6, 2, 6)}
	ts := func(secs int) optime.Timestamp { return optime.MakeTimestamp(uint32(secs), 1) }
	cases := []struct {
		name          string
		stable        optime.Timestamp
		commit        optime.OpTime
		remote        []op
		remoteFailAt  int
		unrecoverable bool
		code          mongoerr.Code
	}{
		{"common point before the stable timestamp", ts(4), optime.OpTime{}, remote, -1, true, mongoerr.UnrecoverableRollbackError},
		{"common point before the commit point", ts(2), optime.OpTime{TS: ts(4), Term: 1}, remote, -1, true, mongoerr.UnrecoverableRollbackError},
		{"no stable timestamp", 0, optime.OpTime{}, remote, -1, true, mongoerr.UnrecoverableRollbackError},
		{"no common point", ts(1), optime.OpTime{}, []op{ins(6, 2, 6)}, -1, true, mongoerr.UnrecoverableRollbackError},
		{"the source fails while we search", ts(2), optime.OpTime{}, remote, 1, false, mongoerr.InternalError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeLocal{oplog: raws(local...), stable: c.stable}
			rbid := int32(7)
			_, err := rollback.Run(context.Background(), rollback.Config{Local: f,
				Remote: sliceRemote{raws(c.remote...), c.remoteFailAt}, CommitPoint: c.commit, Dir: t.TempDir(),
				IncrementRBID: func(context.Context) (int32, error) { rbid++; return rbid, nil }})
			if err == nil {
				t.Fatal("rollback succeeded")
			}
			if rollback.IsUnrecoverable(err) != c.unrecoverable || mongoerr.CodeOf(err) != c.code {
				t.Fatalf("error %v: unrecoverable %v (want %v), code %v (want %v)", err, rollback.IsUnrecoverable(err),
					c.unrecoverable, mongoerr.CodeOf(err), c.code)
			}
			// Nothing may be modified before the common point passed its checks.
			if len(f.calls) != 0 || rbid != 7 {
				t.Fatalf("calls %v, rbid %d: data or rollback id touched", f.calls, rbid)
			}
			if f.openIts != 0 {
				t.Fatalf("%d oplog iterators left open", f.openIts)
			}
		})
	}
}

func TestRunOrder(t *testing.T) {
	local := []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3), ins(4, 1, 4), {secs: 5, term: 1, kind: "u", coll: collA, id: 2}}
	remote := []op{ins(1, 1, 1), ins(2, 1, 2), ins(3, 1, 3), ins(6, 2, 6)}
	f := &fakeLocal{oplog: raws(local...), stable: optime.MakeTimestamp(2, 1), docs: map[string]bsoncore.Document{
		docKey(collA, idValue(2)): bsoncore.NewDocumentBuilder().AppendInt32("_id", 2).AppendInt32("x", 1).Build(),
		docKey(collA, idValue(4)): bsoncore.NewDocumentBuilder().AppendInt32("_id", 4).Build(),
	}}
	dir := t.TempDir()
	res, err := rollback.Run(context.Background(), rollback.Config{Local: f, Remote: sliceRemote{raws(remote...), -1},
		CommitPoint: optime.OpTime{TS: optime.MakeTimestamp(3, 1), Term: 1}, Dir: dir,
		IncrementRBID: func(context.Context) (int32, error) {
			f.calls = append(f.calls, "rbid")
			return 8, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// minValid is the source's top (its newest entry, {6, t2}), persisted before any data
	// changes; the writer's top goes back to the common point at the end.
	want := "rbid lock minValid(6,t2) truncatePoint(3) recover truncateOplog(3) replay(2,3) truncatePoint(0) resetTop(3) unlock"
	if got := strings.Join(f.calls, " "); got != want {
		t.Fatalf("calls\n %s\nwant\n %s", got, want)
	}
	if res.CommonPoint != local[2].optime() || res.MinValid != remote[3].optime() || res.RolledBack != 2 || res.RBID != 8 ||
		len(res.Files) != 1 || res.Files[0].Docs != 2 {
		t.Fatalf("result %+v", res)
	}

	// Nothing after the common point: nothing is touched, not even the rollback id.
	f = &fakeLocal{oplog: raws(local[:3]...), stable: optime.MakeTimestamp(2, 1)}
	res, err = rollback.Run(context.Background(), rollback.Config{Local: f, Remote: sliceRemote{raws(remote...), -1},
		IncrementRBID: func(context.Context) (int32, error) { f.calls = append(f.calls, "rbid"); return 9, nil }})
	if err != nil || res.CommonPoint != local[2].optime() || res.RolledBack != 0 || len(f.calls) != 0 {
		t.Fatalf("no divergence: %+v %v, calls %v", res, err, f.calls)
	}

	// A failure while modifying data is unrecoverable, and the lock is still released.
	for _, failAt := range []string{"minValid", "truncatePoint", "recover", "truncateOplog", "replay"} {
		f := &fakeLocal{oplog: raws(local...), stable: optime.MakeTimestamp(2, 1), failAt: failAt}
		_, err := rollback.Run(context.Background(), rollback.Config{Local: f, Remote: sliceRemote{raws(remote...), -1}})
		if !rollback.IsUnrecoverable(err) {
			t.Fatalf("failure in %s: %v is not unrecoverable", failAt, err)
		}
		if f.calls[len(f.calls)-1] != "unlock" {
			t.Fatalf("failure in %s: calls %v do not end with unlock", failAt, f.calls)
		}
	}
}

// docReader is a DocumentReader over a map.
type docReader map[string]bsoncore.Document

func (d docReader) CurrentDocument(_ context.Context, u catalog.UUID, id bsoncore.Value) (bsoncore.Document, bool, error) {
	doc, ok := d[docKey(u, id)]
	return doc, ok, nil
}

func TestRollbackFiles(t *testing.T) {
	// Our entries after the common point, oldest first: inserts into two collections, an
	// update of a document inserted before, a delete, a second write of the same document,
	// a command and a no-op (which touch no document), and a session record (server
	// bookkeeping, kept out of the files).
	entries := []op{
		{secs: 9, term: 1, kind: "u", coll: collB, id: 3, ns: "config.transactions"},
		ins(10, 1, 1),
		{secs: 11, term: 1, kind: "u", coll: collA, id: 7},
		{secs: 12, term: 1, kind: "i", coll: collB, id: 1},
		{secs: 13, term: 1, kind: "d", coll: collA, id: 8},
		{secs: 14, term: 1, kind: "u", coll: collA, id: 1},
		{secs: 15, term: 1, kind: "c", coll: collB},
		{secs: 16, term: 1, kind: "n"},
		ins(17, 1, 2),
	}
	var rolledBack []*oplog.Entry
	for i := len(entries) - 1; i >= 0; i-- { // newest first, as FindCommonPoint returns them
		e, err := oplog.ParseEntry(entries[i].raw())
		if err != nil {
			t.Fatal(err)
		}
		rolledBack = append(rolledBack, e)
	}
	touched := rollback.TouchedDocuments(rolledBack)
	var desc []string
	for _, td := range touched {
		desc = append(desc, fmt.Sprintf("%d:%d", td.Collection[0], td.ID.Int32()))
	}
	if got, want := strings.Join(desc, " "), "1:1 1:7 16:1 1:8 1:2"; got != want {
		t.Fatalf("touched %s, want %s", got, want)
	}

	doc := func(id, v int32) bsoncore.Document {
		return bsoncore.NewDocumentBuilder().AppendInt32("_id", id).AppendInt32("v", v).Build()
	}
	// The current versions: document 8 was deleted, so it has none.
	reader := docReader{
		docKey(collA, idValue(1)): doc(1, 2),
		docKey(collA, idValue(7)): doc(7, 1),
		docKey(collA, idValue(2)): doc(2, 1),
		docKey(collB, idValue(1)): doc(1, 9),
	}
	dir := t.TempDir()
	now := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	files, err := rollback.WriteFiles(context.Background(), dir, now, reader, touched)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %+v", files)
	}
	want := map[catalog.UUID][]bsoncore.Document{collA: {doc(1, 2), doc(7, 1), doc(2, 1)}, collB: {doc(1, 9)}}
	for _, f := range files {
		if wantPath := filepath.Join(dir, f.Collection.String(), "removed.2024-05-06T07-08-09.0.bson"); f.Path != wantPath {
			t.Errorf("path %s, want %s", f.Path, wantPath)
		}
		got, err := rollback.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want[f.Collection]) || f.Docs != len(got) {
			t.Fatalf("%s: %d documents (reported %d), want %d", f.Path, len(got), f.Docs, len(want[f.Collection]))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[f.Collection][i]) {
				t.Errorf("%s document %d: %s, want %s", f.Path, i, got[i], want[f.Collection][i])
			}
		}
	}
	// A second rollback in the same second keeps the first one's file.
	again, err := rollback.WriteFiles(context.Background(), dir, now, reader, touched[:1])
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || !strings.HasSuffix(again[0].Path, "removed.2024-05-06T07-08-09.1.bson") {
		t.Fatalf("second file %+v", again)
	}
	if _, err := os.Stat(files[0].Path); err != nil {
		t.Fatal(err)
	}
}
