package query

import (
	"fmt"
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
	coll    Collator // the query's collation (setCollator)
}

func (n *exprNode) Kind() Kind                  { return KindExpr }
func (n *exprNode) Path() string                { return "" }
func (n *exprNode) Value() bsoncore.Value       { return n.operand }
func (n *exprNode) Children() []MatchExpression { return nil }
func (n *exprNode) String() string              { return fmt.Sprintf("$expr %s", n.operand) }

// Expr returns the parsed expression.
func (n *exprNode) Expr() expr.Expression { return n.x }

func (n *exprNode) match(doc []byte, _ *MatchDetails) (bool, error) {
	ctx := expr.EvalContext{Root: doc, Now: n.now(), Collator: n.coll}
	v, err := n.x.Eval(&ctx)
	if err != nil {
		return false, err
	}
	return bsonutil.TrueValue(v), nil
}

func (p *parser) parseExprMatch(val bsoncore.Value) (MatchExpression, error) {
	x, err := expr.Parse(val, &expr.ParseContext{})
	if err != nil {
		return nil, err
	}
	now := p.opts.Now
	if now == nil {
		now = time.Now
	}
	return &exprNode{operand: val, x: x, now: now}, nil
}
