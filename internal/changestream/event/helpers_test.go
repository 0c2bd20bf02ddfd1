package event

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// Entries in the tests are built field by field in the order internal/repl/oplog's writer
// writes them (appendEntry, appendTxnEnvelope): {lsid?, txnNumber?, op, ns, ui?, o, o2?,
// fromMigrate?, stmtId?, ts, t, v, wall, prevOpTime?}; their o fields come from the
// writer's own helpers where it has them (UpdateO, IndexBuildO).

var (
	uuidA = catalog.UUID{0xa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	uuidB = catalog.UUID{0xb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	wall  = bson.DateTime(1700000000123)
	lsid  = bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}}, {Key: "uid", Value: bson.Binary{Data: bytes.Repeat([]byte{9}, 32)}}}
)

func bin(u catalog.UUID) bson.Binary { return bson.Binary{Subtype: 4, Data: u[:]} }

func ts(secs uint32) bson.Timestamp { return bson.Timestamp{T: secs, I: 1} }

func raw(t testing.TB, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doc converts a bson.D (or bson.Raw) to a bsoncore.Document.
func doc(t testing.TB, v any) bsoncore.Document { return bsoncore.Document(raw(t, v)) }

// crud is a single-operation entry as OnInserts / OnUpdate / OnDelete log it.
func crud(op, ns string, ui catalog.UUID, o, o2 any, secs uint32, extra ...bson.E) bson.D {
	d := bson.D{{Key: "op", Value: op}, {Key: "ns", Value: ns}, {Key: "ui", Value: bin(ui)}, {Key: "o", Value: o}}
	if o2 != nil {
		d = append(d, bson.E{Key: "o2", Value: o2})
	}
	d = append(d, extra...)
	return append(d, bson.E{Key: "ts", Value: ts(secs)}, bson.E{Key: "t", Value: int64(1)},
		bson.E{Key: "v", Value: int64(2)}, bson.E{Key: "wall", Value: wall})
}

// cmd is a command entry as logCommand logs it; ui may be nil (dropDatabase).
func cmd(db string, ui *catalog.UUID, o, o2 any, secs uint32) bson.D {
	d := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: db + ".$cmd"}}
	if ui != nil {
		d = append(d, bson.E{Key: "ui", Value: bin(*ui)})
	}
	d = append(d, bson.E{Key: "o", Value: o})
	if o2 != nil {
		d = append(d, bson.E{Key: "o2", Value: o2})
	}
	return append(d, bson.E{Key: "ts", Value: ts(secs)}, bson.E{Key: "t", Value: int64(1)},
		bson.E{Key: "v", Value: int64(2)}, bson.E{Key: "wall", Value: wall})
}

// txnEntry is an applyOps entry of a transaction (appendTxnEntry); prev 0 is null.
func txnEntry(secs uint32, prev uint32, ops bson.A, extra ...bson.E) bson.D {
	o := append(bson.D{{Key: "applyOps", Value: ops}}, extra...)
	return txnEnvelope(secs, prev, o)
}

func txnEnvelope(secs, prev uint32, o bson.D) bson.D {
	p := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
	if prev != 0 {
		p = bson.D{{Key: "ts", Value: ts(prev)}, {Key: "t", Value: int64(1)}}
	}
	return bson.D{{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(5)},
		{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "o", Value: o},
		{Key: "ts", Value: ts(secs)}, {Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)},
		{Key: "wall", Value: wall}, {Key: "prevOpTime", Value: p}}
}

// innerCRUD is an operation of an applyOps array (appendOpFields).
func innerCRUD(op, ns string, ui catalog.UUID, o, o2 any) bson.D {
	d := bson.D{{Key: "op", Value: op}, {Key: "ns", Value: ns}, {Key: "ui", Value: bin(ui)}, {Key: "o", Value: o}}
	if o2 != nil {
		d = append(d, bson.E{Key: "o2", Value: o2})
	}
	return d
}

func parse(t testing.TB, d bson.D) *oplog.Entry {
	t.Helper()
	e, err := oplog.ParseEntry(bsoncore.Document(raw(t, d)))
	if err != nil {
		t.Fatalf("ParseEntry(%v): %v", d, err)
	}
	return e
}

// testID makes a readable _id from the token, so tests check the token's contents too.
func testID(tok *Token) (bsoncore.Document, error) {
	b := bsoncore.NewDocumentBuilder().
		AppendTimestamp("ts", tok.ClusterTime.Secs(), tok.ClusterTime.Inc()).
		AppendInt32("i", int32(tok.TxnOpIndex))
	if tok.UUID != nil {
		b.AppendBinary("uuid", 4, tok.UUID[:])
	} else {
		b.AppendNull("uuid")
	}
	b.AppendDocument("eid", tok.EventID.Document())
	if tok.FromInvalidate {
		b.AppendBoolean("inv", true)
	}
	return b.Build(), nil
}

// id is testID's document for an expected event.
func id(secs uint32, i int32, u *catalog.UUID, eid bson.D, inv bool) bson.D {
	d := bson.D{{Key: "ts", Value: ts(secs)}, {Key: "i", Value: i}}
	if u != nil {
		d = append(d, bson.E{Key: "uuid", Value: bin(*u)})
	} else {
		d = append(d, bson.E{Key: "uuid", Value: nil})
	}
	d = append(d, bson.E{Key: "eid", Value: eid})
	if inv {
		d = append(d, bson.E{Key: "inv", Value: true})
	}
	return d
}

func nsD(db, coll string) bson.D {
	return bson.D{{Key: "db", Value: db}, {Key: "coll", Value: coll}}
}

func ptr(u catalog.UUID) *catalog.UUID { return &u }

// checkDocs compares events' documents byte for byte (field order included) with want.
func checkDocs(t *testing.T, evs []Event, want []bson.D) {
	t.Helper()
	if len(evs) != len(want) {
		for _, ev := range evs {
			t.Logf("got  %s", bson.Raw(ev.Doc))
		}
		t.Fatalf("got %d events, want %d", len(evs), len(want))
	}
	for i := range want {
		w := raw(t, want[i])
		if !bytes.Equal(evs[i].Doc, w) {
			t.Errorf("event %d:\n got  %s\n want %s", i, bson.Raw(evs[i].Doc), w)
		}
	}
}

func tsOf(secs uint32) optime.Timestamp { return optime.MakeTimestamp(secs, 1) }
