package collation

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func collator(t *testing.T, kv ...any) *Collator {
	t.Helper()
	d := bson.D{{Key: "locale", Value: "en"}}
	for i := 0; i < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return mustParse(t, d)
}

// TestCaseFirstAndMaxVariable pins ICU's (MongoDB's) results for caseFirst and for
// alternate "shifted" with both maxVariable values.
func TestCaseFirstAndMaxVariable(t *testing.T) {
	upper := collator(t, "caseFirst", "upper")
	lower := collator(t, "caseFirst", "lower")
	off := collator(t)
	upper2 := collator(t, "caseFirst", "upper", "strength", 2)
	upperCL := collator(t, "caseFirst", "upper", "strength", 1, "caseLevel", true)
	shifted := collator(t, "alternate", "shifted")
	shifted4 := collator(t, "alternate", "shifted", "strength", 4)
	space := collator(t, "alternate", "shifted", "maxVariable", "space")
	space4 := collator(t, "alternate", "shifted", "maxVariable", "space", "strength", 4)
	space1 := collator(t, "alternate", "shifted", "maxVariable", "space", "strength", 1)
	spaceNI := collator(t, "maxVariable", "space")
	cases := []struct {
		name string
		c    *Collator
		a, b string
		want int
	}{
		{"upper: A before a", upper, "A", "a", -1},
		{"upper: primary still first", upper, "a", "B", -1},
		{"upper: Aa before aA", upper, "Aa", "aA", -1},
		{"upper: aA before aa", upper, "aA", "aa", -1},
		{"upper: AA before Aa", upper, "AA", "Aa", -1},
		{"upper: wide capital before a", upper, "Ａ", "a", -1},
		{"upper: accents before case", upper, "Á", "a", 1},
		{"upper: Ä before ä", upper, "Ä", "ä", -1},
		{"lower: a before A", lower, "a", "A", -1},
		{"lower: aa before aA", lower, "aa", "aA", -1},
		{"lower: subscript a before A", lower, "ₐ", "A", -1},
		{"off: a before A", off, "a", "A", -1},
		{"off: A before subscript a", off, "A", "ₐ", -1},
		{"upper at strength 2: case ignored", upper2, "A", "a", 0},
		{"upper with caseLevel: A before a", upperCL, "A", "a", -1},
		{"upper with caseLevel: accents ignored", upperCL, "Résumé", "RESUME", 1},
		{"shifted: hyphen ignored", shifted, "black-bird", "blackbird", 0},
		{"shifted: space ignored", shifted, "black bird", "blackbird", 0},
		{"shifted: hyphen and space", shifted, "black bird", "black-bird", 0},
		{"shifted: currency is not variable", shifted, "black$bird", "blackbird", -1},
		{"shifted: symbols are not variable", shifted, "black+bird", "blackbird", -1},
		{"shifted: case still counts", shifted, "Black-bird", "blackbird", 1},
		{"shifted strength 4: space first", shifted4, "black bird", "black-bird", -1},
		{"shifted strength 4: variable before none", shifted4, "black-bird", "blackbird", -1},
		{"space: space ignored", space, "black bird", "blackbird", 0},
		{"space: tabs and newlines too", space, "black\t bird\n", "blackbird", 0},
		{"space: no-break space too", space, "black\u00a0bird", "blackbird", 0},
		{"space: hyphen counts", space, "black-bird", "blackbird", -1},
		{"space: hyphen vs space", space, "black-bird", "black bird", -1},
		{"space: case counts", space, "Black bird", "blackbird", 1},
		{"space strength 1: case and space ignored", space1, "BLACK BIRD", "blackbird", 0},
		{"space strength 4: space is a quaternary difference", space4, "black bird", "blackbird", -1},
		{"space strength 4: an earlier space sorts first", space4, "blac kbird", "black bird", -1},
		{"space strength 4: same spaces equal", space4, "black bird", "black bird", 0},
		{"space strength 4: ß", space4, "ß b", "ßb", -1},
		{"maxVariable without shifted has no effect", spaceNI, "black bird", "blackbird", -1},
	}
	for _, tc := range cases {
		if got := sign(tc.c.Compare(tc.a, tc.b)); got != tc.want {
			t.Errorf("%s: Compare(%q, %q) = %d, want %d", tc.name, tc.a, tc.b, got, tc.want)
		}
		if got := sign(bytes.Compare(tc.c.Key(tc.a), tc.c.Key(tc.b))); got != tc.want {
			t.Errorf("%s: keys of %q, %q compare %d, want %d", tc.name, tc.a, tc.b, got, tc.want)
		}
	}

	words := []string{"b", "aa", "B", "a", "Aa", "A", "aA", "AA"}
	for _, tc := range []struct {
		c    *Collator
		want string
	}{
		{upper, "A a AA Aa aA aa B b"},
		{lower, "a A aa aA Aa AA b B"},
		{off, "a A aa aA Aa AA b B"},
	} {
		got := slices.Clone(words)
		slices.SortStableFunc(got, tc.c.Compare)
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("%s sorts %s, want %s", tc.c.spec.Lookup("caseFirst"), s, tc.want)
		}
	}
}

// TestCaseFirstCoversUnicode checks the uppercase tertiary table against Unicode: for every
// cased letter whose lowercase form differs from it only by case (equal at strength 2),
// caseFirst "upper" puts the capital first and "lower"/"off" put it last.
func TestCaseFirstCoversUnicode(t *testing.T) {
	s2 := collator(t, "strength", 2)
	upper := collator(t, "caseFirst", "upper")
	lower := collator(t, "caseFirst", "lower")
	off := collator(t)
	checked := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.IsUpper(r) || unicode.IsTitle(r) {
			continue
		}
		l := unicode.ToLower(r)
		if l == r || !unicode.IsLower(l) {
			continue
		}
		U, L := string(r), string(l)
		if s2.Compare(U, L) != 0 {
			continue
		}
		checked++
		if upper.Compare(U, L) >= 0 || lower.Compare(L, U) >= 0 || off.Compare(L, U) >= 0 {
			t.Errorf("%U/%U: upper %d, lower %d, off %d", r, l, upper.Compare(U, L), lower.Compare(L, U), off.Compare(L, U))
		}
	}
	if checked < 500 {
		t.Fatalf("only %d case pairs checked", checked)
	}
	t.Logf("%d case pairs", checked)
}
