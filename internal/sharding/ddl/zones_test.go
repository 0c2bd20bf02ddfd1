package ddl

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

func zone(name string, min, max bson.D) configsvr.Zone {
	return configsvr.Zone{Min: doc(min), Max: doc(max), Name: name}
}

func gID(g any) bson.D { return bson.D{{Key: "g", Value: g}, {Key: "_id", Value: bson.MinKey{}}} }

func placement(t *testing.T, sp SplitParams, chunks []routing.Chunk) string {
	t.Helper()
	var parts []string
	for i, c := range chunks {
		if c.Version.Major != 1 || c.Version.Minor != uint32(i) || c.Version.Generation != sp.Gen {
			t.Errorf("chunk %d version %s", i, c.String())
		}
		parts = append(parts, bsonutil.FormatDoc(c.Min)+"->"+c.Shard)
	}
	if _, err := routing.New(sp.UUID, sp.Pattern, sp.Gen, chunks); err != nil {
		t.Errorf("chunks do not make a routing table: %v", err)
	}
	return strings.Join(parts, " | ")
}

// SingleChunkPerTagSplitPolicy: a chunk per zone range on the zone's shards in turn, the gaps
// round robin over all shards sorted by id; the zone bounds are the chunk bounds.
func TestInitialChunksZones(t *testing.T) {
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}
	key := shardkey.MustParse(doc(bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}))
	sp := SplitParams{Pattern: key, UUID: catalog.NewUUID(), Gen: gen, Primary: "b", Shards: []string{"b", "a"}, Empty: true,
		NS: "db.c",
		Zones: []configsvr.Zone{
			zone("A", gID(0), gID(10)),
			zone("B", gID(10), gID(20)),
			zone("A", gID(30), gID(40)),
		},
		ZoneShards: map[string][]string{"A": {"a"}, "B": {"b"}},
	}
	chunks, err := InitialChunks(sp)
	if err != nil {
		t.Fatal(err)
	}
	want := "{ g: MinKey, _id: MinKey }->a | { g: 0, _id: MinKey }->a | { g: 10, _id: MinKey }->b | " +
		"{ g: 20, _id: MinKey }->b | { g: 30, _id: MinKey }->a | { g: 40, _id: MinKey }->a"
	if got := placement(t, sp, chunks); got != want {
		t.Errorf("placement\n got %s\nwant %s", got, want)
	}

	// A zone of two shards: its ranges alternate between them.
	sp.ZoneShards = map[string][]string{"A": {"b", "a"}, "B": {"b"}}
	chunks, err = InitialChunks(sp)
	if err != nil {
		t.Fatal(err)
	}
	if chunks[1].Shard != "b" || chunks[4].Shard != "a" {
		t.Errorf("zone A over two shards: %s", placement(t, sp, chunks))
	}

	// Zones covering the whole key space: no gaps.
	whole := sp
	whole.Zones = []configsvr.Zone{zone("A", gID(bson.MinKey{}), gID(5)), {Min: doc(gID(5)), Max: key.GlobalMax(), Name: "B"}}
	chunks, err = InitialChunks(whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || chunks[0].Shard != "b" || chunks[1].Shard != "b" {
		t.Errorf("whole key space: %s", placement(t, whole, chunks))
	}

	// Not empty: one chunk on the primary, zones or not.
	full := sp
	full.Empty = false
	chunks, err = InitialChunks(full)
	if err != nil || len(chunks) != 1 || chunks[0].Shard != "b" {
		t.Errorf("non-empty collection: %v %v", chunks, err)
	}

	// A zone no shard has.
	none := sp
	none.ZoneShards = map[string][]string{"A": {"a"}}
	_, err = InitialChunks(none)
	if mongoerr.CodeOf(err) != mongoerr.Location50973 || !strings.Contains(err.Error(),
		"Cannot shard collection db.c due to zone B which is not assigned to a shard. Please assign this zone to a shard.") {
		t.Errorf("zone without shards: %v", err)
	}
}

// validateShardKeyAgainstExistingZones: zones must be ranges of the whole proposed key.
func TestValidateZones(t *testing.T) {
	key := shardkey.MustParse(doc(bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: 1}}))
	cases := []struct {
		z    configsvr.Zone
		want string
	}{
		{zone("A", bson.D{{Key: "g", Value: 0}}, bson.D{{Key: "g", Value: 10}}),
			"the proposed shard key { g: 1, _id: 1 } does not match with the shard key of the existing zone { g: 0 } -->> { g: 10 }"},
		{zone("A", bson.D{{Key: "x", Value: 0}, {Key: "_id", Value: 0}}, bson.D{{Key: "x", Value: 10}, {Key: "_id", Value: 0}}),
			"the proposed shard key { g: 1, _id: 1 } does not match with the shard key of the existing zone"},
		{zone("A", gID(0), bson.D{{Key: "x", Value: 10}, {Key: "_id", Value: 0}}),
			"the min and max of the existing zone { g: 0, _id: MinKey } -->> { x: 10, _id: 0 } have non-matching keys"},
	}
	for _, c := range cases {
		err := ValidateZones(key, []configsvr.Zone{c.z})
		if mongoerr.CodeOf(err) != mongoerr.InvalidOptions || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.z, err)
		}
	}
	if err := ValidateZones(key, []configsvr.Zone{zone("A", gID(0), gID(10))}); err != nil {
		t.Errorf("valid zone: %v", err)
	}
	hashed := shardkey.MustParse(doc(bson.D{{Key: "h", Value: "hashed"}}))
	err := ValidateZones(hashed, []configsvr.Zone{zone("A", bson.D{{Key: "h", Value: 1}}, bson.D{{Key: "h", Value: int64(5)}})})
	if mongoerr.CodeOf(err) != mongoerr.InvalidOptions || !strings.Contains(err.Error(), "whose boundaries are not of type NumberLong, MinKey or MaxKey") {
		t.Errorf("hashed zone with an int bound: %v", err)
	}
	// The coordinator's policy refuses such zones too.
	_, err = InitialChunks(SplitParams{Pattern: key, Primary: "a", Shards: []string{"a"}, Empty: true,
		Zones: []configsvr.Zone{cases[0].z}, ZoneShards: map[string][]string{"A": {"a"}}})
	if mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Errorf("InitialChunks with a prefix zone: %v", err)
	}
}

// PresplitHashedZonesSplitPolicy: each zone range cut at hashed values after its prefix.
func TestInitialChunksPresplitHashedZones(t *testing.T) {
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 10, I: 1}}
	key := shardkey.MustParse(doc(bson.D{{Key: "g", Value: 1}, {Key: "h", Value: "hashed"}}))
	gh := func(g any, h any) bson.D { return bson.D{{Key: "g", Value: g}, {Key: "h", Value: h}} }
	sp := SplitParams{Pattern: key, UUID: catalog.NewUUID(), Gen: gen, Primary: "a", Shards: []string{"a", "b"}, Empty: true,
		Presplit: true, NS: "db.c",
		Zones: []configsvr.Zone{
			zone("A", gh("A", bson.MinKey{}), gh("B", bson.MinKey{})),
			zone("B", gh("B", bson.MinKey{}), gh("C", bson.MinKey{})),
		},
		ZoneShards: map[string][]string{"A": {"a"}, "B": {"b"}},
	}
	chunks, err := InitialChunks(sp)
	if err != nil {
		t.Fatal(err)
	}
	// Default 2 chunks per shard with zones: each zone (one shard, one zone each) in 2.
	want := `{ g: MinKey, h: MinKey }->a | { g: "A", h: MinKey }->a | { g: "A", h: 0 }->a | ` +
		`{ g: "B", h: MinKey }->b | { g: "B", h: 0 }->b | { g: "C", h: MinKey }->b`
	if got := placement(t, sp, chunks); got != want {
		t.Errorf("placement\n got %s\nwant %s", got, want)
	}
	if chunks[2].Min.Lookup("h").Type != bsoncore.TypeInt64 {
		t.Errorf("split point's hashed value is not a long: %s", chunks[2].Min)
	}

	bad := []struct {
		z    configsvr.Zone
		code mongoerr.Code
	}{
		{zone("A", gh(bson.MinKey{}, bson.MinKey{}), gh("B", bson.MinKey{})), mongoerr.Location31388},
		{zone("A", gh("A", bson.MinKey{}), gh("A", bson.MaxKey{})), mongoerr.Location31390},
		{zone("A", gh("A", int64(3)), gh("B", bson.MinKey{})), mongoerr.Location31389},
	}
	for _, b := range bad {
		s := sp
		s.Zones = []configsvr.Zone{b.z}
		if _, err := InitialChunks(s); mongoerr.CodeOf(err) != b.code {
			t.Errorf("%s: %v, want %d", b.z, err, b.code)
		}
	}
	huge := sp
	huge.NumInitialChunks = MaxInitialChunksTotal + 1
	if _, err := InitialChunks(huge); mongoerr.CodeOf(err) != mongoerr.InvalidOptions ||
		!strings.Contains(err.Error(), "numInitialChunks cannot be more than either") {
		t.Errorf("presplit with too many chunks: %v", err)
	}
	four := sp
	four.NumInitialChunks = 6
	if chunks, err := InitialChunks(four); err != nil || len(chunks) != 2+2*3 {
		t.Errorf("presplit with numInitialChunks 6: %d chunks, %v", len(chunks), err)
	}
	noZones := sp
	noZones.Zones = nil
	if _, err := InitialChunks(noZones); mongoerr.CodeOf(err) != mongoerr.Location31387 {
		t.Errorf("presplit without zones: %v", err)
	}
	prefix := sp
	prefix.Pattern = shardkey.MustParse(doc(bson.D{{Key: "h", Value: "hashed"}}))
	prefix.Zones = []configsvr.Zone{zone("A", bson.D{{Key: "h", Value: bson.MinKey{}}}, bson.D{{Key: "h", Value: int64(0)}})}
	if _, err := InitialChunks(prefix); mongoerr.CodeOf(err) != mongoerr.Location31412 {
		t.Errorf("hashed prefix with a partial zone: %v", err)
	}
	prefix.Zones = []configsvr.Zone{{Min: prefix.Pattern.GlobalMin(), Max: prefix.Pattern.GlobalMax(), Name: "A"}}
	prefix.ZoneShards = map[string][]string{"A": {"a", "b"}}
	chunks, err = InitialChunks(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := placement(t, prefix, chunks); got != "{ h: MinKey }->a | { h: -4611686018427387902 }->a | { h: 0 }->b | { h: 4611686018427387902 }->b" {
		t.Errorf("hashed prefix over the whole range: %s", got)
	}
}
