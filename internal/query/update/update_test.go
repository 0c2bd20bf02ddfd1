package update

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// J parses relaxed extended JSON into a document: integers become int32 (int64 when they do
// not fit), numbers with a point become doubles.
func J(t testing.TB, s string) bsoncore.Document {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return bsoncore.Document(raw)
}

func show(d bsoncore.Document) string {
	if d == nil {
		return "<nil>"
	}
	return bson.Raw(d).String()
}

var fixedNow = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

type tc struct {
	name    string
	doc     string
	update  string
	filters []string
	ctx     ApplyContext
	want    string // expected document; "" when only an error is expected
	same    bool   // expect changed == false
	code    mongoerr.Code
	msg     string // substring of the error message
}

func runCases(t *testing.T, cases []tc) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var filters []bsoncore.Document
			for _, f := range c.filters {
				filters = append(filters, J(t, f))
			}
			u, err := Parse(J(t, c.update), ParseOptions{ArrayFilters: filters, Now: func() time.Time { return fixedNow }})
			var got bsoncore.Document
			var changed bool
			if err == nil {
				got, changed, err = u.Apply(J(t, c.doc), c.ctx)
			}
			if c.code != 0 {
				if mongoerr.CodeOf(err) != c.code {
					t.Fatalf("error = %v, want code %d (%s)", err, c.code, c.code.Name())
				}
				if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("error = %q, want it to contain %q", err, c.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := J(t, c.want)
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", show(got), show(want))
			}
			if changed == c.same {
				t.Fatalf("changed = %v, want %v", changed, !c.same)
			}
		})
	}
}

func TestSetUnset(t *testing.T) {
	runCases(t, []tc{
		{name: "set existing keeps position", doc: `{"_id":1,"a":1,"b":2}`, update: `{"$set":{"a":5}}`, want: `{"_id":1,"a":5,"b":2}`},
		{name: "set same value is no-op", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a":1}}`, want: `{"_id":1,"a":1}`, same: true},
		{name: "set other type is a change", doc: `{"_id":1,"a":1}`, update: `{"$set":{"a":1.0}}`, want: `{"_id":1,"a":1.0}`},
		{name: "new fields sorted", doc: `{"_id":1}`, update: `{"$set":{"z":1,"a":2,"m":3}}`, want: `{"_id":1,"a":2,"m":3,"z":1}`},
		{name: "numeric names numeric order", doc: `{"_id":1,"a":{}}`, update: `{"$set":{"a.20":1,"a.3":2,"a.b":3}}`, want: `{"_id":1,"a":{"3":2,"20":1,"b":3}}`},
		{name: "dotted creates docs", doc: `{"_id":1}`, update: `{"$set":{"a.b.c":1}}`, want: `{"_id":1,"a":{"b":{"c":1}}}`},
		{name: "dotted into existing", doc: `{"_id":1,"a":{"x":1}}`, update: `{"$set":{"a.b":1}}`, want: `{"_id":1,"a":{"x":1,"b":1}}`},
		{name: "array index", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.1":9}}`, want: `{"_id":1,"a":[1,9,3]}`},
		{name: "array pad nulls", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.3":9}}`, want: `{"_id":1,"a":[1,null,null,9]}`},
		{name: "array index into doc elem", doc: `{"_id":1,"a":[{"b":1},{"b":2}]}`, update: `{"$set":{"a.1.b":5}}`, want: `{"_id":1,"a":[{"b":1},{"b":5}]}`},
		{name: "scalar not viable", doc: `{"_id":1,"a":5}`, update: `{"$set":{"a.b":1}}`, code: mongoerr.PathNotViable, msg: "Cannot create field 'b' in element {a: 5}"},
		{name: "array non-numeric not viable", doc: `{"_id":1,"a":[1,2]}`, update: `{"$set":{"a.b":1}}`, code: mongoerr.PathNotViable, msg: "Cannot create field 'b' in element {a: [ 1, 2 ]}"},
		{name: "unset field", doc: `{"_id":1,"a":1,"b":2}`, update: `{"$unset":{"a":""}}`, want: `{"_id":1,"b":2}`},
		{name: "unset missing no-op", doc: `{"_id":1}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1}`, same: true},
		{name: "unset under scalar no-op", doc: `{"_id":1,"a":5}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1,"a":5}`, same: true},
		{name: "unset array elem nulls", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$unset":{"a.1":1}}`, want: `{"_id":1,"a":[1,null,3]}`},
		{name: "unset past end no-op", doc: `{"_id":1,"a":[1]}`, update: `{"$unset":{"a.5":1}}`, want: `{"_id":1,"a":[1]}`, same: true},
		{name: "nested unset keeps empty doc", doc: `{"_id":1,"a":{"b":1}}`, update: `{"$unset":{"a.b":1}}`, want: `{"_id":1,"a":{}}`},
		{name: "set doc value", doc: `{"_id":1}`, update: `{"$set":{"a":{"x":[1,{"y":2}]}}}`, want: `{"_id":1,"a":{"x":[1,{"y":2}]}}`},
		{name: "empty set", doc: `{}`, update: `{"$set":{}}`, code: mongoerr.FailedToParse, msg: "'$set' is empty. You must specify a field like so: {$set: {<field>: ...}}"},
		{name: "unknown modifier", doc: `{}`, update: `{"$foo":{"a":1}}`, code: mongoerr.FailedToParse, msg: "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array"},
		{name: "mixed operator and field", doc: `{}`, update: `{"$set":{"a":1},"b":2}`, code: mongoerr.FailedToParse, msg: "Unknown modifier: b"},
		{name: "modifier not object", doc: `{}`, update: `{"$set":1}`, code: mongoerr.FailedToParse, msg: "Modifiers operate on fields but we found type int instead"},
		{name: "dollar field", doc: `{}`, update: `{"$set":{"a.$x":1}}`, code: mongoerr.DollarPrefixedFieldName},
		{name: "empty component", doc: `{}`, update: `{"$set":{"a..b":1}}`, code: mongoerr.EmptyFieldName},
		{name: "backfill limit", doc: `{"_id":1,"a":[]}`, update: `{"$set":{"a.1500001":1}}`, code: mongoerr.CannotBackfillArray},
		{name: "leading zero is a field name", doc: `{"_id":1,"a":{}}`, update: `{"$set":{"a.01":1}}`, want: `{"_id":1,"a":{"01":1}}`},
		{name: "leading zero on array not viable", doc: `{"_id":1,"a":[0]}`, update: `{"$set":{"a.01":1}}`, code: mongoerr.PathNotViable},
		{name: "scalar in array not viable", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.0.b":1}}`, code: mongoerr.PathNotViable, msg: "Cannot create field 'b' in element {0: 1}"},
		{name: "empty path", doc: `{}`, update: `{"$set":{"":1}}`, code: mongoerr.EmptyFieldName},
	})
}

func TestConflictsAndID(t *testing.T) {
	runCases(t, []tc{
		{name: "prefix conflict", doc: `{}`, update: `{"$set":{"a":1},"$inc":{"a.b":1}}`, code: mongoerr.ConflictingUpdateOperators, msg: "Updating the path 'a.b' would create a conflict at 'a'"},
		{name: "prefix conflict reversed", doc: `{}`, update: `{"$set":{"a.b":1},"$inc":{"a":1}}`, code: mongoerr.ConflictingUpdateOperators, msg: "Updating the path 'a' would create a conflict at 'a'"},
		{name: "same path", doc: `{}`, update: `{"$set":{"a":1},"$unset":{"a":1}}`, code: mongoerr.ConflictingUpdateOperators},
		{name: "siblings fine", doc: `{}`, update: `{"$set":{"a.b":1},"$inc":{"a.c":1}}`, want: `{"a":{"b":1,"c":1}}`},
		{name: "rename conflicts", doc: `{}`, update: `{"$rename":{"a":"b"},"$set":{"b.c":1}}`, code: mongoerr.ConflictingUpdateOperators},
		{name: "explicit and positional conflict at apply", doc: `{"_id":1,"a":[1,2]}`, update: `{"$set":{"a.0":5,"a.$":6}}`, ctx: ApplyContext{MatchedArrayIndex: "0"}, code: mongoerr.ConflictingUpdateOperators, msg: "Update created a conflict"},
		{name: "all and explicit conflict", doc: `{"_id":1,"a":[1,2]}`, update: `{"$set":{"a.$[]":5},"$inc":{"a.1":1}}`, code: mongoerr.ConflictingUpdateOperators},
		{name: "all and explicit disjoint subfields ok", doc: `{"_id":1,"a":[{"x":1},{"x":2}]}`, update: `{"$set":{"a.$[].y":0,"a.1.z":1}}`, want: `{"_id":1,"a":[{"x":1,"y":0},{"x":2,"y":0,"z":1}]}`},
		{name: "set _id different", doc: `{"_id":1,"a":1}`, update: `{"$set":{"_id":2}}`, code: mongoerr.ImmutableField, msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
		{name: "set _id same ok", doc: `{"_id":1,"a":1}`, update: `{"$set":{"_id":1}}`, want: `{"_id":1,"a":1}`, same: true},
		{name: "set _id other type", doc: `{"_id":1}`, update: `{"$set":{"_id":1.0}}`, code: mongoerr.ImmutableField},
		{name: "unset _id", doc: `{"_id":1}`, update: `{"$unset":{"_id":1}}`, code: mongoerr.ImmutableField},
		{name: "set _id subfield", doc: `{"_id":{"x":1}}`, update: `{"$set":{"_id.y":1}}`, code: mongoerr.ImmutableField},
		{name: "insert may set _id", doc: `{"a":1}`, update: `{"$set":{"_id":5}}`, ctx: ApplyContext{IsInsert: true}, want: `{"_id":5,"a":1}`},
	})
}

func TestArithmetic(t *testing.T) {
	runCases(t, []tc{
		{name: "inc int", doc: `{"_id":1,"a":1}`, update: `{"$inc":{"a":2}}`, want: `{"_id":1,"a":3}`},
		{name: "inc missing", doc: `{"_id":1}`, update: `{"$inc":{"a":2.5}}`, want: `{"_id":1,"a":2.5}`},
		{name: "inc int by double", doc: `{"_id":1,"a":1}`, update: `{"$inc":{"a":0.5}}`, want: `{"_id":1,"a":1.5}`},
		{name: "inc zero no-op", doc: `{"_id":1,"a":1}`, update: `{"$inc":{"a":0}}`, want: `{"_id":1,"a":1}`, same: true},
		{name: "inc int32 overflow promotes", doc: `{"_id":1,"a":2147483647}`, update: `{"$inc":{"a":1}}`, want: `{"_id":1,"a":{"$numberLong":"2147483648"}}`},
		{name: "inc int with long", doc: `{"_id":1,"a":1}`, update: `{"$inc":{"a":{"$numberLong":"1"}}}`, want: `{"_id":1,"a":{"$numberLong":"2"}}`},
		{name: "inc int64 overflow", doc: `{"_id":1,"a":{"$numberLong":"9223372036854775807"}}`, update: `{"$inc":{"a":1}}`, code: mongoerr.BadValue, msg: "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}"},
		{name: "inc decimal", doc: `{"_id":1,"a":{"$numberDecimal":"1.1"}}`, update: `{"$inc":{"a":1}}`, want: `{"_id":1,"a":{"$numberDecimal":"2.1"}}`},
		{name: "inc int by decimal", doc: `{"_id":1,"a":1}`, update: `{"$inc":{"a":{"$numberDecimal":"0.25"}}}`, want: `{"_id":1,"a":{"$numberDecimal":"1.25"}}`},
		{name: "inc decimal by double keeps 15 digits", doc: `{"_id":1,"a":{"$numberDecimal":"0"}}`, update: `{"$inc":{"a":0.1}}`, want: `{"_id":1,"a":{"$numberDecimal":"0.100000000000000"}}`},
		{name: "inc string", doc: `{"_id":1,"a":"x"}`, update: `{"$inc":{"a":1}}`, code: mongoerr.TypeMismatch, msg: "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string"},
		{name: "inc non-numeric arg", doc: `{}`, update: `{"$inc":{"a":"x"}}`, code: mongoerr.TypeMismatch, msg: `Cannot increment with non-numeric argument: {a: "x"}`},
		{name: "mul", doc: `{"_id":1,"a":3}`, update: `{"$mul":{"a":4}}`, want: `{"_id":1,"a":12}`},
		{name: "mul missing zero of arg type", doc: `{"_id":1}`, update: `{"$mul":{"a":{"$numberLong":"4"},"b":2.5}}`, want: `{"_id":1,"a":{"$numberLong":"0"},"b":0.0}`},
		{name: "mul int32 overflow", doc: `{"_id":1,"a":65536}`, update: `{"$mul":{"a":65536}}`, want: `{"_id":1,"a":{"$numberLong":"4294967296"}}`},
		{name: "mul int64 overflow", doc: `{"_id":1,"a":{"$numberLong":"4611686018427387904"}}`, update: `{"$mul":{"a":2}}`, code: mongoerr.BadValue, msg: "Failed to apply $mul"},
		{name: "mul by one no-op", doc: `{"_id":1,"a":3}`, update: `{"$mul":{"a":1}}`, want: `{"_id":1,"a":3}`, same: true},
		{name: "min lower", doc: `{"_id":1,"a":5}`, update: `{"$min":{"a":3}}`, want: `{"_id":1,"a":3}`},
		{name: "min higher no-op", doc: `{"_id":1,"a":5}`, update: `{"$min":{"a":7}}`, want: `{"_id":1,"a":5}`, same: true},
		{name: "min equal other type keeps", doc: `{"_id":1,"a":5}`, update: `{"$min":{"a":5.0}}`, want: `{"_id":1,"a":5}`, same: true},
		{name: "min type order null < number", doc: `{"_id":1,"a":5}`, update: `{"$min":{"a":null}}`, want: `{"_id":1,"a":null}`},
		{name: "max string > number", doc: `{"_id":1,"a":5}`, update: `{"$max":{"a":"s"}}`, want: `{"_id":1,"a":"s"}`},
		{name: "max missing", doc: `{"_id":1}`, update: `{"$max":{"a":1}}`, want: `{"_id":1,"a":1}`},
		{name: "bit and", doc: `{"_id":1,"a":13}`, update: `{"$bit":{"a":{"and":10}}}`, want: `{"_id":1,"a":8}`},
		{name: "bit or xor", doc: `{"_id":1,"a":5}`, update: `{"$bit":{"a":{"or":2,"xor":1}}}`, want: `{"_id":1,"a":6}`},
		{name: "bit long promotes", doc: `{"_id":1,"a":1}`, update: `{"$bit":{"a":{"or":{"$numberLong":"2"}}}}`, want: `{"_id":1,"a":{"$numberLong":"3"}}`},
		{name: "bit missing", doc: `{"_id":1}`, update: `{"$bit":{"a":{"or":4}}}`, want: `{"_id":1,"a":4}`},
		{name: "bit double arg", doc: `{}`, update: `{"$bit":{"a":{"and":1.0}}}`, code: mongoerr.BadValue, msg: "must be an Integer(32/64 bit)"},
		{name: "bit bad op", doc: `{}`, update: `{"$bit":{"a":{"not":1}}}`, code: mongoerr.BadValue, msg: "only supports 'and', 'or', and 'xor'"},
		{name: "bit on double", doc: `{"_id":1,"a":1.5}`, update: `{"$bit":{"a":{"and":1}}}`, code: mongoerr.BadValue},
	})
}

func TestRenameCurrentDateSetOnInsert(t *testing.T) {
	runCases(t, []tc{
		{name: "rename", doc: `{"_id":1,"a":1,"b":2}`, update: `{"$rename":{"a":"c"}}`, want: `{"_id":1,"b":2,"c":1}`},
		{name: "rename over existing keeps dest position", doc: `{"_id":1,"b":2,"a":1}`, update: `{"$rename":{"a":"b"}}`, want: `{"_id":1,"b":1}`},
		{name: "rename nested", doc: `{"_id":1,"a":{"x":1}}`, update: `{"$rename":{"a.x":"b.y"}}`, want: `{"_id":1,"a":{},"b":{"y":1}}`},
		{name: "rename missing no-op", doc: `{"_id":1}`, update: `{"$rename":{"a":"b"}}`, want: `{"_id":1}`, same: true},
		{name: "rename same", doc: `{}`, update: `{"$rename":{"a":"a"}}`, code: mongoerr.BadValue, msg: "must differ"},
		{name: "rename same path", doc: `{}`, update: `{"$rename":{"a":"a.b"}}`, code: mongoerr.BadValue, msg: "must not be on the same path"},
		{name: "rename non-string", doc: `{}`, update: `{"$rename":{"a":1}}`, code: mongoerr.BadValue, msg: "The 'to' field for $rename must be a string"},
		{name: "rename dynamic", doc: `{}`, update: `{"$rename":{"a.$":"b"}}`, code: mongoerr.BadValue, msg: "may not be dynamic"},
		{name: "rename from array", doc: `{"_id":1,"a":[{"b":1}]}`, update: `{"$rename":{"a.0.b":"c"}}`, code: mongoerr.BadValue, msg: "The source field cannot be an array element"},
		{name: "rename to array", doc: `{"_id":1,"a":1,"b":[1]}`, update: `{"$rename":{"a":"b.0"}}`, code: mongoerr.BadValue, msg: "The destination field cannot be an array element"},
		{name: "currentDate", doc: `{"_id":1}`, update: `{"$currentDate":{"a":true,"b":{"$type":"timestamp"},"c":{"$type":"date"}}}`,
			want: `{"_id":1,"a":{"$date":"2024-05-06T07:08:09Z"},"b":{"$timestamp":{"t":1714979289,"i":1}},"c":{"$date":"2024-05-06T07:08:09Z"}}`},
		{name: "currentDate bad type", doc: `{}`, update: `{"$currentDate":{"a":{"$type":"x"}}}`, code: mongoerr.BadValue},
		{name: "currentDate bad arg", doc: `{}`, update: `{"$currentDate":{"a":1}}`, code: mongoerr.BadValue},
		{name: "setOnInsert ignored on update", doc: `{"_id":1}`, update: `{"$setOnInsert":{"a":1}}`, want: `{"_id":1}`, same: true},
		{name: "setOnInsert applies on insert", doc: `{"_id":1}`, update: `{"$setOnInsert":{"a":1},"$set":{"b":2}}`, ctx: ApplyContext{IsInsert: true}, want: `{"_id":1,"a":1,"b":2}`},
		{name: "setOnInsert under scalar ignored on update", doc: `{"_id":1,"a":1}`, update: `{"$setOnInsert":{"a.b":1}}`, want: `{"_id":1,"a":1}`, same: true},
	})
}

func TestArrayOperators(t *testing.T) {
	runCases(t, []tc{
		{name: "push", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "push missing", doc: `{"_id":1}`, update: `{"$push":{"a":2}}`, want: `{"_id":1,"a":[2]}`},
		{name: "push array value", doc: `{"_id":1,"a":[]}`, update: `{"$push":{"a":[1,2]}}`, want: `{"_id":1,"a":[[1,2]]}`},
		{name: "push non-array", doc: `{"_id":1,"a":5}`, update: `{"$push":{"a":2}}`, code: mongoerr.BadValue, msg: "The field 'a' must be an array but is of type int in document {_id: 1}"},
		{name: "push each", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[2,3]}}}`, want: `{"_id":1,"a":[1,2,3]}`},
		{name: "push empty each creates", doc: `{"_id":1}`, update: `{"$push":{"a":{"$each":[]}}}`, want: `{"_id":1,"a":[]}`},
		{name: "push empty each no-op", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[]}}}`, want: `{"_id":1,"a":[1]}`, same: true},
		{name: "push position", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$push":{"a":{"$each":[9],"$position":1}}}`, want: `{"_id":1,"a":[1,9,2,3]}`},
		{name: "push negative position", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$push":{"a":{"$each":[9],"$position":-1}}}`, want: `{"_id":1,"a":[1,2,9,3]}`},
		{name: "push big position", doc: `{"_id":1,"a":[1]}`, update: `{"$push":{"a":{"$each":[9],"$position":10}}}`, want: `{"_id":1,"a":[1,9]}`},
		{name: "push slice", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[3,4],"$slice":3}}}`, want: `{"_id":1,"a":[1,2,3]}`},
		{name: "push slice negative", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[3,4],"$slice":-3}}}`, want: `{"_id":1,"a":[2,3,4]}`},
		{name: "push slice zero", doc: `{"_id":1,"a":[1,2]}`, update: `{"$push":{"a":{"$each":[3],"$slice":0}}}`, want: `{"_id":1,"a":[]}`},
		{name: "push sort whole", doc: `{"_id":1,"a":[3,1]}`, update: `{"$push":{"a":{"$each":[2],"$sort":-1}}}`, want: `{"_id":1,"a":[3,2,1]}`},
		{name: "push sort fields then slice", doc: `{"_id":1,"a":[{"s":3},{"s":1}]}`, update: `{"$push":{"a":{"$each":[{"s":2}],"$sort":{"s":1},"$slice":2}}}`, want: `{"_id":1,"a":[{"s":1},{"s":2}]}`},
		{name: "push slice without each", doc: `{}`, update: `{"$push":{"a":{"$slice":1}}}`, code: mongoerr.BadValue},
		{name: "push each not array", doc: `{}`, update: `{"$push":{"a":{"$each":1}}}`, code: mongoerr.BadValue, msg: "must be an array"},
		{name: "push unknown clause", doc: `{}`, update: `{"$push":{"a":{"$each":[],"$foo":1}}}`, code: mongoerr.BadValue, msg: "Unrecognized clause in $push: $foo"},
		{name: "push bad sort", doc: `{}`, update: `{"$push":{"a":{"$each":[],"$sort":2}}}`, code: mongoerr.BadValue},
		{name: "addToSet new", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "addToSet existing no-op", doc: `{"_id":1,"a":[1,2]}`, update: `{"$addToSet":{"a":2}}`, want: `{"_id":1,"a":[1,2]}`, same: true},
		{name: "addToSet numeric equality", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":1.0}}`, want: `{"_id":1,"a":[1]}`, same: true},
		{name: "addToSet each dedups", doc: `{"_id":1,"a":[1]}`, update: `{"$addToSet":{"a":{"$each":[1,2,2,3]}}}`, want: `{"_id":1,"a":[1,2,3]}`},
		{name: "addToSet missing", doc: `{"_id":1}`, update: `{"$addToSet":{"a":{"$each":[4,4]}}}`, want: `{"_id":1,"a":[4]}`},
		{name: "addToSet doc", doc: `{"_id":1,"a":[{"x":1}]}`, update: `{"$addToSet":{"a":{"x":1}}}`, want: `{"_id":1,"a":[{"x":1}]}`, same: true},
		{name: "addToSet non-array", doc: `{"_id":1,"a":1}`, update: `{"$addToSet":{"a":1}}`, code: mongoerr.BadValue, msg: "Cannot apply $addToSet to non-array field"},
		{name: "pop last", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "pop first", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$pop":{"a":-1}}`, want: `{"_id":1,"a":[2,3]}`},
		{name: "pop empty no-op", doc: `{"_id":1,"a":[]}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1,"a":[]}`, same: true},
		{name: "pop missing no-op", doc: `{"_id":1}`, update: `{"$pop":{"a":1}}`, want: `{"_id":1}`, same: true},
		{name: "pop bad arg", doc: `{}`, update: `{"$pop":{"a":2}}`, code: mongoerr.FailedToParse, msg: "$pop expects 1 or -1, found: 2"},
		{name: "pop non-array", doc: `{"_id":1,"a":1}`, update: `{"$pop":{"a":1}}`, code: mongoerr.TypeMismatch},
		{name: "pull value", doc: `{"_id":1,"a":[1,2,1,3]}`, update: `{"$pull":{"a":1}}`, want: `{"_id":1,"a":[2,3]}`},
		{name: "pull none no-op", doc: `{"_id":1,"a":[1]}`, update: `{"$pull":{"a":5}}`, want: `{"_id":1,"a":[1]}`, same: true},
		{name: "pull doc query", doc: `{"_id":1,"a":[{"x":1,"y":2},{"x":2},5]}`, update: `{"$pull":{"a":{"x":1}}}`, want: `{"_id":1,"a":[{"x":2},5]}`},
		{name: "pull non-array", doc: `{"_id":1,"a":1}`, update: `{"$pull":{"a":1}}`, code: mongoerr.BadValue},
		{name: "pullAll", doc: `{"_id":1,"a":[1,2,3,1]}`, update: `{"$pullAll":{"a":[1,3]}}`, want: `{"_id":1,"a":[2]}`},
		{name: "pullAll non-array arg", doc: `{}`, update: `{"$pullAll":{"a":1}}`, code: mongoerr.BadValue, msg: "$pullAll requires an array argument"},
	})
}

func TestPositional(t *testing.T) {
	runCases(t, []tc{
		{name: "positional", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$":9}}`, ctx: ApplyContext{MatchedArrayIndex: "1"}, want: `{"_id":1,"a":[1,9,3]}`},
		{name: "positional subfield", doc: `{"_id":1,"a":[{"b":1},{"b":2}]}`, update: `{"$inc":{"a.$.b":10}}`, ctx: ApplyContext{MatchedArrayIndex: "1"}, want: `{"_id":1,"a":[{"b":1},{"b":12}]}`},
		{name: "positional no match", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$":9}}`, code: mongoerr.BadValue, msg: "The positional operator did not find the match needed from the query."},
		{name: "positional first", doc: `{}`, update: `{"$set":{"$":9}}`, code: mongoerr.BadValue},
		{name: "two positionals", doc: `{}`, update: `{"$set":{"a.$.b.$":9}}`, code: mongoerr.BadValue, msg: "Too many positional"},
		{name: "all", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$inc":{"a.$[]":1}}`, want: `{"_id":1,"a":[2,3,4]}`},
		{name: "all nested", doc: `{"_id":1,"a":[{"b":[1,2]},{"b":[3]}]}`, update: `{"$set":{"a.$[].b.$[]":0}}`, want: `{"_id":1,"a":[{"b":[0,0]},{"b":[0]}]}`},
		{name: "all on non-array", doc: `{"_id":1,"a":5}`, update: `{"$set":{"a.$[]":0}}`, code: mongoerr.BadValue, msg: "Cannot apply array updates to non-array element a: 5"},
		{name: "all on missing", doc: `{"_id":1}`, update: `{"$set":{"a.$[]":0}}`, code: mongoerr.BadValue, msg: "The path 'a' must exist in the document in order to apply array updates."},
		{name: "all empty array", doc: `{"_id":1,"a":[]}`, update: `{"$set":{"a.$[]":0}}`, want: `{"_id":1,"a":[]}`, same: true},
		{name: "filtered scalar", doc: `{"_id":1,"a":[1,5,2,5]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":5}`}, want: `{"_id":1,"a":[1,0,2,0]}`},
		{name: "filtered doc field", doc: `{"_id":1,"a":[{"k":1,"v":0},{"k":2,"v":0}]}`, update: `{"$set":{"a.$[e].v":7}}`, filters: []string{`{"e.k":2}`}, want: `{"_id":1,"a":[{"k":1,"v":0},{"k":2,"v":7}]}`},
		{name: "filtered nested", doc: `{"_id":1,"a":[{"k":1,"b":[1,2]},{"k":2,"b":[1,2]}]}`, update: `{"$set":{"a.$[i].b.$[j]":0}}`, filters: []string{`{"i.k":2}`, `{"j":2}`}, want: `{"_id":1,"a":[{"k":1,"b":[1,2]},{"k":2,"b":[1,0]}]}`},
		{name: "filtered no match no-op", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":5}`}, want: `{"_id":1,"a":[1]}`, same: true},
		{name: "missing filter", doc: `{}`, update: `{"$set":{"a.$[x]":0}}`, code: mongoerr.BadValue, msg: "No array filter found for identifier 'x' in path 'a.$[x]'"},
		{name: "unused filter", doc: `{}`, update: `{"$set":{"a":0}}`, filters: []string{`{"x":5}`}, code: mongoerr.FailedToParse, msg: "The array filter for identifier 'x' was not used in the update"},
		{name: "duplicate filter", doc: `{}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":5}`, `{"x":6}`}, code: mongoerr.FailedToParse, msg: "Found multiple array filters with the same top-level field name x"},
		{name: "bad identifier", doc: `{}`, update: `{"$set":{"a.$[X]":0}}`, filters: []string{`{"X":5}`}, code: mongoerr.BadValue},
		{name: "two filters overlap conflict", doc: `{"_id":1,"a":[5]}`, update: `{"$set":{"a.$[x]":0,"a.$[y]":1}}`, filters: []string{`{"x":5}`, `{"y":5}`}, code: mongoerr.ConflictingUpdateOperators},
	})
}

func TestReplacement(t *testing.T) {
	runCases(t, []tc{
		{name: "keeps _id first", doc: `{"_id":1,"a":1}`, update: `{"b":2}`, want: `{"_id":1,"b":2}`},
		{name: "moves _id first", doc: `{"_id":1,"a":1}`, update: `{"b":2,"_id":1}`, want: `{"_id":1,"b":2}`},
		{name: "identical no-op", doc: `{"_id":1,"a":1}`, update: `{"a":1}`, want: `{"_id":1,"a":1}`, same: true},
		{name: "different _id", doc: `{"_id":1,"a":1}`, update: `{"_id":2}`, code: mongoerr.ImmutableField, msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
		{name: "empty replacement", doc: `{"_id":1,"a":1}`, update: `{}`, want: `{"_id":1}`},
		{name: "dollar field", doc: `{}`, update: `{"a":1,"$set":{"b":1}}`, code: mongoerr.DollarPrefixedFieldName},
		{name: "validate _id array", doc: `{"a":1}`, update: `{"_id":[1]}`, ctx: ApplyContext{Validate: true}, code: mongoerr.InvalidIdField},
	})
}

func TestParseMisc(t *testing.T) {
	u, err := Parse(J(t, `{"a":1}`), ParseOptions{})
	if err != nil || !u.IsReplacement() {
		t.Fatalf("replacement: %v %v", u, err)
	}
	u, err = Parse(J(t, `{"$set":{"a":1}}`), ParseOptions{})
	if err != nil || u.IsReplacement() {
		t.Fatalf("operator: %v %v", u, err)
	}
	arr := bsoncore.Value{Type: bsoncore.TypeArray, Data: bsoncore.BuildArray(nil)}
	if _, err := ParseValue(arr, ParseOptions{}); err != ErrPipelineUpdate {
		t.Fatalf("pipeline: %v", err)
	}
	if _, err := Parse(bsoncore.Document{1, 2, 3}, ParseOptions{}); mongoerr.CodeOf(err) != mongoerr.InvalidBSON {
		t.Fatalf("corrupt update: %v", err)
	}
	u, _ = Parse(J(t, `{"$set":{"a":1}}`), ParseOptions{})
	if _, _, err := u.Apply(bsoncore.Document{9, 0, 0, 0, 3, 0}, ApplyContext{}); mongoerr.CodeOf(err) != mongoerr.InvalidBSON {
		t.Fatalf("corrupt doc: %v", err)
	}
}

func TestValidateDepth(t *testing.T) {
	// nested builds {$set: {a: <n nested documents>}}; the result has n+1 levels.
	nested := func(n int) *Update {
		var sb strings.Builder
		sb.WriteString(`{"$set":{"a":`)
		for i := 0; i < n; i++ {
			sb.WriteString(`{"a":`)
		}
		sb.WriteString("1")
		sb.WriteString(strings.Repeat("}", n+2))
		u, err := Parse(J(t, sb.String()), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if _, _, err := nested(99).Apply(J(t, `{"_id":1}`), ApplyContext{Validate: true}); err != nil {
		t.Fatalf("100 levels: %v", err)
	}
	if _, _, err := nested(100).Apply(J(t, `{"_id":1}`), ApplyContext{Validate: true}); mongoerr.CodeOf(err) != mongoerr.Overflow {
		t.Fatalf("101 levels: %v", err)
	}
	if _, _, err := nested(100).Apply(J(t, `{"_id":1}`), ApplyContext{}); err != nil {
		t.Fatalf("without Validate: %v", err)
	}
}

func TestUpsertSeed(t *testing.T) {
	cases := []struct {
		query, want string
		code        mongoerr.Code
	}{
		{query: `{"a":1,"_id":5}`, want: `{"_id":5,"a":1}`},
		{query: `{"b.c":1,"a":{"$eq":2},"d":{"$gt":1}}`, want: `{"a":2,"b":{"c":1}}`},
		{query: `{"$and":[{"a":1},{"b":2}],"$or":[{"c":1}]}`, want: `{"a":1,"b":2}`},
		{query: `{"a":{"$regularExpression":{"pattern":"x","options":""}}}`, want: `{}`},
		{query: `{"a":1,"a.b":2}`, code: mongoerr.NotSingleValueField},
		{query: `{"$and":[{"a":1},{"a":2}]}`, code: mongoerr.NotSingleValueField},
		{query: `{"a":{"x":1}}`, want: `{"a":{"x":1}}`},
	}
	for _, c := range cases {
		got, err := UpsertSeed(J(t, c.query))
		if c.code != 0 {
			if mongoerr.CodeOf(err) != c.code {
				t.Errorf("%s: err %v, want %v", c.query, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			continue
		}
		if want := J(t, c.want); !bytes.Equal(got, want) {
			t.Errorf("%s: got %s want %s", c.query, show(got), show(want))
		}
	}
	// Seed then apply, as an upsert does: $setOnInsert applies and _id stays first.
	seed, err := UpsertSeed(J(t, `{"x":1,"_id":7}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := Parse(J(t, `{"$set":{"b":1},"$setOnInsert":{"a":0}}`), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := u.Apply(seed, ApplyContext{IsInsert: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := J(t, `{"_id":7,"x":1,"a":0,"b":1}`); !bytes.Equal(got, want) {
		t.Fatalf("got %s want %s", show(got), show(want))
	}
}

// TestWithMatcher covers what the query matcher sees: array filters match elements wrapped
// as {"<id>": element}, operator $pull conditions match them wrapped as {"v": element}, and
// operator-free $pull documents match document elements.
func TestWithMatcher(t *testing.T) {
	runCases(t, []tc{
		{name: "pull condition", doc: `{"_id":1,"a":[1,5,7,2]}`, update: `{"$pull":{"a":{"$gte":5}}}`, want: `{"_id":1,"a":[1,2]}`},
		{name: "pull in", doc: `{"_id":1,"a":["x","y","z"]}`, update: `{"$pull":{"a":{"$in":["x","z"]}}}`, want: `{"_id":1,"a":["y"]}`},
		{name: "pull doc query", doc: `{"_id":1,"a":[{"s":1,"t":"x"},{"s":5,"t":"x"},3]}`, update: `{"$pull":{"a":{"s":{"$gt":2},"t":"x"}}}`, want: `{"_id":1,"a":[{"s":1,"t":"x"},3]}`},
		{name: "pull elemMatch style", doc: `{"_id":1,"a":[{"r":[1,2]},{"r":[3]}]}`, update: `{"$pull":{"a":{"r":3}}}`, want: `{"_id":1,"a":[{"r":[1,2]}]}`},
		{name: "pull regex", doc: `{"_id":1,"a":["apple","banana"]}`, update: `{"$pull":{"a":{"$regularExpression":{"pattern":"^a","options":""}}}}`, want: `{"_id":1,"a":["banana"]}`},
		{name: "pull unknown operator", doc: `{"_id":1,"a":[1]}`, update: `{"$pull":{"a":{"$foo":1}}}`, code: mongoerr.BadValue},
		{name: "array filter scalar", doc: `{"_id":1,"a":[1,6,3,9]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":{"$gt":5}}`}, want: `{"_id":1,"a":[1,0,3,0]}`},
		{name: "array filter doc fields", doc: `{"_id":1,"g":[{"k":"a","n":1},{"k":"b","n":2}]}`, update: `{"$inc":{"g.$[e].n":10}}`, filters: []string{`{"e.k":"b","e.n":{"$lt":5}}`}, want: `{"_id":1,"g":[{"k":"a","n":1},{"k":"b","n":12}]}`},
		{name: "nested filters", doc: `{"_id":1,"a":[{"t":1,"b":[{"v":1},{"v":2}]},{"t":2,"b":[{"v":2}]}]}`, update: `{"$set":{"a.$[i].b.$[j].v":0}}`,
			filters: []string{`{"i.t":2}`, `{"j.v":{"$gte":2}}`}, want: `{"_id":1,"a":[{"t":1,"b":[{"v":1},{"v":2}]},{"t":2,"b":[{"v":0}]}]}`},
		{name: "filter with or", doc: `{"_id":1,"a":[1,2,3]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"$or":[{"x":1},{"x":3}]}`}, want: `{"_id":1,"a":[0,2,0]}`},
		{name: "filter with pull in one update", doc: `{"_id":1,"a":[1,3,5,2],"b":[1,2,3]}`, update: `{"$pull":{"a":{"$gte":3}},"$set":{"b.$[x]":0}}`,
			filters: []string{`{"x":{"$gte":2}}`}, want: `{"_id":1,"a":[1,2],"b":[1,0,0]}`},
		{name: "pull expr rejected", doc: `{"_id":1,"a":[{"x":1}]}`, update: `{"$pull":{"a":{"$expr":{"$eq":["$x",1]}}}}`, code: mongoerr.QueryFeatureNotAllowed},
		{name: "filter operator error", doc: `{"_id":1,"a":[1]}`, update: `{"$set":{"a.$[x]":0}}`, filters: []string{`{"x":{"$foo":1}}`},
			code: mongoerr.BadValue, msg: "Error parsing array filter :: caused by :: unknown operator"},
	})
}

// TestConcurrentApply pins that a parsed Update is immutable: many goroutines apply it at
// once (run with -race).
func TestConcurrentApply(t *testing.T) {
	u, err := Parse(J(t, `{"$set":{"a.$[x].b":1,"a.$[].c":2},"$inc":{"n":1},"$push":{"p":{"$each":[3,1],"$sort":1}}}`),
		ParseOptions{ArrayFilters: []bsoncore.Document{J(t, `{"x.k":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	doc := J(t, `{"_id":1,"a":[{"k":1},{"k":2}],"n":1,"p":[2]}`)
	want := J(t, `{"_id":1,"a":[{"k":1,"b":1,"c":2},{"k":2,"c":2}],"n":2,"p":[1,2,3]}`)
	done := make(chan error, 4)
	for range 4 {
		go func() {
			for range 200 {
				got, _, err := u.Apply(doc, ApplyContext{})
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("got %s", show(got))
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestFieldOrderAcrossOperators(t *testing.T) {
	runCases(t, []tc{
		{name: "ops interleave by path", doc: `{"_id":1,"m":0}`, update: `{"$set":{"z":1},"$inc":{"b":1},"$push":{"a":1}}`, want: `{"_id":1,"m":0,"a":[1],"b":1,"z":1}`},
		{name: "rename dest sorted with others", doc: `{"_id":1,"q":1}`, update: `{"$rename":{"q":"c"},"$set":{"d":1,"b":1}}`, want: `{"_id":1,"b":1,"c":1,"d":1}`},
		{name: "nested creation order", doc: `{"_id":1}`, update: `{"$set":{"x.z":1,"x.a":1,"w":1}}`, want: `{"_id":1,"w":1,"x":{"a":1,"z":1}}`},
	})
}
