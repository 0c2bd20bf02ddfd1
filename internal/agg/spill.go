package agg

// Partitioned input for $setWindowFields, $fill and $densify, with spilling (allowDiskUse).
//
// The three stages see their input grouped by partition and sorted within each partition.
// Below Context.MaxMemoryBytes that is an in-memory stable sort, as before. Above it, without
// allowDiskUse the stage fails with 292; with it, every document goes to the external sorter
// (internal/index/sorter) under the key (partition, sort key, arrival order), and the sorted
// stream is read back one partition at a time: only the current partition is held, and a
// partition that alone exceeds the limit is written to a private file and read back by
// position, like MongoDB's SpillableCache for $setWindowFields. The per-document values the
// window functions compute for a partition (one per document and output) stay in memory;
// those of a spilled partition are copied out of its documents so they do not pin them.
//
// The stages are push-style producers over the partitions (genSource), run as a coroutine
// (iter.Pull2) that advances only inside the consumer's Next: output streams partition by
// partition instead of being collected first.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"os"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// pdoc is one input document with its partition and sort keys.
type pdoc struct {
	part []byte // KeyString of the partition key
	key  []byte // sort key
	doc  bsoncore.Document
}

// partition is one partition's documents in sort order.
type partition interface {
	Len() int
	// At returns document i (its part is not set for a spilled partition). The document
	// stays valid after later calls.
	At(i int) (pdoc, error)
}

type memPartition []pdoc

func (m memPartition) Len() int               { return len(m) }
func (m memPartition) At(i int) (pdoc, error) { return m[i], nil }

// onDisk reports whether p's documents are read from a file, so values taken from them must
// be copied before being kept for the whole partition (ownValue).
func onDisk(p partition) bool { _, ok := p.(*filePartition); return ok }

// ownValue returns v with its own copy of the bytes when own is set.
func ownValue(v value, own bool) value {
	if !own || v.Type == 0 {
		return v
	}
	return value{Type: v.Type, Data: bytes.Clone(v.Data)}
}

// filePartition is a partition too large for memory: records `uvarint(len(key)) key doc`
// appended to a private temporary file, read back by position.
type filePartition struct {
	f    *os.File
	w    *bufio.Writer // nil once finished
	offs []int64       // record i spans offs[i]..offs[i+1]
	// block caches the last block read from the file, starting at offset blockOff: window
	// functions read nearby records in sequence, so one read serves many of them.
	block    []byte
	blockOff int64
}

// filePartitionBlock is the size of filePartition's reads.
const filePartitionBlock = 64 << 10

func newFilePartition(dir string) (*filePartition, error) {
	f, err := os.CreateTemp(dir, "humongo-window-*")
	if err != nil {
		return nil, fmt.Errorf("$setWindowFields spill: %w", err)
	}
	return &filePartition{f: f, w: bufio.NewWriterSize(f, 256<<10), offs: []int64{0}}, nil
}

func (fp *filePartition) add(p pdoc) error {
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(p.key)))
	for _, b := range [][]byte{hdr[:n], p.key, p.doc} {
		if _, err := fp.w.Write(b); err != nil {
			return fmt.Errorf("$setWindowFields spill: %w", err)
		}
	}
	fp.offs = append(fp.offs, fp.offs[len(fp.offs)-1]+int64(n+len(p.key)+len(p.doc)))
	return nil
}

func (fp *filePartition) finish() error {
	err := fp.w.Flush()
	fp.w = nil
	if err != nil {
		return fmt.Errorf("$setWindowFields spill: %w", err)
	}
	return nil
}

func (fp *filePartition) Len() int { return len(fp.offs) - 1 }

func (fp *filePartition) At(i int) (pdoc, error) {
	start, end := fp.offs[i], fp.offs[i+1]
	if start < fp.blockOff || end > fp.blockOff+int64(len(fp.block)) {
		size := max(end-start, filePartitionBlock)
		size = min(size, fp.offs[len(fp.offs)-1]-start)
		if int64(cap(fp.block)) < size {
			fp.block = make([]byte, size)
		}
		fp.block, fp.blockOff = fp.block[:size], start
		if _, err := fp.f.ReadAt(fp.block, start); err != nil {
			fp.block = fp.block[:0]
			return pdoc{}, fmt.Errorf("$setWindowFields spill read: %w", err)
		}
	}
	// Callers keep the documents they get: each gets its own copy.
	buf := bytes.Clone(fp.block[start-fp.blockOff : end-fp.blockOff])
	kl, n := binary.Uvarint(buf)
	if n <= 0 || uint64(len(buf)-n) < kl {
		return pdoc{}, mongoerr.New(mongoerr.InternalError, "corrupt $setWindowFields spill record")
	}
	key := buf[n : n+int(kl) : n+int(kl)]
	return pdoc{key: key, doc: buf[n+int(kl):]}, nil
}

// close removes the file.
func (fp *filePartition) close() {
	name := fp.f.Name()
	_ = fp.f.Close()
	_ = os.Remove(name)
}

// partReader hands out the partitions of a loaded input in order.
type partReader struct {
	maxMem  int64
	tempDir string
	// In memory: all is the whole input sorted, pos the start of the next partition.
	all []pdoc
	pos int
	// Spilled: the sorter's merged stream, with the first record of the next partition
	// already read (peek) and the partition handed out last if it went to a file (cur).
	ext  *sorter.Sorter
	it   *sorter.Iterator
	peek *pdoc
	cur  *filePartition
}

// spillKey is the sorter key of p: uvarint(len(part)) part uvarint(len(key)) key seq.
func spillKey(p pdoc, seq uint64) []byte {
	b := make([]byte, 0, len(p.part)+len(p.key)+8+2*binary.MaxVarintLen32)
	b = binary.AppendUvarint(b, uint64(len(p.part)))
	b = append(b, p.part...)
	b = binary.AppendUvarint(b, uint64(len(p.key)))
	b = append(b, p.key...)
	return binary.BigEndian.AppendUint64(b, seq)
}

// splitSpillKey undoes spillKey (ok false for a malformed key).
func splitSpillKey(k []byte) (part, key, seq []byte, ok bool) {
	pl, n := binary.Uvarint(k)
	if n <= 0 || uint64(len(k)-n) < pl {
		return nil, nil, nil, false
	}
	part, k = k[n:n+int(pl)], k[n+int(pl):]
	kl, n := binary.Uvarint(k)
	if n <= 0 || uint64(len(k)-n) < kl+8 {
		return nil, nil, nil, false
	}
	return part, k[n : n+int(kl)], k[n+int(kl):], true
}

// compareSpillKeys orders spill keys by partition, then sort key, then arrival (a stable
// sort). Partition and sort keys are compared as whole fields, so the order does not depend
// on KeyStrings being prefix-free.
func compareSpillKeys(a, b []byte) int {
	pa, ka, sa, oka := splitSpillKey(a)
	pb, kb, sb, okb := splitSpillKey(b)
	if !oka || !okb {
		return bytes.Compare(a, b)
	}
	if c := bytes.Compare(pa, pb); c != 0 {
		return c
	}
	if c := bytes.Compare(ka, kb); c != 0 {
		return c
	}
	return bytes.Compare(sa, sb)
}

// loadPartitions drains in, keying each document by partition (partX; nil: one partition)
// and sort key (sortBy; nil: arrival order). visit, when set, sees every input document.
func loadPartitions(ctx context.Context, in Source, rc *runCtx, partX expr.Expression, sortBy *expr.SortKey, stageName string,
	visit func(bsoncore.Document) error) (r *partReader, err error) {
	r = &partReader{maxMem: rc.maxMem(), tempDir: rc.tempDir()}
	owned := r // a failing return sets r to nil before the deferred cleanup runs
	defer func() {
		if err != nil {
			owned.close()
		}
	}()
	var mem int64
	var seq uint64
	var kb keystring.Builder
	ec := rc.evalCtx(nil)
	err = forEach(ctx, in, func(d bsoncore.Document) error {
		if visit != nil {
			if err := visit(d); err != nil {
				return err
			}
		}
		p := pdoc{doc: d}
		if partX != nil {
			ec.Root, ec.Current = d, nil
			v, err := partX.Eval(ec)
			if err != nil {
				return err
			}
			kb.Reset(keystring.AllAscending)
			kb.AppendValue(expr.CollKey(rc.coll, v))
			if err := kb.Err(); err != nil {
				return err
			}
			p.part = bytes.Clone(kb.Bytes())
		}
		if sortBy != nil {
			p.key = sortBy.Key(d, rc.coll)
		}
		if r.ext != nil {
			if err := r.ext.Add(spillKey(p, seq), d); err != nil {
				return err
			}
			seq++
			return nil
		}
		r.all = append(r.all, p)
		mem += int64(len(d)+len(p.part)+len(p.key)) + 64
		if mem <= r.maxMem {
			return nil
		}
		var err error
		if r.ext, err = rc.spillSorter(stageName, compareSpillKeys); err != nil {
			return err
		}
		for _, q := range r.all {
			if err := r.ext.Add(spillKey(q, seq), q.doc); err != nil {
				return err
			}
			seq++
		}
		r.all = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.ext != nil {
		if r.it, err = r.ext.Done(); err != nil {
			return nil, err
		}
		return r, nil
	}
	slices.SortStableFunc(r.all, func(a, b pdoc) int {
		if c := bytes.Compare(a.part, b.part); c != 0 {
			return c
		}
		return bytes.Compare(a.key, b.key)
	})
	return r, nil
}

// next returns the next partition. A partition returned earlier must not be used after.
func (r *partReader) next(ctx context.Context) (partition, bool, error) {
	if r.cur != nil {
		r.cur.close()
		r.cur = nil
	}
	if r.ext == nil {
		if r.pos >= len(r.all) {
			r.all = nil
			return nil, false, nil
		}
		i, j := r.pos, r.pos+1
		for j < len(r.all) && bytes.Equal(r.all[j].part, r.all[i].part) {
			j++
		}
		r.pos = j
		return memPartition(r.all[i:j:j]), true, nil
	}
	first, ok, err := r.read()
	if err != nil || !ok {
		return nil, false, err
	}
	mem := memPartition{first}
	size := int64(len(first.doc) + len(first.key) + 64)
	var fp *filePartition
	for n := 1; ; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		p, ok, err := r.read()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			break
		}
		if !bytes.Equal(p.part, first.part) {
			r.peek = &p
			break
		}
		if fp != nil {
			if err := fp.add(p); err != nil {
				return nil, false, err
			}
			continue
		}
		mem = append(mem, p)
		size += int64(len(p.doc)+len(p.key)) + 64
		if size > r.maxMem {
			// One partition alone exceeds the limit: move it to a file.
			if fp, err = newFilePartition(r.tempDir); err != nil {
				return nil, false, err
			}
			r.cur = fp
			for _, q := range mem {
				if err := fp.add(q); err != nil {
					return nil, false, err
				}
			}
			mem = nil
		}
	}
	if fp != nil {
		if err := fp.finish(); err != nil {
			return nil, false, err
		}
		return fp, true, nil
	}
	return mem, true, nil
}

// read returns the next record of the sorted stream, copied out of the sorter.
func (r *partReader) read() (pdoc, bool, error) {
	if r.peek != nil {
		p := *r.peek
		r.peek = nil
		return p, true, nil
	}
	if !r.it.Next() {
		return pdoc{}, false, r.it.Err()
	}
	k := bytes.Clone(r.it.Key())
	part, key, _, ok := splitSpillKey(k)
	if !ok {
		return pdoc{}, false, mongoerr.New(mongoerr.InternalError, "corrupt spill key")
	}
	return pdoc{part: part, key: key, doc: bytes.Clone(r.it.Value())}, true, nil
}

// close releases the sorter and the current partition's file.
func (r *partReader) close() {
	if r.cur != nil {
		r.cur.close()
		r.cur = nil
	}
	if r.ext != nil {
		r.ext.Close()
		r.ext, r.it = nil, nil
	}
	r.all = nil
}

// gen is the state a genSource producer reads: the context of the Next call being served
// (each getMore of a cursor brings its own).
type gen struct {
	ctx context.Context
}

// genSource turns produce, which pushes its output through emit, into a Source. produce runs
// as a coroutine (iter.Pull2): it advances only while the consumer waits in Next, so it never
// runs concurrently with the pipeline, and Close stops it. When emit returns false the
// consumer has gone: produce must return (its error is then ignored).
func genSource(in Source, produce func(g *gen, emit func(bsoncore.Document) bool) error) Source {
	g := &gen{}
	var next func() (bsoncore.Document, error, bool)
	var stop func()
	finished := false
	return &funcSrc{
		closeFn: func() {
			if stop != nil {
				stop()
			}
			in.Close()
		},
		next: func(ctx context.Context) (bsoncore.Document, bool, error) {
			if finished {
				return nil, false, nil
			}
			if next == nil {
				next, stop = iter.Pull2(func(yield func(bsoncore.Document, error) bool) {
					stopped := false
					err := produce(g, func(d bsoncore.Document) bool {
						if !yield(d, nil) {
							stopped = true
						}
						return !stopped
					})
					if err != nil && !stopped {
						yield(nil, err)
					}
				})
			}
			g.ctx = ctx
			d, err, ok := next()
			if !ok || err != nil {
				finished = true
				stop()
				return nil, false, err
			}
			return d, true, nil
		},
	}
}
