package configsvr

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

func zdoc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

func x(v any) bsoncore.Document { return zdoc(bson.D{{Key: "x", Value: v}}) }

// ZoneInfo::addRangeToZone: overlaps and containments are RangeOverlapConflict, the same
// range in the same zone is a no-op, adjacent ranges are fine.
func TestZoneSetAdd(t *testing.T) {
	var s ZoneSet
	for _, z := range []Zone{{x(10), x(20), "A"}, {x(30), x(40), "B"}, {x(20), x(30), "C"}, {x(10), x(20), "A"}} {
		if err := s.Add(z); err != nil {
			t.Fatalf("%s: %v", z, err)
		}
	}
	if len(s.Ranges()) != 3 {
		t.Fatalf("ranges: %v", s.Ranges())
	}
	for _, z := range []Zone{
		{x(15), x(25), "D"},            // overlaps the start of [20, 30)
		{x(5), x(15), "D"},             // overlaps [10, 20)
		{x(12), x(18), "D"},            // inside [10, 20)
		{x(0), x(50), "D"},             // contains all
		{x(10), x(20), "B"},            // same range, other zone
		{x(bson.MinKey{}), x(11), "D"}, // reaches into [10, 20)
	} {
		err := s.Add(z)
		if mongoerr.CodeOf(err) != mongoerr.RangeOverlapConflict || !strings.Contains(err.Error(), "Zone range: "+z.String()+" is overlapping with existing: ") {
			t.Errorf("%s: %v", z, err)
		}
	}
	if err := s.Add(Zone{x(40), x(bson.MaxKey{}), "E"}); err != nil {
		t.Errorf("adjacent range: %v", err)
	}
	if got := (Zone{x(1), x(2), "A"}).String(); got != "{ x: 1 } -->> { x: 2 }  on  A" {
		t.Errorf("ZoneRange::toString: %q", got)
	}
}

func TestExtendBound(t *testing.T) {
	key := zdoc(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}, {Key: "c", Value: "hashed"}})
	got, err := ExtendBound(key, zdoc(bson.D{{Key: "a", Value: 5}}))
	if err != nil || bsonutil.FormatDoc(got) != "{ a: 5, b: MaxKey, c: MinKey }" {
		t.Errorf("extend: %s %v", got, err)
	}
	if _, err := ExtendBound(key, zdoc(bson.D{{Key: "b", Value: 5}})); mongoerr.CodeOf(err) != mongoerr.Location16634 {
		t.Errorf("wrong field: %v", err)
	}
}

func TestParseZoneRange(t *testing.T) {
	const name = "updateZoneKeyRange"
	r, err := ParseZoneRange(name, zdoc(bson.D{{Key: name, Value: "db.c"}, {Key: "min", Value: bson.D{{Key: "x", Value: 1}}},
		{Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: nil}}))
	if err != nil || !r.Remove || r.NS != "db.c" {
		t.Fatalf("remove: %+v %v", r, err)
	}
	if cmd := r.Command(); cmd.Lookup("zone").Type != bsoncore.TypeNull || cmd.Lookup("_configsvrUpdateZoneKeyRange").StringValue() != "db.c" {
		t.Errorf("config command: %s", cmd)
	}
	cases := []struct {
		cmd  bson.D
		code mongoerr.Code
		msg  string
	}{
		{bson.D{{Key: name, Value: "nodot"}, {Key: "min", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: "A"}},
			mongoerr.InvalidNamespace, "nodot is not a valid namespace"},
		{bson.D{{Key: name, Value: "db.c"}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: "A"}},
			mongoerr.NoSuchKey, "The field 'min' cannot be parsed"},
		{bson.D{{Key: name, Value: "db.c"}, {Key: "min", Value: bson.D{}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: "A"}},
			mongoerr.BadValue, "The field 'min' cannot be empty"},
		{bson.D{{Key: name, Value: "db.c"}, {Key: "min", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: "A"}},
			mongoerr.FailedToParse, "min: { x: 2 } should be less than max: { x: 2 }"},
		{bson.D{{Key: name, Value: "db.c"}, {Key: "min", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "zone", Value: 3}},
			mongoerr.TypeMismatch, "\"zone\" had the wrong type. Expected string or null, found int"},
		{bson.D{{Key: name, Value: "db.c"}, {Key: "min", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "max", Value: bson.D{{Key: "x", Value: 2}}}},
			mongoerr.NoSuchKey, "Missing expected field \"zone\""},
	}
	for _, c := range cases {
		_, err := ParseZoneRange(name, zdoc(c.cmd))
		if mongoerr.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v", c.cmd, err)
		}
	}
	if _, _, err := ParseShardZone("addShardToZone", zdoc(bson.D{{Key: "addShardToZone", Value: "s"}})); mongoerr.CodeOf(err) != mongoerr.Location40414 {
		t.Errorf("missing zone: %v", err)
	}
	if _, _, err := ParseShardZone("addShardToZone", zdoc(bson.D{{Key: "addShardToZone", Value: "s"}, {Key: "zone", Value: 1}})); mongoerr.CodeOf(err) != mongoerr.TypeMismatch {
		t.Errorf("zone of the wrong type: %v", err)
	}
}

func TestRangeKeyPattern(t *testing.T) {
	if _, err := rangeKeyPattern(zdoc(bson.D{{Key: "a", Value: 1}}), zdoc(bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 1}})); mongoerr.CodeOf(err) != mongoerr.ShardKeyNotFound {
		t.Errorf("mismatched bounds: %v", err)
	}
	k, err := rangeKeyPattern(zdoc(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}), zdoc(bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 1}}))
	if err != nil || bsonutil.FormatDoc(k) != "{ a: 1, b: 1 }" {
		t.Errorf("key pattern %s %v", k, err)
	}
}
