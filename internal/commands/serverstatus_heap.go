package commands

import (
	"runtime/metrics"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// heapSamples are the Go runtime's memory classes that serverStatus's tcmalloc section
// reports. mongod reports its allocator (tcmalloc) there; humongod's allocator is the Go
// runtime's, so the section carries the same generic fields and the page-heap figures that
// have a Go counterpart: what is in use, what is free but still mapped, what went back to
// the OS. runtime/metrics reads them without stopping the world.
var heapSamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/unused:bytes",
}

// appendHeapSection appends serverStatus's tcmalloc section.
func appendHeapSection(b []byte) []byte {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	objects, total, free, released, unused := v(0), v(1), v(2), v(3), v(4)
	return bsoncore.AppendDocumentElement(b, "tcmalloc", bsoncore.NewDocumentBuilder().
		AppendDocument("generic", bsoncore.NewDocumentBuilder().
			AppendInt64("current_allocated_bytes", objects).
			AppendInt64("heap_size", total).Build()).
		AppendDocument("tcmalloc", bsoncore.NewDocumentBuilder().
			AppendInt64("pageheap_free_bytes", free).
			AppendInt64("pageheap_unmapped_bytes", released).
			AppendInt64("total_free_bytes", free+unused).Build()).Build())
}
