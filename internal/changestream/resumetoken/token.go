// Package resumetoken encodes and decodes change stream resume tokens byte for byte as
// MongoDB does (MongoDB's src/mongo/db/pipeline/resume_token.cpp; the spec's execution.md has
// no change stream section), so that tokens sort by cluster time as strings and a token from
// MongoDB decodes here.
//
// A change event's `_id` is {_data: "<hex>", _typeBits: BinData} where _data is the uppercase
// hex of a KeyString V1 encoding (all ascending, see ks.go) of the token's fields as one BSON
// object's values, in this order:
//
//	clusterTime   Timestamp
//	version       int (0, 1 or 2)
//	tokenType     int, v1+: 0 high water mark, 128 event
//	txnOpIndex    int
//	fromInvalidate bool, v1+
//	uuid          BinData 4; v2+: null when absent; v0/v1: omitted when absent
//	eventIdentifier  object; v0/v1: the documentKey; v2: {operationType, documentKey or
//	              operationDescription}; omitted when absent
//	fragmentNum   int, v2+, only for events split by $changeStreamSplitLargeEvent
//
// _typeBits is present only when the type bits have a one bit (a non-int number or a symbol
// in the eventIdentifier): it is what tells 1 from 1.0 when decoding.
//
// Known deviations: a KeyString that runs out of bytes reports Overflow (15) with Humongo's
// message where MongoDB's BufReader reports its own; DecodeOption reports a non-object value
// with the IDL's TypeMismatch message for `$changeStream.<name>`. Reproduced on purpose:
// MongoDB's decoder turns a decimal with integer part 2^53+1 and a fraction into one with
// integer part 2^53 (an int64 compared with 2^53 as a double), and so does this one; NaNs,
// infinities with payload bits and non-canonical decimals decode as their canonical forms.
package resumetoken

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// Token types (ResumeTokenData::TokenType).
const (
	// HighWaterMark is a token naming a point in time rather than an event.
	HighWaterMark = 0
	// Event is a token naming an event of the stream.
	Event = 128
)

// DefaultVersion is the token version MongoDB 7.0+ generates (kDefaultTokenVersion).
const DefaultVersion = 2

// Data is a decoded resume token (ResumeTokenData).
type Data struct {
	ClusterTime    optime.Timestamp
	Version        int
	TokenType      int // HighWaterMark or Event; always Event in v0 tokens
	TxnOpIndex     int // index of the operation in its transaction; 0 outside transactions
	FromInvalidate bool
	UUID           *catalog.UUID // nil when absent
	// EventID is the eventIdentifier: for v2 an object {operationType, documentKey} (or
	// operationDescription), for v0/v1 the documentKey. Zero Value when absent.
	EventID     bsoncore.Value
	FragmentNum *int // nil when absent
}

// HighWaterMarkAt returns the high water mark token data for ts (makeHighWaterMarkTokenData).
func HighWaterMarkAt(ts optime.Timestamp) Data {
	return Data{ClusterTime: ts, Version: DefaultVersion, TokenType: HighWaterMark}
}

// IsHighWaterMark reports whether d is a high water mark token: equal to the one
// HighWaterMarkAt builds for its cluster time and version (isHighWaterMarkToken).
func (d Data) IsHighWaterMark() bool {
	return Compare(d, Data{ClusterTime: d.ClusterTime, Version: d.Version, TokenType: HighWaterMark}) == 0
}

func present(v bsoncore.Value) bool { return v.Type != 0 }

// Compare orders token data field by field in the order of ResumeTokenData::operator==:
// clusterTime, version, tokenType, txnOpIndex, fromInvalidate, uuid (absent first),
// eventIdentifier (absent first, then BSON order) and fragmentNum (absent first). It returns
// 0 exactly when MongoDB's operator== holds.
func Compare(a, b Data) int {
	if c := cmpInt(uint64(a.ClusterTime), uint64(b.ClusterTime)); c != 0 {
		return c
	}
	if c := cmpInt(a.Version, b.Version); c != 0 {
		return c
	}
	if c := cmpInt(a.TokenType, b.TokenType); c != 0 {
		return c
	}
	if c := cmpInt(a.TxnOpIndex, b.TxnOpIndex); c != 0 {
		return c
	}
	if c := cmpInt(b2i(a.FromInvalidate), b2i(b.FromInvalidate)); c != 0 {
		return c
	}
	switch {
	case a.UUID == nil && b.UUID != nil:
		return -1
	case a.UUID != nil && b.UUID == nil:
		return 1
	case a.UUID != nil:
		if c := a.UUID.Compare(*b.UUID); c != 0 {
			return c
		}
	}
	switch pa, pb := present(a.EventID), present(b.EventID); {
	case !pa && pb:
		return -1
	case pa && !pb:
		return 1
	case pa:
		if c := bsonutil.Compare(a.EventID, b.EventID); c != 0 {
			return c
		}
	}
	switch {
	case a.FragmentNum == nil && b.FragmentNum != nil:
		return -1
	case a.FragmentNum != nil && b.FragmentNum == nil:
		return 1
	case a.FragmentNum != nil:
		return cmpInt(*a.FragmentNum, *b.FragmentNum)
	}
	return 0
}

func cmpInt[T int | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendNumber appends n as BSONObjBuilder::appendNumber(long long) does: an int below 2^30
// in magnitude, a double below 2^40, a long beyond.
func appendNumber(vals []bsoncore.Value, n int64) []bsoncore.Value {
	abs := n
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs < 1<<30:
		return append(vals, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(n))})
	case abs < 1<<40:
		return append(vals, bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, float64(n))})
	}
	return append(vals, bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)})
}

// Make returns the `_id` document {_data, [_typeBits]} for d (ResumeToken(ResumeTokenData)),
// or MongoDB's error for data no valid token holds.
func Make(d Data) (bsoncore.Document, error) {
	if d.TokenType == HighWaterMark &&
		(d.TxnOpIndex > 0 || d.FromInvalidate || d.UUID != nil || present(d.EventID)) {
		return nil, mongoerr.New(mongoerr.Location6189505, "Invalid high water mark token")
	}
	if d.UUID == nil && present(d.EventID) && d.Version < 2 {
		return nil, mongoerr.New(mongoerr.Location50788, "Unexpected resume token with a eventIdentifier but no UUID")
	}
	if d.TokenType == Event && !present(d.EventID) && d.Version >= 2 {
		return nil, mongoerr.New(mongoerr.Location6189502, "Expected an eventIdentifier for an event resume token")
	}
	if d.FragmentNum != nil && d.Version < 2 {
		return nil, mongoerr.Newf(mongoerr.Location7182504, "Tokens of version %d cannot have a fragmentNum", d.Version)
	}
	if d.TxnOpIndex < 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "resume token txnOpIndex must be non-negative")
	}

	vals := []bsoncore.Value{
		{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, d.ClusterTime.Secs(), d.ClusterTime.Inc())},
		{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(d.Version))},
	}
	if d.Version >= 1 {
		vals = appendNumber(vals, int64(d.TokenType))
	}
	vals = appendNumber(vals, int64(d.TxnOpIndex))
	if d.Version >= 1 {
		vals = append(vals, bsoncore.Value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, d.FromInvalidate)})
	}
	switch {
	case d.UUID != nil:
		vals = append(vals, bsoncore.Value{Type: bsoncore.TypeBinary, Data: bsoncore.AppendBinary(nil, 4, d.UUID[:])})
	case d.Version >= 2:
		vals = append(vals, bsoncore.Value{Type: bsoncore.TypeNull})
	}
	if present(d.EventID) {
		vals = append(vals, d.EventID)
	}
	if d.FragmentNum != nil {
		vals = appendNumber(vals, int64(*d.FragmentNum))
	}

	b := newKSBuilder()
	for _, v := range vals {
		if err := b.appendValue(v, 1); err != nil {
			return nil, err
		}
	}
	b.appendByte(ksEnd, false)

	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendStringElement(doc, "_data", strings.ToUpper(hex.EncodeToString(b.buf)))
	if tb := b.tb.serialize(); tb != nil {
		doc = bsoncore.AppendBinaryElement(doc, "_typeBits", 0, tb)
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc, nil
}

// Encode is Make for data the caller built itself: it panics on data no valid token holds.
func Encode(d Data) bsoncore.Document {
	doc, err := Make(d)
	if err != nil {
		panic(fmt.Sprintf("resumetoken.Encode: %v", err))
	}
	return doc
}

// DecodeOption decodes the value of a resumeAfter or startAfter option ($changeStream's
// resumeToken IDL type): it must be an object holding a token. name is the option's name
// ("resumeAfter"); a name without a dot is reported as `$changeStream.<name>`.
func DecodeOption(name string, v bsoncore.Value) (Data, error) {
	if v.Type != bsoncore.TypeEmbeddedDocument {
		if !strings.Contains(name, ".") {
			name = "$changeStream." + name
		}
		return Data{}, mongoerr.Newf(mongoerr.TypeMismatch,
			"BSON field '%s' is the wrong type '%s', expected type 'object'", name, bsonutil.TypeName(v.Type))
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return Data{}, mongoerr.New(mongoerr.InvalidBSON, "resume token: malformed BSON object")
	}
	return Decode(doc)
}

// Decode parses an `_id` resume token document (ResumeToken::parse then getData), with
// MongoDB's errors for malformed tokens. It never panics.
func Decode(id bsoncore.Document) (Data, error) {
	if err := id.Validate(); err != nil {
		return Data{}, mongoerr.New(mongoerr.InvalidBSON, "resume token: malformed BSON object")
	}
	dataVal, err := id.LookupErr("_data")
	if err != nil || dataVal.Type != bsoncore.TypeString {
		return Data{}, mongoerr.New(mongoerr.Location40647,
			"Bad resume token: _data of missing or of wrong type. Expected string, got "+bsonutil.FormatDoc(id))
	}
	hexStr := dataVal.StringValue()
	var tbBytes []byte
	if tbVal, err := id.LookupErr("_typeBits"); err == nil {
		sub, data, ok := tbVal.BinaryOK()
		if tbVal.Type != bsoncore.TypeBinary || !ok || sub != 0 {
			return Data{}, mongoerr.New(mongoerr.Location40648,
				"Bad resume token: _typeBits of wrong type "+bsonutil.FormatDoc(id))
		}
		tbBytes = data
	}
	tb, err := parseTypeBits(tbBytes)
	if err != nil {
		return Data{}, err
	}
	if len(hexStr)%2 != 0 {
		return Data{}, mongoerr.New(mongoerr.FailedToParse, "resume token string was not a valid hex string")
	}
	key, err := hex.DecodeString(hexStr)
	if err != nil {
		return Data{}, mongoerr.New(mongoerr.FailedToParse, "resume token string was not a valid hex string")
	}
	vals, err := decodeKey(key, tb)
	if err != nil {
		return Data{}, err
	}
	return fromValues(vals)
}

// fromValues reads the token fields out of the decoded KeyString (ResumeToken::getData).
func fromValues(vals []bsoncore.Value) (Data, error) {
	next := func() (bsoncore.Value, bool) {
		if len(vals) == 0 {
			return bsoncore.Value{}, false
		}
		v := vals[0]
		vals = vals[1:]
		return v, true
	}
	var d Data
	d.TokenType = Event
	first, ok := next()
	if !ok {
		return Data{}, mongoerr.New(mongoerr.Location40649, "invalid empty resume token")
	}
	// BSONElement::timestamp(): a Timestamp or a Date's bits, else zero.
	if first.Type == bsoncore.TypeTimestamp || first.Type == bsoncore.TypeDateTime {
		d.ClusterTime = optime.Timestamp(binary.LittleEndian.Uint64(first.Data))
	}
	ver, ok := next()
	if !ok {
		return Data{}, mongoerr.New(mongoerr.Location50796, "Resume Token does not contain version")
	}
	if ver.Type != bsoncore.TypeInt32 {
		return Data{}, mongoerr.New(mongoerr.Location50854, "Invalid resume token: wrong type for version")
	}
	d.Version = int(ver.Int32())
	if d.Version < 0 || d.Version > 2 {
		return Data{}, mongoerr.New(mongoerr.Location50795, "Invalid Resume Token: only supports version 0, 1 and 2")
	}
	if d.Version >= 1 {
		tt, ok := next()
		if !ok {
			return Data{}, mongoerr.New(mongoerr.Location51055, "Resume Token does not contain tokenType")
		}
		if tt.Type != bsoncore.TypeInt32 {
			return Data{}, mongoerr.New(mongoerr.Location51056, "Resume Token tokenType is not an int.")
		}
		d.TokenType = int(tt.Int32())
		if d.TokenType != Event && d.TokenType != HighWaterMark {
			return Data{}, mongoerr.Newf(mongoerr.Location51057, "Token type %d not recognized", d.TokenType)
		}
	}
	idx, ok := next()
	if !ok {
		return Data{}, mongoerr.New(mongoerr.Location50793, "Resume Token does not contain txnOpIndex")
	}
	if idx.Type != bsoncore.TypeInt32 {
		return Data{}, mongoerr.New(mongoerr.Location50855, "Resume Token txnOpIndex is not an integer")
	}
	if d.TxnOpIndex = int(idx.Int32()); d.TxnOpIndex < 0 {
		return Data{}, mongoerr.New(mongoerr.Location50794, "Invalid Resume Token: txnOpIndex should be non-negative")
	}
	if d.Version >= 1 {
		fi, ok := next()
		if !ok {
			return Data{}, mongoerr.New(mongoerr.Location50872, "Resume Token does not contain fromInvalidate")
		}
		if fi.Type != bsoncore.TypeBoolean {
			return Data{}, mongoerr.New(mongoerr.Location50870, "Resume Token fromInvalidate is not a boolean.")
		}
		d.FromInvalidate = fi.Boolean()
	}
	uuidVal, ok := next()
	if !ok {
		if d.Version > 1 {
			return Data{}, mongoerr.New(mongoerr.Location6189500, "Expected UUID or null")
		}
		return d, nil
	}
	if uuidVal.Type != bsoncore.TypeNull {
		sub, data, ok := uuidVal.BinaryOK()
		if uuidVal.Type != bsoncore.TypeBinary || !ok || sub != 4 || len(data) != 16 {
			return Data{}, mongoerr.New(mongoerr.InvalidUUID, "uuid must be a 16-byte binary field with UUID (4) subtype")
		}
		var u catalog.UUID
		copy(u[:], data)
		d.UUID = &u
	}
	if d.TokenType == HighWaterMark && len(vals) > 0 {
		return Data{}, mongoerr.New(mongoerr.Location6189504, "Invalid high water mark token")
	}
	ev, ok := next()
	if !ok {
		if d.TokenType == Event && d.Version >= 2 {
			return Data{}, mongoerr.New(mongoerr.Location6189501, "Expected an eventIdentifier for an event resume token")
		}
		return d, nil
	}
	if ev.Type != bsoncore.TypeEmbeddedDocument {
		return Data{}, mongoerr.New(mongoerr.Location6189503, "Resume Token eventIdentifier is not an object")
	}
	d.EventID = ev
	if len(vals) > 0 && d.Version >= 2 {
		fn, _ := next()
		if fn.Type != bsoncore.TypeInt32 || fn.Int32() < 0 {
			return Data{}, mongoerr.New(mongoerr.Location7182501, "Resume token 'fragmentNum' must be a non-negative integer.")
		}
		n := int(fn.Int32())
		d.FragmentNum = &n
	}
	if len(vals) > 0 {
		return Data{}, mongoerr.New(mongoerr.Location40646, "invalid oversized resume token")
	}
	return d, nil
}
