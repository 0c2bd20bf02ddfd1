package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// ddlPreAndPostImagesField is the collection option of change stream pre- and post-images
// (MongoDB 6.0+; internal/changestream/images).
const ddlPreAndPostImagesField = "changeStreamPreAndPostImages"

// ddlParsePreAndPostImages parses {enabled: <bool>} as MongoDB's IDL
// ChangeStreamPreAndPostImagesOptions does (strict, enabled required and a bool) and returns
// enabled. cmdName is "create" or "collMod".
func ddlParsePreAndPostImages(cmdName string, v bsoncore.Value) (bool, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return false, typeMismatch(cmdName, ddlPreAndPostImagesField, v.Type, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return false, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", ddlPreAndPostImagesField, err)
	}
	enabled, has := false, false
	for _, e := range elems {
		if e.Key() != "enabled" {
			return false, mongoerr.Newf(codeUnknownField, "BSON field '%s.%s.%s' is an unknown field.",
				cmdName, ddlPreAndPostImagesField, e.Key())
		}
		if has {
			return false, mongoerr.Newf(mongoerr.Location40413, "BSON field '%s.%s.enabled' is a duplicate field",
				cmdName, ddlPreAndPostImagesField)
		}
		ev := e.Value()
		if ev.Type != bsoncore.TypeBoolean {
			return false, typeMismatch(cmdName+"."+ddlPreAndPostImagesField, "enabled", ev.Type, "bool")
		}
		enabled, has = ev.Boolean(), true
	}
	if !has {
		return false, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s.enabled' is missing but a required field",
			cmdName, ddlPreAndPostImagesField)
	}
	return enabled, nil
}

// ddlCheckPreAndPostImagesAllowed refuses the option on the internal databases (MongoDB's
// validateChangeStreamPreAndPostImagesOptionIsPermitted).
func ddlCheckPreAndPostImagesAllowed(ns string) error {
	switch db, _ := catalog.SplitNS(ns); db {
	case "admin", "local", "config":
		return mongoerr.Newf(mongoerr.InvalidOptions,
			"%s collection option is not supported on the %s database", ddlPreAndPostImagesField, db)
	}
	return nil
}

// ddlPreAndPostImagesOption is the stored form of an enabled option: {enabled: true}.
var ddlPreAndPostImagesOption = bsoncore.NewDocumentBuilder().AppendBoolean("enabled", true).Build()
