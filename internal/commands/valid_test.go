package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// validCmd runs a command given as relaxed extended JSON (field order kept). Replies with
// writeErrors are returned as replies, not errors.
func validCmd(t testing.TB, cl *mongo.Client, js string) (bson.Raw, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.Database("test").RunCommand(ctx, writeExtJSON(t, js)).Raw()
	var we mongo.WriteException
	if errors.As(err, &we) && len(r) > 0 {
		return r, nil
	}
	return r, err
}

func validMust(t testing.TB, cl *mongo.Client, js string) bson.Raw {
	t.Helper()
	r, err := validCmd(t, cl, js)
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return r
}

// validWantWriteCode checks the reply's first write error code.
func validWantWriteCode(t testing.TB, r bson.Raw, code mongoerr.Code) bson.Raw {
	t.Helper()
	we := writeErr0(r)
	if we == nil || we.Lookup("code").Int32() != int32(code) {
		t.Fatalf("want write error %d, got %s", code, r)
	}
	return we
}

func validWantOK(t testing.TB, r bson.Raw) {
	t.Helper()
	if writeErr0(r) != nil {
		t.Fatalf("unexpected write error: %s", r)
	}
}

// validFind returns test.<coll>'s documents as relaxed JSON, in storage order.
func validFind(t testing.TB, cl *mongo.Client, coll string) string {
	t.Helper()
	cur, err := cl.Database("test").Collection(coll).Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(docs))
	for i, d := range docs {
		b, _ := bson.MarshalExtJSON(d, false, false)
		parts[i] = string(b)
	}
	return strings.Join(parts, ",")
}

func TestValidJSONSchemaErrInfo(t *testing.T) {
	_, cl := writeTestServer(t)
	validMust(t, cl, `{"create": "p", "validator": {"$jsonSchema": {"bsonType": "object", "required": ["name", "age"],
		"properties": {"name": {"bsonType": "string", "description": "must be a string"}, "age": {"bsonType": "int", "minimum": 0}}}}}`)
	validWantOK(t, validMust(t, cl, `{"insert": "p", "documents": [{"_id": 1, "name": "ann", "age": 30}]}`))

	r := validMust(t, cl, `{"insert": "p", "documents": [{"_id": 2, "name": 5}]}`)
	if n := r.Lookup("n").Int32(); n != 0 {
		t.Fatalf("n = %d: %s", n, r)
	}
	we := validWantWriteCode(t, r, mongoerr.DocumentValidationFailure)
	if got := strings.Join(writeKeys(we), ","); got != "index,code,errInfo,errmsg" {
		t.Errorf("write error fields %s: %s", got, we)
	}
	if we.Lookup("errmsg").StringValue() != "Document failed validation" {
		t.Errorf("errmsg: %s", we)
	}
	info := we.Lookup("errInfo").Document()
	if id := info.Lookup("failingDocumentId"); id.Int32() != 2 {
		t.Errorf("failingDocumentId: %s", info)
	}
	details := info.Lookup("details").Document()
	if details.Lookup("operatorName").StringValue() != "$jsonSchema" {
		t.Fatalf("details: %s", details)
	}
	rules, _ := details.Lookup("schemaRulesNotSatisfied").Array().Values()
	var sawRequired, sawProps bool
	for _, rv := range rules {
		rule := rv.Document()
		switch rule.Lookup("operatorName").StringValue() {
		case "required":
			sawRequired = true
			if m := rule.Lookup("missingProperties").String(); m != `["age"]` {
				t.Errorf("missingProperties %s", m)
			}
		case "properties":
			sawProps = true
			props, _ := rule.Lookup("propertiesNotSatisfied").Array().Values()
			if len(props) != 1 {
				t.Fatalf("propertiesNotSatisfied: %s", rule)
			}
			p := props[0].Document()
			if p.Lookup("propertyName").StringValue() != "name" || p.Lookup("description").StringValue() != "must be a string" {
				t.Errorf("property: %s", p)
			}
			d0 := p.Lookup("details").Array().Index(0).Document()
			if d0.Lookup("operatorName").StringValue() != "bsonType" || d0.Lookup("reason").StringValue() != "type did not match" ||
				d0.Lookup("consideredType").StringValue() != "int" || d0.Lookup("consideredValue").Int32() != 5 {
				t.Errorf("property details: %s", d0)
			}
		}
	}
	if !sawRequired || !sawProps {
		t.Errorf("rules: %s", details)
	}

	// A failing minimum inside properties names the keyword.
	r = validMust(t, cl, `{"insert": "p", "documents": [{"_id": 3, "name": "bob", "age": -1}]}`)
	we = validWantWriteCode(t, r, mongoerr.DocumentValidationFailure)
	if s := we.Lookup("errInfo").String(); !strings.Contains(s, `"operatorName": "minimum"`) || !strings.Contains(s, `"reason": "comparison failed"`) {
		t.Errorf("minimum details: %s", s)
	}

	// Ordered stops at the failure; unordered goes on.
	r = validMust(t, cl, `{"insert": "p", "documents": [{"_id": 4, "name": "a", "age": 1}, {"_id": 5}, {"_id": 6, "name": "b", "age": 2}], "ordered": false}`)
	if r.Lookup("n").Int32() != 2 || writeErr0(r).Lookup("index").Int32() != 1 {
		t.Errorf("unordered: %s", r)
	}

	// Updates and upserts that produce invalid documents fail and change nothing.
	r = validMust(t, cl, `{"update": "p", "updates": [{"q": {"_id": 1}, "u": {"$unset": {"age": ""}}}]}`)
	validWantWriteCode(t, r, mongoerr.DocumentValidationFailure)
	r = validMust(t, cl, `{"update": "p", "updates": [{"q": {"_id": 9}, "u": {"$set": {"name": "z"}}, "upsert": true}]}`)
	validWantWriteCode(t, r, mongoerr.DocumentValidationFailure)
	if got := validFind(t, cl, "p"); got != `{"_id":1,"name":"ann","age":30},{"_id":4,"name":"a","age":1},{"_id":6,"name":"b","age":2}` {
		t.Errorf("after failed writes: %s", got)
	}

	// findAndModify reports a command error with errInfo.
	_, err := validCmd(t, cl, `{"findAndModify": "p", "query": {"_id": 1}, "update": {"$set": {"age": "old"}}}`)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.DocumentValidationFailure) || !strings.Contains(ce.Raw.String(), "errInfo") {
		t.Errorf("findAndModify: %v", err)
	}

	// bypassDocumentValidation skips the check on every write command.
	validWantOK(t, validMust(t, cl, `{"insert": "p", "documents": [{"_id": 7}], "bypassDocumentValidation": true}`))
	validWantOK(t, validMust(t, cl, `{"update": "p", "updates": [{"q": {"_id": 1}, "u": {"$set": {"age": "x"}}}], "bypassDocumentValidation": true}`))
	if _, err := validCmd(t, cl, `{"findAndModify": "p", "query": {"_id": 4}, "update": {"$set": {"age": "y"}}, "bypassDocumentValidation": true}`); err != nil {
		t.Errorf("findAndModify bypass: %v", err)
	}
}

func TestValidQueryOperatorsLevelsActions(t *testing.T) {
	_, cl := writeTestServer(t)
	validMust(t, cl, `{"create": "q", "validator": {"a": {"$gte": 0}, "s": {"$type": "string"}}}`)
	r := validMust(t, cl, `{"insert": "q", "documents": [{"_id": 1, "a": -1, "s": "x"}]}`)
	we := validWantWriteCode(t, r, mongoerr.DocumentValidationFailure)
	details := we.Lookup("errInfo", "details").Document()
	if details.Lookup("operatorName").StringValue() != "$and" {
		t.Fatalf("details: %s", details)
	}
	c0 := details.Lookup("clausesNotSatisfied").Array().Index(0).Document()
	d0 := c0.Lookup("details").Document()
	if c0.Lookup("index").Int32() != 0 || d0.Lookup("operatorName").StringValue() != "$gte" ||
		d0.Lookup("reason").StringValue() != "comparison failed" || d0.Lookup("consideredValue").Int32() != -1 {
		t.Errorf("clause details: %s", c0)
	}
	// A single clause is reported without the $and wrapper; a missing field says so.
	validMust(t, cl, `{"create": "one", "validator": {"k": {"$exists": true}}}`)
	r = validMust(t, cl, `{"insert": "one", "documents": [{"_id": 1}]}`)
	if d := validWantWriteCode(t, r, mongoerr.DocumentValidationFailure).Lookup("errInfo", "details").Document(); d.Lookup("operatorName").StringValue() != "$exists" ||
		d.Lookup("reason").StringValue() != "path does not exist" {
		t.Errorf("$exists details: %s", d)
	}

	// Seed one invalid and one valid document.
	validWantOK(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 1, "a": -1, "s": "x"}], "bypassDocumentValidation": true}`))
	validWantOK(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 2, "a": 1, "s": "y"}]}`))

	// strict (default): updating the invalid document must produce a valid one.
	validWantWriteCode(t, validMust(t, cl, `{"update": "q", "updates": [{"q": {"_id": 1}, "u": {"$set": {"b": 1}}}]}`), mongoerr.DocumentValidationFailure)
	// A no-op update writes nothing and is not validated.
	r = validMust(t, cl, `{"update": "q", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": -1}}}]}`)
	validWantOK(t, r)

	// moderate: updates of already-invalid documents are not checked; valid ones still are.
	validMust(t, cl, `{"collMod": "q", "validationLevel": "moderate"}`)
	validWantOK(t, validMust(t, cl, `{"update": "q", "updates": [{"q": {"_id": 1}, "u": {"$set": {"b": 1}}}]}`))
	validWantWriteCode(t, validMust(t, cl, `{"update": "q", "updates": [{"q": {"_id": 2}, "u": {"$set": {"a": -5}}}]}`), mongoerr.DocumentValidationFailure)
	validWantWriteCode(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 3, "a": -1}]}`), mongoerr.DocumentValidationFailure)

	// warn: failures are logged and the write goes ahead.
	validMust(t, cl, `{"collMod": "q", "validationLevel": "strict", "validationAction": "warn"}`)
	validWantOK(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 3, "a": -1}]}`))

	// off: nothing is checked.
	validMust(t, cl, `{"collMod": "q", "validationLevel": "off", "validationAction": "error"}`)
	validWantOK(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 4, "a": -1}]}`))

	// collMod replaces the validator; the next write sees the new one.
	validMust(t, cl, `{"collMod": "q", "validator": {"a": {"$lt": 100}}, "validationLevel": "strict"}`)
	validWantOK(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 5, "a": -1}]}`))
	validWantWriteCode(t, validMust(t, cl, `{"insert": "q", "documents": [{"_id": 6, "a": 500}]}`), mongoerr.DocumentValidationFailure)

	// $expr validators.
	validMust(t, cl, `{"create": "e", "validator": {"$expr": {"$lt": ["$lo", "$hi"]}}}`)
	validWantOK(t, validMust(t, cl, `{"insert": "e", "documents": [{"lo": 1, "hi": 2}]}`))
	r = validMust(t, cl, `{"insert": "e", "documents": [{"lo": 3, "hi": 2}]}`)
	if d := validWantWriteCode(t, r, mongoerr.DocumentValidationFailure).Lookup("errInfo", "details").Document(); d.Lookup("operatorName").StringValue() != "$expr" {
		t.Errorf("$expr details: %s", d)
	}
}

func TestValidInvalidValidatorRejected(t *testing.T) {
	_, cl := writeTestServer(t)
	_, err := validCmd(t, cl, `{"create": "bad", "validator": {"a": {"$foo": 1}}}`)
	writeWantCode(t, err, mongoerr.BadValue)
	_, err = validCmd(t, cl, `{"create": "bad", "validator": {"$jsonSchema": {"bsonType": "nope"}}}`)
	writeWantCode(t, err, mongoerr.BadValue)
	if got := validFind(t, cl, "bad"); got != "" {
		t.Errorf("collection created anyway: %s", got)
	}
	validMust(t, cl, `{"create": "good", "validator": {"a": 1}}`)
	_, err = validCmd(t, cl, `{"collMod": "good", "validator": {"$jsonSchema": {"minimum": "x"}}}`)
	writeWantCode(t, err, mongoerr.TypeMismatch)
	// The old validator is still in force.
	validWantWriteCode(t, validMust(t, cl, `{"insert": "good", "documents": [{"a": 2}]}`), mongoerr.DocumentValidationFailure)
	validWantOK(t, validMust(t, cl, `{"insert": "good", "documents": [{"a": 1}]}`))
}

func TestWritePipelineUpdate(t *testing.T) {
	_, cl := writeTestServer(t)
	validMust(t, cl, `{"insert": "c", "documents": [{"_id": 1, "a": 2, "b": 3, "tmp": true}, {"_id": 2, "a": 10, "b": 20}]}`)

	// $set referencing other fields, $unset, across a multi-update.
	r := validMust(t, cl, `{"update": "c", "updates": [{"q": {}, "u": [{"$set": {"sum": {"$add": ["$a", "$b"]}}}, {"$unset": "tmp"}], "multi": true}]}`)
	if r.Lookup("n").Int32() != 2 || r.Lookup("nModified").Int32() != 2 {
		t.Fatalf("multi pipeline: %s", r)
	}
	if got := validFind(t, cl, "c"); got != `{"_id":1,"a":2,"b":3,"sum":5},{"_id":2,"a":10,"b":20,"sum":30}` {
		t.Errorf("after $set/$unset: %s", got)
	}
	// The same pipeline again changes nothing: no-op by byte equality.
	r = validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"sum": {"$add": ["$a", "$b"]}}}]}]}`)
	if r.Lookup("n").Int32() != 1 || r.Lookup("nModified").Int32() != 0 {
		t.Errorf("no-op pipeline: %s", r)
	}
	// $replaceWith keeps _id when the new document has none; let and c variables.
	r = validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 2}, "u": [{"$replaceWith": {"x": "$$k", "y": "$$cv"}}], "c": {"cv": "const"}}], "let": {"k": 7}}`)
	validWantOK(t, r)
	if got := validFind(t, cl, "c"); !strings.HasSuffix(got, `{"_id":2,"x":7,"y":"const"}`) {
		t.Errorf("after $replaceWith: %s", got)
	}
	// $$NOW is a date.
	validWantOK(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 2}, "u": [{"$set": {"at": "$$NOW"}}]}]}`))
	var d bson.Raw
	if err := cl.Database("test").Collection("c").FindOne(context.Background(), bson.D{{Key: "_id", Value: 2}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Lookup("at").Type != bson.TypeDateTime {
		t.Errorf("$$NOW: %s", d)
	}

	// Upsert applies the pipeline to the document seeded from the query.
	r = validMust(t, cl, `{"update": "c", "updates": [{"q": {"k": 5}, "u": [{"$set": {"double": {"$multiply": ["$k", 2]}}}], "upsert": true}]}`)
	ups, _ := r.Lookup("upserted").Array().Values()
	if len(ups) != 1 {
		t.Fatalf("upsert: %s", r)
	}
	if err := cl.Database("test").Collection("c").FindOne(context.Background(), bson.D{{Key: "k", Value: 5}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if strings.Join(writeKeys(d), ",") != "_id,k,double" || d.Lookup("double").Int32() != 10 {
		t.Errorf("upserted: %s", d)
	}

	// Errors: _id is immutable; disallowed and unknown stages; arrayFilters; c without a pipeline.
	validWantWriteCode(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"_id": 99}}]}]}`), mongoerr.ImmutableField)
	validWantWriteCode(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$group": {"_id": null}}]}]}`), mongoerr.InvalidOptions)
	validWantWriteCode(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$bogus": {}}]}]}`), mongoerr.Location40324)
	validWantWriteCode(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [1]}]}`), mongoerr.TypeMismatch)
	_, err := validCmd(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"a": 1}}], "arrayFilters": []}]}`)
	writeWantCode(t, err, mongoerr.FailedToParse)
	_, err = validCmd(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}, "c": {"x": 1}}]}`)
	writeWantCode(t, err, mongoerr.Location51198)
	if got := validFind(t, cl, "c"); !strings.HasPrefix(got, `{"_id":1,"a":2,"b":3,"sum":5}`) {
		t.Errorf("errors changed the document: %s", got)
	}

	// A pipeline update is validated like any other.
	validMust(t, cl, `{"collMod": "c", "validator": {"a": {"$type": "number"}}, "validationLevel": "moderate"}`)
	validWantWriteCode(t, validMust(t, cl, `{"update": "c", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"a": {"$toString": "$a"}}}]}]}`), mongoerr.DocumentValidationFailure)
}

func TestWritePipelineFindAndModify(t *testing.T) {
	_, cl := writeTestServer(t)
	validMust(t, cl, `{"insert": "f", "documents": [{"_id": 1, "n": 1}, {"_id": 2, "n": 5}]}`)
	r := validMust(t, cl, `{"findAndModify": "f", "query": {"n": {"$gt": 0}}, "sort": {"n": -1}, "update": [{"$set": {"n": {"$add": ["$n", "$$inc"]}}}], "new": true, "let": {"inc": 100}}`)
	if v := r.Lookup("value").Document(); v.Lookup("_id").Int32() != 2 || v.Lookup("n").Int32() != 105 {
		t.Errorf("findAndModify new: %s", r)
	}
	r = validMust(t, cl, `{"findAndModify": "f", "query": {"_id": 3}, "update": [{"$replaceWith": {"made": true}}], "upsert": true, "new": true}`)
	if v := r.Lookup("value").Document(); v.Lookup("_id").Int32() != 3 || !v.Lookup("made").Boolean() {
		t.Errorf("findAndModify upsert: %s", r)
	}
	_, err := validCmd(t, cl, `{"findAndModify": "f", "query": {"_id": 1}, "update": [{"$sort": {"n": 1}}]}`)
	writeWantCode(t, err, mongoerr.InvalidOptions)
	_, err = validCmd(t, cl, `{"findAndModify": "f", "query": {"_id": 1}, "update": [{"$set": {"n": 2}}], "arrayFilters": [{"x": 1}]}`)
	writeWantCode(t, err, mongoerr.FailedToParse)
}

func TestValidWritesToViewRejected(t *testing.T) {
	_, cl := writeTestServer(t)
	validMust(t, cl, `{"insert": "base", "documents": [{"_id": 1}]}`)
	if _, err := validCmd(t, cl, `{"create": "v", "viewOn": "base", "pipeline": []}`); err != nil {
		t.Fatalf("create view: %v", err)
	}
	for _, js := range []string{
		`{"insert": "v", "documents": [{"_id": 2}]}`,
		`{"update": "v", "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "upsert": true}]}`,
		`{"delete": "v", "deletes": [{"q": {}, "limit": 0}]}`,
		`{"findAndModify": "v", "query": {}, "update": {"$set": {"a": 1}}, "upsert": true}`,
	} {
		_, err := validCmd(t, cl, js)
		writeWantCode(t, err, mongoerr.CommandNotSupportedOnView)
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Message != "Namespace test.v is a view, not a collection" {
			t.Errorf("%s: message %q", js, ce.Message)
		}
	}
	// No collection was created under the view's name.
	names, err := cl.Database("test").ListCollectionNames(context.Background(), bson.D{{Key: "type", Value: "collection"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "v" {
			t.Errorf("collection v created over the view: %v", names)
		}
	}
}
