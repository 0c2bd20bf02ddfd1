package agg

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// parseDocs parses an extended-JSON array of documents.
func parseDocs(t testing.TB, s string) []bsoncore.Document {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"a":`+s+`}`), false, &raw); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	vals, err := bsoncore.Document(raw).Lookup("a").Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bsoncore.Document, len(vals))
	for i, v := range vals {
		out[i] = v.Document()
	}
	return out
}

func render(d bsoncore.Document) string {
	b, err := bson.MarshalExtJSON(bson.Raw(d), false, false)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func renderAll(ds []bsoncore.Document) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = render(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// memResolver is an in-memory CollectionResolver for joins and $out/$merge.
type memResolver struct {
	mu    sync.Mutex
	colls map[string][]bsoncore.Document
}

func (r *memResolver) Open(_ context.Context, db, coll string) (Source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return SliceSource(append([]bsoncore.Document(nil), r.colls[db+"."+coll]...)), nil
}

func (r *memResolver) OpenWriter(_ context.Context, db, coll string, replace bool) (Writer, error) {
	w := &memWriter{r: r, ns: db + "." + coll, replace: replace}
	if !replace {
		r.mu.Lock()
		w.docs = append(w.docs, r.colls[w.ns]...)
		r.mu.Unlock()
	}
	return w, nil
}

type memWriter struct {
	r       *memResolver
	ns      string
	replace bool
	docs    []bsoncore.Document
}

func (w *memWriter) find(filter bsoncore.Document) int {
	els, _ := filter.Elements()
	for i, d := range w.docs {
		ok := true
		for _, el := range els {
			v, found := bsonutil.Lookup(d, el.Key())
			if !found || bsonutil.Compare(v, el.Value()) != 0 {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

func (w *memWriter) FindOne(_ context.Context, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	if i := w.find(filter); i >= 0 {
		return w.docs[i], true, nil
	}
	return nil, false, nil
}
func (w *memWriter) Insert(_ context.Context, d bsoncore.Document) error {
	if id := expr.Field(d, "_id"); id.Type != 0 && w.find(expr.DocOf("_id", id)) >= 0 {
		return mongoerr.New(mongoerr.DuplicateKey, "duplicate _id")
	}
	w.docs = append(w.docs, d)
	return nil
}
func (w *memWriter) Replace(_ context.Context, filter, d bsoncore.Document) error {
	if i := w.find(filter); i >= 0 {
		w.docs[i] = d
	}
	return nil
}
func (w *memWriter) Commit(context.Context) error {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	w.r.colls[w.ns] = w.docs
	return nil
}
func (w *memWriter) Abort(context.Context) {}

var testNow = time.Date(2024, 3, 15, 10, 30, 0, 0, time.UTC)

// runPipeline runs pipeline (extended JSON array) over input.
func runPipeline(t testing.TB, res *memResolver, input, pipeline string) ([]bsoncore.Document, error) {
	t.Helper()
	stages := parseDocs(t, pipeline)
	p, err := Parse(stages, ParseContext{DB: "test"})
	if err != nil {
		return nil, err
	}
	var in Source
	if input != "" {
		in = SliceSource(parseDocs(t, input))
	}
	ac := &Context{Now: testNow, Resolver: res}
	out, err := p.Run(context.Background(), in, ac)
	if err != nil {
		return nil, err
	}
	return Drain(context.Background(), out)
}

type pcase struct {
	name      string
	input     string
	pipeline  string
	want      string // extended JSON array, or "" with code set
	code      mongoerr.Code
	unordered bool
}

func runCases(t *testing.T, res *memResolver, cases []pcase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runPipeline(t, res, c.input, c.pipeline)
			if c.code != 0 {
				if mongoerr.CodeOf(err) != c.code {
					t.Fatalf("want error code %d, got %v (result %s)", c.code, err, renderAll(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := parseDocs(t, c.want)
			g, w := renderAll(got), renderAll(want)
			if c.unordered {
				g, w = sortedRender(got), sortedRender(want)
			}
			if g != w {
				t.Fatalf("pipeline %s\n got: %s\nwant: %s", c.pipeline, g, w)
			}
		})
	}
}

func sortedRender(ds []bsoncore.Document) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = render(d)
	}
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && parts[j] < parts[j-1]; j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func codeOf(err error) int { return int(mongoerr.CodeOf(err)) }
