package expr

import (
	"bytes"
	"math"
	"slices"
	"sort"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
)

// Accumulator folds the documents of one group (or one window).
type Accumulator interface {
	// Add folds the document in ec; it returns the growth of the memory it holds.
	Add(ec *EvalContext) (int64, error)
	Result() (value, error)
}

// AccSpec is a parsed accumulator ({$op: arg}); New makes one per group.
type AccSpec struct {
	op  string
	raw value
	New func() Accumulator
}

// ParseAccumulator parses {$op: arg} for $group, $bucket and $setWindowFields.
func ParseAccumulator(op string, arg value, pc *ParseContext) (*AccSpec, error) {
	simple := func(mk func(x expr) Accumulator) (*AccSpec, error) {
		if arg.Type == bsoncore.TypeArray && op != "$push" && op != "$addToSet" {
			return nil, mongoerr.Newf(mongoerr.Location40237, "The %s accumulator is a unary operator", op)
		}
		x, err := Parse(arg, pc)
		if err != nil {
			return nil, err
		}
		return &AccSpec{op: op, raw: arg, New: func() Accumulator { return mk(x) }}, nil
	}
	switch op {
	case "$sum":
		return simple(func(x expr) Accumulator { return &sumAcc{x: x} })
	case "$avg":
		return simple(func(x expr) Accumulator { return &sumAcc{x: x, avg: true} })
	case "$min":
		return simple(func(x expr) Accumulator { return &minMaxAcc{x: x, sign: -1} })
	case "$max":
		return simple(func(x expr) Accumulator { return &minMaxAcc{x: x, sign: 1} })
	case "$first":
		return simple(func(x expr) Accumulator { return &firstLastAcc{x: x, first: true} })
	case "$last":
		return simple(func(x expr) Accumulator { return &firstLastAcc{x: x} })
	case "$push":
		return simple(func(x expr) Accumulator { return &pushAcc{x: x} })
	case "$addToSet":
		return simple(func(x expr) Accumulator { return &pushAcc{x: x, set: map[string]bool{}} })
	case "$stdDevPop":
		return simple(func(x expr) Accumulator { return &stdDevAcc{x: x} })
	case "$stdDevSamp":
		return simple(func(x expr) Accumulator { return &stdDevAcc{x: x, samp: true} })
	case "$mergeObjects":
		return simple(func(x expr) Accumulator { return &mergeAcc{x: x} })
	case "$count":
		d, ok := arg.DocumentOK()
		if !ok || len(d) != 5 {
			return nil, mongoerr.New(mongoerr.Location40237, "$count takes no arguments, i.e. $count:{}")
		}
		one := Expression(constX{Int32(1)})
		return &AccSpec{op: op, raw: arg, New: func() Accumulator { return &sumAcc{x: one} }}, nil
	case "$top", "$bottom", "$topN", "$bottomN":
		return parseTopBottom(op, arg, pc)
	case "$firstN", "$lastN", "$maxN", "$minN":
		return parseNAcc(op, arg, pc)
	case "$median", "$percentile":
		return parsePercentile(op, arg, pc)
	}
	return nil, mongoerr.Newf(mongoerr.Location15952, "unknown group operator '%s'", op)
}

// constX is a constant expression built by this package.
type constX struct{ v value }

func (c constX) Eval(*EvalContext) (value, error) { return c.v, nil }

// ---- $sum / $avg ----

// numSum adds numbers with MongoDB's widening: int32 → int64 → double → decimal, integer
// overflow promoting to double.
type numSum struct {
	kind  int // 0 int32, 1 int64, 2 double, 3 decimal
	i     int64
	f     float64
	dec   *apd.Decimal
	count int64
}

func (s *numSum) add(v value) error {
	s.count++
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		var n int64
		if v.Type == bsoncore.TypeInt32 {
			n = int64(v.Int32())
		} else {
			s.kind = max(s.kind, 1)
			n = v.Int64()
		}
		if s.kind >= 2 {
			s.f += float64(n)
			if s.kind == 3 {
				return s.addDec(v)
			}
			return nil
		}
		r := s.i + n
		if (s.i >= 0) == (n >= 0) && (r >= 0) != (s.i >= 0) {
			s.kind, s.f = 2, float64(s.i)+float64(n)
			return nil
		}
		s.i = r
		if s.kind == 0 && (r > math.MaxInt32 || r < math.MinInt32) {
			s.kind = 1
		}
	case bsoncore.TypeDouble:
		if s.kind < 2 {
			s.f = float64(s.i)
			s.kind = 2
		}
		s.f += v.Double()
		if s.kind == 3 {
			return s.addDec(v)
		}
	case bsoncore.TypeDecimal128:
		if s.kind < 3 {
			s.dec = new(apd.Decimal)
			if s.kind == 2 {
				s.dec.SetFloat64(s.f)
			} else {
				s.dec.SetInt64(s.i)
			}
			s.kind = 3
		}
		return s.addDec(v)
	}
	return nil
}

func (s *numSum) addDec(v value) error {
	d, err := ToDecimal(v)
	if err != nil {
		return err
	}
	_, err = decCtx.Add(s.dec, s.dec, d)
	return err
}

func (s *numSum) value() value {
	switch s.kind {
	case 0:
		return Int32(int32(s.i))
	case 1:
		return Int64(s.i)
	case 2:
		return Double(s.f)
	}
	v, err := FromDecimal(s.dec)
	if err != nil {
		return Null
	}
	return v
}

type sumAcc struct {
	x   expr
	avg bool
	s   numSum
}

func (a *sumAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.x.Eval(ec)
	if err != nil {
		return 0, err
	}
	if IsNumber(v) {
		return 0, a.s.add(v)
	}
	return 0, nil
}

func (a *sumAcc) Result() (value, error) {
	if !a.avg {
		return a.s.value(), nil
	}
	if a.s.count == 0 {
		return Null, nil
	}
	if a.s.kind == 3 {
		q := new(apd.Decimal)
		if _, err := decCtx.Quo(q, a.s.dec, apd.New(a.s.count, 0)); err != nil {
			return Null, err
		}
		return FromDecimal(q)
	}
	if a.s.kind == 2 {
		return Double(a.s.f / float64(a.s.count)), nil
	}
	return Double(float64(a.s.i) / float64(a.s.count)), nil
}

// ---- $min / $max ----

type minMaxAcc struct {
	x    expr
	sign int
	cur  value
}

func (a *minMaxAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.x.Eval(ec)
	if err != nil || IsNullish(v) {
		return 0, err
	}
	if a.cur.Type == 0 || Compare(v, a.cur, ec.Collator)*a.sign > 0 {
		a.cur = v
		return ValueSize(v), nil
	}
	return 0, nil
}

func (a *minMaxAcc) Result() (value, error) { return OrNull(a.cur), nil }

// ---- $first / $last ----

type firstLastAcc struct {
	x     expr
	first bool
	seen  bool
	cur   value
}

func (a *firstLastAcc) Add(ec *EvalContext) (int64, error) {
	if a.first && a.seen {
		return 0, nil
	}
	v, err := a.x.Eval(ec)
	if err != nil {
		return 0, err
	}
	a.seen, a.cur = true, v
	return ValueSize(v), nil
}

func (a *firstLastAcc) Result() (value, error) { return OrNull(a.cur), nil }

// ---- $push / $addToSet ----

type pushAcc struct {
	x    expr
	vals []value
	set  map[string]bool // $addToSet: keystrings of the values kept
	kb   keystring.Builder
}

func (a *pushAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.x.Eval(ec)
	if err != nil || v.Type == 0 {
		return 0, err
	}
	if a.set != nil {
		a.kb.Reset(keystring.AllAscending)
		a.kb.AppendValue(CollKey(EvalCollator(ec), v))
		k := a.kb.Bytes()
		if a.set[string(k)] {
			return 0, nil
		}
		a.set[string(k)] = true
	}
	a.vals = append(a.vals, v)
	return ValueSize(v) * 2, nil
}

func (a *pushAcc) Result() (value, error) { return Array(slices.Clone(a.vals)), nil }

// ---- $stdDevPop / $stdDevSamp (Welford) ----

type stdDevAcc struct {
	x        expr
	samp     bool
	n        int64
	mean, m2 float64
}

func (a *stdDevAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.x.Eval(ec)
	if err != nil || !IsNumber(v) {
		return 0, err
	}
	f, _ := bsonutil.ToFloat64(v)
	a.n++
	d := f - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (f - a.mean)
	return 0, nil
}

func (a *stdDevAcc) Result() (value, error) {
	switch {
	case a.n == 0, a.samp && a.n == 1:
		return Null, nil
	case a.samp:
		return Double(math.Sqrt(a.m2 / float64(a.n-1))), nil
	}
	return Double(math.Sqrt(a.m2 / float64(a.n))), nil
}

// ---- $mergeObjects ----

type mergeAcc struct {
	x   expr
	cur bsoncore.Document
}

func (a *mergeAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.x.Eval(ec)
	if err != nil || IsNullish(v) {
		return 0, err
	}
	d, ok := v.DocumentOK()
	if !ok {
		return 0, mongoerr.Newf(mongoerr.Location40400, "$mergeObjects requires object inputs, but input %s is of type %s", v, TypeName(v))
	}
	if a.cur == nil {
		a.cur = EmptyDoc
	}
	a.cur = MergeDocs(a.cur, d)
	return int64(len(d)), nil
}

func (a *mergeAcc) Result() (value, error) {
	if a.cur == nil {
		return Doc(EmptyDoc), nil
	}
	return Doc(a.cur), nil
}

// MergeDocs overlays b's fields on a (a's order, new fields appended).
func MergeDocs(a, b bsoncore.Document) bsoncore.Document {
	els, _ := b.Elements()
	for _, el := range els {
		a = SetField(a, el.Key(), el.Value())
	}
	return a
}

// ---- $top / $bottom / $topN / $bottomN ----

type topBottomAcc struct {
	sortBy *SortKey
	output expr
	nX     expr
	n      int64
	bottom bool
	single bool
	items  []sortedItem
}

type sortedItem struct {
	key []byte
	v   value
}

func parseTopBottom(op string, arg value, pc *ParseContext) (*AccSpec, error) {
	d, ok := arg.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location5788001, "specification must be an object; found %s", TypeName(arg))
	}
	els, err := DocElems(d)
	if err != nil {
		return nil, err
	}
	single := op == "$top" || op == "$bottom"
	var sortBy *SortKey
	var output, nX expr
	for _, el := range els {
		switch el.Key() {
		case "sortBy":
			sd, ok := el.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.Location5788604, "expected an object for sortBy")
			}
			if sortBy, err = NewSortKey(sd); err != nil {
				return nil, err
			}
		case "output":
			if output, err = Parse(el.Value(), pc); err != nil {
				return nil, err
			}
		case "n":
			if single {
				return nil, mongoerr.Newf(mongoerr.Location5788002, "'n' is not a valid field for %s", op)
			}
			if nX, err = Parse(el.Value(), pc); err != nil {
				return nil, err
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location5788002, "Unknown argument for %s: %s", op, el.Key())
		}
	}
	if sortBy == nil {
		return nil, mongoerr.Newf(mongoerr.Location5788005, "Missing value for 'sortBy'")
	}
	if output == nil {
		return nil, mongoerr.Newf(mongoerr.Location5788004, "Missing value for 'output'")
	}
	if !single && nX == nil {
		return nil, mongoerr.Newf(mongoerr.Location5787906, "Missing value for 'n'")
	}
	return &AccSpec{op: op, raw: arg, New: func() Accumulator {
		return &topBottomAcc{sortBy: sortBy, output: output, nX: nX, bottom: op == "$bottom" || op == "$bottomN", single: single, n: -1}
	}}, nil
}

func evalN(x expr, ec *EvalContext, op string) (int64, error) {
	v, err := x.Eval(ec)
	if err != nil {
		return 0, err
	}
	n, ok := bsonutil.ToInt64Exact(v)
	if !ok || !IsNumber(v) {
		return 0, mongoerr.Newf(mongoerr.Location5787902, "Value for 'n' must be of integral type, but found %s", v)
	}
	if n <= 0 {
		return 0, mongoerr.Newf(mongoerr.Location5787908, "'n' must be greater than 0, found %d", n)
	}
	return n, nil
}

func (a *topBottomAcc) Add(ec *EvalContext) (int64, error) {
	if a.n < 0 {
		if a.single {
			a.n = 1
		} else {
			n, err := evalN(a.nX, ec, "")
			if err != nil {
				return 0, err
			}
			a.n = n
		}
	}
	doc := ec.Current
	if doc == nil {
		doc = ec.Root
	}
	k := a.sortBy.Key(doc, EvalCollator(ec))
	v, err := a.output.Eval(ec)
	if err != nil {
		return 0, err
	}
	if v.Type == 0 {
		v = Null
	}
	a.items = append(a.items, sortedItem{key: k, v: v})
	if int64(len(a.items)) > 2*a.n+16 {
		a.trim()
	}
	return int64(len(k)) + ValueSize(v), nil
}

func (a *topBottomAcc) trim() {
	sort.SliceStable(a.items, func(i, j int) bool {
		c := bytes.Compare(a.items[i].key, a.items[j].key)
		if a.bottom {
			return c > 0
		}
		return c < 0
	})
	if int64(len(a.items)) > a.n {
		a.items = a.items[:a.n]
	}
}

// Result may be called repeatedly (running windows): it trims but does not reorder state.
func (a *topBottomAcc) Result() (value, error) {
	a.trim()
	items := a.items
	if a.bottom {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	if a.single {
		if len(items) == 0 {
			return Null, nil
		}
		return items[0].v, nil
	}
	out := make([]value, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return Array(out), nil
}

// ---- $firstN / $lastN / $maxN / $minN ----

type nAcc struct {
	op    string
	input expr
	nX    expr
	n     int64
	vals  []value
	coll  bsonutil.StringComparer // the evaluation's collation, for $minN/$maxN ordering
}

func parseNAcc(op string, arg value, pc *ParseContext) (*AccSpec, error) {
	d, ok := arg.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location5787801, "specification must be an object; found %s", TypeName(arg))
	}
	els, err := DocElems(d)
	if err != nil {
		return nil, err
	}
	var input, nX expr
	for _, el := range els {
		switch el.Key() {
		case "input":
			input, err = Parse(el.Value(), pc)
		case "n":
			nX, err = Parse(el.Value(), pc)
		default:
			return nil, mongoerr.Newf(mongoerr.Location5787901, "Unknown argument for %s: %s", op, el.Key())
		}
		if err != nil {
			return nil, err
		}
	}
	if input == nil {
		return nil, mongoerr.Newf(mongoerr.Location5787907, "Missing value for 'input'")
	}
	if nX == nil {
		return nil, mongoerr.Newf(mongoerr.Location5787906, "Missing value for 'n'")
	}
	return &AccSpec{op: op, raw: arg, New: func() Accumulator { return &nAcc{op: op, input: input, nX: nX, n: -1} }}, nil
}

func (a *nAcc) Add(ec *EvalContext) (int64, error) {
	a.coll = ec.Collator
	if a.n < 0 {
		n, err := evalN(a.nX, ec, a.op)
		if err != nil {
			return 0, err
		}
		a.n = n
	}
	v, err := a.input.Eval(ec)
	if err != nil {
		return 0, err
	}
	switch a.op {
	case "$firstN":
		if int64(len(a.vals)) >= a.n {
			return 0, nil
		}
		if v.Type == 0 {
			v = Null
		}
	case "$lastN":
		if v.Type == 0 {
			v = Null
		}
		if int64(len(a.vals)) >= a.n {
			a.vals = append(a.vals[:0], a.vals[1:]...)
		}
	default:
		if IsNullish(v) {
			return 0, nil
		}
		if int64(len(a.vals)) >= 2*a.n+16 {
			a.trim()
		}
	}
	a.vals = append(a.vals, v)
	return ValueSize(v), nil
}

func (a *nAcc) trim() {
	sign := 1
	if a.op == "$maxN" {
		sign = -1
	}
	slices.SortStableFunc(a.vals, func(x, y value) int { return sign * Compare(x, y, a.coll) })
	if int64(len(a.vals)) > a.n {
		a.vals = a.vals[:a.n]
	}
}

func (a *nAcc) Result() (value, error) {
	if a.op == "$maxN" || a.op == "$minN" {
		a.trim()
	}
	return Array(slices.Clone(a.vals)), nil
}

// ---- $median / $percentile ----

type pctAcc struct {
	input  expr
	ps     []float64
	median bool
	vals   []float64
}

func parsePercentile(op string, arg value, pc *ParseContext) (*AccSpec, error) {
	d, ok := arg.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location7436100, "specification must be an object; found %s", TypeName(arg))
	}
	els, err := DocElems(d)
	if err != nil {
		return nil, err
	}
	var input expr
	var ps []float64
	method := ""
	for _, el := range els {
		switch el.Key() {
		case "input":
			if input, err = Parse(el.Value(), pc); err != nil {
				return nil, err
			}
		case "p":
			if op == "$median" {
				return nil, mongoerr.New(mongoerr.Location40415, "BSON field '$median.p' is an unknown field.")
			}
			vals, err := ArrayValues(el.Value())
			if err != nil || el.Value().Type != bsoncore.TypeArray || len(vals) == 0 {
				return nil, mongoerr.New(mongoerr.Location7750301, "The $percentile 'p' field must be an array of numbers")
			}
			for _, v := range vals {
				f, ok := bsonutil.ToFloat64(v)
				if !ok || !IsNumber(v) || f < 0 || f > 1 {
					return nil, mongoerr.Newf(mongoerr.Location7750301, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", v)
				}
				ps = append(ps, f)
			}
		case "method":
			method, _ = el.Value().StringValueOK()
			if method != "approximate" {
				return nil, mongoerr.Newf(mongoerr.BadValue, "Currently only 'approximate' can be used as percentile 'method'")
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '%s.%s' is an unknown field.", op, el.Key())
		}
	}
	if input == nil || method == "" || (op == "$percentile" && ps == nil) {
		return nil, mongoerr.Newf(mongoerr.Location40414, "%s requires 'input', 'method'%s", op, map[bool]string{true: " and 'p'"}[op == "$percentile"])
	}
	if op == "$median" {
		ps = []float64{0.5}
	}
	return &AccSpec{op: op, raw: arg, New: func() Accumulator { return &pctAcc{input: input, ps: ps, median: op == "$median"} }}, nil
}

func (a *pctAcc) Add(ec *EvalContext) (int64, error) {
	v, err := a.input.Eval(ec)
	if err != nil || !IsNumber(v) {
		return 0, err
	}
	f, _ := bsonutil.ToFloat64(v)
	if math.IsNaN(f) {
		return 0, nil
	}
	a.vals = append(a.vals, f)
	return 8, nil
}

// Result computes discrete percentiles (MongoDB's 'approximate' method returns an input
// value: the one at rank ceil(p*n)).
func (a *pctAcc) Result() (value, error) {
	slices.Sort(a.vals)
	out := make([]value, len(a.ps))
	for i, p := range a.ps {
		if len(a.vals) == 0 {
			out[i] = Null
			continue
		}
		r := int(math.Ceil(p*float64(len(a.vals)))) - 1
		r = max(0, min(r, len(a.vals)-1))
		out[i] = Double(a.vals[r])
	}
	if a.median {
		return out[0], nil
	}
	return Array(out), nil
}
