package lock

import (
	"context"
	"testing"
)

// TestHeldModes: the published modes follow acquisitions, conversions, downgrades and
// releases, strongest mode per lock type.
func TestHeldModes(t *testing.T) {
	ctx := context.Background()
	m := NewManager()
	l := m.NewLocker()
	get := func() map[string]Mode {
		out := map[string]Mode{}
		for _, h := range l.HeldModes() {
			out[h.Name] = h.Mode
		}
		return out
	}
	if len(get()) != 0 {
		t.Fatalf("fresh locker holds %v", get())
	}
	s, err := l.CollectionLock(ctx, "db.c", ModeIS)
	if err != nil {
		t.Fatal(err)
	}
	if h := get(); h["Global"] != ModeIS || h["Database"] != ModeIS || h["Collection"] != ModeIS {
		t.Errorf("after IS: %v", h)
	}
	s2, err := l.CollectionLock(ctx, "db.c", ModeX)
	if err != nil {
		t.Fatal(err)
	}
	if h := get(); h["Global"] != ModeIX || h["Collection"] != ModeX {
		t.Errorf("after the conversion to X: %v", h)
	}
	if err := s2.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Downgrade(CollectionResource("db.c"), ModeIS); err != nil {
		t.Fatal(err)
	}
	if h := get(); h["Collection"] != ModeIS {
		t.Errorf("after the downgrade: %v", h)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if h := get(); len(h) != 0 {
		t.Errorf("after release: %v", h)
	}
}
