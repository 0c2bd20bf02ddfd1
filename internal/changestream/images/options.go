package images

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// OptionsParameter is the cluster parameter that sets the pre-images' time-based expiry:
// {changeStreamOptions: {preAndPostImages: {expireAfterSeconds: <long> | "off"}}} (MongoDB's
// ChangeStreamOptions, stored in config.clusterParameters under _id "changeStreamOptions").
const OptionsParameter = "changeStreamOptions"

// ParseOptions validates a changeStreamOptions value as setClusterParameter receives it and
// returns its canonical form, {preAndPostImages: {expireAfterSeconds: <long> | "off"}}.
// Errors are BadValue, as MongoDB's.
func ParseOptions(v bsoncore.Value) (bsoncore.Document, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Cluster parameter value must be an object")
	}
	pv, err := d.LookupErr("preAndPostImages")
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "Should specify at least one change stream option to set: 'preAndPostImages'")
	}
	if elems, _ := d.Elements(); len(elems) != 1 {
		return nil, mongoerr.New(mongoerr.BadValue, "changeStreamOptions has no option other than 'preAndPostImages'")
	}
	pd, ok := pv.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "'preAndPostImages' must be an object")
	}
	ev, err := pd.LookupErr("expireAfterSeconds")
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "'preAndPostImages' must specify 'expireAfterSeconds'")
	}
	if elems, _ := pd.Elements(); len(elems) != 1 {
		return nil, mongoerr.New(mongoerr.BadValue, "'preAndPostImages' has no option other than 'expireAfterSeconds'")
	}
	var exp bsoncore.Value
	if s, ok := ev.StringValueOK(); ok {
		if s != "off" {
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Invalid value '%s' for 'expireAfterSeconds': expected \"off\" or a positive number of seconds", s)
		}
		exp = bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "off")}
	} else {
		n, ok := ev.AsInt64OK()
		if !ok {
			if f, isF := ev.DoubleOK(); isF && f == float64(int64(f)) {
				n, ok = int64(f), true
			}
		}
		if !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "'expireAfterSeconds' must be \"off\" or a number, not %s", ev.Type)
		}
		if n <= 0 {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Invalid value %d for 'expireAfterSeconds': it must be positive", n)
		}
		exp = bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)}
	}
	inner := bsoncore.NewDocumentBuilder().AppendValue("expireAfterSeconds", exp).Build()
	return bsoncore.NewDocumentBuilder().AppendDocument("preAndPostImages", inner).Build(), nil
}

// DefaultOptions is the value of a changeStreamOptions never set: no time-based expiry.
var DefaultOptions = bsoncore.NewDocumentBuilder().AppendDocument("preAndPostImages",
	bsoncore.NewDocumentBuilder().AppendString("expireAfterSeconds", "off").Build()).Build()

// ExpireAfterSeconds reads preAndPostImages.expireAfterSeconds from a stored
// changeStreamOptions document; false when it is "off" or absent.
func ExpireAfterSeconds(opts bsoncore.Document) (int64, bool) {
	v, err := opts.LookupErr("preAndPostImages", "expireAfterSeconds")
	if err != nil {
		return 0, false
	}
	n, ok := v.AsInt64OK()
	if !ok || n <= 0 {
		return 0, false
	}
	return n, true
}
