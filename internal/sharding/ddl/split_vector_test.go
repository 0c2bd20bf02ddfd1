package ddl

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func intKeys(vals ...int32) []bsoncore.Document {
	out := make([]bsoncore.Document, len(vals))
	for i, v := range vals {
		out[i] = bsoncore.NewDocumentBuilder().AppendInt32("x", v).Build()
	}
	return out
}

func sliceScan(keys []bsoncore.Document) (KeyScan, *int) {
	passes := 0
	return func(_ context.Context, yield func(bsoncore.Document) bool) error {
		passes++
		for _, k := range keys {
			if !yield(k) {
				return nil
			}
		}
		return nil
	}, &passes
}

func keyInts(t *testing.T, keys []bsoncore.Document) []int32 {
	t.Helper()
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = k.Lookup("x").Int32()
	}
	return out
}

func equalInts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSelectSplitPoints(t *testing.T) {
	seq := func(n int) []bsoncore.Document {
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(i)
		}
		return intKeys(vals...)
	}
	for _, tc := range []struct {
		name string
		in   SplitPointsInput
		keys []bsoncore.Document
		want []int32
	}{
		// 100 documents of 100 bytes, max 4000 bytes: 20 keys per chunk; a split key is
		// the 21st key after the previous one.
		{"every k-th key", SplitPointsInput{DataSize: 10000, RecCount: 100, MaxChunkSizeBytes: 4000}, seq(100),
			[]int32{20, 41, 62, 83}},
		{"below the max size: none", SplitPointsInput{DataSize: 3999, RecCount: 100, MaxChunkSizeBytes: 4000}, seq(100), nil},
		{"empty collection: none", SplitPointsInput{DataSize: 0, RecCount: 0, MaxChunkSizeBytes: 1}, nil, nil},
		{"maxChunkObjects caps keyCount", SplitPointsInput{DataSize: 10000, RecCount: 100, MaxChunkSizeBytes: 4000, MaxChunkObjects: 40},
			seq(100), []int32{20, 41, 62, 83}},
		{"maxChunkObjects 10", SplitPointsInput{DataSize: 10000, RecCount: 100, MaxChunkSizeBytes: 10000, MaxChunkObjects: 10},
			seq(50), []int32{10, 21, 32, 43}},
		{"maxSplitPoints", SplitPointsInput{DataSize: 10000, RecCount: 100, MaxChunkSizeBytes: 4000, MaxSplitPoints: 2},
			seq(100), []int32{20, 41}},
		{"force: the median", SplitPointsInput{DataSize: 100, RecCount: 100, Force: true}, seq(10), []int32{5}},
		{"force: two keys", SplitPointsInput{DataSize: 100, RecCount: 100, Force: true}, seq(2), []int32{1}},
		{"force: odd", SplitPointsInput{DataSize: 100, RecCount: 100, Force: true}, seq(11), []int32{5}},
		{"single key: none", SplitPointsInput{DataSize: 10000, RecCount: 100, MaxChunkSizeBytes: 1000},
			intKeys(7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7), nil},
		{"single key forced: none", SplitPointsInput{DataSize: 100, RecCount: 100, Force: true}, intKeys(7, 7, 7, 7), nil},
		// A key repeated past keyCount is never a split point twice: the next distinct
		// key is.
		{"frequent keys", SplitPointsInput{DataSize: 1000, RecCount: 100, MaxChunkSizeBytes: 40},
			intKeys(0, 1, 1, 1, 1, 1, 1, 1, 2, 3), []int32{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scan, _ := sliceScan(tc.keys)
			got, err := SelectSplitPoints(context.Background(), tc.in, scan)
			if err != nil {
				t.Fatal(err)
			}
			if g := keyInts(t, got.Keys); !equalInts(g, tc.want) {
				t.Fatalf("split points %v, want %v", g, tc.want)
			}
			if single := strings.HasPrefix(tc.name, "single key"); got.SingleKey != single {
				t.Fatalf("single key %v, want %v", got.SingleKey, single)
			}
		})
	}
}

func TestSelectSplitPointsErrors(t *testing.T) {
	scan, passes := sliceScan(nil)
	_, err := SelectSplitPoints(context.Background(), SplitPointsInput{DataSize: 100, RecCount: 1}, scan)
	if mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("no max size: %v, want InvalidOptions", err)
	}
	_, err = SelectSplitPoints(context.Background(), SplitPointsInput{DataSize: 100, RecCount: 1, MaxChunkSizeBytes: 10}, scan)
	if mongoerr.CodeOf(err) != mongoerr.OperationFailed {
		t.Fatalf("empty range: %v, want OperationFailed", err)
	}
	if *passes != 1 {
		t.Fatalf("%d scans, want 1", *passes)
	}
}

func TestParseSplitVector(t *testing.T) {
	kp := bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()
	base := func() *bsoncore.DocumentBuilder {
		return bsoncore.NewDocumentBuilder().AppendString("splitVector", "db.c").AppendDocument("keyPattern", kp)
	}
	for _, tc := range []struct {
		name string
		cmd  bsoncore.Document
		code mongoerr.Code
	}{
		{"no key pattern", bsoncore.NewDocumentBuilder().AppendString("splitVector", "db.c").Build(), mongoerr.InvalidOptions},
		{"bad ns", bsoncore.NewDocumentBuilder().AppendString("splitVector", "c").AppendDocument("keyPattern", kp).Build(), mongoerr.InvalidNamespace},
		{"min without max", base().AppendDocument("min", kp).Build(), mongoerr.InvalidOptions},
		{"maxChunkObjects 0", base().AppendInt32("maxChunkObjects", 0).Build(), mongoerr.InvalidOptions},
		{"maxChunkSize 0", base().AppendInt32("maxChunkSize", 0).Build(), mongoerr.InvalidOptions},
		{"maxChunkSize 2048", base().AppendInt32("maxChunkSize", 2048).Build(), mongoerr.InvalidOptions},
		{"maxChunkSizeBytes small", base().AppendInt64("maxChunkSizeBytes", 1000).Build(), mongoerr.InvalidOptions},
		{"ok", base().AppendInt32("maxChunkSize", 1).AppendBoolean("force", true).Build(), mongoerr.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseSplitVector(tc.cmd)
			if mongoerr.CodeOf(err) != tc.code {
				t.Fatalf("error %v, want code %d", err, tc.code)
			}
			if err == nil && (r.MaxChunkSizeBytes != 1<<20 || !r.Force) {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}
