package query

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// TestMatchInterrupted: one long match (a $all of many values is an $and of as many
// equalities) stops with the cause of its interrupt context, and matches normally without one.
func TestMatchInterrupted(t *testing.T) {
	arr := bsoncore.NewArrayBuilder()
	for i := range 10_000 {
		arr.AppendInt32(int32(i % 100))
	}
	all := arr.Build()
	filter := bsoncore.NewDocumentBuilder().AppendDocument("tags",
		bsoncore.NewDocumentBuilder().AppendArray("$all", all).Build()).Build()
	m, err := Parse(filter, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tags := bsoncore.NewArrayBuilder()
	for i := range 100 {
		tags.AppendInt32(int32(i))
	}
	doc := bsoncore.NewDocumentBuilder().AppendArray("tags", tags.Build()).Build()
	var d MatchDetails
	if ok, err := m.MatchesWithDetails(doc, &d); !ok || err != nil {
		t.Fatalf("uninterrupted: %v %v", ok, err)
	}
	cause := errors.New("killed")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	for _, f := range []string{"$all", "$not"} {
		d = MatchDetails{Interrupt: ctx}
		mm := m
		if f == "$not" {
			// Under $not (and $nor) the interrupt still reaches the clauses.
			nf := bsoncore.NewDocumentBuilder().AppendDocument("tags", bsoncore.NewDocumentBuilder().
				AppendDocument("$not", bsoncore.NewDocumentBuilder().AppendArray("$all", all).Build()).Build()).Build()
			if mm, err = Parse(nf, ParseOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := mm.MatchesWithDetails(doc, &d); !errors.Is(err, cause) {
			t.Fatalf("%s: interrupted match returned %v, want %v", f, err, cause)
		}
	}
}
