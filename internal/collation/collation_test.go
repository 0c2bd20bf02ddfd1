package collation

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func spec(t *testing.T, d bson.D) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t *testing.T, d bson.D) *Collator {
	t.Helper()
	c, err := Parse(spec(t, d))
	if err != nil {
		t.Fatalf("Parse(%v): %v", d, err)
	}
	if c == nil {
		t.Fatalf("Parse(%v): nil collator", d)
	}
	return c
}

func TestSimpleIsNil(t *testing.T) {
	c, err := Parse(spec(t, bson.D{{Key: "locale", Value: "simple"}}))
	if err != nil || c != nil {
		t.Fatalf("simple: %v %v", c, err)
	}
	if !Equal(nil, nil) || Equal(nil, mustParse(t, bson.D{{Key: "locale", Value: "en"}})) {
		t.Fatal("Equal with nil")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		d    bson.D
		code mongoerr.Code
		msg  string
	}{
		{bson.D{{Key: "locale", Value: "xx_bogus"}}, mongoerr.BadValue, "Field 'locale' is invalid in:"},
		{bson.D{{Key: "strength", Value: 2}}, 40414, "'collation.locale' is missing"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 6}}, mongoerr.FailedToParse, "must be an integer 1 through 5. Got: 6"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: "2"}}, mongoerr.TypeMismatch, "wrong type"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "up"}}, mongoerr.FailedToParse, "caseFirst"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "alternate", Value: "x"}}, mongoerr.FailedToParse, "alternate"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "maxVariable", Value: "x"}}, mongoerr.FailedToParse, "maxVariable"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "foo", Value: 1}}, 40415, "'collation.foo' is an unknown field"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseLevel", Value: 1}}, mongoerr.TypeMismatch, "caseLevel"},
		{bson.D{{Key: "locale", Value: "simple"}, {Key: "strength", Value: 1}}, mongoerr.FailedToParse, "no other fields"},
		{bson.D{{Key: "locale", Value: 5}}, mongoerr.TypeMismatch, "locale"},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "version", Value: "1.0"}}, mongoerr.IncompatibleCollationVersion, "version"},
	}
	for _, tc := range cases {
		_, err := Parse(spec(t, tc.d))
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != tc.code || !strings.Contains(me.Msg, tc.msg) {
			t.Errorf("Parse(%v) = %v, want code %d containing %q", tc.d, err, tc.code, tc.msg)
		}
	}
}

func TestSpecNormalised(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "en_US"}, {Key: "strength", Value: 2}})
	want := `{"locale": "en_US","caseLevel": false,"caseFirst": "off","strength": {"$numberInt":"2"},"numericOrdering": false,"alternate": "non-ignorable","maxVariable": "punct","normalization": false,"backwards": false,"version": "57.1"}`
	if got := c.Spec().String(); got != want {
		t.Fatalf("spec\n got %s\nwant %s", got, want)
	}
	// The normalised spec parses back to an equal collator.
	c2, err := Parse(c.Spec())
	if err != nil || !Equal(c, c2) {
		t.Fatalf("round trip: %v %v", c2, err)
	}
	if Equal(c, mustParse(t, bson.D{{Key: "locale", Value: "en_US"}})) {
		t.Fatal("different strengths are equal")
	}
	if fr := mustParse(t, bson.D{{Key: "locale", Value: "fr_CA"}}); !strings.Contains(fr.Spec().String(), `"backwards": true`) {
		t.Fatalf("fr_CA default backwards: %s", fr.Spec())
	}
	for _, l := range []string{"de@collation=phonebook", "zh@collation=pinyin", "en_US_POSIX", "zh_Hant", "sr_Latn"} {
		mustParse(t, bson.D{{Key: "locale", Value: l}})
	}
}

func TestCompare(t *testing.T) {
	s1 := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 1}})
	s2 := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}})
	s3 := mustParse(t, bson.D{{Key: "locale", Value: "en"}})
	num := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "numericOrdering", Value: true}})
	shifted := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "alternate", Value: "shifted"}})
	s5 := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 5}})
	cases := []struct {
		name string
		c    *Collator
		a, b string
		want int
	}{
		{"strength2 case-insensitive", s2, "a", "A", 0},
		{"strength2 accents count", s2, "e", "é", -1},
		{"strength1 accents ignored", s1, "resume", "Résumé", 0},
		{"strength3 case counts", s3, "a", "A", -1},
		{"strength3 alphabetic not ASCII", s3, "B", "a", 1},
		{"binary-like below", s3, "apple", "banana", -1},
		{"numericOrdering", num, "10", "9", 1},
		{"no numericOrdering", s3, "10", "9", -1},
		{"shifted ignores punctuation", shifted, "black-bird", "blackbird", 0},
		{"shifted ignores space", shifted, "black bird", "blackbird", 0},
		{"non-ignorable counts punctuation", s3, "black-bird", "blackbird", -1},
		{"identical breaks ties", s5, "a", "a", 0},
	}
	for _, tc := range cases {
		if got := sign(tc.c.Compare(tc.a, tc.b)); got != tc.want {
			t.Errorf("%s: Compare(%q, %q) = %d, want %d", tc.name, tc.a, tc.b, got, tc.want)
		}
		if got := sign(bytes.Compare(tc.c.Key(tc.a), tc.c.Key(tc.b))); got != tc.want {
			t.Errorf("%s: keys of %q, %q compare %d, want %d", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestSortOrder(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "en"}})
	words := []string{"banana", "Apple", "cherry", "apple", "Banana"}
	slices.SortFunc(words, c.Compare)
	want := []string{"apple", "Apple", "banana", "Banana", "cherry"}
	if !slices.Equal(words, want) {
		t.Fatalf("sorted %v, want %v", words, want)
	}
}

func TestAppendValueKey(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}})
	doc := func(d bson.D) bsoncore.Value {
		b, _ := bson.Marshal(bson.D{{Key: "v", Value: d}})
		return bsoncore.Document(b).Lookup("v")
	}
	a, _ := c.AppendValueKey(nil, doc(bson.D{{Key: "x", Value: "ABC"}, {Key: "n", Value: 1}, {Key: "arr", Value: bson.A{"Q", 2}}}))
	b, _ := c.AppendValueKey(nil, doc(bson.D{{Key: "x", Value: "abc"}, {Key: "n", Value: 1}, {Key: "arr", Value: bson.A{"q", 2}}}))
	if !bytes.Equal(a.Data, b.Data) || a.Type != bsoncore.TypeEmbeddedDocument {
		t.Fatalf("nested keys differ: %v vs %v", a, b)
	}
	if err := bsoncore.Document(a.Data).Validate(); err != nil {
		t.Fatalf("key document invalid: %v", err)
	}
	n := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 7)}
	if got, buf := c.AppendValueKey(nil, n); len(buf) != 0 || !bytes.Equal(got.Data, n.Data) {
		t.Fatal("number was copied or changed")
	}
	s := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "Hi")}
	got, _ := c.AppendValueKey([]byte("prefix"), s)
	if _, _, ok := bsoncore.ReadString(got.Data); !ok {
		t.Fatalf("string key not a BSON string: %x", got.Data)
	}
	// Malformed input comes back unchanged.
	bad := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: []byte{9, 0, 0, 0, 2, 'x', 0, 0xff, 0}}
	if got, _ := c.AppendValueKey(nil, bad); !bytes.Equal(got.Data, bad.Data) {
		t.Fatal("malformed value changed")
	}
}

func TestConcurrent(t *testing.T) {
	c := mustParse(t, bson.D{{Key: "locale", Value: "de"}, {Key: "strength", Value: 1}})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if c.Compare("Straße", "strasse") != 0 && c.Compare("Müller", "muller") != 0 {
					t.Error("mismatch")
					return
				}
			}
		}()
	}
	wg.Wait()
}
