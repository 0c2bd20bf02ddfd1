package query

import (
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// TestParseVars: ParseOptions.Vars (a command's let) are visible to $expr anywhere in the
// filter and to the projection's expressions; without them the reference is 17276.
func TestParseVars(t *testing.T) {
	filter := ej(t, `{"$or": [{"_id": 99}, {"$expr": {"$eq": ["$a", {"$let": {"vars": {"y": "$$x"}, "in": "$$y"}}]}}]}`)
	if _, err := Parse(filter, ParseOptions{AllowExpr: true}); mongoerr.CodeOf(err) != mongoerr.Location17276 {
		t.Fatalf("without vars: %v, want 17276", err)
	}
	vars := map[string]bsoncore.Value{"x": bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 5)}}
	m, err := Parse(filter, ParseOptions{AllowExpr: true, Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	// The matcher is shared by concurrent readers: $let's bindings must not touch vars.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if ok, err := m.Matches(ej(t, `{"a": 5}`)); !ok || err != nil {
					t.Errorf("{a: 5}: %v %v", ok, err)
					return
				}
				if ok, _ := m.Matches(ej(t, `{"a": 6}`)); ok {
					t.Errorf("{a: 6} matched")
					return
				}
			}
		})
	}
	wg.Wait()
	if len(vars) != 1 {
		t.Errorf("vars changed: %v", vars)
	}
	pr, err := ParseProjection(ej(t, `{"_id": 0, "v": "$$x"}`), m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pr.Apply(ej(t, `{"_id": 1}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := bsoncore.Document(out).Lookup("v"); got.Type != bsoncore.TypeInt32 || got.Int32() != 5 {
		t.Errorf("projection: %v", bsoncore.Document(out))
	}
}

// TestParseVarNames: variables declared by name (ParseOptions.VarNames) parse anywhere in
// the filter's $expr and take their values from MatchDetails.Vars at each match.
func TestParseVarNames(t *testing.T) {
	filter := ej(t, `{"$and": [{"a": {"$gt": 0}}, {"$or": [{"$expr": {"$eq": ["$a", "$$x"]}}, {"b": 1}]}]}`)
	m, err := Parse(filter, ParseOptions{AllowExpr: true, VarNames: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	five := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 5)}
	six := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 6)}
	for _, c := range []struct {
		x    bsoncore.Value
		want bool
	}{{five, true}, {six, false}} {
		d := &MatchDetails{Vars: map[string]bsoncore.Value{"x": c.x}}
		if ok, err := m.MatchesWithDetails(ej(t, `{"a": 5}`), d); ok != c.want || err != nil {
			t.Errorf("x = %v: %v %v, want %v", c.x, ok, err, c.want)
		}
	}
	// Without values the variable is missing.
	if ok, err := m.Matches(ej(t, `{"a": 5}`)); ok || err != nil {
		t.Errorf("unbound: %v %v", ok, err)
	}
}
