package agg

import (
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query/expr"
)

func decV(t *testing.T, s string) value {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	h, l := d.GetBytes()
	return value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, h, l)}
}

func TestGranularityRounders(t *testing.T) {
	cases := []struct {
		gran     string
		in       value
		up, down value
	}{
		{"R5", expr.Double(0), expr.Double(0), expr.Double(0)},
		{"R5", expr.Int32(0), expr.Int32(0), expr.Int32(0)}, // 0 is kept as is, type included
		{"R5", expr.Int32(1), expr.Double(1.6), expr.Double(0.63)},
		{"R5", expr.Double(1.6), expr.Double(2.5), expr.Double(1)},
		// Doubles are scaled by repeated ×10 / ÷10 exactly as MongoDB does, so its
		// floating-point artefacts are reproduced (63×0.1 = 6.300000000000001).
		{"R5", expr.Int64(7), expr.Double(10), expr.Double(6.300000000000001)},
		{"R5", expr.Double(100), expr.Double(160), expr.Double(63)},
		{"R5", expr.Double(2000), expr.Double(2500), expr.Double(1600)},
		{"R10", expr.Double(3), expr.Double(3.15), expr.Double(2.5)},
		{"R20", expr.Int32(20), expr.Double(22.400000000000002), expr.Double(18)},
		{"R20", expr.Int32(59), expr.Double(63), expr.Double(56)},
		{"R40", expr.Double(3.3), expr.Double(3.5500000000000003), expr.Double(3.15)}, // MongoDB's R40 has no 3.35
		{"R80", expr.Double(1), expr.Double(1.03), expr.Double(0.975)},
		{"1-2-5", expr.Double(3), expr.Double(5), expr.Double(2)},
		{"1-2-5", expr.Double(50), expr.Double(100), expr.Double(20)},
		{"E6", expr.Double(0.8), expr.Double(1), expr.Double(0.68)},
		{"E12", expr.Double(30), expr.Double(33), expr.Double(27)},
		{"E24", expr.Double(90), expr.Double(91), expr.Double(82)},
		{"E48", expr.Double(5), expr.Double(5.11), expr.Double(4.87)},
		{"E96", expr.Double(9.8), expr.Double(10), expr.Double(9.76)},
		{"E192", expr.Double(9.9), expr.Double(10), expr.Double(9.88)},
		{"POWERSOF2", expr.Int32(3), expr.Int32(4), expr.Int32(2)},
		{"POWERSOF2", expr.Int32(4), expr.Int32(8), expr.Int32(2)},
		{"POWERSOF2", expr.Int64(5), expr.Int32(8), expr.Int32(4)},
		{"POWERSOF2", expr.Double(4), expr.Int32(8), expr.Int32(2)},
		{"POWERSOF2", expr.Double(0.3), expr.Double(0.5), expr.Double(0.25)},
		{"POWERSOF2", expr.Int32(0), expr.Int32(0), expr.Int32(0)},
	}
	for _, c := range cases {
		r := granularityRounders[c.gran]
		if r == nil {
			t.Fatalf("no rounder %s", c.gran)
		}
		up, err := r.roundUp(c.in)
		if err != nil {
			t.Fatal(err)
		}
		down, err := r.roundDown(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if up.Type != c.up.Type || expr.Compare(up, c.up, nil) != 0 {
			t.Errorf("%s roundUp(%v) = %v (%v), want %v", c.gran, c.in, up, up.Type, c.up)
		}
		if down.Type != c.down.Type || expr.Compare(down, c.down, nil) != 0 {
			t.Errorf("%s roundDown(%v) = %v (%v), want %v", c.gran, c.in, down, down.Type, c.down)
		}
	}
}

func TestGranularityDecimal(t *testing.T) {
	cases := []struct{ gran, in, up, down string }{
		{"R5", "1", "1.6", "0.63"},
		{"R5", "7", "10", "6.3"},
		{"E6", "0.8", "1.0", "0.68"},
		{"R20", "20", "22.4", "18"},
		{"1-2-5", "0.0005", "0.001", "0.0002"},
		{"POWERSOF2", "3", "4", "2"},
	}
	for _, c := range cases {
		r := granularityRounders[c.gran]
		up, err := r.roundUp(decV(t, c.in))
		if err != nil {
			t.Fatal(err)
		}
		down, err := r.roundDown(decV(t, c.in))
		if err != nil {
			t.Fatal(err)
		}
		if up.Type != bsoncore.TypeDecimal128 || expr.Compare(up, decV(t, c.up), nil) != 0 {
			t.Errorf("%s roundUp(%s) = %v, want decimal %s", c.gran, c.in, up, c.up)
		}
		if down.Type != bsoncore.TypeDecimal128 || expr.Compare(down, decV(t, c.down), nil) != 0 {
			t.Errorf("%s roundDown(%s) = %v, want decimal %s", c.gran, c.in, down, c.down)
		}
	}
}

// TestGranularityStrict checks, over many magnitudes, that every series rounds strictly
// up and strictly down and that both directions land on the same grid.
func TestGranularityStrict(t *testing.T) {
	for name, r := range granularityRounders {
		for _, x := range []float64{1e-7, 0.00123, 0.5, 0.99, 1, 1.5, 9.99, 10, 42, 999, 12345.678, 1e9, 3e15} {
			up, err := r.roundUp(expr.Double(x))
			if err != nil {
				t.Fatal(err)
			}
			down, err := r.roundDown(expr.Double(x))
			if err != nil {
				t.Fatal(err)
			}
			if !(expr.ToFloat(down) < x && x < expr.ToFloat(up)) {
				t.Errorf("%s: %g not strictly within (%v, %v)", name, x, down, up)
			}
			if back, _ := r.roundDown(up); expr.ToFloat(back) >= expr.ToFloat(up) || expr.ToFloat(back) < expr.ToFloat(down) {
				t.Errorf("%s: roundDown(roundUp(%g)=%v) = %v", name, x, up, back)
			}
		}
		if v, err := r.roundUp(expr.Double(math.Inf(1))); err != nil || !math.IsInf(expr.ToFloat(v), 1) {
			t.Errorf("%s: roundUp(+Inf) = %v, %v", name, v, err)
		}
	}
}

func TestBucketAutoGranularity(t *testing.T) {
	var hundred []string
	for i := 0; i < 100; i++ {
		hundred = append(hundred, `{"_id": `+itoa(i)+`}`)
	}
	things := "[" + strings.Join(hundred, ",") + "]"
	runCases(t, nil, []pcase{
		// The R20 example of the MongoDB manual ($bucketAuto, "Granularity Example").
		{name: "docs R20", input: things, pipeline: `[{"$bucketAuto": {"groupBy": "$_id", "buckets": 5, "granularity": "R20"}}]`,
			want: `[{"_id": {"min": 0, "max": 20.0}, "count": 20}, {"_id": {"min": 20.0, "max": 40.0}, "count": 20},
				{"_id": {"min": 40.0, "max": 63.0}, "count": 23}, {"_id": {"min": 63.0, "max": 90.0}, "count": 27},
				{"_id": {"min": 90.0, "max": 100.0}, "count": 10}]`},
		{name: "R5 min rounded down", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}, {"v": 5}, {"v": 6}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 3, "granularity": "R5"}}]`,
			// 4 rounds up to 6.3, which absorbs 5 and 6 into the second bucket.
			want: `[{"_id": {"min": 0.63, "max": 2.5}, "count": 2}, {"_id": {"min": 2.5, "max": 6.300000000000001}, "count": 4}]`},
		{name: "R5 three buckets", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}, {"v": 7}, {"v": 8}, {"v": 12}, {"v": 13}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 4, "granularity": "R5"}}]`,
			want: `[{"_id": {"min": 0.63, "max": 2.5}, "count": 2}, {"_id": {"min": 2.5, "max": 6.300000000000001}, "count": 2},
				{"_id": {"min": 6.300000000000001, "max": 10.0}, "count": 2}, {"_id": {"min": 10.0, "max": 16.0}, "count": 2}]`},
		// Rounded boundaries that would collide merge the buckets: everything is below 1.6.
		{name: "R5 merged", input: `[{"v": 1}, {"v": 1.1}, {"v": 1.2}, {"v": 1.3}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 4, "granularity": "R5"}}]`,
			want:     `[{"_id": {"min": 0.63, "max": 1.6}, "count": 4}]`},
		{name: "POWERSOF2", input: `[{"v": 1}, {"v": 2}, {"v": 3}, {"v": 5}, {"v": 9}, {"v": 17}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 3, "granularity": "POWERSOF2"}}]`,
			want: `[{"_id": {"min": 0.5, "max": 4}, "count": 3}, {"_id": {"min": 4, "max": 16}, "count": 2},
				{"_id": {"min": 16, "max": 32}, "count": 1}]`},
		// A bucket of zeros rounds up to 0, so its max becomes the next value rounded down.
		{name: "zero", input: `[{"v": 0}, {"v": 0}, {"v": 5}, {"v": 6}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "1-2-5"}}]`,
			want:     `[{"_id": {"min": 0, "max": 2.0}, "count": 2}, {"_id": {"min": 2.0, "max": 10.0}, "count": 2}]`},
		{name: "string value", input: `[{"v": 1}, {"v": "a"}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R5"}}]`, code: 40258},
		{name: "missing value", input: `[{"v": 1}, {}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}]`, code: 40258},
		{name: "negative value", input: `[{"v": 1}, {"v": -2}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R5"}}]`, code: 40260},
		{name: "NaN value", input: `[{"v": {"$numberDouble": "NaN"}}]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R5"}}]`, code: 40260},
		{name: "unknown granularity", input: `[]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R6"}}]`, code: 40257},
		{name: "granularity not string", input: `[]`,
			pipeline: `[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": 5}}]`, code: 40261},
	})
}

func TestGranularityErrorMessages(t *testing.T) {
	if err := checkGranularityKey(expr.Double(-1.5)); err == nil || !strings.Contains(err.Error(), "found a negative value: -1.5") {
		t.Errorf("negative: %v", err)
	}
	if err := checkGranularityKey(value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "x")}); err == nil || !strings.Contains(err.Error(), "found a value with type: string") {
		t.Errorf("string: %v", err)
	}
}
