package agg

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query/expr"
)

// spillInput is n documents of about 100 bytes: a partition p (nParts of them), a sort field
// x with gaps and ties, a value v that is sometimes missing or null, and padding.
func spillInput(t *testing.T, n, nParts int) []bsoncore.Document {
	t.Helper()
	docs := make([]string, n)
	for i := range n {
		v := fmt.Sprint(i % 10)
		switch i % 7 {
		case 0:
			v = "null"
		case 3:
			v = ""
		}
		vf := ""
		if v != "" {
			vf = `, "v": ` + v
		}
		docs[i] = fmt.Sprintf(`{"_id": %d, "p": %d, "x": %d%s, "pad": "%s"}`, i, i%nParts, (i*7919)%(3*n)/2+1, vf, strings.Repeat("x", 40))
	}
	return parseDocs(t, "["+strings.Join(docs, ",")+"]")
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestWindowStagesSpill: with a memory limit far below the input, $setWindowFields, $fill,
// $densify and $bucketAuto fail with 292 without allowDiskUse, and with it spill to disk and
// produce exactly the in-memory results (same documents, same order); the spill files are
// gone once the output is drained, or when it is closed early.
func TestWindowStagesSpill(t *testing.T) {
	const limit = 20_000
	cases := []struct {
		name     string
		n, parts int
		pipeline string
	}{
		{"setWindowFields partitions", 1200, 4, `[{"$setWindowFields": {"partitionBy": "$p", "sortBy": {"x": 1}, "output": {
			"run": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
			"avg": {"$avg": "$v", "window": {"documents": [-2, 2]}},
			"rng": {"$push": "$_id", "window": {"range": [-3, 0]}},
			"tail": {"$max": "$v", "window": {"documents": ["current", "unbounded"]}},
			"all": {"$sum": 1},
			"r": {"$rank": {}}, "d": {"$denseRank": {}}, "n": {"$documentNumber": {}},
			"prev": {"$shift": {"output": "$pad", "by": -1, "default": "none"}},
			"lf": {"$locf": "$v"}, "lin": {"$linearFill": "$v"},
			"ema": {"$expMovingAvg": {"input": "$v", "N": 3}},
			"der": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}},
			"int": {"$integral": {"input": "$v"}, "window": {"documents": [-3, 0]}},
			"cov": {"$covariancePop": ["$x", "$v"], "window": {"documents": [-5, 5]}},
			"first": {"$first": "$pad", "window": {"documents": [-1, 1]}}}}}]`},
		{"setWindowFields one partition", 1500, 1, `[{"$setWindowFields": {"sortBy": {"x": -1}, "output": {
			"run": {"$sum": "$x", "window": {"documents": ["unbounded", "current"]}},
			"mov": {"$push": "$_id", "window": {"documents": [-1, 1]}},
			"r": {"$rank": {}}}}}]`},
		{"setWindowFields small partitions", 1500, 150, `[{"$setWindowFields": {"partitionBy": {"$mod": ["$p", 300]}, "sortBy": {"x": 1}, "output": {
			"c": {"$count": {}}, "s": {"$shift": {"output": "$x", "by": 1}}}}}]`},
		{"fill", 1500, 3, `[{"$fill": {"partitionBy": "$p", "sortBy": {"x": 1}, "output": {
			"v": {"method": "locf"}, "w": {"value": "none"}}}},
			{"$fill": {"sortBy": {"x": 1}, "partitionByFields": ["p"], "output": {"u": {"method": "linear"}}}}]`},
		{"fill linear one partition", 1500, 1, `[{"$set": {"u": {"$cond": [{"$eq": [{"$mod": ["$_id", 3]}, 0]}, "$x", null]}}},
			{"$fill": {"sortBy": {"x": 1}, "output": {"u": {"method": "linear"}}}}]`},
		{"densify partition bounds", 1000, 4, `[{"$densify": {"field": "x", "partitionByFields": ["p"], "range": {"step": 1, "bounds": "partition"}}}]`},
		{"densify full bounds", 1000, 3, `[{"$densify": {"field": "x", "partitionByFields": ["p"], "range": {"step": 2, "bounds": "full"}}}]`},
		{"densify explicit bounds", 1000, 1, `[{"$densify": {"field": "x", "range": {"step": 3, "bounds": [-10, 1000]}}}]`},
		{"bucketAuto", 2000, 1, `[{"$bucketAuto": {"groupBy": "$x", "buckets": 7, "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}, "f": {"$first": "$_id"}}}}]`},
		{"bucketAuto ties", 2000, 1, `[{"$bucketAuto": {"groupBy": "$p2", "buckets": 5}}]`},
		{"bucketAuto granularity", 2000, 1, `[{"$bucketAuto": {"groupBy": "$x", "buckets": 6, "granularity": "R5", "output": {"n": {"$sum": 1}}}}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			input := spillInput(t, c.n, c.parts)
			if strings.Contains(c.pipeline, "$p2") {
				for i, d := range input {
					input[i] = setPath(d, []string{"p2"}, expr.Int(int64(i%13)))
				}
			}
			p, err := Parse(parseDocs(t, c.pipeline), ParseContext{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := Drain(t.Context(), must(p.Run(t.Context(), SliceSource(input), &Context{Now: testNow})))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Drain(t.Context(), must(p.Run(t.Context(), SliceSource(input), &Context{Now: testNow, MaxMemoryBytes: limit}))); codeOf(err) != 292 {
				t.Fatalf("without allowDiskUse: want 292, got %v", err)
			}

			dir := t.TempDir()
			out := must(p.Run(t.Context(), SliceSource(input), &Context{Now: testNow, MaxMemoryBytes: limit, AllowDiskUse: true, TempDir: dir}))
			first, ok, err := out.Next(t.Context())
			if err != nil || !ok {
				t.Fatalf("first spilled result: %v %v", ok, err)
			}
			// The whole input has been read by now: it must be on disk.
			if files := dirEntries(t, dir); len(files) == 0 {
				t.Fatal("no spill file while reading the output")
			}
			rest, err := Drain(t.Context(), out)
			if err != nil {
				t.Fatal(err)
			}
			got := append([]bsoncore.Document{first}, rest...)
			if files := dirEntries(t, dir); len(files) != 0 {
				t.Fatalf("spill files left after the output was drained: %v", files)
			}
			if g, w := renderAll(got), renderAll(want); g != w {
				t.Fatalf("spilled result differs (%d vs %d docs):\n got %.600s\nwant %.600s", len(got), len(want), g, w)
			}
			if len(want) < 3 {
				t.Fatalf("suspiciously small result: %s", renderAll(want))
			}

			// Closing after one result removes the files too.
			out = must(p.Run(t.Context(), SliceSource(input), &Context{Now: testNow, MaxMemoryBytes: limit, AllowDiskUse: true, TempDir: dir}))
			if _, _, err := out.Next(t.Context()); err != nil {
				t.Fatal(err)
			}
			out.Close()
			if files := dirEntries(t, dir); len(files) != 0 {
				t.Fatalf("spill files left after Close: %v", files)
			}
		})
	}
}

// TestWindowSpillLargePartitionFile checks that a partition alone larger than the limit is
// kept in a file while it is processed (MongoDB's SpillableCache), not in memory.
func TestWindowSpillLargePartitionFile(t *testing.T) {
	input := spillInput(t, 3000, 2)
	p, err := Parse(parseDocs(t, `[{"$setWindowFields": {"partitionBy": "$p", "sortBy": {"x": 1}, "output": {"r": {"$documentNumber": {}}}}}]`), ParseContext{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := must(p.Run(t.Context(), SliceSource(input), &Context{MaxMemoryBytes: 20_000, AllowDiskUse: true, TempDir: dir}))
	defer out.Close()
	if _, _, err := out.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	var window, sorter int
	for _, f := range dirEntries(t, dir) {
		switch {
		case strings.HasPrefix(f, "humongo-window-"):
			window++
		case strings.HasPrefix(f, "humongo-sorter-"):
			sorter++
		}
	}
	if window != 1 || sorter != 1 {
		t.Fatalf("want one sorter file and one partition file, got %v", dirEntries(t, dir))
	}
	// Reading on into the second partition replaces the first partition's file.
	n := 1
	for {
		d, ok, err := out.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
		if n == 1501 {
			if got := expr.Field(d, "r").Int32(); got != 1 {
				t.Fatalf("document 1501 should start the second partition, r=%d", got)
			}
			var window int
			for _, f := range dirEntries(t, dir) {
				if strings.HasPrefix(f, "humongo-window-") {
					window++
				}
			}
			if window != 1 {
				t.Fatalf("partition files during the second partition: %v", dirEntries(t, dir))
			}
		}
	}
	if n != 3000 {
		t.Fatalf("got %d documents", n)
	}
}
