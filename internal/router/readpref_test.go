package router

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func rpValue(t *testing.T, v any) bsoncore.Value {
	t.Helper()
	raw, err := bson.Marshal(bson.D{{Key: "$readPreference", Value: v}})
	if err != nil {
		t.Fatal(err)
	}
	return bsoncore.Document(raw).Lookup("$readPreference")
}

func TestParseReadPref(t *testing.T) {
	good := []struct {
		in        bson.D
		mode      readpref.Mode
		tags      int
		staleness time.Duration
	}{
		{bson.D{{Key: "mode", Value: "primary"}}, readpref.PrimaryMode, 0, 0},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "tags", Value: bson.A{bson.D{}}}}, readpref.PrimaryMode, 0, 0},
		{bson.D{{Key: "mode", Value: "primaryPreferred"}}, readpref.PrimaryPreferredMode, 0, 0},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: "east"}}, bson.D{}}}}, readpref.SecondaryMode, 2, 0},
		{bson.D{{Key: "mode", Value: "secondaryPreferred"}, {Key: "maxStalenessSeconds", Value: 120}}, readpref.SecondaryPreferredMode, 0, 120 * time.Second},
		{bson.D{{Key: "mode", Value: "nearest"}, {Key: "maxStalenessSeconds", Value: int64(-0)}, {Key: "hedge", Value: bson.D{{Key: "enabled", Value: true}}}}, readpref.NearestMode, 0, 0},
	}
	for _, c := range good {
		rp, err := parseReadPref(rpValue(t, c.in))
		if err != nil {
			t.Errorf("%v: %v", c.in, err)
			continue
		}
		ms, _ := rp.MaxStaleness()
		if rp.Mode() != c.mode || len(rp.TagSets()) != c.tags || ms != c.staleness {
			t.Errorf("%v: got %v", c.in, rp)
		}
	}
	bad := []struct {
		in   any
		code mongoerr.Code
	}{
		{"secondary", mongoerr.TypeMismatch},
		{bson.D{}, mongoerr.NoSuchKey},
		{bson.D{{Key: "mode", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "mode", Value: "Secondary"}}, mongoerr.FailedToParse},
		{bson.D{{Key: "mode", Value: "bogus"}}, mongoerr.FailedToParse},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: "x"}}}}}, mongoerr.BadValue},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "tags", Value: bson.D{}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "tags", Value: bson.A{1}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: 1}}}}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "maxStalenessSeconds", Value: "x"}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "maxStalenessSeconds", Value: -1}}, mongoerr.BadValue},
		{bson.D{{Key: "mode", Value: "secondary"}, {Key: "maxStalenessSeconds", Value: 89}}, mongoerr.BadValue},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "maxStalenessSeconds", Value: 90}}, mongoerr.BadValue},
		{bson.D{{Key: "mode", Value: "primary"}, {Key: "hedge", Value: bson.D{}}}, mongoerr.BadValue},
		{bson.D{{Key: "mode", Value: "nearest"}, {Key: "hedge", Value: true}}, mongoerr.TypeMismatch},
	}
	for _, c := range bad {
		_, err := parseReadPref(rpValue(t, c.in))
		me, ok := mongoerr.As(err)
		if !ok || me.Code != c.code {
			t.Errorf("%v: want code %d, got %v", c.in, c.code, err)
		}
	}
}
