package ddl

import (
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

func doc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// 7.0's CalculateHashedSplitPointsTest cases: symmetric around 0, MinKey after the hashed
// field.
func TestHashedSplitPoints(t *testing.T) {
	p := shardkey.MustParse(doc(bson.D{{Key: "x", Value: "hashed"}, {Key: "y", Value: 1}}))
	pts := HashedSplitPoints(p, 4)
	want := []int64{-4611686018427387902, 0, 4611686018427387902}
	if len(pts) != len(want) {
		t.Fatalf("points: %v", pts)
	}
	for i, pt := range pts {
		if x := pt.Lookup("x").Int64(); x != want[i] || pt.Lookup("y").Type != bsoncore.TypeMinKey {
			t.Errorf("point %d: %s", i, pt)
		}
	}
	odd := HashedSplitPoints(shardkey.MustParse(doc(bson.D{{Key: "x", Value: "hashed"}})), 3)
	third := (int64(math.MaxInt64) / 3) * 2
	if len(odd) != 2 || odd[0].Lookup("x").Int64() != -third/2 || odd[1].Lookup("x").Int64() != third/2 {
		t.Errorf("3 chunks: %v", odd)
	}
	if HashedSplitPoints(p, 1) != nil {
		t.Errorf("1 chunk has split points")
	}
}

func TestInitialChunks(t *testing.T) {
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}
	uuid := catalog.NewUUID()
	hashed := shardkey.MustParse(doc(bson.D{{Key: "h", Value: "hashed"}}))
	ranged := shardkey.MustParse(doc(bson.D{{Key: "k", Value: 1}}))
	sp := SplitParams{Pattern: hashed, UUID: uuid, Gen: gen, Primary: "b", Shards: []string{"b", "a", "c"}, Empty: true}
	chunks, err := InitialChunks(sp)
	if err != nil {
		t.Fatal(err)
	}
	// 2 per shard, shards sorted, contiguous runs, versions 1|0..1|5.
	var got []string
	for i, c := range chunks {
		got = append(got, c.Shard)
		if c.Version.Major != 1 || c.Version.Minor != uint32(i) || c.Version.Generation != gen || c.History[0].ValidAfter != gen.Timestamp {
			t.Errorf("chunk %d: %s", i, c.String())
		}
	}
	if strings.Join(got, "") != "aabbcc" {
		t.Errorf("placement %v", got)
	}
	if _, err := routing.New(uuid, hashed, gen, chunks); err != nil {
		t.Errorf("chunks do not make a routing table: %v", err)
	}
	// One shard short of chunks: the first chunk goes to the primary.
	sp.NumInitialChunks = 2
	chunks, _ = InitialChunks(sp)
	if len(chunks) != 2 || chunks[0].Shard != "b" {
		t.Errorf("2 chunks over 3 shards: %v %v", chunks[0].Shard, chunks[1].Shard)
	}
	// Ranged, or not empty: one chunk on the primary.
	for _, sp := range []SplitParams{{Pattern: ranged, Gen: gen, Primary: "b", Shards: []string{"a", "b"}, Empty: true},
		{Pattern: hashed, Gen: gen, Primary: "b", Shards: []string{"a", "b"}}} {
		chunks, err := InitialChunks(sp)
		if err != nil || len(chunks) != 1 || chunks[0].Shard != "b" || chunks[0].Version.Minor != 0 {
			t.Errorf("%s: %v %v", sp.Pattern, chunks, err)
		}
	}
	for _, sp := range []SplitParams{
		{Pattern: ranged, Primary: "a", Shards: []string{"a"}, Empty: true, NumInitialChunks: 4},
		{Pattern: hashed, Primary: "a", Shards: []string{"a"}, NumInitialChunks: 4},
		{Pattern: hashed, Primary: "a", Shards: []string{"a"}, Empty: true, NumInitialChunks: MaxInitialChunksPerShard + 1},
	} {
		if _, err := InitialChunks(sp); !mongoerr.Is(err, mongoerr.InvalidOptions) {
			t.Errorf("%+v: %v", sp, err)
		}
	}
}

func TestPresplitHashedZonesNeedsZones(t *testing.T) {
	sp := SplitParams{Pattern: shardkey.MustParse(doc(bson.D{{Key: "h", Value: "hashed"}})), Primary: "a", Shards: []string{"a"},
		Empty: true, Presplit: true}
	if _, err := InitialChunks(sp); !mongoerr.Is(err, mongoerr.Location31387) {
		t.Errorf("presplitHashedZones without zones: %v", err)
	}
}

func TestCheckIndexes(t *testing.T) {
	p := shardkey.MustParse(doc(bson.D{{Key: "a", Value: 1}}))
	ix := func(d bson.D) IndexSpec { return ParseIndexSpec(doc(d)) }
	id := ix(bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}})
	ab := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "a_1_b_1"}})
	sparse := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "sparse", Value: true}})
	partial := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"},
		{Key: "partialFilterExpression", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}}})
	collated := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"},
		{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}})
	uniqueOther := ix(bson.D{{Key: "key", Value: bson.D{{Key: "u", Value: 1}}}, {Key: "name", Value: "u_1"}, {Key: "unique", Value: true}})
	exact := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}})
	exactUnique := ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}})
	for _, tc := range []struct {
		name            string
		idx             []IndexSpec
		unique, empty   bool
		multikey        bool
		create          bool
		code            mongoerr.Code
		msg             string
		defaultCollated bool
	}{
		{name: "prefix index", idx: []IndexSpec{id, ab}},
		{name: "none, empty", idx: []IndexSpec{id}, empty: true, create: true},
		{name: "none, not empty", idx: []IndexSpec{id}, code: mongoerr.InvalidOptions, msg: "Please create an index"},
		{name: "sparse", idx: []IndexSpec{id, sparse}, code: mongoerr.InvalidOptions, msg: "sharding the collection.  Index a_1 cannot be used for sharding because [ Index key is sparse. ]"},
		{name: "descending", idx: []IndexSpec{id, ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: -1}}}, {Key: "name", Value: "a_-1"}})}, code: mongoerr.InvalidOptions, msg: "Please create an index"},
		{name: "numeric 1.0", idx: []IndexSpec{id, ix(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1.0}}}, {Key: "name", Value: "a_1"}})}},
		{name: "partial", idx: []IndexSpec{id, partial}, code: mongoerr.InvalidOptions, msg: "Please create an index"},
		{name: "collation", idx: []IndexSpec{id, collated}, code: mongoerr.InvalidOptions, msg: "Please create an index"},
		{name: "multikey", idx: []IndexSpec{id, ab}, multikey: true, code: mongoerr.InvalidOptions, msg: "couldn't find valid index for shard key"},
		{name: "other unique", idx: []IndexSpec{id, ab, uniqueOther}, code: mongoerr.InvalidOptions, msg: "Uniqueness can't be maintained"},
		{name: "unique wants exact", idx: []IndexSpec{id, ab}, unique: true, code: mongoerr.InvalidOptions, msg: "Please create an index"},
		{name: "unique, exact not unique", idx: []IndexSpec{id, exact}, unique: true, code: mongoerr.InvalidOptions, msg: "index not unique"},
		{name: "unique, exact unique", idx: []IndexSpec{id, exactUnique}, unique: true},
		{name: "unique, empty", idx: []IndexSpec{id}, unique: true, empty: true, create: true},
		{name: "default collation, empty", idx: []IndexSpec{id}, empty: true, create: true, defaultCollated: true},
	} {
		plan, err := CheckIndexes("db.c", p, tc.unique, tc.idx, tc.defaultCollated, tc.empty, tc.multikey)
		if tc.code != 0 {
			if !mongoerr.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: %v, want %d %q", tc.name, err, tc.code, tc.msg)
			}
			continue
		}
		if err != nil || plan.Create != tc.create {
			t.Errorf("%s: %+v %v", tc.name, plan, err)
			continue
		}
		if plan.Create {
			if plan.Spec.Lookup("name").StringValue() != "a_1" || truthy(plan.Spec.Lookup("unique")) != tc.unique ||
				(plan.Spec.Lookup("collation").Type != 0) != tc.defaultCollated {
				t.Errorf("%s: spec %s", tc.name, plan.Spec)
			}
		}
	}
}

func TestIndexName(t *testing.T) {
	if got := IndexName(doc(bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: "hashed"}, {Key: "d", Value: 1.0}})); got != "a_1_b.c_hashed_d_1" {
		t.Errorf("IndexName: %s", got)
	}
}
