package agg

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// projection is the tree shared by $project (inclusion or exclusion), $addFields/$set and
// $unset. Fields keep spec order; computed expressions are evaluated against $$CURRENT.
type projection struct {
	mode projMode
	root *pnode
	raw  value
}

type projMode int

const (
	pmInclusion projMode = iota
	pmExclusion
	pmAddFields
)

type pnode struct {
	fields []*pfield
}

type pfield struct {
	name    string
	include bool // inclusion of the existing value
	exclude bool
	x       expr.Expression // computed value
	sub     *pnode
}

func (n *pnode) get(name string, create bool) *pfield {
	for _, f := range n.fields {
		if f.name == name {
			return f
		}
	}
	if !create {
		return nil
	}
	f := &pfield{name: name}
	n.fields = append(n.fields, f)
	return f
}

// parseProjection parses a $project ($project=true) or $addFields spec.
func parseProjection(spec value, p *pctx, stageName string, isProject bool) (*projection, error) {
	d, ok := spec.DocumentOK()
	if !ok {
		// DocumentSourceProject / DocumentSourceAddFields::createFromBson.
		if isProject {
			return nil, mongoerr.Newf(mongoerr.Location15969, "%s specification must be an object", stageName)
		}
		return nil, mongoerr.Newf(mongoerr.Location40272, "%s specification stage must be an object, got %s", stageName, expr.TypeName(spec))
	}
	pr := &projection{root: &pnode{}, raw: spec, mode: pmAddFields}
	if isProject {
		pr.mode = -1
	}
	idSeen := false
	if err := pr.parseLevel(d, pr.root, "", p, isProject, &idSeen, 0); err != nil {
		return nil, err
	}
	if isProject {
		els, _ := d.Elements()
		if len(els) == 0 {
			return nil, mongoerr.New(mongoerr.Location51272, "Invalid $project :: caused by :: projection specification must have at least one field")
		}
		if pr.mode == -1 {
			// Only _id (and it included or excluded): {_id: 0} is an exclusion.
			pr.mode = pmInclusion
			if f := pr.root.get("_id", false); f != nil && f.exclude {
				pr.mode = pmExclusion
			}
		}
		if pr.mode == pmInclusion && !idSeen {
			pr.root.fields = append([]*pfield{{name: "_id", include: true}}, pr.root.fields...)
		}
	}
	return pr, nil
}

func (pr *projection) parseLevel(d bsoncore.Document, n *pnode, prefix string, p *pctx, isProject bool, idSeen *bool, depth int) error {
	if depth > 100 {
		return mongoerr.New(mongoerr.BadValue, "projection too deep")
	}
	els, err := expr.DocElems(d)
	if err != nil {
		return err
	}
	for _, el := range els {
		key := el.Key()
		if strings.HasSuffix(key, ".$") {
			// projection_parser.cpp's parseElement: positional projection is find-only.
			return mongoerr.Newf(mongoerr.Location31324, "Invalid %s :: caused by :: Cannot use positional projection in aggregation projection", stageNameOf(isProject))
		}
		if strings.HasPrefix(key, "$") {
			return mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		path, err := expr.SplitFieldPath(key)
		if err != nil {
			return err
		}
		full := prefix + key
		if full == "_id" && prefix == "" {
			*idSeen = true
		}
		// Walk to the leaf node, creating sub-nodes for dotted paths.
		cur := n
		for _, c := range path[:len(path)-1] {
			f := cur.get(c, true)
			if f.sub == nil {
				if f.include || f.exclude || f.x != nil {
					// MongoDB names the path without its first component (FieldPath::tail).
					return mongoerr.Newf(mongoerr.Location31249, "Path collision at %s remaining portion %s",
						key, strings.Join(path[1:], "."))
				}
				f.sub = &pnode{}
			}
			cur = f.sub
		}
		leaf := path[len(path)-1]
		if cur.get(leaf, false) != nil && (el.Value().Type != bsoncore.TypeEmbeddedDocument || expr.IsOperatorDoc(el.Value())) {
			return mongoerr.Newf(mongoerr.Location31250, "Path collision at %s", full)
		}
		f := cur.get(leaf, true)
		v := el.Value()
		if isProject {
			switch {
			case expr.IsNumber(v) || v.Type == bsoncore.TypeBoolean:
				if expr.Truthy(v) {
					f.include = true
					if err := pr.setMode(pmInclusion, full); err != nil {
						return err
					}
				} else {
					f.exclude = true
					if full != "_id" {
						if err := pr.setMode(pmExclusion, full); err != nil {
							return err
						}
					}
				}
				continue
			case v.Type == bsoncore.TypeEmbeddedDocument && !expr.IsOperatorDoc(v):
				sd := v.Document()
				if e, _ := sd.Elements(); len(e) == 0 {
					return mongoerr.Newf(mongoerr.Location51270, "An empty sub-projection is not a valid value. Found empty object at path %s", full)
				}
				if f.sub == nil {
					f.sub = &pnode{}
				}
				if err := pr.parseLevel(sd, f.sub, full+".", p, isProject, idSeen, depth+1); err != nil {
					return err
				}
				continue
			}
			if err := pr.setMode(pmInclusion, full); err != nil {
				return err
			}
		} else if v.Type == bsoncore.TypeEmbeddedDocument && !expr.IsOperatorDoc(v) {
			sd := v.Document()
			if e, _ := sd.Elements(); len(e) > 0 {
				if f.sub == nil {
					f.sub = &pnode{}
				}
				if err := pr.parseLevel(sd, f.sub, full+".", p, isProject, idSeen, depth+1); err != nil {
					return err
				}
				continue
			}
		}
		x, err := p.parseExpr(v)
		if err != nil {
			return err
		}
		f.x = x
	}
	return nil
}

func (pr *projection) setMode(m projMode, path string) error {
	if pr.mode == -1 {
		pr.mode = m
		return nil
	}
	if pr.mode != m {
		if m == pmExclusion {
			return mongoerr.Newf(mongoerr.Location31254, "Invalid $project :: caused by :: Cannot do exclusion on field %s in inclusion projection", path)
		}
		return mongoerr.Newf(mongoerr.Location31253, "Invalid $project :: caused by :: Cannot do inclusion on field %s in exclusion projection", path)
	}
	return nil
}

// apply projects one document.
func (pr *projection) apply(doc bsoncore.Document, ec *expr.EvalContext) (bsoncore.Document, error) {
	switch pr.mode {
	case pmInclusion:
		return applyInclusion(pr.root, doc, ec)
	case pmExclusion:
		return applyExclusion(pr.root, doc), nil
	}
	return applyAddFields(pr.root, doc, ec)
}

func applyInclusion(n *pnode, doc bsoncore.Document, ec *expr.EvalContext) (bsoncore.Document, error) {
	out := expr.NewDoc()
	els, _ := doc.Elements()
	for _, el := range els {
		f := n.get(el.Key(), false)
		if f == nil || f.x != nil {
			continue
		}
		if f.include {
			out.AddElement(el)
			continue
		}
		if f.sub != nil {
			v, err := inclusionValue(f.sub, el.Value(), ec)
			if err != nil {
				return nil, err
			}
			out.Add(el.Key(), v)
		}
	}
	// Computed fields (and sub-documents holding only computed fields that did not exist)
	// come after the included ones, in spec order.
	for _, f := range n.fields {
		switch {
		case f.x != nil:
			v, err := f.x.Eval(ec)
			if err != nil {
				return nil, err
			}
			out.Add(f.name, v)
		case f.sub != nil && hasComputed(f.sub) && expr.Field(doc, f.name).Type == 0:
			d, err := applyInclusion(f.sub, expr.EmptyDoc, ec)
			if err != nil {
				return nil, err
			}
			out.Add(f.name, expr.Doc(d))
		}
	}
	return out.Done(), nil
}

func hasComputed(n *pnode) bool {
	for _, f := range n.fields {
		if f.x != nil || (f.sub != nil && hasComputed(f.sub)) {
			return true
		}
	}
	return false
}

func inclusionValue(n *pnode, v value, ec *expr.EvalContext) (value, error) {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		d, err := applyInclusion(n, v.Data, ec)
		return expr.Doc(d), err
	case bsoncore.TypeArray:
		vals, err := expr.ArrayValues(v)
		if err != nil {
			return expr.Missing, err
		}
		out := make([]value, 0, len(vals))
		for _, e := range vals {
			if e.Type != bsoncore.TypeEmbeddedDocument && e.Type != bsoncore.TypeArray {
				if hasComputed(n) {
					d, err := applyInclusion(n, expr.EmptyDoc, ec)
					if err != nil {
						return expr.Missing, err
					}
					out = append(out, expr.Doc(d))
				}
				continue
			}
			r, err := inclusionValue(n, e, ec)
			if err != nil {
				return expr.Missing, err
			}
			out = append(out, r)
		}
		return expr.Array(out), nil
	}
	if hasComputed(n) {
		d, err := applyInclusion(n, expr.EmptyDoc, ec)
		return expr.Doc(d), err
	}
	return expr.Missing, nil
}

func applyExclusion(n *pnode, doc bsoncore.Document) bsoncore.Document {
	out := expr.NewDoc()
	els, _ := doc.Elements()
	for _, el := range els {
		f := n.get(el.Key(), false)
		switch {
		case f == nil || f.include:
			out.AddElement(el)
		case f.exclude:
		case f.sub != nil:
			out.Add(el.Key(), exclusionValue(f.sub, el.Value()))
		default:
			out.AddElement(el)
		}
	}
	return out.Done()
}

func exclusionValue(n *pnode, v value) value {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		return expr.Doc(applyExclusion(n, v.Data))
	case bsoncore.TypeArray:
		vals, _ := expr.ArrayValues(v)
		out := make([]value, len(vals))
		for i, e := range vals {
			out[i] = exclusionValue(n, e)
		}
		return expr.Array(out)
	}
	return v
}

func applyAddFields(n *pnode, doc bsoncore.Document, ec *expr.EvalContext) (bsoncore.Document, error) {
	out := expr.NewDoc()
	els, _ := doc.Elements()
	done := make([]bool, len(n.fields))
	for _, el := range els {
		idx := -1
		for i, f := range n.fields {
			if f.name == el.Key() {
				idx = i
				break
			}
		}
		if idx < 0 {
			out.AddElement(el)
			continue
		}
		if done[idx] {
			continue // duplicate field name in the input: first occurrence wins
		}
		done[idx] = true
		v, err := addFieldsValue(n.fields[idx], el.Value(), ec)
		if err != nil {
			return nil, err
		}
		out.Add(el.Key(), v)
	}
	for i, f := range n.fields {
		if done[i] {
			continue
		}
		v, err := addFieldsValue(f, expr.Missing, ec)
		if err != nil {
			return nil, err
		}
		out.Add(f.name, v)
	}
	return out.Done(), nil
}

func addFieldsValue(f *pfield, cur value, ec *expr.EvalContext) (value, error) {
	if f.x != nil {
		return f.x.Eval(ec)
	}
	switch cur.Type {
	case bsoncore.TypeEmbeddedDocument:
		d, err := applyAddFields(f.sub, cur.Data, ec)
		return expr.Doc(d), err
	case bsoncore.TypeArray:
		vals, err := expr.ArrayValues(cur)
		if err != nil {
			return expr.Missing, err
		}
		out := make([]value, len(vals))
		for i, e := range vals {
			if out[i], err = addFieldsValue(f, e, ec); err != nil {
				return expr.Missing, err
			}
		}
		return expr.Array(out), nil
	}
	d, err := applyAddFields(f.sub, expr.EmptyDoc, ec)
	return expr.Doc(d), err
}

// ---- stages ----

type projectStage struct {
	stageName string
	pr        *projection
}

func (s *projectStage) name() string { return s.stageName }
func (s *projectStage) spec() value {
	if s.stageName == "$unset" {
		return s.pr.raw
	}
	return s.pr.raw
}

func (s *projectStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	ec := rc.evalCtx(nil)
	return eachDoc(in, func(_ context.Context, d bsoncore.Document) (bsoncore.Document, bool, error) {
		ec.Root, ec.Current = d, nil
		out, err := s.pr.apply(d, ec)
		return out, err == nil, err
	}), nil
}

func parseProject(spec value, p *pctx) (stage, error) {
	pr, err := parseProjection(spec, p, "$project", true)
	if err != nil {
		return nil, invalidStage("$project", spec, err)
	}
	return &projectStage{stageName: "$project", pr: pr}, nil
}

func parseAddFields(name string) stageParser {
	return func(spec value, p *pctx) (stage, error) {
		pr, err := parseProjection(spec, p, name, false)
		if err != nil {
			return nil, invalidStage(name, spec, err)
		}
		return &projectStage{stageName: name, pr: pr}, nil
	}
}

func parseUnset(spec value, p *pctx) (stage, error) {
	var names []value
	switch spec.Type {
	case bsoncore.TypeString:
		names = []value{spec}
	case bsoncore.TypeArray:
		vals, err := expr.ArrayValues(spec)
		if err != nil {
			return nil, err
		}
		names = vals
	default:
		return nil, mongoerr.New(mongoerr.Location31002, "$unset specification must be a string or an array")
	}
	if len(names) == 0 {
		return nil, mongoerr.New(mongoerr.Location31119, "$unset specification must be a string or an array with at least one field")
	}
	d := expr.NewDoc()
	for _, n := range names {
		s, ok := n.StringValueOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location31120, "$unset specification must be a string or an array containing only string values")
		}
		d.Add(s, expr.Int32(0))
	}
	pr, err := parseProjection(expr.Doc(d.Done()), p, "$unset", true)
	if err != nil {
		return nil, err
	}
	return &projectStage{stageName: "$unset", pr: pr}, nil
}

// modifiedTopFields is, for optimisation, the set of top-level fields a projection stage may
// change, and whether a field not in it survives unchanged.
func (s *projectStage) preserves(top string) bool {
	switch s.pr.mode {
	case pmAddFields:
		return s.pr.root.get(top, false) == nil
	case pmExclusion:
		return s.pr.root.get(top, false) == nil
	}
	f := s.pr.root.get(top, false)
	return f != nil && f.include
}

// stageNameOf names the stage a projection specification belongs to in error messages.
func stageNameOf(isProject bool) string {
	if isProject {
		return "$project"
	}
	return "$addFields"
}

// invalidStage gives a $project/$addFields/$set parse error the context mongod adds around
// building the stage's projection (DBException::addContext("Invalid <stage>")): "Invalid
// $addFields :: caused by :: <reason>". The non-object check comes before and stays bare.
func invalidStage(stage string, spec value, err error) error {
	me, ok := mongoerr.As(err)
	if !ok || spec.Type != bsoncore.TypeEmbeddedDocument {
		return err
	}
	prefix := "Invalid " + stage + " :: caused by :: "
	if strings.HasPrefix(me.Msg, prefix) {
		return err
	}
	c := *me
	c.Msg = prefix + me.Msg
	return &c
}
