package lock

import "testing"

// TestCompatibilityMatrix pins the spec's matrix, cell by cell.
func TestCompatibilityMatrix(t *testing.T) {
	modes := []Mode{ModeNone, ModeIS, ModeIX, ModeS, ModeX}
	// want[requested] lists compatibility with granted NONE, IS, IX, S, X.
	want := map[Mode][5]bool{
		ModeIS: {true, true, true, true, false},
		ModeIX: {true, true, true, false, false},
		ModeS:  {true, true, false, true, false},
		ModeX:  {true, false, false, false, false},
	}
	for req, row := range want {
		for i, granted := range modes {
			if got := Compatible(req, granted); got != row[i] {
				t.Errorf("Compatible(%s requested, %s granted) = %v, want %v", req, granted, got, row[i])
			}
		}
	}
	// The matrix is symmetric between real modes.
	for _, a := range modes[1:] {
		for _, b := range modes[1:] {
			if Compatible(a, b) != Compatible(b, a) {
				t.Errorf("asymmetric: %s/%s", a, b)
			}
		}
	}
}

func TestCoversAndSupremum(t *testing.T) {
	coverTests := []struct {
		have, want Mode
		ok         bool
	}{
		{ModeIS, ModeIS, true}, {ModeIX, ModeIS, true}, {ModeS, ModeIS, true}, {ModeX, ModeIS, true},
		{ModeIS, ModeIX, false}, {ModeS, ModeIX, false}, {ModeX, ModeIX, true},
		{ModeIX, ModeS, false}, {ModeX, ModeS, true}, {ModeS, ModeX, false}, {ModeIX, ModeX, false},
	}
	for _, c := range coverTests {
		if got := covers(c.have, c.want); got != c.ok {
			t.Errorf("covers(%s, %s) = %v, want %v", c.have, c.want, got, c.ok)
		}
	}
	supTests := []struct{ a, b, want Mode }{
		{ModeIS, ModeIX, ModeIX}, {ModeIS, ModeS, ModeS}, {ModeIX, ModeS, ModeX},
		{ModeS, ModeIX, ModeX}, {ModeIS, ModeX, ModeX}, {ModeIS, ModeIS, ModeIS},
	}
	for _, c := range supTests {
		if got := supremum(c.a, c.b); got != c.want {
			t.Errorf("supremum(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

func TestResourceIDs(t *testing.T) {
	if ResourceGlobal == ResourceRSTL || ResourceRSTL == ResourcePBWM || ResourceGlobal == ResourcePBWM {
		t.Fatal("global resources collide")
	}
	for _, r := range []ResourceID{ResourceGlobal, ResourceRSTL, ResourcePBWM} {
		if r.Type() != TypeGlobal {
			t.Errorf("%v has type %v", r, r.Type())
		}
	}
	db, coll := DatabaseResource("test"), CollectionResource("test.foo")
	if db.Type() != TypeDatabase || coll.Type() != TypeCollection {
		t.Fatalf("types: %v %v", db.Type(), coll.Type())
	}
	if p, ok := coll.Parent(); !ok || p != db {
		t.Errorf("parent of test.foo = %v, %v; want %v", p, ok, db)
	}
	// Same name, different type: different ids.
	if DatabaseResource("x").id == CollectionResource("x").id {
		t.Error("type not part of the id")
	}
	if CollectionResource("test.foo") != coll || CollectionResource("test.bar") == coll {
		t.Error("collection ids not a function of the name")
	}
	if a, b := NewMutexResource("a"), NewMutexResource("a"); a == b || a.Type() != TypeMutex {
		t.Errorf("mutex ids: %v %v", a, b)
	}
	if (ResourceID{}).Type() != TypeInvalid {
		t.Error("zero id has a type")
	}
}
