package update

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// UpsertSeed builds the document an upsert starts from when no document matched: the
// query's equality predicates ({a: 1}, {a: {$eq: 1}}, also inside $and), with dotted paths
// creating embedded documents, _id first, other fields in path order. Operators other than
// $eq, regexes, and $or/$nor/$expr contribute nothing. Two equalities on the same path, or on
// a path and its prefix, cannot both be satisfied by one document: NotSingleValueField.
func UpsertSeed(query bsoncore.Document) (bsoncore.Document, error) {
	query, err := checkBSON(query, "query")
	if err != nil {
		return nil, err
	}
	var eqs []seedEq
	if err := collectEqualities(query, &eqs, 0); err != nil {
		return nil, err
	}
	for i := range eqs {
		for j := i + 1; j < len(eqs); j++ {
			a, b := eqs[i].path, eqs[j].path
			switch {
			case a == b:
				return nil, mongoerr.Newf(mongoerr.NotSingleValueField,
					"cannot infer query fields to set, path '%s' is matched twice", a)
			case strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+"."):
				return nil, mongoerr.Newf(mongoerr.NotSingleValueField,
					"cannot infer query fields to set, both paths '%s' and '%s' are matched", b, a)
			}
		}
	}
	u := &Update{root: &node{}}
	p := &parser{u: u}
	for _, e := range eqs {
		parts := strings.Split(e.path, ".")
		if err := p.insert(parts, &leaf{op: opSet, arg: e.val, path: e.path, name: parts[len(parts)-1]}); err != nil {
			return nil, err
		}
	}
	doc, _, err := u.Apply(emptyDoc, ApplyContext{IsInsert: true})
	if err != nil {
		return nil, err
	}
	return doc, nil
}

type seedEq struct {
	path string
	val  bsoncore.Value
}

func collectEqualities(q bsoncore.Document, out *[]seedEq, depth int) error {
	if depth > 100 {
		return mongoerr.New(mongoerr.BadValue, "query is nested too deeply")
	}
	elems, _ := q.Elements()
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if k == "$and" {
			arr, ok := v.ArrayOK()
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "$and must be an array")
			}
			vals, _ := arr.Values()
			for _, x := range vals {
				d, ok := x.DocumentOK()
				if !ok {
					return mongoerr.New(mongoerr.BadValue, "$and/$or/$nor entries need to be full objects")
				}
				if err := collectEqualities(d, out, depth+1); err != nil {
					return err
				}
			}
			continue
		}
		if strings.HasPrefix(k, "$") {
			continue
		}
		if _, err := splitUpdatePath(k, false); err != nil {
			// Paths an update could not create (positional, empty parts) seed nothing.
			continue
		}
		if v.Type == bsoncore.TypeRegex {
			continue
		}
		if d, ok := v.DocumentOK(); ok {
			if first, err := d.IndexErr(0); err == nil && strings.HasPrefix(first.Key(), "$") {
				if eq, err := d.LookupErr("$eq"); err == nil && eq.Type != bsoncore.TypeRegex {
					*out = append(*out, seedEq{path: k, val: eq})
				}
				continue
			}
		}
		*out = append(*out, seedEq{path: k, val: v})
	}
	return nil
}
