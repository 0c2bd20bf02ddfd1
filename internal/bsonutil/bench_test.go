package bsonutil

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	. "humongo/internal/bsonutil/bsontest"
)

func benchCompare(b *testing.B, x, y bsoncore.Value) {
	b.ReportAllocs()
	for b.Loop() {
		Compare(x, y)
	}
}

func BenchmarkCompareInt32(b *testing.B)       { benchCompare(b, Int32(1), Int32(2)) }
func BenchmarkCompareInt64Double(b *testing.B) { benchCompare(b, Int64(1<<53+1), Double(1<<53)) }
func BenchmarkCompareDouble(b *testing.B)      { benchCompare(b, Double(1.5), Double(2.5)) }
func BenchmarkCompareString(b *testing.B) {
	benchCompare(b, String("hello world, a string"), String("hello world, b string"))
}
func BenchmarkCompareDocument(b *testing.B) {
	x := Doc("_id", Int32(1), "name", String("alice"), "tags", Arr(String("a"), String("b")), "n", Doc("x", Double(1)))
	y := Doc("_id", Int32(1), "name", String("alice"), "tags", Arr(String("a"), String("b")), "n", Doc("x", Int64(2)))
	benchCompare(b, x, y)
}
func BenchmarkCompareMixedTypes(b *testing.B) { benchCompare(b, String("a"), Int32(1)) }
func BenchmarkCompareDecimal(b *testing.B)    { benchCompare(b, Decimal("1.5"), Decimal("2.50")) }
func BenchmarkCompareDecimalDouble(b *testing.B) {
	benchCompare(b, Decimal("0.1"), Double(0.1))
}

func BenchmarkLookup(b *testing.B) {
	d := D("a", Int32(1), "b", D("c", Arr(Int32(0), Doc("d", String("x")))), "z", Int32(2))
	b.ReportAllocs()
	for b.Loop() {
		Lookup(d, "b.c.1.d")
	}
}

func BenchmarkWalk(b *testing.B) {
	d := D("a", Arr(Doc("b", Int32(1)), Doc("b", Int32(2)), Doc("b", Arr(Int32(3), Int32(4)))))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		Walk(d, "a.b", func(bsoncore.Value, bool) bool { n++; return true })
	}
}
