package query

import (
	"fmt"
	"maps"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/query/expr"
)

// exprNode is {$expr: <aggregation expression>}: the document matches when the expression,
// evaluated against it, is true. The expression language is internal/query/expr.
type exprNode struct {
	operand bsoncore.Value
	x       expr.Expression
	now     func() time.Time
	coll    Collator                  // the query's collation (setCollator)
	vars    map[string]bsoncore.Value // the command's let variables (ParseOptions.Vars)
}

func (n *exprNode) Kind() Kind                  { return KindExpr }
func (n *exprNode) Path() string                { return "" }
func (n *exprNode) Value() bsoncore.Value       { return n.operand }
func (n *exprNode) Children() []MatchExpression { return nil }
func (n *exprNode) String() string              { return fmt.Sprintf("$expr %s", n.operand) }

// Expr returns the parsed expression.
func (n *exprNode) Expr() expr.Expression { return n.x }

func (n *exprNode) match(doc []byte, d *MatchDetails) (bool, error) {
	var ctx expr.EvalContext
	if d != nil && d.Vars != nil {
		ctx = expr.EvalContext{Root: doc, Now: d.Now, Collator: n.coll, Vars: d.Vars}
		if ctx.Now.IsZero() {
			ctx.Now = n.now()
		}
	} else {
		ctx = expr.EvalContext{Root: doc, Now: n.now(), Collator: n.coll, Vars: evalVars(n.vars)}
	}
	v, err := n.x.Eval(&ctx)
	if err != nil {
		return false, err
	}
	return bsonutil.TrueValue(v), nil
}

func (p *parser) parseExprMatch(val bsoncore.Value) (MatchExpression, error) {
	pc := varsParseContext(p.opts.Vars)
	if len(p.opts.VarNames) > 0 {
		if pc.Vars == nil {
			pc.Vars = make(map[string]bool, len(p.opts.VarNames))
		}
		for _, n := range p.opts.VarNames {
			pc.Vars[n] = true
		}
	}
	x, err := expr.Parse(val, pc)
	if err != nil {
		return nil, err
	}
	now := p.opts.Now
	if now == nil {
		now = time.Now
	}
	return &exprNode{operand: val, x: x, now: now, vars: p.opts.Vars}, nil
}

// varsParseContext is the expression parse context in which the command's let variables are
// defined.
func varsParseContext(vars map[string]bsoncore.Value) *expr.ParseContext {
	pc := &expr.ParseContext{}
	if len(vars) > 0 {
		pc.Vars = make(map[string]bool, len(vars))
		for k := range vars {
			pc.Vars[k] = true
		}
	}
	return pc
}

// evalVars returns the let variables for one evaluation: a copy, because binding operators
// ($let, $map, $filter, ...) add their own names to the map while they run and a Matcher is
// shared by concurrent readers.
func evalVars(vars map[string]bsoncore.Value) map[string]bsoncore.Value {
	if len(vars) == 0 {
		return nil
	}
	return maps.Clone(vars)
}
