package migration

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// ForceJumbo values (move_range_request.idl's ForceJumbo enum).
const (
	DoNotForce             = "doNotForce"
	ForceManualMigration   = "forceManualMigration"
	ForceBalancerMigration = "forceBalancerMigration"
)

// MoveRangeRequest is _shardsvrMoveRange's content (MongoDB 7.0's
// src/mongo/s/request_types/move_range_request.idl: ShardsvrMoveRange = MoveRangeRequestBase
// + fromShard, epoch, collectionTimestamp, maxChunkSizeBytes; ConfigsvrMoveRange and
// ClusterMoveRange share the base).
type MoveRangeRequest struct {
	NS                  string
	ToShard             string
	Min, Max            bsoncore.Document // Max nil: up to the chunk's max
	WaitForDelete       bool
	ForceJumbo          string
	SecondaryThrottle   bsoncore.Document // {_secondaryThrottle, writeConcern} as sent, nil when absent
	FromShard           string
	Epoch               bson.ObjectID
	CollectionTimestamp bson.Timestamp
	MaxChunkSizeBytes   int64
}

// Same reports whether two requests are the same migration (a second one joins the first).
func (r MoveRangeRequest) Same(o MoveRangeRequest) bool {
	return r.NS == o.NS && r.ToShard == o.ToShard && r.FromShard == o.FromShard &&
		bsonutil.CompareDocuments(r.Min, o.Min) == 0 && bsonutil.CompareDocuments(r.Max, o.Max) == 0 &&
		r.Epoch == o.Epoch && r.CollectionTimestamp == o.CollectionTimestamp && r.WaitForDelete == o.WaitForDelete &&
		r.ForceJumbo == o.ForceJumbo && r.MaxChunkSizeBytes == o.MaxChunkSizeBytes
}

// rangeText is ActiveMoveChunkState::constructErrorStatus's range ("min: {..} - max: {..}").
func (r MoveRangeRequest) rangeText() string {
	var b strings.Builder
	if r.Min != nil {
		b.WriteString("min: " + bsonutil.FormatDoc(r.Min) + " - ")
	}
	if r.Max != nil {
		b.WriteString("max: " + bsonutil.FormatDoc(r.Max))
	}
	return b.String()
}

// Command builds {_shardsvrMoveRange: ns, ...} for the donor primary.
func (r MoveRangeRequest) Command() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendString("_shardsvrMoveRange", r.NS).AppendString("toShard", r.ToShard).
		AppendDocument("min", r.Min)
	if r.Max != nil {
		b.AppendDocument("max", r.Max)
	}
	b.AppendBoolean("waitForDelete", r.WaitForDelete)
	fj := r.ForceJumbo
	if fj == "" {
		fj = DoNotForce
	}
	b.AppendString("forceJumbo", fj)
	if r.SecondaryThrottle != nil {
		b.AppendDocument("secondaryThrottle", r.SecondaryThrottle)
	}
	b.AppendString("fromShard", r.FromShard).AppendObjectID("epoch", r.Epoch).
		AppendTimestamp("collectionTimestamp", r.CollectionTimestamp.T, r.CollectionTimestamp.I).
		AppendInt64("maxChunkSizeBytes", r.MaxChunkSizeBytes)
	return b.Build()
}

func missingField(cmd, field string) error {
	return mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", cmd, field)
}

func wrongType(cmd, field string, got bsoncore.Type, want string) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
		cmd, field, typeName(got), want)
}

func typeName(t bsoncore.Type) string {
	switch t {
	case bsoncore.TypeString:
		return "string"
	case bsoncore.TypeEmbeddedDocument:
		return "object"
	case bsoncore.TypeArray:
		return "array"
	case bsoncore.TypeBoolean:
		return "bool"
	case bsoncore.TypeInt32:
		return "int"
	case bsoncore.TypeInt64:
		return "long"
	case bsoncore.TypeDouble:
		return "double"
	case bsoncore.TypeObjectID:
		return "objectId"
	case bsoncore.TypeTimestamp:
		return "timestamp"
	case bsoncore.TypeNull:
		return "null"
	}
	return strings.ToLower(t.String())
}

// ParseMoveRangeBase reads the fields every moveRange variant shares (cmdName is the
// command's name for error messages): toShard, min, max, waitForDelete, forceJumbo,
// secondaryThrottle.
func ParseMoveRangeBase(cmdName string, cmd bsoncore.Document) (MoveRangeRequest, error) {
	var r MoveRangeRequest
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok {
		return r, mongoerr.Newf(mongoerr.InvalidNamespace, "collection name has invalid type %s", typeName(cmd.Index(0).Value().Type))
	}
	if db, coll, ok := strings.Cut(ns, "."); !ok || db == "" || coll == "" {
		return r, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	r.NS = ns
	str := func(field string, required bool) (string, error) {
		v, err := cmd.LookupErr(field)
		if err != nil {
			if required {
				return "", missingField(cmdName, field)
			}
			return "", nil
		}
		s, ok := v.StringValueOK()
		if !ok {
			return "", wrongType(cmdName, field, v.Type, "string")
		}
		return s, nil
	}
	doc := func(field string, required bool) (bsoncore.Document, error) {
		v, err := cmd.LookupErr(field)
		if err != nil {
			if required {
				return nil, missingField(cmdName, field)
			}
			return nil, nil
		}
		d, ok := v.DocumentOK()
		if !ok {
			return nil, wrongType(cmdName, field, v.Type, "object")
		}
		return d, nil
	}
	var err error
	if r.ToShard, err = str("toShard", true); err != nil {
		return r, err
	}
	if r.Min, err = doc("min", true); err != nil {
		return r, err
	}
	if r.Max, err = doc("max", false); err != nil {
		return r, err
	}
	if r.Max != nil && bsonutil.CompareDocuments(r.Min, r.Max) >= 0 {
		return r, mongoerr.Newf(mongoerr.BadValue, "min must be less than max: %s >= %s",
			bsonutil.FormatDoc(r.Min), bsonutil.FormatDoc(r.Max))
	}
	if v, err := cmd.LookupErr("waitForDelete"); err == nil {
		b, ok := v.BooleanOK()
		if !ok {
			return r, wrongType(cmdName, "waitForDelete", v.Type, "bool")
		}
		r.WaitForDelete = b
	}
	if r.ForceJumbo, err = str("forceJumbo", false); err != nil {
		return r, err
	}
	switch r.ForceJumbo {
	case "":
		r.ForceJumbo = DoNotForce
	case DoNotForce, ForceManualMigration, ForceBalancerMigration:
	default:
		return r, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field '%s.forceJumbo' is not a valid value.", r.ForceJumbo, cmdName)
	}
	// The public moveRange's secondaryThrottle is a bool; the internal commands carry
	// {_secondaryThrottle, writeConcern} as the router or the balancer built it.
	if v, lerr := cmd.LookupErr("secondaryThrottle"); lerr == nil {
		switch v.Type {
		case bsoncore.TypeBoolean:
			b := bsoncore.NewDocumentBuilder().AppendBoolean("_secondaryThrottle", v.Boolean())
			if wc, ok := cmd.Lookup("writeConcern").DocumentOK(); ok && v.Boolean() {
				b.AppendDocument("writeConcern", wc)
			}
			r.SecondaryThrottle = b.Build()
		case bsoncore.TypeEmbeddedDocument:
			r.SecondaryThrottle = v.Document()
		default:
			return r, wrongType(cmdName, "secondaryThrottle", v.Type, "bool")
		}
	}
	// The command's buffer is reused for the connection's next message, and the request
	// outlives it (the registry, the donation's goroutine): keep copies.
	r.Min, r.Max, r.SecondaryThrottle = cloneDoc(r.Min), cloneDoc(r.Max), cloneDoc(r.SecondaryThrottle)
	return r, nil
}

// Throttle reads the request's secondaryThrottle options (MigrationSecondaryThrottleOptions):
// whether the recipient waits for replication after each cloned batch, and with which write
// concern (nil: the migration default). Unset, as in MongoDB 7.0's moveRange, is off.
func (r MoveRangeRequest) Throttle() (on bool, wc bsoncore.Document) {
	if r.SecondaryThrottle == nil {
		return false, nil
	}
	v := r.SecondaryThrottle.Lookup("_secondaryThrottle")
	if v.Type == 0 {
		v = r.SecondaryThrottle.Lookup("secondaryThrottle")
	}
	on, _ = v.BooleanOK()
	if on {
		wc, _ = r.SecondaryThrottle.Lookup("writeConcern").DocumentOK()
	}
	return on, wc
}

func cloneDoc(d bsoncore.Document) bsoncore.Document {
	if d == nil {
		return nil
	}
	return append(bsoncore.Document(nil), d...)
}

// ParseShardsvrMoveRange reads a _shardsvrMoveRange command.
func ParseShardsvrMoveRange(cmd bsoncore.Document) (MoveRangeRequest, error) {
	const name = "_shardsvrMoveRange"
	r, err := ParseMoveRangeBase(name, cmd)
	if err != nil {
		return r, err
	}
	v, err := cmd.LookupErr("fromShard")
	if err != nil {
		return r, missingField(name, "fromShard")
	}
	var ok bool
	if r.FromShard, ok = v.StringValueOK(); !ok {
		return r, wrongType(name, "fromShard", v.Type, "string")
	}
	if v, err = cmd.LookupErr("epoch"); err != nil {
		return r, missingField(name, "epoch")
	}
	if r.Epoch, ok = v.ObjectIDOK(); !ok {
		return r, wrongType(name, "epoch", v.Type, "objectId")
	}
	if v, err = cmd.LookupErr("collectionTimestamp"); err != nil {
		return r, missingField(name, "collectionTimestamp")
	}
	t, i, ok := v.TimestampOK()
	if !ok {
		return r, wrongType(name, "collectionTimestamp", v.Type, "timestamp")
	}
	r.CollectionTimestamp = bson.Timestamp{T: t, I: i}
	if v, err = cmd.LookupErr("maxChunkSizeBytes"); err != nil {
		return r, missingField(name, "maxChunkSizeBytes")
	}
	if r.MaxChunkSizeBytes, ok = v.AsInt64OK(); !ok {
		return r, wrongType(name, "maxChunkSizeBytes", v.Type, "long")
	}
	return r, nil
}
