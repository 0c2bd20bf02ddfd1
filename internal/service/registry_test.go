package service

import "testing"

func TestRegistryIsAValue(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	a.Register(PingCommand())
	a.Register(&Command{Name: "zeta", Aliases: []string{"Zeta"}, SecondaryOk: true})
	a.Register(&Command{Name: "alpha", Writes: true, SecondaryOk: true})
	if b.Lookup("ping") != nil {
		t.Fatal("a registration leaked into another registry")
	}
	if a.Lookup("Zeta") == nil || a.Lookup("ZETA") != nil {
		t.Fatal("aliases resolve exactly, case-sensitively")
	}
	var names []string
	for _, c := range a.List() {
		names = append(names, c.Name)
		if c.Counter != "command" {
			t.Errorf("%s: Counter %q, want the default \"command\"", c.Name, c.Counter)
		}
	}
	if len(names) != 3 || names[0] != "alpha" || names[2] != "zeta" {
		t.Fatalf("List = %v, want sorted by name", names)
	}
	// The legacy SecondaryOk flag resolves to Always for reads and Never for writes.
	if s := a.Lookup("zeta").Secondary; s != SecondaryAlways {
		t.Errorf("zeta: %v", s)
	}
	if c := a.Lookup("alpha"); c.Secondary != SecondaryNever || c.SecondaryOk {
		t.Errorf("alpha: %v %v", c.Secondary, c.SecondaryOk)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice must panic")
		}
	}()
	a.Register(&Command{Name: "other", Aliases: []string{"ping"}})
}
