package shardkey

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

func doc(t testing.TB, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		kp      bson.D
		errCode mongoerr.Code
		errMsg  string // substring
		hashed  int
	}{
		{kp: bson.D{{Key: "a", Value: 1}}, hashed: -1},
		{kp: bson.D{{Key: "a", Value: 1.0}, {Key: "b.c", Value: int64(1)}}, hashed: -1},
		{kp: bson.D{{Key: "a", Value: "hashed"}}, hashed: 0},
		{kp: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}}, hashed: 1},
		{kp: bson.D{{Key: "_id", Value: "hashed"}}, hashed: 0},
		{kp: bson.D{}, errCode: mongoerr.BadValue, errMsg: "Shard key is empty"},
		{kp: bson.D{{Key: "a", Value: -1}}, errCode: mongoerr.BadValue,
			errMsg: "Shard key { a: -1 } can contain at most one 'hashed' field, and/or multiple numerical fields set to a value of 1. Failed to parse field a"},
		{kp: bson.D{{Key: "a", Value: 2}}, errCode: mongoerr.BadValue, errMsg: "Failed to parse field a"},
		{kp: bson.D{{Key: "a", Value: "text"}}, errCode: mongoerr.BadValue, errMsg: "Failed to parse field a"},
		{kp: bson.D{{Key: "a", Value: true}}, errCode: mongoerr.BadValue, errMsg: "Failed to parse field a"},
		{kp: bson.D{{Key: "a", Value: "hashed"}, {Key: "b", Value: "hashed"}}, errCode: mongoerr.BadValue, errMsg: "Failed to parse field b"},
		{kp: bson.D{{Key: "$a", Value: 1}}, errCode: mongoerr.CannotCreateIndex, errMsg: "Index key contains an illegal field name: field name starts with '$'."},
		{kp: bson.D{{Key: "a.$b", Value: 1}}, errCode: mongoerr.CannotCreateIndex, errMsg: "field name starts with '$'"},
		{kp: bson.D{{Key: "a", Value: 1.5}}, hashed: -1}, // safeNumberInt truncates
		{kp: bson.D{{Key: "a", Value: "hashed"}, {Key: "b", Value: 1}, {Key: "c", Value: 1}}, hashed: 0},
		{kp: bson.D{{Key: "a..b", Value: 1}}, errCode: mongoerr.BadValue, errMsg: "Field a..b contains empty parts"},
		{kp: bson.D{{Key: "a.", Value: 1}}, errCode: mongoerr.BadValue, errMsg: "contains empty parts"},
		{kp: bson.D{{Key: "", Value: 1}}, errCode: mongoerr.BadValue, errMsg: "is empty"},
	} {
		p, err := Parse(doc(t, c.kp))
		if c.errCode != 0 {
			if !mongoerr.Is(err, c.errCode) || !strings.Contains(msg(err), c.errMsg) {
				t.Errorf("Parse(%v) = %v, want %v containing %q", c.kp, err, c.errCode, c.errMsg)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%v): %v", c.kp, err)
			continue
		}
		if p.HashedField() != c.hashed {
			t.Errorf("Parse(%v).HashedField() = %d, want %d", c.kp, p.HashedField(), c.hashed)
		}
	}
}

func TestGlobalBounds(t *testing.T) {
	p := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: "hashed"}}))
	if got := bsonutil.FormatDoc(p.GlobalMin()); got != "{ a: MinKey, b.c: MinKey }" {
		t.Errorf("GlobalMin = %s", got)
	}
	if got := bsonutil.FormatDoc(p.GlobalMax()); got != "{ a: MaxKey, b.c: MaxKey }" {
		t.Errorf("GlobalMax = %s", got)
	}
	if !p.IsShardKey(p.GlobalMin()) || !p.IsShardKey(p.GlobalMax()) {
		t.Error("global bounds are not shard keys")
	}
}

func TestExtractKey(t *testing.T) {
	ab := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: 1}}))
	h := MustParse(doc(t, bson.D{{Key: "x", Value: "hashed"}}))
	for _, c := range []struct {
		p    *Pattern
		doc  bson.D
		want string
		err  mongoerr.Code
	}{
		{p: ab, doc: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: "x"}}}}, want: `{ a: 1, b.c: "x" }`},
		// Missing fields (and a scalar where the path continues) are null, as MongoDB stores them.
		{p: ab, doc: bson.D{{Key: "z", Value: 1}}, want: "{ a: null, b.c: null }"},
		{p: ab, doc: bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 5}}, want: "{ a: 2, b.c: null }"},
		{p: ab, doc: bson.D{{Key: "a", Value: bson.D{{Key: "y", Value: 1}}}}, want: "{ a: { y: 1 }, b.c: null }"},
		// Arrays on the path or at its end are refused.
		{p: ab, doc: bson.D{{Key: "a", Value: bson.A{1}}}, err: mongoerr.ShardKeyNotFound},
		{p: ab, doc: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.A{bson.D{{Key: "c", Value: 1}}}}}, err: mongoerr.ShardKeyNotFound},
		{p: ab, doc: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: bson.A{}}}}}, err: mongoerr.ShardKeyNotFound},
		// Hashed: NumberLong(hash64(v, 0)), the values MongoDB's convertShardKeyToHashed gives.
		{p: h, doc: bson.D{{Key: "x", Value: 1}}, want: "{ x: 5902408780260971510 }"},
		{p: h, doc: bson.D{{Key: "x", Value: 42.123}}, want: "{ x: -944302157085130861 }"},
		{p: h, doc: bson.D{{Key: "y", Value: 1}}, want: "{ x: 2338878944348059895 }"},
		{p: h, doc: bson.D{{Key: "x", Value: nil}}, want: "{ x: 2338878944348059895 }"},
		{p: h, doc: bson.D{{Key: "x", Value: bson.A{1}}}, err: mongoerr.ShardKeyNotFound},
	} {
		got, err := c.p.ExtractKey(doc(t, c.doc))
		if c.err != 0 {
			if !mongoerr.Is(err, c.err) || msg(err) != "Shard key cannot contain array values or array descendants." {
				t.Errorf("ExtractKey(%v) = %v, want %v", c.doc, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ExtractKey(%v): %v", c.doc, err)
			continue
		}
		if s := bsonutil.FormatDoc(got); s != c.want {
			t.Errorf("ExtractKey(%v) = %s, want %s", c.doc, s, c.want)
		}
		if !c.p.IsShardKey(got) {
			t.Errorf("ExtractKey(%v) = %s is not a shard key", c.doc, got)
		}
	}
	hv, _ := HashValue(bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 0)})
	if hv.Type != bsoncore.TypeInt64 || hv.Int64() != 4854801880128277513 {
		t.Errorf("HashValue(0) = %v", hv)
	}
}

func TestCheckKeyForMetadataStorage(t *testing.T) {
	if err := CheckKeyForMetadataStorage(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 1}}}})); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  bson.D
		want string
	}{
		{bson.D{{Key: "a", Value: bson.A{1}}}, "Shard key element a: [ 1 ] is not valid for storage"},
		{bson.D{{Key: "a", Value: bson.Regex{Pattern: "x"}}}, "Shard key element a: /x/ is not valid for storage"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$x", Value: 1}}}}, "Shard key element a: { $x: 1 } is not valid for storage"},
	} {
		err := CheckKeyForMetadataStorage(doc(t, c.key))
		if !mongoerr.Is(err, mongoerr.BadValue) || msg(err) != c.want {
			t.Errorf("CheckKeyForMetadataStorage(%v) = %v, want %q", c.key, err, c.want)
		}
	}
}

func TestCheckShardKeySize(t *testing.T) {
	small := doc(t, bson.D{{Key: "a", Value: strings.Repeat("x", 400)}})
	if err := CheckShardKeySize(small); err != nil {
		t.Fatal(err)
	}
	big := doc(t, bson.D{{Key: "a", Value: strings.Repeat("x", 600)}})
	err := CheckShardKeySize(big)
	if !mongoerr.Is(err, mongoerr.ShardKeyTooBig) || !strings.HasPrefix(msg(err), "shard keys must be less than 512 bytes, but key { a: \"xxx") ||
		!strings.HasSuffix(err.Error(), "is 613 bytes") {
		t.Errorf("CheckShardKeySize(big) = %v", err)
	}
}

// msg is a MongoDB error's message without the code.
func msg(err error) string {
	if e, ok := mongoerr.As(err); ok {
		return e.Msg
	}
	return ""
}

func TestCheckUnique(t *testing.T) {
	h := MustParse(doc(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}}))
	r := MustParse(doc(t, bson.D{{Key: "a", Value: 1}}))
	if err := h.CheckUnique(true); !mongoerr.Is(err, mongoerr.InvalidOptions) || !strings.HasPrefix(msg(err), "Hashed shard keys cannot be declared unique.") {
		t.Errorf("hashed unique: %v", err)
	}
	if h.CheckUnique(false) != nil || r.CheckUnique(true) != nil {
		t.Error("only hashed and unique together are refused")
	}
}
