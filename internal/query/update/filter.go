package update

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// equalityFilter is the built-in Filter used when no matcher is plugged in: a conjunction of
// {path: value} (or {path: {$eq: value}}) equalities with the matcher's array semantics (a
// path that reaches an array matches if the array or one of its elements is equal). Anything
// else needs the real matcher and is rejected with NotImplemented at parse time.
type equalityFilter struct {
	preds []eqPred
}

type eqPred struct {
	path string
	want bsoncore.Value
}

func newEqualityFilter(q bsoncore.Document) (*equalityFilter, error) {
	elems, err := q.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid filter: %v", err)
	}
	f := &equalityFilter{}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if strings.HasPrefix(k, "$") {
			return nil, notImplementedFilter(q)
		}
		if d, ok := v.DocumentOK(); ok {
			if first, err := d.IndexErr(0); err == nil && strings.HasPrefix(first.Key(), "$") {
				n, _ := d.Elements()
				if first.Key() != "$eq" || len(n) != 1 {
					return nil, notImplementedFilter(q)
				}
				v = first.Value()
			}
		}
		if v.Type == bsoncore.TypeRegex {
			return nil, notImplementedFilter(q)
		}
		f.preds = append(f.preds, eqPred{path: k, want: v})
	}
	return f, nil
}

func notImplementedFilter(q bsoncore.Document) error {
	return mongoerr.Newf(mongoerr.NotImplemented,
		"the filter %s needs the query matcher (no FilterParser configured; only equality is built in)", formatDoc(q))
}

// Matches implements Filter.
func (f *equalityFilter) Matches(doc bsoncore.Document) (bool, error) {
	for _, p := range f.preds {
		found := false
		bsonutil.Walk(doc, p.path, func(v bsoncore.Value, _ bool) bool {
			if bsonutil.Compare(v, p.want) == 0 {
				found = true
				return false
			}
			if arr, ok := v.ArrayOK(); ok {
				vals, _ := arr.Values()
				for _, x := range vals {
					if bsonutil.Compare(x, p.want) == 0 {
						found = true
						return false
					}
				}
			}
			return true
		})
		if !found {
			return false, nil
		}
	}
	return true, nil
}
