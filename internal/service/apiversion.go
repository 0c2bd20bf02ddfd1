package service

// The Stable API (versioned API) parameters every command accepts — apiVersion, apiStrict,
// apiDeprecationErrors — checked as MongoDB's initializeAPIParameters
// (src/mongo/db/initialize_api_parameters.cpp) and enforceRequireAPIVersion do.

import (
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// apiVersion1Commands are the commands of Stable API Version 1 (MongoDB 7.0's; count joined
// in 5.0.9/5.3.2). A registration may set Command.APIVersions instead (the test commands).
var apiVersion1Commands = map[string]bool{
	"abortTransaction": true, "aggregate": true, "authenticate": true, "collMod": true,
	"commitTransaction": true, "count": true, "create": true, "createIndexes": true, "delete": true,
	"drop": true, "dropDatabase": true, "dropIndexes": true, "endSessions": true, "find": true,
	"findAndModify": true, "getMore": true, "hello": true, "insert": true, "killCursors": true,
	"listCollections": true, "listDatabases": true, "listIndexes": true, "ping": true,
	"refreshSessions": true, "update": true,
}

// apiStrictRefusedStages are the aggregation stages registered with
// AllowedWithApiStrict::kNeverInVersion1: a pipeline using one under apiStrict fails.
var apiStrictRefusedStages = map[string]bool{
	"$currentOp": true, "$listLocalSessions": true, "$listSessions": true, "$planCacheStats": true,
	"$indexStats": true, "$listSearchIndexes": true, "$search": true, "$searchMeta": true,
	"$vectorSearch": true, "$listCatalog": true, "$shardedDataDistribution": true,
	"$querySettings": true, "$listSampledQueries": true, "$queryStats": true,
	"$changeStreamSplitLargeEvent": true, "$rankFusion": true, "$scoreFusion": true,
}

// APIVersionsOf returns the Stable API versions command c belongs to.
func APIVersionsOf(c *Command) []string {
	if c.APIVersions != nil {
		return c.APIVersions
	}
	if apiVersion1Commands[c.Name] {
		return []string{"1"}
	}
	return nil
}

// CheckAPIParameters validates cmd's Stable API parameters for command c: their types, the
// version ("1"; "2" only with acceptApiVersion2), apiStrict (the command, and an aggregate's
// stages, must be in the version) and apiDeprecationErrors. requireAPIVersion (the
// requireApiVersion parameter) makes apiVersion mandatory for every command of an external
// client (internal: the connection identified itself as an internal client).
func CheckAPIParameters(c *Command, cmd bsoncore.Document, requireAPIVersion, acceptV2, internal bool) error {
	var version string
	var hasVersion, strict, hasStrict, deprecationErrors, hasDeprecationErrors bool
	elems, err := cmd.Elements()
	if err != nil {
		return nil // framing validated the document; nothing more to say here
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "apiVersion":
			s, ok := v.StringValueOK()
			if !ok {
				return apiTypeMismatch("apiVersion", v.Type, "string")
			}
			version, hasVersion = s, true
		case "apiStrict":
			if v.Type != bsoncore.TypeBoolean {
				return apiTypeMismatch("apiStrict", v.Type, "bool")
			}
			strict, hasStrict = v.Boolean(), true
		case "apiDeprecationErrors":
			if v.Type != bsoncore.TypeBoolean {
				return apiTypeMismatch("apiDeprecationErrors", v.Type, "bool")
			}
			deprecationErrors, hasDeprecationErrors = v.Boolean(), true
		}
	}
	// enforceRequireAPIVersion: internal clients are exempt, and so is a pre-auth hello that
	// claims to be one ({hello: 1, internalClient: ...}), which is how they identify.
	if !internal && !c.RequiresAuth && Truthy(cmd.Lookup("internalClient")) {
		internal = true
	}
	if requireAPIVersion && !internal && !hasVersion {
		return mongoerr.New(mongoerr.Location498870,
			"The apiVersion parameter is required, please configure your MongoClient's API version")
	}
	if (hasStrict || hasDeprecationErrors) && !hasVersion {
		return mongoerr.New(mongoerr.Location4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
	}
	if !hasVersion {
		return nil
	}
	switch {
	case version == "2" && !acceptV2:
		return mongoerr.New(mongoerr.APIVersionError, "Cannot accept API version 2")
	case version != "1" && version != "2":
		return mongoerr.New(mongoerr.APIVersionError, `API version must be "1"`)
	}
	if strict {
		if !slices.Contains(APIVersionsOf(c), version) {
			return mongoerr.Newf(mongoerr.APIStrictError,
				"Provided apiStrict:true, but the command %s is not in API Version %s. Information on supported commands and migrations in API Version %s can be found at https://dochub.mongodb.org/core/manual-versioned-api",
				c.Name, version, version)
		}
		if c.Name == "aggregate" && version == "1" {
			if err := checkStrictPipeline(cmd); err != nil {
				return err
			}
		}
	}
	if deprecationErrors && slices.Contains(c.DeprecatedAPIVersions, version) {
		return mongoerr.Newf(mongoerr.APIDeprecationError,
			"Provided apiDeprecationErrors:true, but the command %s is deprecated in API Version %s", c.Name, version)
	}
	return nil
}

// checkStrictPipeline refuses an aggregate's top-level stages that are never in API
// Version 1 (LiteParsedDocumentSource's AllowedWithApiStrict check).
func checkStrictPipeline(cmd bsoncore.Document) error {
	arr, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return nil // the aggregate's own parsing reports a bad pipeline
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		first, err := d.IndexErr(0)
		if err != nil {
			continue
		}
		if name := first.Key(); apiStrictRefusedStages[name] {
			return mongoerr.Newf(mongoerr.APIStrictError, "%s is not allowed with 'apiStrict: true' in API Version 1", name)
		}
	}
	return nil
}

func apiTypeMismatch(field string, got bsoncore.Type, want string) error {
	return mongoerr.New(mongoerr.TypeMismatch, fmt.Sprintf("BSON field 'APIParametersFromClient.%s' is the wrong type '%s', expected type '%s'",
		field, bsonutil.TypeName(got), want))
}
