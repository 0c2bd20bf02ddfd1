package optime

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func TestTimestampOrderIsSecsThenInc(t *testing.T) {
	ts := []Timestamp{0, MakeTimestamp(0, 1), MakeTimestamp(0, ^uint32(0)), MakeTimestamp(1, 0), MakeTimestamp(1, 2), MakeTimestamp(^uint32(0), 0), MaxTimestamp}
	for i := range ts {
		for j := range ts {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := ts[i].Compare(ts[j]); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", ts[i], ts[j], got, want)
			}
		}
	}
	if got := MakeTimestamp(7, 9); got.Secs() != 7 || got.Inc() != 9 || got.String() != "Timestamp(7, 9)" {
		t.Errorf("MakeTimestamp(7, 9) = %v (secs %d inc %d)", got, got.Secs(), got.Inc())
	}
}

func TestOpTimeOrderIsTermFirst(t *testing.T) {
	older := OpTime{TS: MakeTimestamp(100, 1), Term: 1}
	newer := OpTime{TS: MakeTimestamp(5, 1), Term: 2}
	if !older.Less(newer) || newer.Less(older) || older.Compare(older) != 0 {
		t.Errorf("term must order before timestamp: %v vs %v", older, newer)
	}
	if Max(older, newer) != newer || Min(older, newer) != older {
		t.Errorf("Max/Min of %v and %v", older, newer)
	}
}

func TestIsNullLooksAtTheTimestampOnly(t *testing.T) {
	if !(OpTime{}).IsNull() || !(OpTime{Term: UninitializedTerm}).IsNull() {
		t.Error("a null timestamp is a null OpTime whatever the term")
	}
	if (OpTime{TS: 1, Term: UninitializedTerm}).IsNull() {
		t.Error("an entry before the first election is not null")
	}
}

func TestBSONIsMongoDBs(t *testing.T) {
	op := OpTime{TS: MakeTimestamp(3, 4), Term: 5}
	want := bsoncore.NewDocumentBuilder().AppendTimestamp("ts", 3, 4).AppendInt64("t", 5).Build()
	if got := op.Document(); string(got) != string(want) {
		t.Errorf("Document() = %v, want %v", got, want)
	}
	outer := bsoncore.NewDocumentBuilder().AppendDocument("op", want).Build()
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = op.AppendElement(b, "op")
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	if string(b) != string(outer) {
		t.Errorf("AppendElement = %v, want %v", bsoncore.Document(b), outer)
	}
	if v := op.Document().Lookup("ts"); v.Type != bsoncore.TypeTimestamp {
		t.Errorf("ts has BSON type %v, want timestamp (0x11)", v.Type)
	}
}
