package agg

import (
	"context"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// parseOutputAccs parses an "output" document of accumulators ($bucket, $bucketAuto).
func parseOutputAccs(v value, p *pctx, stageName string) ([]string, []*accSpec, error) {
	if v.Type == 0 {
		a, _ := parseAccumulator("$sum", i32V(1), p)
		return []string{"count"}, []*accSpec{a}, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, nil, mongoerr.Newf(mongoerr.Location40196, "The %s 'output' field must be an object", stageName)
	}
	els, err := docElems(d)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var accs []*accSpec
	for _, el := range els {
		ad, ok := el.Value().DocumentOK()
		if !ok {
			return nil, nil, mongoerr.Newf(mongoerr.Location40234, "The field '%s' must be an accumulator object", el.Key())
		}
		aels, err := docElems(ad)
		if err != nil || len(aels) != 1 {
			return nil, nil, mongoerr.Newf(mongoerr.Location40238, "The field '%s' must specify one accumulator", el.Key())
		}
		a, err := parseAccumulator(aels[0].Key(), aels[0].Value(), p)
		if err != nil {
			return nil, nil, err
		}
		names = append(names, el.Key())
		accs = append(accs, a)
	}
	return names, accs, nil
}

type bucketStage struct {
	raw        value
	groupBy    expr
	boundaries []value
	def        value
	fields     []string
	accs       []*accSpec
}

func parseBucket(spec value, p *pctx) (stage, error) {
	d, ok := spec.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location40201, "Argument to $bucket stage must be an object")
	}
	els, err := docElems(d)
	if err != nil {
		return nil, err
	}
	s := &bucketStage{raw: spec}
	var outV value
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "groupBy":
			if v.Type != bsoncore.TypeString && !isOperatorDoc(v) {
				return nil, mongoerr.New(mongoerr.Location40202, "The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression")
			}
			if s.groupBy, err = p.parseExpr(v); err != nil {
				return nil, err
			}
		case "boundaries":
			if v.Type != bsoncore.TypeArray {
				return nil, mongoerr.New(mongoerr.Location40200, "The $bucket 'boundaries' field must be an array")
			}
			if s.boundaries, err = arrValues(v); err != nil {
				return nil, err
			}
		case "default":
			s.def = v
		case "output":
			outV = v
		default:
			return nil, mongoerr.Newf(mongoerr.Location40197, "Unrecognized option to $bucket: %s.", el.Key())
		}
	}
	if s.groupBy == nil || s.boundaries == nil {
		return nil, mongoerr.New(mongoerr.Location40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.")
	}
	if len(s.boundaries) < 2 {
		return nil, mongoerr.New(mongoerr.Location40192, "The $bucket 'boundaries' field must have at least 2 values")
	}
	for i := 1; i < len(s.boundaries); i++ {
		a, b := s.boundaries[i-1], s.boundaries[i]
		if bsonutil.CanonicalTypeOrder(a.Type) != bsonutil.CanonicalTypeOrder(b.Type) {
			return nil, mongoerr.New(mongoerr.Location40193, "All values in the 'boundaries' option to $bucket must have the same type.")
		}
		if cmpV(a, b) >= 0 {
			return nil, mongoerr.New(mongoerr.Location40194, "The 'boundaries' option to $bucket must be sorted in ascending order")
		}
	}
	if s.def.Type != 0 {
		lo, hi := s.boundaries[0], s.boundaries[len(s.boundaries)-1]
		if bsonutil.CanonicalTypeOrder(s.def.Type) == bsonutil.CanonicalTypeOrder(lo.Type) && cmpV(s.def, lo) >= 0 && cmpV(s.def, hi) < 0 {
			return nil, mongoerr.New(mongoerr.Location40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.")
		}
	}
	if s.fields, s.accs, err = parseOutputAccs(outV, p, "$bucket"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *bucketStage) name() string { return "$bucket" }
func (s *bucketStage) spec() value  { return s.raw }
func (s *bucketStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		gr := newGrouper(s.accs)
		defer gr.close()
		ec := rc.evalCtx(nil)
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			ec.Root, ec.Current = d, nil
			v, err := s.groupBy.Eval(ec)
			if err != nil {
				return nil, err
			}
			var id value
			i := -1
			if bsonutil.CanonicalTypeOrder(v.Type) == bsonutil.CanonicalTypeOrder(s.boundaries[0].Type) || v.Type == 0 {
				i, _ = slices.BinarySearchFunc(s.boundaries, v, func(b, v value) int {
					if cmpC(b, v, collOf(rc.coll)) <= 0 {
						return -1
					}
					return 1
				})
				i-- // the last boundary <= v
			}
			if v.Type != 0 && i >= 0 && i < len(s.boundaries)-1 {
				id = s.boundaries[i]
			} else {
				if s.def.Type == 0 {
					return nil, mongoerr.Newf(mongoerr.Location40066, "$switch could not find a matching branch for an input, and no default was specified.")
				}
				id = s.def
			}
			if err := gr.add(id, ec, rc, "$bucket"); err != nil {
				return nil, err
			}
		}
		docs, err := gr.output(s.fields, "_id", ec)
		if err != nil {
			return nil, err
		}
		// Buckets come out in boundary order, the default bucket last.
		slices.SortStableFunc(docs, func(a, b bsoncore.Document) int {
			ia, ib := field(a, "_id"), field(b, "_id")
			da, db := s.def.Type != 0 && cmpC(ia, s.def, collOf(rc.coll)) == 0, s.def.Type != 0 && cmpC(ib, s.def, collOf(rc.coll)) == 0
			switch {
			case da && !db:
				return 1
			case db && !da:
				return -1
			}
			return cmpC(ia, ib, collOf(rc.coll))
		})
		return docs, nil
	}), nil
}

type bucketAutoStage struct {
	raw     value
	groupBy expr
	n       int
	fields  []string
	accs    []*accSpec
	gran    string
}

func parseBucketAuto(spec value, p *pctx) (stage, error) {
	d, ok := spec.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location40240, "The argument to $bucketAuto must be an object")
	}
	els, err := docElems(d)
	if err != nil {
		return nil, err
	}
	s := &bucketAutoStage{raw: spec}
	var outV value
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "groupBy":
			if v.Type != bsoncore.TypeString && !isOperatorDoc(v) {
				return nil, mongoerr.New(mongoerr.Location40239, "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object")
			}
			if s.groupBy, err = p.parseExpr(v); err != nil {
				return nil, err
			}
		case "buckets":
			n, ok := bsonutil.ToInt64Exact(v)
			if !ok || !isNumber(v) || n <= 0 || n > math.MaxInt32 {
				return nil, mongoerr.New(mongoerr.Location40243, "The $bucketAuto 'buckets' field must be greater than 0")
			}
			s.n = int(n)
		case "output":
			outV = v
		case "granularity":
			s.gran, _ = v.StringValueOK()
			if s.gran != "" {
				return nil, mongoerr.Newf(mongoerr.Location40257, "Rounding granularity '%s' is not supported", s.gran)
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40245, "Unrecognized option to $bucketAuto: %s.", el.Key())
		}
	}
	if s.groupBy == nil || s.n == 0 {
		return nil, mongoerr.New(mongoerr.Location40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified")
	}
	if s.fields, s.accs, err = parseOutputAccs(outV, p, "$bucketAuto"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *bucketAutoStage) name() string { return "$bucketAuto" }
func (s *bucketAutoStage) spec() value  { return s.raw }
func (s *bucketAutoStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	type item struct {
		k value
		d bsoncore.Document
	}
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		var items []item
		var mem int64
		ec := rc.evalCtx(nil)
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			ec.Root, ec.Current = d, nil
			v, err := s.groupBy.Eval(ec)
			if err != nil {
				return nil, err
			}
			if v.Type == 0 {
				v = nullV
			}
			items = append(items, item{v, d})
			mem += int64(len(d)) + valueSize(v)
			if mem > rc.maxMem() && !rc.ac.AllowDiskUse {
				return nil, errMemory("$bucketAuto")
			}
		}
		slices.SortStableFunc(items, func(a, b item) int { return cmpC(a.k, b.k, collOf(rc.coll)) })
		var out []bsoncore.Document
		approx := int(math.Round(float64(len(items)) / float64(s.n)))
		if approx < 1 {
			approx = 1
		}
		i := 0
		for b := 0; i < len(items) && b < s.n; b++ {
			start := i
			end := i + approx
			if b == s.n-1 || end > len(items) {
				end = len(items)
			}
			for end < len(items) && cmpC(items[end].k, items[end-1].k, collOf(rc.coll)) == 0 {
				end++
			}
			accs := make([]accumulator, len(s.accs))
			for j, a := range s.accs {
				accs[j] = a.newAcc()
			}
			for _, it := range items[start:end] {
				ec.Root, ec.Current = it.d, nil
				for _, a := range accs {
					if _, err := a.add(ec); err != nil {
						return nil, err
					}
				}
			}
			maxV := items[end-1].k
			if end < len(items) {
				maxV = items[end].k
			}
			doc := newDoc()
			doc.add("_id", docV(docOf("min", items[start].k, "max", maxV)))
			for j, a := range accs {
				v, err := a.result()
				if err != nil {
					return nil, err
				}
				doc.add(s.fields[j], v)
			}
			out = append(out, doc.done())
			i = end
		}
		return out, nil
	}), nil
}

var _ = query.Expression(nil)
