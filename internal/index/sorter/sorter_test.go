package sorter

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSpillAndMerge sorts many random pairs through a tiny memory limit so that dozens of runs
// are spilled and merged, and compares with an in-memory sort.
func TestSpillAndMerge(t *testing.T) {
	for _, limit := range []int64{1, 64, 4 << 10, 1 << 30} {
		dir := t.TempDir()
		s := New(Options{MaxMemoryBytes: limit, TempDir: dir})
		rng := rand.New(rand.NewPCG(1, uint64(limit)))
		type kv struct{ k, v []byte }
		var want []kv
		for i := 0; i < 5000; i++ {
			k := make([]byte, 1+rng.IntN(12))
			for j := range k {
				k[j] = byte(rng.IntN(256))
			}
			k = binary.BigEndian.AppendUint32(k, uint32(i)) // unique keys
			v := []byte{byte(i), byte(i >> 8)}
			if err := s.Add(k, v); err != nil {
				t.Fatal(err)
			}
			want = append(want, kv{k, v})
		}
		slices.SortFunc(want, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
		it, err := s.Done()
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for it.Next() {
			if i >= len(want) || !bytes.Equal(it.Key(), want[i].k) || !bytes.Equal(it.Value(), want[i].v) {
				t.Fatalf("limit %d: pair %d = %x/%x, want %x/%x", limit, i, it.Key(), it.Value(), want[i].k, want[i].v)
			}
			i++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		if i != len(want) {
			t.Fatalf("limit %d: got %d pairs, want %d", limit, i, len(want))
		}
		st := s.Stats()
		if limit < 1<<20 && st.Spills < 2 {
			t.Fatalf("limit %d: expected spills, got %+v", limit, st)
		}
		if limit == 1<<30 && st.Spills != 0 {
			t.Fatalf("unexpected spill: %+v", st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(left) != 0 {
			t.Fatalf("spill files left behind: %v", left)
		}
	}
}

func TestCustomCompareAndEmpty(t *testing.T) {
	s := New(Options{MaxMemoryBytes: 32, TempDir: t.TempDir(),
		Compare: func(a, b []byte) int { return -bytes.Compare(a, b) }})
	defer s.Close()
	it, err := s.Done()
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() {
		t.Fatal("empty sorter yielded a pair")
	}
	if err := s.Add([]byte("x"), nil); err != ErrDone {
		t.Fatalf("Add after Done: %v", err)
	}

	s2 := New(Options{MaxMemoryBytes: 32, TempDir: t.TempDir(),
		Compare: func(a, b []byte) int { return -bytes.Compare(a, b) }})
	defer s2.Close()
	for _, k := range []string{"b", "d", "a", "c", "e", "f", "g"} {
		if err := s2.Add([]byte(k), []byte("val-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	it, err = s2.Done()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for it.Next() {
		got += string(it.Key())
	}
	if got != "gfedcba" {
		t.Fatalf("descending order: %q", got)
	}
}

// TestCorruptRun flips a byte of the spill file; the merge must report an error, not panic or
// return wrong data silently.
func TestCorruptRun(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{MaxMemoryBytes: 100, TempDir: dir})
	defer s.Close()
	for i := 0; i < 200; i++ {
		if err := s.Add([]byte{byte(i)}, bytes.Repeat([]byte{byte(i)}, 10)); err != nil {
			t.Fatal(err)
		}
	}
	name := s.file.Name()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	it, err := s.Done()
	if err != nil {
		return // detected while priming
	}
	for it.Next() {
	}
	if it.Err() == nil {
		t.Fatal("corruption not detected")
	}
}

func BenchmarkSorter1M(b *testing.B) {
	for b.Loop() {
		s := New(Options{MaxMemoryBytes: 8 << 20, TempDir: b.TempDir()})
		var k [16]byte
		for i := 0; i < 1_000_000; i++ {
			binary.BigEndian.PutUint64(k[:], uint64(i)*0x9E3779B97F4A7C15)
			binary.BigEndian.PutUint64(k[8:], uint64(i))
			_ = s.Add(k[:], k[8:])
		}
		it, _ := s.Done()
		for it.Next() {
		}
		s.Close()
	}
}
