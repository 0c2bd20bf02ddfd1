// Package sorter is the external sorter (execution spec: "The External Sorter"): it sorts a
// stream of (key, value) byte pairs that may be far larger than memory.
//
// Pairs are appended to an in-memory arena until its size reaches the memory limit
// (maxIndexBuildMemoryUsageMegabytes for index builds); the arena is then sorted and written
// out as one sorted run. All runs of one sorter live in a single temporary file (one file
// descriptor however many spills happen), each run a contiguous byte range. Done sorts what
// is left in memory and returns an iterator that k-way merges the runs and the in-memory
// remainder with a heap.
//
// Run format: a sequence of records `uvarint(len(key)) uvarint(len(value)) key value`, then
// the run's record count and a CRC-32C of the run's bytes are kept in memory (the file is
// private to this process and removed on Close). A run whose bytes do not parse or whose
// checksum does not match yields an error, never a panic.
//
// Pairs are ordered by Options.Compare on the keys (bytes.Compare by default). Pairs with
// equal keys come out in an unspecified order; index builds never produce equal keys because
// every key ends with its RecordId.
package sorter

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
)

// Options configure a Sorter.
type Options struct {
	// MaxMemoryBytes is the size of buffered pairs (bytes of keys and values plus a fixed
	// per-pair overhead) above which the buffer is spilled to disk. <= 0 means 100 MiB.
	MaxMemoryBytes int64
	// TempDir holds the spill file (os.TempDir() when empty).
	TempDir string
	// Compare orders keys; nil means bytes.Compare.
	Compare func(a, b []byte) int
}

// perPairOverhead approximates the memory of one entry's bookkeeping.
const perPairOverhead = 16

type entry struct {
	off  uint32 // offset in arena; the arena is spilled before it can exceed 4 GiB
	klen uint32
	vlen uint32
}

type run struct {
	off, len int64
	count    int64
	crc      uint32
}

// Stats report what a sorter did.
type Stats struct {
	Pairs  int64 // pairs added
	Spills int   // sorted runs written to disk
	Bytes  int64 // bytes written to the spill file
}

// Sorter accumulates pairs. Not safe for concurrent use.
type Sorter struct {
	opts    Options
	cmp     func(a, b []byte) int
	arena   []byte
	entries []entry
	file    *os.File
	fileOff int64
	runs    []run
	stats   Stats
	done    bool
	closed  bool
	crcTab  *crc32.Table
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// New returns an empty sorter.
func New(opts Options) *Sorter {
	if opts.MaxMemoryBytes <= 0 {
		opts.MaxMemoryBytes = 100 << 20
	}
	cmp := opts.Compare
	if cmp == nil {
		cmp = bytes.Compare
	}
	return &Sorter{opts: opts, cmp: cmp, crcTab: castagnoli}
}

// ErrDone is returned by Add after Done.
var ErrDone = errors.New("sorter: Add after Done")

// maxArena bounds the arena so entry offsets fit in uint32.
const maxArena = 1<<32 - 1

// Add copies the pair into the sorter, spilling to disk when the memory limit is reached.
func (s *Sorter) Add(key, value []byte) error {
	if s.done || s.closed {
		return ErrDone
	}
	need := int64(len(key) + len(value))
	if len(s.entries) > 0 && (s.memUsage()+need+perPairOverhead > s.opts.MaxMemoryBytes ||
		int64(len(s.arena))+need > maxArena) {
		if err := s.spill(); err != nil {
			return err
		}
	}
	if need > maxArena {
		return fmt.Errorf("sorter: pair of %d bytes is too large", need)
	}
	off := len(s.arena)
	s.arena = append(s.arena, key...)
	s.arena = append(s.arena, value...)
	s.entries = append(s.entries, entry{off: uint32(off), klen: uint32(len(key)), vlen: uint32(len(value))})
	s.stats.Pairs++
	return nil
}

// memUsage is the accounted size of buffered pairs.
func (s *Sorter) memUsage() int64 {
	return int64(len(s.arena)) + int64(len(s.entries))*perPairOverhead
}

// Stats returns counters so far.
func (s *Sorter) Stats() Stats { return s.stats }

func (s *Sorter) key(e entry) []byte { return s.arena[e.off : e.off+e.klen] }
func (s *Sorter) val(e entry) []byte { return s.arena[e.off+e.klen : e.off+e.klen+e.vlen] }

func (s *Sorter) sortEntries() {
	slices.SortFunc(s.entries, func(a, b entry) int { return s.cmp(s.key(a), s.key(b)) })
}

// spill sorts the buffer and appends it to the spill file as one run.
func (s *Sorter) spill() error {
	if s.file == nil {
		f, err := os.CreateTemp(s.opts.TempDir, "humongo-sorter-*")
		if err != nil {
			return fmt.Errorf("sorter: create spill file: %w", err)
		}
		s.file = f
	}
	s.sortEntries()
	crc := crc32.New(s.crcTab)
	cw := &countWriter{w: s.file}
	w := bufio.NewWriterSize(io.MultiWriter(cw, crc), 256<<10)
	var hdr [2 * binary.MaxVarintLen64]byte
	for _, e := range s.entries {
		n := binary.PutUvarint(hdr[:], uint64(e.klen))
		n += binary.PutUvarint(hdr[n:], uint64(e.vlen))
		if _, err := w.Write(hdr[:n]); err != nil {
			return fmt.Errorf("sorter: spill: %w", err)
		}
		if _, err := w.Write(s.arena[e.off : e.off+e.klen+e.vlen]); err != nil {
			return fmt.Errorf("sorter: spill: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sorter: spill: %w", err)
	}
	s.runs = append(s.runs, run{off: s.fileOff, len: cw.n, count: int64(len(s.entries)), crc: crc.Sum32()})
	s.fileOff += cw.n
	s.stats.Spills++
	s.stats.Bytes += cw.n
	s.arena = s.arena[:0]
	s.entries = s.entries[:0]
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Done ends input and returns an iterator over all pairs in order. The iterator is valid
// until the sorter is closed; Close the sorter (which removes the spill file) when finished.
func (s *Sorter) Done() (*Iterator, error) {
	if s.done || s.closed {
		return nil, ErrDone
	}
	s.done = true
	s.sortEntries()
	it := &Iterator{h: srcHeap{cmp: s.cmp}}
	for _, r := range s.runs {
		ri := &runIter{
			r:     bufio.NewReaderSize(io.NewSectionReader(s.file, r.off, r.len), 64<<10),
			run:   r,
			crc:   crc32.New(s.crcTab),
			count: r.count,
		}
		it.sources = append(it.sources, ri)
	}
	if len(s.entries) > 0 {
		it.sources = append(it.sources, &memIter{s: s})
	}
	for _, src := range it.sources {
		ok, err := src.next()
		if err != nil {
			return nil, err
		}
		if ok {
			it.h.s = append(it.h.s, src)
		}
	}
	heap.Init(&it.h)
	return it, nil
}

// Close releases memory and removes the spill file. Safe to call more than once.
func (s *Sorter) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.arena, s.entries = nil, nil
	if s.file != nil {
		name := s.file.Name()
		err := s.file.Close()
		if rerr := os.Remove(name); err == nil {
			err = rerr
		}
		s.file = nil
		return err
	}
	return nil
}

// source is one sorted stream: a spilled run or the in-memory remainder.
type source interface {
	next() (bool, error)
	key() []byte
	value() []byte
}

type memIter struct {
	s *Sorter
	i int // index of the current entry + 1
}

func (m *memIter) next() (bool, error) {
	if m.i >= len(m.s.entries) {
		return false, nil
	}
	m.i++
	return true, nil
}
func (m *memIter) key() []byte   { return m.s.key(m.s.entries[m.i-1]) }
func (m *memIter) value() []byte { return m.s.val(m.s.entries[m.i-1]) }

type runIter struct {
	r     *bufio.Reader
	run   run
	crc   hashWriter
	count int64 // records left
	buf   []byte
	klen  int
}

type hashWriter interface {
	io.Writer
	Sum32() uint32
}

var errCorruptRun = errors.New("sorter: corrupt spill run")

func (ri *runIter) next() (bool, error) {
	if ri.count == 0 {
		// Consumed every record: the run must be exactly used up and its checksum match.
		if _, err := ri.r.ReadByte(); err != io.EOF {
			return false, errCorruptRun
		}
		if ri.crc.Sum32() != ri.run.crc {
			return false, fmt.Errorf("%w: checksum mismatch", errCorruptRun)
		}
		return false, nil
	}
	ri.count--
	var hdr [2 * binary.MaxVarintLen64]byte
	klen, err := readUvarint(ri.r, hdr[:0], ri.crc)
	if err != nil {
		return false, err
	}
	vlen, err := readUvarint(ri.r, hdr[:0], ri.crc)
	if err != nil {
		return false, err
	}
	if klen > uint64(ri.run.len) || vlen > uint64(ri.run.len) {
		return false, fmt.Errorf("%w: record length out of range", errCorruptRun)
	}
	n := int(klen + vlen)
	if cap(ri.buf) < n {
		ri.buf = make([]byte, n)
	}
	ri.buf = ri.buf[:n]
	if _, err := io.ReadFull(ri.r, ri.buf); err != nil {
		return false, fmt.Errorf("%w: %v", errCorruptRun, err)
	}
	ri.crc.Write(ri.buf)
	ri.klen = int(klen)
	return true, nil
}

func readUvarint(r *bufio.Reader, scratch []byte, h io.Writer) (uint64, error) {
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errCorruptRun, err)
		}
		scratch = append(scratch, b)
		if b < 0x80 {
			h.Write(scratch)
			v, n := binary.Uvarint(scratch)
			if n <= 0 {
				return 0, errCorruptRun
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint overflow", errCorruptRun)
}

func (ri *runIter) key() []byte   { return ri.buf[:ri.klen] }
func (ri *runIter) value() []byte { return ri.buf[ri.klen:] }

// Iterator yields pairs in key order. Key and Value are valid until the next call to Next.
type Iterator struct {
	sources []source
	h       srcHeap
	cur     source
	started bool
	err     error
}

type srcHeap struct {
	s   []source
	cmp func(a, b []byte) int
}

func (h srcHeap) Len() int           { return len(h.s) }
func (h srcHeap) Less(i, j int) bool { return h.cmp(h.s[i].key(), h.s[j].key()) < 0 }
func (h srcHeap) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *srcHeap) Push(x any)        { h.s = append(h.s, x.(source)) }
func (h *srcHeap) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}

// Next advances to the next pair, returning false at the end or on error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.started && it.cur != nil {
		// Advance the source we returned last and restore the heap.
		ok, err := it.cur.next()
		if err != nil {
			it.err = err
			return false
		}
		if ok {
			heap.Fix(&it.h, 0)
		} else {
			heap.Pop(&it.h)
		}
	}
	it.started = true
	if it.h.Len() == 0 {
		it.cur = nil
		return false
	}
	it.cur = it.h.s[0]
	return true
}

// Key returns the current key.
func (it *Iterator) Key() []byte { return it.cur.key() }

// Value returns the current value.
func (it *Iterator) Value() []byte { return it.cur.value() }

// Err returns the error that stopped iteration, if any.
func (it *Iterator) Err() error { return it.err }
