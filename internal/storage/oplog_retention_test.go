package storage

import (
	"bytes"
	"testing"
	"time"

	"humongo/internal/optime"
	"humongo/internal/recordid"
)

// TestOplogMinRetention: replSetResizeOplog's minRetentionHours keeps entries younger than
// the retention period although the oplog is over its cap; turning it off lets truncation
// remove them. Entry timestamps carry wall-clock seconds, as real oplog entries do.
func TestOplogMinRetention(t *testing.T) {
	e := openMem(t)
	mustCreate(t, e, "oplog", IdentOptions{Oplog: true})
	rs, err := OpenRecordStore(e, "oplog")
	must(t, err)
	payload := bytes.Repeat([]byte("x"), 200)
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	now := uint32(time.Now().Unix())
	for i := uint32(1); i <= 60; i++ {
		w := ru.BeginUnitOfWork()
		ts := optime.MakeTimestamp(now, i)
		must(t, ru.SetCommitTimestamp(ts))
		must(t, rs.InsertWithID(ru, recordid.Long(int64(ts)), payload))
		must(t, w.Commit())
		w.End()
	}
	count := func() int64 {
		n, _ := rs.Counts()
		return n
	}
	e.SetOplogMinRetention("oplog", time.Hour)
	e.SetOplogMaxSize("oplog", 2_000)
	if got := e.OplogMaxSize("oplog"); got != 2_000 {
		t.Fatalf("OplogMaxSize = %d, want 2000", got)
	}
	must(t, e.truncateOplogs())
	if n := count(); n != 60 {
		t.Fatalf("with a 1 h retention %d of 60 entries remain", n)
	}
	e.SetOplogMinRetention("oplog", 0)
	must(t, e.truncateOplogs())
	if n := count(); n == 60 || n*200 > 2_000+1_100 {
		t.Fatalf("without retention %d entries remain (cap 2000 bytes of 200-byte entries)", n)
	}
	if got := e.OplogMaxSize("no-such-ident"); got != 0 {
		t.Fatalf("OplogMaxSize of a missing ident = %d", got)
	}
}
