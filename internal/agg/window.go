package agg

import (
	"bytes"
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// ---- $setWindowFields ----

type windowBound struct {
	kind int // 0 unbounded, 1 current, 2 offset
	off  value
}

type windowOut struct {
	path []string
	op   string
	acc  *expr.AccSpec // accumulator-based window functions
	// $shift
	shiftX   expr.Expression
	shiftBy  int64
	shiftDef value
	// window
	alpha      float64         // $expMovingAvg
	numUnit    string          // $derivative/$integral time unit
	covX, covY expr.Expression // $covariancePop/$covarianceSamp
	hasWindow  bool
	rangeBased bool
	unit       string
	lo, hi     windowBound
}

type setWindowStage struct {
	raw     value
	partX   expr.Expression
	sortPat bsoncore.Document
	outs    []*windowOut
}

func parseSetWindowFields(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.FailedToParse, "the $setWindowFields stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &setWindowStage{raw: spec}
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "partitionBy":
			if s.partX, err = p.parseExpr(v); err != nil {
				return nil, err
			}
		case "sortBy":
			if s.sortPat, err = parseSortBy(v); err != nil {
				return nil, err
			}
		case "output":
			oels, err := outputElems(v)
			if err != nil {
				return nil, err
			}
			for _, oel := range oels {
				wo, err := parseWindowOut(oel.Key(), oel.Value(), p, s.sortPat != nil)
				if err != nil {
					return nil, err
				}
				s.outs = append(s.outs, wo)
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$setWindowFields.%s' is an unknown field.", el.Key())
		}
	}
	if s.outs == nil {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field '$setWindowFields.output' is missing but a required field")
	}
	for _, wo := range s.outs {
		switch wo.op {
		case "$rank", "$denseRank", "$documentNumber", "$shift", "$locf", "$linearFill", "$expMovingAvg", "$derivative", "$integral":
			if s.sortPat == nil {
				return nil, mongoerr.Newf(mongoerr.Location5371602, "%s must be specified with a top level sortBy expression with exactly one element", wo.op)
			}
		}
		if wo.rangeBased {
			sels, _ := expr.DocElems(s.sortPat)
			if len(sels) != 1 {
				return nil, mongoerr.New(mongoerr.Location5339902, "Range-based bounds require sortBy a single field")
			}
		}
	}
	return s, nil
}

func parseWindowOut(path string, v value, p *pctx, sorted bool) (*windowOut, error) {
	parts, err := expr.SplitFieldPath(path)
	if err != nil {
		return nil, err
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "The field '%s' must be an object", path)
	}
	els, err := expr.DocElems(d)
	if err != nil {
		return nil, err
	}
	wo := &windowOut{path: parts}
	for _, el := range els {
		k, av := el.Key(), el.Value()
		if k == "window" {
			if err := wo.parseWindow(av); err != nil {
				return nil, err
			}
			continue
		}
		if !strings.HasPrefix(k, "$") || wo.op != "" {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "'%s' is not a valid window function; expected exactly one operator", k)
		}
		wo.op = k
		switch k {
		case "$rank", "$denseRank", "$documentNumber":
			if ad, ok := av.DocumentOK(); !ok || len(ad) != 5 {
				return nil, mongoerr.Newf(mongoerr.Location5371603, "%s must be specified with '{}' as the value", k)
			}
		case "$shift":
			ad, ok := av.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "Argument to $shift must be an object")
			}
			sels, err := expr.DocElems(ad)
			if err != nil {
				return nil, err
			}
			wo.shiftDef = expr.Null
			hasBy := false
			for _, se := range sels {
				switch se.Key() {
				case "output":
					if wo.shiftX, err = p.parseExpr(se.Value()); err != nil {
						return nil, err
					}
				case "by":
					n, ok := bsonutil.ToInt64Exact(se.Value())
					if !ok || !expr.IsNumber(se.Value()) {
						return nil, mongoerr.New(mongoerr.FailedToParse, "'$shift:by' field must be an integer")
					}
					wo.shiftBy, hasBy = n, true
				case "default":
					wo.shiftDef = se.Value()
				default:
					return nil, mongoerr.Newf(mongoerr.FailedToParse, "Unknown argument in $shift: %s", se.Key())
				}
			}
			if wo.shiftX == nil || !hasBy {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$shift requires 'output' and 'by'")
			}
		case "$locf", "$linearFill":
			if wo.shiftX, err = p.parseExpr(av); err != nil {
				return nil, err
			}
		case "$expMovingAvg", "$derivative", "$integral":
			n, err := expr.ParseNamed(k, av, p.exprPC(), []string{"input"}, nil, "N", "alpha", "unit")
			if err != nil {
				return nil, err
			}
			wo.shiftX = n.X["input"]
			if u, ok := n.Raw["unit"]; ok {
				wo.numUnit, _ = u.StringValueOK()
				if !expr.ValidUnit(wo.numUnit) || k == "$expMovingAvg" {
					return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s: invalid 'unit' %s", k, u)
				}
			}
			if k == "$expMovingAvg" {
				nv, hasN := n.Raw["N"]
				av2, hasA := n.Raw["alpha"]
				switch {
				case hasN == hasA:
					return nil, mongoerr.New(mongoerr.FailedToParse, "$expMovingAvg requires exactly one of 'N' or 'alpha'")
				case hasN:
					nn, ok := bsonutil.ToInt64Exact(nv)
					if !ok || !expr.IsNumber(nv) || nn <= 0 {
						return nil, mongoerr.New(mongoerr.FailedToParse, "'N' field must be a positive integer")
					}
					wo.alpha = 2 / float64(nn+1)
				default:
					a, ok := bsonutil.ToFloat64(av2)
					if !ok || !expr.IsNumber(av2) || a <= 0 || a >= 1 {
						return nil, mongoerr.New(mongoerr.FailedToParse, "'alpha' must be a number between 0 and 1 (exclusive)")
					}
					wo.alpha = a
				}
			} else if n.Has("N") || n.Has("alpha") {
				return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s does not accept 'N' or 'alpha'", k)
			}
		case "$covariancePop", "$covarianceSamp":
			xs, err := expr.ArgList(av, p.exprPC())
			if err != nil {
				return nil, err
			}
			if av.Type != bsoncore.TypeArray || len(xs) != 2 {
				return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s requires an array of two expressions", k)
			}
			wo.covX, wo.covY = xs[0], xs[1]
		default:
			if wo.acc, err = expr.ParseAccumulator(k, av, p.exprPC()); err != nil {
				if mongoerr.CodeOf(err) == mongoerr.Location15952 {
					return nil, mongoerr.Newf(mongoerr.FailedToParse, "Unrecognized window function, %s", k)
				}
				return nil, err
			}
		}
	}
	if wo.op == "" {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "Expected a window function for output field '%s'", path)
	}
	if wo.hasWindow {
		switch wo.op {
		case "$rank", "$denseRank", "$documentNumber", "$shift", "$locf", "$linearFill", "$expMovingAvg":
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s does not accept a 'window' field", wo.op)
		}
		if !sorted && !(wo.lo.kind == 0 && wo.hi.kind == 0) {
			return nil, mongoerr.New(mongoerr.Location5339901, "Document-based bounds require a sortBy")
		}
	} else if wo.op == "$derivative" {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$derivative requires explicit window bounds")
	}
	return wo, nil
}

func (wo *windowOut) parseWindow(v value) error {
	d, ok := v.DocumentOK()
	if !ok {
		return mongoerr.New(mongoerr.FailedToParse, "'window' field must be an object")
	}
	els, err := expr.DocElems(d)
	if err != nil {
		return err
	}
	wo.hasWindow = true
	var bounds value
	for _, el := range els {
		switch el.Key() {
		case "documents":
			bounds = el.Value()
		case "range":
			bounds, wo.rangeBased = el.Value(), true
		case "unit":
			wo.unit, _ = el.Value().StringValueOK()
		default:
			return mongoerr.Newf(mongoerr.FailedToParse, "'window' has an invalid parameter: %s", el.Key())
		}
	}
	vals, err := expr.ArrayValues(bounds)
	if err != nil || bounds.Type != bsoncore.TypeArray || len(vals) != 2 {
		return mongoerr.New(mongoerr.FailedToParse, "Window bounds must be a 2-element array")
	}
	parse := func(b value) (windowBound, error) {
		if s, ok := b.StringValueOK(); ok {
			switch s {
			case "unbounded":
				return windowBound{kind: 0}, nil
			case "current":
				return windowBound{kind: 1}, nil
			}
			return windowBound{}, mongoerr.Newf(mongoerr.FailedToParse, "Window bounds must be 'unbounded', 'current' or a number, got %s", s)
		}
		if !expr.IsNumber(b) {
			return windowBound{}, mongoerr.New(mongoerr.FailedToParse, "Window bounds must be 'unbounded', 'current' or a number")
		}
		if !wo.rangeBased {
			if _, ok := bsonutil.ToInt64Exact(b); !ok {
				return windowBound{}, mongoerr.New(mongoerr.FailedToParse, "Numeric document-based bounds must be an integer")
			}
		}
		return windowBound{kind: 2, off: b}, nil
	}
	if wo.lo, err = parse(vals[0]); err != nil {
		return err
	}
	if wo.hi, err = parse(vals[1]); err != nil {
		return err
	}
	return nil
}

func (s *setWindowStage) name() string { return "$setWindowFields" }
func (s *setWindowStage) spec() value  { return s.raw }

// parseSortBy parses the sortBy of $setWindowFields and $fill.
func parseSortBy(v value) (bsoncore.Document, error) {
	sd, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "sortBy must be an object")
	}
	if _, err := expr.NewSortKey(sd); err != nil {
		return nil, err
	}
	return sd, nil
}

// outputElems returns the fields of the output of $setWindowFields and $fill.
func outputElems(v value) ([]bsoncore.Element, error) {
	od, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "output must be an object")
	}
	return expr.DocElems(od)
}

// sortGen is the key generator of an optional sortBy (nil without one).
func sortGen(pat bsoncore.Document) (*expr.SortKey, error) {
	if pat == nil {
		return nil, nil
	}
	return expr.NewSortKey(pat)
}

// eachPartition loads a partitioned stage's input (see loadPartitions) and hands fn its
// partitions in order; fn reports stop when the consumer has gone.
func eachPartition(g *gen, in Source, rc *runCtx, partX expr.Expression, sortBy *expr.SortKey, stageName string, fn func(part partition) (stop bool, err error)) error {
	r, err := loadPartitions(g.ctx, in, rc, partX, sortBy, stageName, nil)
	if err != nil {
		return err
	}
	defer r.close()
	for {
		part, ok, err := r.next(g.ctx)
		if err != nil || !ok {
			return err
		}
		if stop, err := fn(part); err != nil || stop {
			return err
		}
	}
}

func (s *setWindowStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	sortBy, err := sortGen(s.sortPat)
	if err != nil {
		return nil, err
	}
	var sortPath []string
	if sortBy != nil {
		sortPath = sortBy.Paths()[0]
	}
	return genSource(in, func(g *gen, emit func(bsoncore.Document) bool) error {
		ec := rc.evalCtx(nil)
		return eachPartition(g, in, rc, s.partX, sortBy, "$setWindowFields", func(part partition) (bool, error) {
			results := make([][]value, len(s.outs))
			for j, wo := range s.outs {
				var err error
				if results[j], err = wo.compute(part, ec, sortPath); err != nil {
					return false, err
				}
			}
			for i := range part.Len() {
				p, err := part.At(i)
				if err != nil {
					return false, err
				}
				d := p.doc
				for j, wo := range s.outs {
					d = setPath(d, wo.path, results[j][i])
				}
				if !emit(d) {
					return true, nil
				}
			}
			return false, g.ctx.Err()
		})
	}), nil
}

// compute evaluates one window function for every document of a partition. Values kept for
// the whole partition are copied out of the documents of a spilled partition (ownValue), so
// only the documents of the current window are in memory at once.
func (wo *windowOut) compute(part partition, ec *expr.EvalContext, sortPath []string) ([]value, error) {
	n := part.Len()
	own := onDisk(part)
	res := make([]value, n)
	doc := func(i int) (bsoncore.Document, error) {
		p, err := part.At(i)
		return p.doc, err
	}
	eval := func(x expr.Expression, i int) (value, error) {
		d, err := doc(i)
		if err != nil {
			return expr.Missing, err
		}
		ec.Root, ec.Current = d, nil
		v, err := x.Eval(ec)
		return ownValue(v, own), err
	}
	switch wo.op {
	case "$documentNumber", "$rank", "$denseRank":
		rank, dense := 0, 0
		var prev []byte
		for i := range n {
			p, err := part.At(i)
			if err != nil {
				return nil, err
			}
			if i == 0 || !bytes.Equal(p.key, prev) {
				rank = i + 1
				dense++
			}
			prev = p.key
			switch wo.op {
			case "$documentNumber":
				res[i] = expr.Int(int64(i + 1))
			case "$rank":
				res[i] = expr.Int(int64(rank))
			default:
				res[i] = expr.Int(int64(dense))
			}
		}
		return res, nil
	case "$shift":
		for i := range n {
			j := int64(i) + wo.shiftBy
			if j < 0 || j >= int64(n) {
				res[i] = wo.shiftDef
				continue
			}
			v, err := eval(wo.shiftX, int(j))
			if err != nil {
				return nil, err
			}
			if v.Type == 0 {
				v = expr.Null
			}
			res[i] = v
		}
		return res, nil
	case "$locf", "$linearFill":
		vals := make([]value, n)
		for i := range n {
			v, err := eval(wo.shiftX, i)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		if wo.op == "$locf" {
			return locf(vals), nil
		}
		xs, err := column(part, sortPath)
		if err != nil {
			return nil, err
		}
		return linearFill(xs, vals), nil
	case "$expMovingAvg":
		prev := expr.Null
		for i := range n {
			v, err := eval(wo.shiftX, i)
			if err != nil {
				return nil, err
			}
			if expr.IsNumber(v) {
				if prev.Type == bsoncore.TypeNull {
					prev = expr.Double(expr.ToFloat(v))
				} else {
					prev = expr.Double(wo.alpha*expr.ToFloat(v) + (1-wo.alpha)*expr.ToFloat(prev))
				}
			}
			res[i] = prev
		}
		return res, nil
	}
	// addRange adds documents from..to (inclusive) to an accumulator.
	addRange := func(acc expr.Accumulator, from, to int) error {
		for j := from; j <= to; j++ {
			d, err := doc(j)
			if err != nil {
				return err
			}
			ec.Root, ec.Current = d, nil
			if _, err = acc.Add(ec); err != nil {
				return err
			}
		}
		return nil
	}
	result := func(acc expr.Accumulator) (value, error) {
		v, err := acc.Result()
		return ownValue(v, own), err
	}
	// Accumulator over a window.
	if wo.acc != nil && (!wo.hasWindow || (wo.lo.kind == 0 && wo.hi.kind == 0)) {
		acc := wo.acc.New()
		if err := addRange(acc, 0, n-1); err != nil {
			return nil, err
		}
		v, err := result(acc)
		if err != nil {
			return nil, err
		}
		for i := range res {
			res[i] = v
		}
		return res, nil
	}
	var sortVals []value
	if wo.rangeBased || wo.op == "$derivative" || wo.op == "$integral" {
		var err error
		if sortVals, err = column(part, sortPath); err != nil {
			return nil, err
		}
	}
	switch wo.op {
	case "$derivative", "$integral", "$covariancePop", "$covarianceSamp":
		return wo.computeNumeric(n, eval, sortVals)
	}
	if wo.lo.kind == 0 {
		// A window starting at the partition's start only grows (its upper bound is
		// non-decreasing in sort order), so one accumulator serves every document.
		acc := wo.acc.New()
		added := 0 // documents 0..added-1 are in acc
		for i := range n {
			_, hi, err := wo.bounds(i, n, sortVals)
			if err != nil {
				return nil, err
			}
			if err := addRange(acc, added, hi); err != nil {
				return nil, err
			}
			added = max(added, hi+1)
			if res[i], err = result(acc); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	for i := range n {
		lo, hi, err := wo.bounds(i, n, sortVals)
		if err != nil {
			return nil, err
		}
		acc := wo.acc.New()
		if err := addRange(acc, lo, hi); err != nil {
			return nil, err
		}
		if res[i], err = result(acc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// column is the value of path in each document of part, copied out of a spilled one.
func column(part partition, path []string) ([]value, error) {
	own := onDisk(part)
	out := make([]value, part.Len())
	for i := range out {
		p, err := part.At(i)
		if err != nil {
			return nil, err
		}
		out[i] = ownValue(expr.GetPath(p.doc, path), own)
	}
	return out, nil
}

// bounds returns the inclusive index range of document i's window (lo > hi: empty).
func (wo *windowOut) bounds(i, n int, sortVals []value) (int, int, error) {
	if !wo.rangeBased {
		lo, hi := 0, n-1
		if wo.lo.kind == 1 {
			lo = i
		} else if wo.lo.kind == 2 {
			off, _ := bsonutil.ToInt64Exact(wo.lo.off)
			lo = max(0, i+int(off))
		}
		if wo.hi.kind == 1 {
			hi = i
		} else if wo.hi.kind == 2 {
			off, _ := bsonutil.ToInt64Exact(wo.hi.off)
			hi = min(n-1, i+int(off))
		}
		return lo, hi, nil
	}
	cur := sortVals[i]
	target := func(b windowBound) (value, error) {
		if b.kind == 1 {
			return cur, nil
		}
		if cur.Type == bsoncore.TypeDateTime {
			if wo.unit == "" {
				return expr.Missing, mongoerr.New(mongoerr.Location5429513, "Invalid range: Expected the sortBy field to be a number, but it was Date")
			}
			f, _ := bsonutil.ToFloat64(b.off)
			return expr.Date(expr.AddUnits(time.UnixMilli(cur.DateTime()).UTC(), wo.unit, int64(f)).UnixMilli()), nil
		}
		if !expr.IsNumber(cur) {
			return expr.Missing, mongoerr.Newf(mongoerr.Location5429414, "Invalid range: Expected the sortBy field to be a number, but it was %s", expr.TypeName(cur))
		}
		return expr.Arith("$add", cur, b.off)
	}
	lo, hi := 0, n-1
	if wo.lo.kind != 0 {
		t, err := target(wo.lo)
		if err != nil {
			return 0, 0, err
		}
		for lo < n && expr.Compare(sortVals[lo], t, nil) < 0 {
			lo++
		}
	}
	if wo.hi.kind != 0 {
		t, err := target(wo.hi)
		if err != nil {
			return 0, 0, err
		}
		for hi >= 0 && expr.Compare(sortVals[hi], t, nil) > 0 {
			hi--
		}
	}
	return lo, hi, nil
}

func locf(vals []value) []value {
	out := make([]value, len(vals))
	last := expr.Null
	for i, v := range vals {
		if !expr.IsNullish(v) {
			last = v
		}
		out[i] = last
	}
	return out
}

// linearFill interpolates null values between numeric neighbours by the sort field xs.
func linearFill(xs, vals []value) []value {
	out := make([]value, len(vals))
	prev := -1
	for i, v := range vals {
		if expr.IsNullish(v) {
			out[i] = expr.Null
			continue
		}
		out[i] = v
		if prev >= 0 && i-prev > 1 {
			x0, _ := toFloat(xs[prev])
			x1, _ := toFloat(xs[i])
			y0, _ := bsonutil.ToFloat64(vals[prev])
			y1, _ := bsonutil.ToFloat64(v)
			for k := prev + 1; k < i; k++ {
				xk, _ := toFloat(xs[k])
				if x1 == x0 {
					out[k] = expr.Double(y0)
				} else {
					out[k] = expr.Double(y0 + (y1-y0)*(xk-x0)/(x1-x0))
				}
			}
		}
		prev = i
	}
	return out
}

func toFloat(v value) (float64, bool) {
	if v.Type == bsoncore.TypeDateTime {
		return float64(v.DateTime()), true
	}
	return bsonutil.ToFloat64(v)
}

// ---- $densify ----

type densifyStage struct {
	raw        value
	field      []string
	fieldStr   string
	partFields []string
	step       value
	unit       string
	bounds     string // "full", "partition" or "" (explicit lo/hi)
	lo, hi     value
}

func parseDensify(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.FailedToParse, "the $densify stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &densifyStage{raw: spec}
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "field":
			str, ok := v.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'field' must be a string")
			}
			if s.field, err = expr.SplitFieldPath(str); err != nil {
				return nil, err
			}
			s.fieldStr = str
		case "partitionByFields":
			vals, err := expr.ArrayValues(v)
			if err != nil || v.Type != bsoncore.TypeArray {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'partitionByFields' must be an array of strings")
			}
			for _, e := range vals {
				str, ok := e.StringValueOK()
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'partitionByFields' must be an array of strings")
				}
				s.partFields = append(s.partFields, str)
			}
		case "range":
			rd, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'range' must be an object")
			}
			rels, err := expr.DocElems(rd)
			if err != nil {
				return nil, err
			}
			for _, re := range rels {
				switch re.Key() {
				case "step":
					s.step = re.Value()
				case "unit":
					s.unit, _ = re.Value().StringValueOK()
					if !expr.ValidUnit(s.unit) {
						return nil, mongoerr.Newf(mongoerr.FailedToParse, "unknown time unit value: %s", re.Value())
					}
				case "bounds":
					if str, ok := re.Value().StringValueOK(); ok && (str == "full" || str == "partition") {
						s.bounds = str
						continue
					}
					bv, err := expr.ArrayValues(re.Value())
					if err != nil || re.Value().Type != bsoncore.TypeArray || len(bv) != 2 {
						return nil, mongoerr.New(mongoerr.Location5733403, "a bounding array in a range statement must have exactly two elements")
					}
					s.lo, s.hi = bv[0], bv[1]
					if expr.Compare(s.lo, s.hi, nil) > 0 {
						return nil, mongoerr.New(mongoerr.Location5733402, "the first element of a bounding array must be less than or equal to the second element")
					}
				default:
					return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field 'range.%s' is an unknown field.", re.Key())
				}
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$densify.%s' is an unknown field.", el.Key())
		}
	}
	if s.field == nil || s.step.Type == 0 || (s.bounds == "" && s.lo.Type == 0) {
		return nil, mongoerr.New(mongoerr.Location40414, "$densify requires 'field' and 'range' with 'step' and 'bounds'")
	}
	if f, ok := bsonutil.ToFloat64(s.step); !ok || !expr.IsNumber(s.step) || f <= 0 {
		return nil, mongoerr.New(mongoerr.Location5733401, "the step parameter in a range statement must be a strictly positive numeric value")
	}
	if s.unit != "" {
		if _, ok := bsonutil.ToInt64Exact(s.step); !ok {
			return nil, mongoerr.New(mongoerr.Location5733412, "the step parameter must be an integer when a unit is specified")
		}
	}
	return s, nil
}

func (s *densifyStage) name() string { return "$densify" }
func (s *densifyStage) spec() value  { return s.raw }

func (s *densifyStage) next(v value) (value, error) {
	if v.Type == bsoncore.TypeDateTime {
		if s.unit == "" {
			return expr.Missing, mongoerr.New(mongoerr.Location5733501, "Densify field of type date requires a unit")
		}
		n, _ := bsonutil.ToInt64Exact(s.step)
		return expr.Date(expr.AddUnits(time.UnixMilli(v.DateTime()).UTC(), s.unit, n).UnixMilli()), nil
	}
	if !expr.IsNumber(v) {
		return expr.Missing, mongoerr.Newf(mongoerr.Location5733201, "Densify field type must be numeric or a date, got %s", expr.TypeName(v))
	}
	if s.unit != "" {
		return expr.Missing, mongoerr.New(mongoerr.Location6053600, "Densify with a unit requires date values")
	}
	return expr.Arith("$add", v, s.step)
}

func (s *densifyStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	var partX expr.Expression
	if len(s.partFields) > 0 {
		vs := make([]value, len(s.partFields))
		for i, f := range s.partFields {
			vs[i] = expr.String("$" + f)
		}
		x, err := expr.Parse(value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, vs...)}, nil)
		if err != nil {
			return nil, err
		}
		partX = x
	}
	sortBy, err := expr.NewSortKey(expr.DocOf(s.fieldStr, expr.Int32(1)))
	if err != nil {
		return nil, err
	}
	return genSource(in, func(g *gen, emit func(bsoncore.Document) bool) error {
		// Every value must be of the kind the range steps through (numbers, or dates with a
		// unit); anything else would never be reached by stepping. The range of "full"
		// bounds is the input's, found on the way in.
		lo, hi := s.lo, s.hi
		if s.bounds == "full" {
			lo, hi = expr.Missing, expr.Missing
		}
		visit := func(d bsoncore.Document) error {
			v := expr.GetPath(d, s.field)
			switch {
			case expr.IsNullish(v):
				return nil
			case s.unit == "" && !expr.IsNumber(v):
				return mongoerr.Newf(mongoerr.Location5733201, "PlanExecutor error during aggregation :: caused by :: Densify field type must be numeric, got %s", expr.TypeName(v))
			case s.unit != "" && v.Type != bsoncore.TypeDateTime:
				return mongoerr.Newf(mongoerr.Location6053600, "PlanExecutor error during aggregation :: caused by :: Densify with a unit requires date values, got %s", expr.TypeName(v))
			}
			if s.bounds == "full" {
				if lo.Type == 0 || expr.Compare(v, lo, nil) < 0 {
					lo = ownValue(v, true)
				}
				if hi.Type == 0 || expr.Compare(v, hi, nil) > 0 {
					hi = ownValue(v, true)
				}
			}
			return nil
		}
		r, err := loadPartitions(g.ctx, in, rc, partX, sortBy, "$densify", visit)
		if err != nil {
			return err
		}
		defer r.close()
		for _, b := range []value{s.lo, s.hi} {
			if b.Type != 0 && ((s.unit == "" && !expr.IsNumber(b)) || (s.unit != "" && b.Type != bsoncore.TypeDateTime)) {
				return mongoerr.New(mongoerr.Location5733403, "$densify bounds must match the field type (numbers, or dates with a unit)")
			}
		}
		budget := 500_000 // bound generated documents (MongoDB: internalQueryMaxAllowedDensifyDocs)
		for {
			part, ok, err := r.next(g.ctx)
			if err != nil || !ok {
				return err
			}
			if stop, err := s.densifyPartition(part, lo, hi, &budget, emit); err != nil || stop {
				return err
			}
		}
	}), nil
}

// densifyPartition emits one partition (sorted by the field, nulls first) with the missing
// steps generated, in one pass. lo and hi are the full or explicit bounds. With "partition"
// bounds the range is the partition's own: it starts at its first non-null value and its end
// (the last value) only matters after the last document, since every value seen before it is
// below it. stop reports that the consumer has gone.
func (s *densifyStage) densifyPartition(part partition, lo, hi value, budget *int, emit func(bsoncore.Document) bool) (stop bool, err error) {
	inclusiveHi := s.bounds != ""
	var first bsoncore.Document // the first document with a value: its partition fields are copied
	var cur, last value
	gen := func(v value) bsoncore.Document {
		d := expr.EmptyDoc
		for _, f := range s.partFields {
			pv := expr.GetPath(first, strings.Split(f, "."))
			d = setPath(d, strings.Split(f, "."), pv)
		}
		return setPath(d, s.field, v)
	}
	below := func() bool { // cur is inside the range's upper end
		return s.bounds == "partition" || expr.Compare(cur, hi, nil) < 0 || (inclusiveHi && expr.Compare(cur, hi, nil) == 0)
	}
	// generateWhile emits a generated document at cur and steps cur on while more holds (and
	// cur has a next step), counting each against the budget.
	generateWhile := func(more func() bool) (stop bool, err error) {
		for cur.Type != 0 && more() {
			if !emit(gen(cur)) {
				return true, nil
			}
			if *budget--; *budget < 0 {
				return false, mongoerr.New(mongoerr.Location5897900, "Generated documents exceeded the maximum for $densify")
			}
			if cur, err = s.next(cur); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	for i := range part.Len() {
		p, err := part.At(i)
		if err != nil {
			return false, err
		}
		v := expr.GetPath(p.doc, s.field)
		if expr.IsNullish(v) {
			if !emit(p.doc) {
				return true, nil
			}
			continue
		}
		if first == nil {
			first, cur = p.doc, lo
			if s.bounds == "partition" {
				cur = v
			}
		}
		last = v
		if stop, err := generateWhile(func() bool { return expr.Compare(cur, v, nil) < 0 && below() }); stop || err != nil {
			return stop, err
		}
		if !emit(p.doc) {
			return true, nil
		}
		for cur.Type != 0 && expr.Compare(cur, v, nil) <= 0 {
			if cur, err = s.next(cur); err != nil {
				return false, err
			}
		}
	}
	if first == nil {
		return false, nil
	}
	end := hi
	if s.bounds == "partition" {
		end = last
	}
	return generateWhile(func() bool { return expr.Compare(cur, end, nil) < 0 })
}

// ---- $fill ----

type fillStage struct {
	raw     value
	partX   expr.Expression
	sortPat bsoncore.Document
	paths   [][]string
	valXs   []expr.Expression // value fill (nil: method)
	methods []string
}

func parseFill(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.FailedToParse, "the $fill stage specification must be an object")
	if err != nil {
		return nil, err
	}
	s := &fillStage{raw: spec}
	for _, el := range els {
		v := el.Value()
		switch el.Key() {
		case "partitionBy":
			if s.partX, err = p.parseExpr(v); err != nil {
				return nil, err
			}
		case "partitionByFields":
			vals, _ := expr.ArrayValues(v)
			fs := make([]value, len(vals))
			for i, e := range vals {
				str, ok := e.StringValueOK()
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "partitionByFields must be strings")
				}
				fs[i] = expr.String("$" + str)
			}
			if s.partX, err = p.parseExpr(value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil, fs...)}); err != nil {
				return nil, err
			}
		case "sortBy":
			if s.sortPat, err = parseSortBy(v); err != nil {
				return nil, err
			}
		case "output":
			oels, err := outputElems(v)
			if err != nil {
				return nil, err
			}
			for _, oel := range oels {
				path, err := expr.SplitFieldPath(oel.Key())
				if err != nil {
					return nil, err
				}
				spec, ok := oel.Value().DocumentOK()
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "$fill output fields must be objects")
				}
				var x expr.Expression
				method := ""
				sels, err := expr.DocElems(spec)
				if err != nil || len(sels) != 1 {
					return nil, mongoerr.New(mongoerr.Location6050203, "Exactly one of 'value' and 'method' must be specified")
				}
				switch sels[0].Key() {
				case "value":
					if x, err = p.parseExpr(sels[0].Value()); err != nil {
						return nil, err
					}
				case "method":
					method, _ = sels[0].Value().StringValueOK()
					if method != "locf" && method != "linear" {
						return nil, mongoerr.Newf(mongoerr.Location6050202, "Method must be either locf or linear")
					}
					if s.sortPat == nil {
						// sortBy may come after output; checked below.
					}
				default:
					return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '%s' is an unknown field.", sels[0].Key())
				}
				s.paths = append(s.paths, path)
				s.valXs = append(s.valXs, x)
				s.methods = append(s.methods, method)
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$fill.%s' is an unknown field.", el.Key())
		}
	}
	for _, m := range s.methods {
		if m != "" && s.sortPat == nil {
			return nil, mongoerr.New(mongoerr.Location6050204, "Method requires sortBy")
		}
	}
	if s.paths == nil {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field '$fill.output' is missing but a required field")
	}
	return s, nil
}

func (s *fillStage) name() string { return "$fill" }
func (s *fillStage) spec() value  { return s.raw }

func (s *fillStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	sortBy, err := sortGen(s.sortPat)
	if err != nil {
		return nil, err
	}
	return genSource(in, func(g *gen, emit func(bsoncore.Document) bool) error {
		ec := rc.evalCtx(nil)
		return eachPartition(g, in, rc, s.partX, sortBy, "$fill", func(part partition) (bool, error) {
			// The locf and linear outputs need the partition's column of values; a value
			// output only looks at its own document.
			filled := make([][]value, len(s.paths))
			for j, path := range s.paths {
				if s.methods[j] == "" {
					continue
				}
				vals, err := column(part, path)
				if err != nil {
					return false, err
				}
				if s.methods[j] != "linear" {
					filled[j] = locf(vals)
					continue
				}
				xs, err := column(part, sortBy.Paths()[0])
				if err != nil {
					return false, err
				}
				filled[j] = linearFill(xs, vals)
			}
			for i := range part.Len() {
				p, err := part.At(i)
				if err != nil {
					return false, err
				}
				d := p.doc
				for j, path := range s.paths {
					if s.methods[j] != "" {
						if !expr.IsNullish(filled[j][i]) {
							d = setPath(d, path, filled[j][i])
						}
						continue
					}
					if expr.IsNullish(expr.GetPath(d, path)) {
						ec.Root, ec.Current = d, nil
						v, err := s.valXs[j].Eval(ec)
						if err != nil {
							return false, err
						}
						d = setPath(d, path, v)
					}
				}
				if !emit(d) {
					return true, nil
				}
			}
			return false, nil
		})
	}), nil
}

// computeNumeric evaluates the window functions that need the window's points rather than an
// accumulator: $derivative and $integral (over the sortBy values) and the covariances. eval
// evaluates an expression on document i.
func (wo *windowOut) computeNumeric(n int, eval func(x expr.Expression, i int) (value, error), sortVals []value) ([]value, error) {
	res := make([]value, n)
	xs := make([]value, n)
	ys := make([]value, n)
	for i := range n {
		var err error
		if wo.covX != nil {
			if xs[i], err = eval(wo.covX, i); err != nil {
				return nil, err
			}
			if ys[i], err = eval(wo.covY, i); err != nil {
				return nil, err
			}
			continue
		}
		xs[i] = sortVals[i]
		if ys[i], err = eval(wo.shiftX, i); err != nil {
			return nil, err
		}
	}
	unitMs := float64(expr.UnitMillis(wo.numUnit))
	xf := func(v value) (float64, error) {
		if v.Type == bsoncore.TypeDateTime {
			if wo.numUnit == "" && wo.covX == nil {
				return 0, mongoerr.Newf(mongoerr.Location5624901, "%s where the sortBy is a Date requires a 'unit'", wo.op)
			}
			return float64(v.DateTime()) / unitMs, nil
		}
		if wo.numUnit != "" && wo.covX == nil {
			return 0, mongoerr.Newf(mongoerr.Location5624900, "%s with 'unit' expects the sortBy field to be a Date", wo.op)
		}
		return expr.ToFloat(v), nil
	}
	for i := range n {
		lo, hi := 0, n-1
		if wo.hasWindow {
			var err error
			if lo, hi, err = wo.bounds(i, n, sortVals); err != nil {
				return nil, err
			}
		}
		res[i] = expr.Null
		switch wo.op {
		case "$derivative":
			if hi <= lo || !expr.IsNumber(ys[lo]) || !expr.IsNumber(ys[hi]) {
				continue
			}
			x0, err := xf(xs[lo])
			if err != nil {
				return nil, err
			}
			x1, err := xf(xs[hi])
			if err != nil {
				return nil, err
			}
			if x1 == x0 {
				continue
			}
			res[i] = expr.Double((expr.ToFloat(ys[hi]) - expr.ToFloat(ys[lo])) / (x1 - x0))
		case "$integral":
			sum := 0.0
			for j := lo; j < hi; j++ {
				if !expr.IsNumber(ys[j]) || !expr.IsNumber(ys[j+1]) {
					continue
				}
				x0, err := xf(xs[j])
				if err != nil {
					return nil, err
				}
				x1, err := xf(xs[j+1])
				if err != nil {
					return nil, err
				}
				sum += (x1 - x0) * (expr.ToFloat(ys[j]) + expr.ToFloat(ys[j+1])) / 2
			}
			if hi >= lo {
				res[i] = expr.Double(sum)
			}
		default: // covariances
			var cnt, mx, my, c float64
			for j := lo; j <= hi; j++ {
				if !expr.IsNumber(xs[j]) || !expr.IsNumber(ys[j]) {
					continue
				}
				x, y := expr.ToFloat(xs[j]), expr.ToFloat(ys[j])
				cnt++
				dx := x - mx
				mx += dx / cnt
				my += (y - my) / cnt
				c += dx * (y - my)
			}
			switch {
			case wo.op == "$covariancePop" && cnt > 0:
				res[i] = expr.Double(c / cnt)
			case wo.op == "$covarianceSamp" && cnt > 1:
				res[i] = expr.Double(c / (cnt - 1))
			}
		}
	}
	return res, nil
}
