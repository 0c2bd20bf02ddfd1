package lock

import (
	"context"
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

// waitQueued polls (no sleeping decides the outcome) until n requests wait on h.
func waitQueued(t *testing.T, h *TicketHolder, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Stats().QueueLength != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue length %d, want %d", h.Stats().QueueLength, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func admitted(m *Manager) *Locker {
	l := m.NewLocker()
	l.SetAdmission(new(Admission))
	return l
}

// With one write ticket a second writer (on another collection, so no lock conflicts) waits
// for the ticket, and its wait ends on cancellation (Interrupted) or at its maxTimeMS
// (MaxTimeMSExpired); once the first writer finishes the next one is admitted.
func TestWriteTicketSecondWriterWaitsAndIsInterruptible(t *testing.T) {
	m := NewManager()
	w := m.Tickets().Write
	w.Resize(1)

	l1 := admitted(m)
	s1, err := l1.CollectionLock(context.Background(), "db.a", ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Out != 1 || st.Available != 0 || st.Total != 1 {
		t.Fatalf("after the first writer: %+v", st)
	}

	// Interrupted by cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	l2 := admitted(m)
	done := make(chan error, 1)
	go func() {
		_, err := l2.CollectionLock(ctx, "db.b", ModeIX)
		done <- err
	}()
	waitQueued(t, w, 1)
	select {
	case err := <-done:
		t.Fatalf("second writer admitted with the only ticket out: %v", err)
	default:
	}
	cancel()
	if err := <-done; !mongoerr.Is(err, mongoerr.Interrupted) {
		t.Fatalf("cancelled wait: %v, want Interrupted", err)
	}
	if l2.Mode(ResourceGlobal) != ModeNone || l2.Mode(ResourcePBWM) != ModeNone {
		t.Fatal("a writer refused admission holds locks")
	}

	// maxTimeMS.
	l3 := admitted(m)
	l3.SetDeadlineKind(DeadlineMaxTimeMS)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := l3.CollectionLock(dctx, "db.c", ModeIX); !mongoerr.Is(err, mongoerr.MaxTimeMSExpired) {
		t.Fatalf("wait past maxTimeMS: %v, want MaxTimeMSExpired", err)
	}

	// Readers use the other pool.
	r := admitted(m)
	rs, err := r.CollectionLock(context.Background(), "db.d", ModeIS)
	if err != nil {
		t.Fatal(err)
	}
	_ = rs.Release()

	// The ticket comes back with the Global lock; a waiting writer gets it.
	l4 := admitted(m)
	go func() {
		s, err := l4.CollectionLock(context.Background(), "db.e", ModeIX)
		if err == nil {
			_ = s.Release()
		}
		done <- err
	}()
	waitQueued(t, w, 1)
	if err := s1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("writer after release: %v", err)
	}
	if st := w.Stats(); st.Out != 0 || st.Available != 1 || st.Canceled != 2 {
		t.Fatalf("at the end: %+v", st)
	}
}

// Lockers sharing an Admission (one request's nested operations) share its ticket: with one
// write ticket the nested writer does not wait for itself.
func TestAdmissionSharedByRequest(t *testing.T) {
	m := NewManager()
	m.Tickets().Write.Resize(1)
	a := new(Admission)
	outer, inner := m.NewLocker(), m.NewLocker()
	outer.SetAdmission(a)
	inner.SetAdmission(a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	so, err := outer.CollectionLock(ctx, "db.a", ModeIX)
	if err != nil {
		t.Fatal(err)
	}
	si, err := inner.CollectionLock(ctx, "db.b", ModeIS) // a write ticket covers reads
	if err != nil {
		t.Fatalf("nested reader: %v", err)
	}
	_ = si.Release()
	si, err = inner.CollectionLock(ctx, "db.b", ModeIX)
	if err != nil {
		t.Fatalf("nested writer: %v", err)
	}
	_ = so.Release()
	if st := m.Tickets().Write.Stats(); st.Out != 1 {
		t.Fatalf("ticket given back while a Locker of the request still holds Global: %+v", st)
	}
	_ = si.Release()
	if st := m.Tickets().Write.Stats(); st.Out != 0 {
		t.Fatalf("ticket kept after the request released everything: %+v", st)
	}
}

// Resizing a pool admits waiters at once; shrinking below the tickets out revokes none.
func TestTicketResize(t *testing.T) {
	h := NewTicketHolder(1)
	if err := h.Acquire(context.Background(), DeadlineLockTimeout); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Acquire(context.Background(), DeadlineLockTimeout) }()
	waitQueued(t, h, 1)
	h.Resize(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.Resize(1)
	if st := h.Stats(); st.Out != 2 || st.Available != 0 || st.Total != 1 {
		t.Fatalf("after shrinking: %+v", st)
	}
	h.Release()
	h.Release()
	if st := h.Stats(); st.Out != 0 || st.Available != 1 {
		t.Fatalf("after release: %+v", st)
	}
}

// Global X takes no ticket, and internal Lockers (no Admission) take none either.
func TestNoTicketForExclusiveOrInternal(t *testing.T) {
	m := NewManager()
	m.Tickets().Write.Resize(0)
	m.Tickets().Read.Resize(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := admitted(m)
	s, err := x.GlobalLock(ctx, ModeX)
	if err != nil {
		t.Fatalf("global X: %v", err)
	}
	_ = s.Release()
	in := m.NewLocker()
	s, err = in.CollectionLock(ctx, "db.a", ModeIX)
	if err != nil {
		t.Fatalf("internal writer: %v", err)
	}
	_ = s.Release()
}
