package event

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// FuzzTransform: Transform, TransformTxn, ReadTxnChain and AddImages never panic on an
// entry ParseEntry accepts, whatever its fields, for every scope and option combination.
func FuzzTransform(f *testing.F) {
	seeds := []bson.D{
		crud("i", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 1),
		crud("u", "test.a", uuidA, bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: bson.D{{Key: "sarr", Value: bson.D{{Key: "a", Value: true}, {Key: "l", Value: 1}, {Key: "s0", Value: bson.D{{Key: "u", Value: bson.D{{Key: "a.b", Value: 1}}}}}}}}}}, bson.D{{Key: "_id", Value: 1}}, 2),
		crud("u", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, 2),
		crud("d", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 3),
		crud("n", "test.a", uuidA, bson.D{{Key: "msg", Value: "x"}}, bson.D{{Key: "shardCollection", Value: "test.a"}}, 3),
		cmd("test", &uuidA, bson.D{{Key: "renameCollection", Value: "test.a"}, {Key: "to", Value: "test.b"}, {Key: "stayTemp", Value: false}}, nil, 4),
		cmd("test", &uuidA, bson.D{{Key: "collMod", Value: "a"}}, bson.D{{Key: "collectionOptions_old", Value: bson.D{}}}, 4),
		cmd("test", nil, bson.D{{Key: "dropDatabase", Value: 1}}, nil, 5),
		txnEntry(6, 0, bson.A{ins(1), insOther(2), bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "test.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "a"}}}}}),
		txnEntry(7, 6, bson.A{ins(1)}, bson.E{Key: "count", Value: int64(2)}),
		txnEntry(7, 6, bson.A{ins(1)}, bson.E{Key: "prepare", Value: true}),
		txnEnvelope(8, 7, bson.D{{Key: "commitTransaction", Value: 1}, {Key: "commitTimestamp", Value: ts(7)}}),
	}
	for _, s := range seeds {
		f.Add([]byte(raw(f, s)), uint8(0))
		f.Add([]byte(raw(f, s)), uint8(0xff))
	}
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		e, err := oplog.ParseEntry(bsoncore.Document(data))
		if err != nil {
			return
		}
		o := &Options{
			Scope:                    []Scope{collA, dbTest, cluster}[int(flags)%3],
			ShowExpandedEvents:       flags&4 != 0,
			ShowSystemEvents:         flags&8 != 0,
			ShowRawUpdateDescription: flags&16 != 0,
		}
		if flags&32 != 0 {
			o.MakeID = testID
		}
		if flags&64 != 0 {
			o.ShardKey = func(catalog.UUID) bsoncore.Document {
				return bsoncore.NewDocumentBuilder().AppendInt32("x.y", 1).AppendInt32("_id", 1).Build()
			}
		}
		evs, _ := Transform(nil, e, o)
		// The entry serves as its own earlier entries too: whatever they hold.
		chain, _ := ReadTxnChain(e, func(optime.OpTime) (*oplog.Entry, error) { return e, nil })
		more, _ := TransformTxn(nil, e, append(chain, e), o)
		for _, ev := range append(evs, more...) {
			if err := ev.Doc.Validate(); err != nil {
				t.Fatalf("invalid event document %v: %v", ev.Doc, err)
			}
			_, _ = AddImages(ev.Doc, bsoncore.Value{Type: bsoncore.TypeNull}, bsoncore.Value{Type: bsoncore.TypeNull})
		}
	})
}
