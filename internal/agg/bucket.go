package agg

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// parseOutputAccs parses an "output" document of accumulators ($bucket, $bucketAuto).
func parseOutputAccs(v value, p *pctx, stageName string) ([]string, []*expr.AccSpec, error) {
	if v.Type == 0 {
		a, _ := expr.ParseAccumulator("$sum", expr.Int32(1), p.exprPC())
		return []string{"count"}, []*expr.AccSpec{a}, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, nil, mongoerr.Newf(mongoerr.Location40196, "The %s 'output' field must be an object", stageName)
	}
	els, err := expr.DocElems(d)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var accs []*expr.AccSpec
	for _, el := range els {
		ad, ok := el.Value().DocumentOK()
		if !ok {
			return nil, nil, mongoerr.Newf(mongoerr.Location40234, "The field '%s' must be an accumulator object", el.Key())
		}
		aels, err := expr.DocElems(ad)
		if err != nil || len(aels) == 0 || !strings.HasPrefix(aels[0].Key(), "$") {
			return nil, nil, mongoerr.Newf(mongoerr.Location40234, "The field '%s' must be an accumulator object", el.Key())
		}
		if len(aels) != 1 {
			return nil, nil, mongoerr.Newf(mongoerr.Location40238, "The field '%s' must specify one accumulator", el.Key())
		}
		a, err := expr.ParseAccumulator(aels[0].Key(), aels[0].Value(), p.exprPC())
		if err != nil {
			return nil, nil, err
		}
		names = append(names, el.Key())
		accs = append(accs, a)
	}
	return names, accs, nil
}

// parseGroupBy parses the groupBy of $bucket and $bucketAuto: a path or an operator
// expression (code and msg are the error for anything else).
func parseGroupBy(v value, p *pctx, code mongoerr.Code, msg string) (expr.Expression, error) {
	if v.Type != bsoncore.TypeString && !expr.IsOperatorDoc(v) {
		return nil, mongoerr.New(code, msg)
	}
	return p.parseExpr(v)
}

type bucketStage struct {
	raw        value
	groupBy    expr.Expression
	boundaries []value
	def        value
	fields     []string
	accs       []*expr.AccSpec
}

func parseBucket(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location40201, "Argument to $bucket stage must be an object")
	if err != nil {
		return nil, err
	}
	s := &bucketStage{raw: spec}
	var outV value
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "groupBy":
			if s.groupBy, err = parseGroupBy(v, p, mongoerr.Location40202, "The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression"); err != nil {
				return nil, err
			}
		case "boundaries":
			if v.Type != bsoncore.TypeArray {
				return nil, mongoerr.New(mongoerr.Location40200, "The $bucket 'boundaries' field must be an array")
			}
			if s.boundaries, err = expr.ArrayValues(v); err != nil {
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
		if expr.Compare(a, b, nil) >= 0 {
			return nil, mongoerr.New(mongoerr.Location40194, "The 'boundaries' option to $bucket must be sorted in ascending order")
		}
	}
	if s.def.Type != 0 {
		lo, hi := s.boundaries[0], s.boundaries[len(s.boundaries)-1]
		if bsonutil.CanonicalTypeOrder(s.def.Type) == bsonutil.CanonicalTypeOrder(lo.Type) && expr.Compare(s.def, lo, nil) >= 0 && expr.Compare(s.def, hi, nil) < 0 {
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
	// bucketOf is the _id of a document's bucket: the boundary starting it, or the default.
	bucketOf := func(ec *expr.EvalContext) (value, error) {
		v, err := s.groupBy.Eval(ec)
		if err != nil {
			return expr.Missing, err
		}
		i := -1
		if bsonutil.CanonicalTypeOrder(v.Type) == bsonutil.CanonicalTypeOrder(s.boundaries[0].Type) || v.Type == 0 {
			i, _ = slices.BinarySearchFunc(s.boundaries, v, func(b, v value) int {
				if expr.Compare(b, v, expr.ComparerOf(rc.coll)) <= 0 {
					return -1
				}
				return 1
			})
			i-- // the last boundary <= v
		}
		if v.Type != 0 && i >= 0 && i < len(s.boundaries)-1 {
			return s.boundaries[i], nil
		}
		if s.def.Type == 0 {
			return expr.Missing, mongoerr.Newf(mongoerr.Location40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return s.def, nil
	}
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		docs, err := groupAll(ctx, in, rc, "$bucket", s.accs, s.fields, bucketOf)
		if err != nil {
			return nil, err
		}
		// Buckets come out in boundary order, the default bucket last.
		slices.SortStableFunc(docs, func(a, b bsoncore.Document) int {
			ia, ib := expr.Field(a, "_id"), expr.Field(b, "_id")
			da, db := s.def.Type != 0 && expr.Compare(ia, s.def, expr.ComparerOf(rc.coll)) == 0, s.def.Type != 0 && expr.Compare(ib, s.def, expr.ComparerOf(rc.coll)) == 0
			switch {
			case da && !db:
				return 1
			case db && !da:
				return -1
			}
			return expr.Compare(ia, ib, expr.ComparerOf(rc.coll))
		})
		return docs, nil
	}), nil
}

type bucketAutoStage struct {
	raw     value
	groupBy expr.Expression
	n       int
	fields  []string
	accs    []*expr.AccSpec
	gran    string
	rounder rounder // nil without a granularity
}

func parseBucketAuto(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location40240, "The argument to $bucketAuto must be an object")
	if err != nil {
		return nil, err
	}
	s := &bucketAutoStage{raw: spec}
	var outV value
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "groupBy":
			if s.groupBy, err = parseGroupBy(v, p, mongoerr.Location40239, "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object"); err != nil {
				return nil, err
			}
		case "buckets":
			n, ok := bsonutil.ToInt64Exact(v)
			if !ok || !expr.IsNumber(v) || n <= 0 || n > math.MaxInt32 {
				return nil, mongoerr.New(mongoerr.Location40243, "The $bucketAuto 'buckets' field must be greater than 0")
			}
			s.n = int(n)
		case "output":
			outV = v
		case "granularity":
			g, ok := v.StringValueOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.Location40261, "The $bucketAuto 'granularity' field must be a string, but found type: %s", expr.TypeName(v))
			}
			if s.rounder = granularityRounders[g]; s.rounder == nil {
				return nil, mongoerr.Newf(mongoerr.Location40257, "Rounding granularity '%s' is not supported", g)
			}
			s.gran = g
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

// bucketItem is one input document of $bucketAuto with its groupBy value.
type bucketItem struct {
	k value
	d bsoncore.Document
}

// bucketInput is $bucketAuto's input sorted by groupBy value: in memory, or, above the memory
// limit with allowDiskUse, streamed back from the external sorter keyed by (KeyString of the
// collation key of the value, arrival order). Either way the buckets are then cut in one
// pass with one item of lookahead, so a spilled input is never held in memory.
type bucketInput struct {
	n     int64 // number of items
	items []bucketItem
	pos   int
	ext   *sorter.Sorter
	it    *sorter.Iterator
	peekd *bucketItem
}

func (s *bucketAutoStage) load(ctx context.Context, in Source, rc *runCtx, ec *expr.EvalContext) (bi *bucketInput, err error) {
	bi = &bucketInput{}
	owned := bi // a failing return sets bi to nil before the deferred cleanup runs
	defer func() {
		if err != nil {
			owned.close()
		}
	}()
	var mem int64
	var kb keystring.Builder
	add := func(it bucketItem) error {
		kb.Reset(keystring.AllAscending)
		kb.AppendValue(expr.CollKey(rc.coll, it.k))
		if err := kb.Err(); err != nil {
			return err
		}
		key := binary.BigEndian.AppendUint64(bytes.Clone(kb.Bytes()), uint64(bi.n))
		return bi.ext.Add(key, expr.DocOf("k", it.k, "d", expr.Doc(it.d)))
	}
	err = forEach(ctx, in, func(d bsoncore.Document) error {
		ec.Root, ec.Current = d, nil
		v, err := s.groupBy.Eval(ec)
		if err != nil {
			return err
		}
		if s.rounder != nil {
			if err := checkGranularityKey(v); err != nil {
				return err
			}
		}
		it := bucketItem{expr.OrNull(v), d}
		if bi.ext != nil {
			if err := add(it); err != nil {
				return err
			}
			bi.n++
			return nil
		}
		bi.items = append(bi.items, it)
		bi.n++
		mem += int64(len(d)) + expr.ValueSize(it.k)
		if mem <= rc.maxMem() {
			return nil
		}
		if bi.ext, err = rc.spillSorter("$bucketAuto", nil); err != nil {
			return err
		}
		items := bi.items
		bi.items, bi.n = nil, 0
		for _, it := range items {
			if err := add(it); err != nil {
				return err
			}
			bi.n++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if bi.ext != nil {
		if bi.it, err = bi.ext.Done(); err != nil {
			return nil, err
		}
		return bi, nil
	}
	slices.SortStableFunc(bi.items, func(a, b bucketItem) int { return expr.Compare(a.k, b.k, expr.ComparerOf(rc.coll)) })
	return bi, nil
}

// peek returns the next item without consuming it.
func (bi *bucketInput) peek() (bucketItem, bool, error) {
	if bi.ext == nil {
		if bi.pos >= len(bi.items) {
			return bucketItem{}, false, nil
		}
		return bi.items[bi.pos], true, nil
	}
	if bi.peekd == nil {
		if !bi.it.Next() {
			return bucketItem{}, false, bi.it.Err()
		}
		rec := bsoncore.Document(bytes.Clone(bi.it.Value()))
		d, ok := expr.Field(rec, "d").DocumentOK()
		if !ok {
			return bucketItem{}, false, mongoerr.New(mongoerr.InternalError, "corrupt $bucketAuto spill record")
		}
		bi.peekd = &bucketItem{k: expr.Field(rec, "k"), d: d}
	}
	return *bi.peekd, true, nil
}

// take consumes the item peek returned.
func (bi *bucketInput) take() {
	if bi.ext == nil {
		bi.pos++
		return
	}
	bi.peekd = nil
}

func (bi *bucketInput) close() {
	if bi.ext != nil {
		bi.ext.Close()
		bi.ext, bi.it = nil, nil
	}
	bi.items = nil
}

func (s *bucketAutoStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	// Buckets stream out as they are cut, so a spilled input is read from the sorter while
	// the output is consumed.
	return genSource(in, func(g *gen, emit func(bsoncore.Document) bool) error {
		ec := rc.evalCtx(nil)
		bi, err := s.load(g.ctx, in, rc, ec)
		if err != nil {
			return err
		}
		defer bi.close()
		approx := int64(math.Round(float64(bi.n) / float64(s.n)))
		if approx < 1 {
			approx = 1
		}
		var prevMax value
		for b := 0; b < s.n; b++ {
			first, ok, err := bi.peek()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			accs := make([]expr.Accumulator, len(s.accs))
			for j, a := range s.accs {
				accs[j] = a.New()
			}
			var last value
			take := func(it bucketItem) error {
				bi.take()
				last = it.k
				ec.Root, ec.Current = it.d, nil
				for _, a := range accs {
					if _, err := a.Add(ec); err != nil {
						return err
					}
				}
				return nil
			}
			// The first approx items (all the rest in the last bucket), then every item that
			// belongs with them.
			var next bucketItem
			more := true
			for cnt := int64(0); more && (b == s.n-1 || cnt < approx); cnt++ {
				if cnt > 0 {
					if next, more, err = bi.peek(); err != nil {
						return err
					}
					if !more {
						break
					}
				} else {
					next = first
				}
				if err := take(next); err != nil {
					return err
				}
			}
			if next, more, err = bi.peek(); err != nil {
				return err
			}
			var maxV value
			if s.rounder == nil {
				// Equal values never straddle two buckets.
				for more && expr.Compare(next.k, last, expr.ComparerOf(rc.coll)) == 0 {
					if err := take(next); err != nil {
						return err
					}
					if next, more, err = bi.peek(); err != nil {
						return err
					}
				}
				maxV = last
				if more {
					maxV = next.k
				}
			} else {
				// The rounded-up boundary is exclusive, so every following value below it
				// belongs in this bucket too; this is how buckets whose rounded boundaries
				// would collide get merged.
				bound, err := s.rounder.roundUp(last)
				if err != nil {
					return err
				}
				for more && expr.Compare(bound, next.k, nil) > 0 {
					if err := take(next); err != nil {
						return err
					}
					if next, more, err = bi.peek(); err != nil {
						return err
					}
				}
				maxV = bound
				// A bucket holding only zeros rounds up to 0 (0 is in no series). MongoDB then
				// uses the next bucket's rounded-down min, keeping max exclusive / min inclusive.
				if expr.ToFloat(bound) == 0 && more {
					if maxV, err = s.rounder.roundDown(next.k); err != nil {
						return err
					}
				}
			}
			minV := first.k
			if s.rounder != nil {
				// The first bucket's min is rounded down; every later one starts at the
				// previous bucket's max, so the boundaries tile the value range.
				if b == 0 {
					if minV, err = s.rounder.roundDown(minV); err != nil {
						return err
					}
				} else {
					minV = prevMax
				}
				prevMax = maxV
			}
			doc := expr.NewDoc()
			doc.Add("_id", expr.Doc(expr.DocOf("min", minV, "max", maxV)))
			for j, a := range accs {
				v, err := a.Result()
				if err != nil {
					return err
				}
				doc.Add(s.fields[j], v)
			}
			if !emit(doc.Done()) {
				return nil
			}
			if err := g.ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	}), nil
}

var _ = expr.Expression(nil)

// ---- $bucketAuto granularity (preferred number series) ----

// rounder rounds non-negative numbers onto a preferred number series. Both directions are
// strict (the result is never equal to a non-zero input) and 0 rounds to itself, because 0
// belongs to no series; this mirrors MongoDB's GranularityRounder.
type rounder interface {
	roundUp(v value) (value, error)
	roundDown(v value) (value, error)
}

// checkGranularityKey rejects groupBy values that cannot be rounded onto a series.
func checkGranularityKey(v value) error {
	if !expr.IsNumber(v) {
		return mongoerr.Newf(mongoerr.Location40258, "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: %s", expr.TypeName(v))
	}
	if f := expr.ToFloat(v); !(f >= 0) { // NaN fails too, as in MongoDB
		return mongoerr.Newf(mongoerr.Location40260, "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a negative value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return nil
}

// granularityRounders maps each supported granularity name to its rounder. The series
// are one decade of MongoDB's tables, scaled to integers (e.g. R5 1.6 is stored as 16) so
// that scaling by powers of ten multiplies exact integers; values in other decades are
// reached by multiplying or dividing by 10, exactly as MongoDB does.
var granularityRounders = map[string]rounder{
	"R5":  seriesRounder{10, 16, 25, 40, 63},
	"R10": seriesRounder{100, 125, 160, 200, 250, 315, 400, 500, 630, 800},
	"R20": seriesRounder{100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
		315, 355, 400, 450, 500, 560, 630, 710, 800, 900},
	// R40 and R80 are MongoDB's tables verbatim, not the ISO 3 ones: MongoDB's R40 lacks
	// 335 and its R80 holds only the 40 values R80 adds to R40, and results must match it.
	"R40": seriesRounder{100, 106, 112, 118, 125, 132, 140, 150, 160, 170, 180, 190, 200,
		212, 224, 236, 250, 265, 280, 300, 315, 355, 375, 400, 425, 450,
		475, 500, 530, 560, 600, 630, 670, 710, 750, 800, 850, 900, 950},
	"R80": seriesRounder{103, 109, 115, 122, 128, 136, 145, 155, 165, 175, 185, 195, 206, 218,
		230, 243, 258, 272, 290, 307, 325, 345, 365, 387, 412, 437, 462, 487,
		515, 545, 575, 615, 650, 690, 730, 775, 825, 875, 925, 975},
	"1-2-5": seriesRounder{10, 20, 50},
	"E6":    seriesRounder{10, 15, 22, 33, 47, 68},
	"E12":   seriesRounder{10, 12, 15, 18, 22, 27, 33, 39, 47, 56, 68, 82},
	"E24": seriesRounder{10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30,
		33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91},
	"E48": seriesRounder{100, 105, 110, 115, 121, 127, 133, 140, 147, 154, 162, 169,
		178, 187, 196, 205, 215, 226, 237, 249, 261, 274, 287, 301,
		316, 332, 348, 365, 383, 402, 422, 442, 464, 487, 511, 536,
		562, 590, 619, 649, 681, 715, 750, 787, 825, 866, 909, 953},
	"E96": seriesRounder{100, 102, 105, 107, 110, 113, 115, 118, 121, 124, 127, 130, 133, 137,
		140, 143, 147, 150, 154, 158, 162, 165, 169, 174, 178, 182, 187, 191,
		196, 200, 205, 210, 215, 221, 226, 232, 237, 243, 249, 255, 261, 267,
		274, 280, 287, 294, 301, 309, 316, 324, 332, 340, 348, 357, 365, 374,
		383, 392, 402, 412, 422, 432, 442, 453, 464, 475, 487, 499, 511, 523,
		536, 549, 562, 576, 590, 604, 619, 634, 649, 665, 681, 698, 715, 732,
		750, 768, 787, 806, 825, 845, 866, 887, 909, 931, 953, 976},
	"E192": seriesRounder{100, 101, 102, 104, 105, 106, 107, 109, 110, 111, 113, 114, 115, 117,
		118, 120, 121, 123, 124, 126, 127, 129, 130, 132, 133, 135, 137, 138, 140, 142, 143,
		145, 147, 149, 150, 152, 154, 156, 158, 160, 162, 164, 165, 167, 169, 172, 174, 176,
		178, 180, 182, 184, 187, 189, 191, 193, 196, 198, 200, 203, 205, 208, 210, 213, 215,
		218, 221, 223, 226, 229, 232, 234, 237, 240, 243, 246, 249, 252, 255, 258, 261, 264,
		267, 271, 274, 277, 280, 284, 287, 291, 294, 298, 301, 305, 309, 312, 316, 320, 324,
		328, 332, 336, 340, 344, 348, 352, 357, 361, 365, 370, 374, 379, 383, 388, 392, 397,
		402, 407, 412, 417, 422, 427, 432, 437, 442, 448, 453, 459, 464, 470, 475, 481, 487,
		493, 499, 505, 511, 517, 523, 530, 536, 542, 549, 556, 562, 569, 576, 583, 590, 597,
		604, 612, 619, 626, 634, 642, 649, 657, 665, 673, 681, 690, 698, 706, 715, 723, 732,
		741, 750, 759, 768, 777, 787, 796, 806, 816, 825, 835, 845, 856, 866, 876, 887, 898,
		909, 920, 931, 942, 953, 965, 976, 988},
	"POWERSOF2": powersOf2Rounder{},
}

// seriesRounder rounds onto one decade of a preferred number series repeated over all
// powers of ten. Non-decimal inputs give doubles; decimals give decimals.
type seriesRounder []int64

func (r seriesRounder) roundUp(v value) (value, error) {
	if err := checkGranularityKey(v); err != nil {
		return expr.Missing, err
	}
	if expr.ToFloat(v) == 0 {
		return v, nil
	}
	if v.Type == bsoncore.TypeDecimal128 { // exact, even beyond the double range
		return r.decRound(v, true)
	}
	if math.IsInf(expr.ToFloat(v), 1) {
		return v, nil
	}
	x := expr.ToFloat(v)
	first, last := float64(r[0]), float64(r[len(r)-1])
	m := 1.0
	for x >= last*m {
		m *= 10
	}
	for x < first*m {
		prev := first * m
		m /= 10
		if m == 0 {
			break
		}
		if x >= last*m { // between this decade's top and the next decade's first value
			return expr.Double(prev), nil
		}
	}
	for _, s := range r {
		if x < float64(s)*m {
			return expr.Double(float64(s) * m), nil
		}
	}
	return expr.Double(first * m * 10), nil
}

func (r seriesRounder) roundDown(v value) (value, error) {
	if err := checkGranularityKey(v); err != nil {
		return expr.Missing, err
	}
	if expr.ToFloat(v) == 0 {
		return v, nil
	}
	if v.Type == bsoncore.TypeDecimal128 { // exact, even beyond the double range
		return r.decRound(v, false)
	}
	if math.IsInf(expr.ToFloat(v), 1) {
		return v, nil
	}
	x := expr.ToFloat(v)
	first, last := float64(r[0]), float64(r[len(r)-1])
	m := 1.0
	for x <= first*m && m > 0 {
		m /= 10
	}
	for x > last*m {
		prev := last * m
		m *= 10
		if x <= first*m { // between the previous decade's top and this decade's first value
			return expr.Double(prev), nil
		}
	}
	for i := len(r) - 1; i >= 0; i-- {
		if float64(r[i])*m < x {
			return expr.Double(float64(r[i]) * m), nil
		}
	}
	return expr.Double(0), nil // only reached for inputs below the smallest double step
}

// decRound rounds a positive finite decimal exactly. With x in [10^d, 10^(d+1)) the answer
// is r[i]×10^k for k one decade below, at, or above x's own, so those candidates (ascending,
// as the decades do not overlap) always contain it.
func (r seriesRounder) decRound(v value, up bool) (value, error) {
	x, err := expr.ToDecimal(v)
	if err != nil {
		return expr.Missing, err
	}
	if x.Form != apd.Finite {
		return v, nil
	}
	d := x.Exponent + int32(x.NumDigits()) - 1
	k := d - int32(len(strconv.FormatInt(r[0], 10))) + 1
	if up {
		for kk := k - 1; kk <= k+1; kk++ {
			for _, s := range r {
				if c := apd.New(s, kk); c.Cmp(x) > 0 {
					return expr.FromDecimal(c)
				}
			}
		}
		return expr.FromDecimal(apd.New(r[0], k+2))
	}
	for kk := k + 1; kk >= k-1; kk-- {
		for i := len(r) - 1; i >= 0; i-- {
			if c := apd.New(r[i], kk); c.Cmp(x) < 0 {
				return expr.FromDecimal(c)
			}
		}
	}
	return expr.FromDecimal(apd.New(r[len(r)-1], k-2))
}

// powersOf2Rounder rounds to powers of two via $pow(2, exp), so the result type follows
// $pow's rules as in MongoDB (an int for whole powers, a double below 1, a decimal for decimals).
type powersOf2Rounder struct{}

func (powersOf2Rounder) roundUp(v value) (value, error) { return powersOf2(v, true) }

func (powersOf2Rounder) roundDown(v value) (value, error) { return powersOf2(v, false) }

func powersOf2(v value, up bool) (value, error) {
	if err := checkGranularityKey(v); err != nil {
		return expr.Missing, err
	}
	x := expr.ToFloat(v)
	if x == 0 || math.IsInf(x, 1) {
		return v, nil
	}
	var exp int64
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		n, _ := bsonutil.ToInt64Exact(v)
		l := int64(bits.Len64(uint64(n)))
		switch {
		case up:
			exp = l
		case n&(n-1) == 0: // a power of two rounds down to the one below
			exp = l - 2
		default:
			exp = l - 1
		}
		return expr.Pow([]value{expr.Int32(2), expr.Int32(int32(exp))})
	}
	if up {
		exp = int64(math.Floor(math.Log2(x)) + 1)
	} else {
		exp = int64(math.Ceil(math.Log2(x)) - 1)
	}
	if v.Type == bsoncore.TypeDecimal128 {
		e, err := expr.FromDecimal(apd.New(exp, 0))
		if err != nil {
			return expr.Missing, err
		}
		return expr.Pow([]value{expr.Int32(2), e})
	}
	return expr.Pow([]value{expr.Int32(2), expr.Int32(int32(exp))})
}
