package index

import (
	"bytes"
	"encoding/binary"
	"errors"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Small allocation-free readers over raw BSON, specialised for key generation. They validate
// lengths as they go so that corrupt documents produce errCorruptBSON instead of panics.

var errCorruptBSON = errors.New("index: corrupt BSON document")

// elemIter walks the elements of a document or array without allocating.
type elemIter struct {
	rem []byte
}

func newElemIter(doc []byte) (elemIter, error) {
	if len(doc) < 5 {
		return elemIter{}, errCorruptBSON
	}
	n := int(binary.LittleEndian.Uint32(doc))
	if n != len(doc) || doc[n-1] != 0 {
		return elemIter{}, errCorruptBSON
	}
	return elemIter{rem: doc[4 : n-1]}, nil
}

// next returns the next element's name and value; ok is false at the end.
func (it *elemIter) next() (name []byte, v bsoncore.Value, ok bool, err error) {
	if len(it.rem) == 0 {
		return nil, bsoncore.Value{}, false, nil
	}
	t := bsoncore.Type(it.rem[0])
	i := bytes.IndexByte(it.rem[1:], 0)
	if i < 0 {
		return nil, bsoncore.Value{}, false, errCorruptBSON
	}
	name = it.rem[1 : 1+i]
	data, rest, ok := bsoncore.ReadValue(it.rem[2+i:], t)
	if !ok {
		return nil, bsoncore.Value{}, false, errCorruptBSON
	}
	it.rem = rest
	return name, data, true, nil
}

// getField returns the first element of doc named name. A nil or empty doc has no fields.
func getField(doc []byte, name string) (bsoncore.Value, bool, error) {
	if len(doc) == 0 {
		return bsoncore.Value{}, false, nil
	}
	it, err := newElemIter(doc)
	if err != nil {
		return bsoncore.Value{}, false, err
	}
	for {
		n, v, ok, err := it.next()
		if err != nil || !ok {
			return bsoncore.Value{}, false, err
		}
		if string(n) == name {
			return v, true, nil
		}
	}
}

// sameValue reports whether a and b are the very same bytes (MongoDB compares rawdata()
// pointers to tell one array reached by two index paths from two parallel arrays).
func sameValue(a, b bsoncore.Value) bool {
	return len(a.Data) > 0 && len(b.Data) == len(a.Data) && &a.Data[0] == &b.Data[0]
}

func isEmptyDoc(doc []byte) bool { return len(doc) == 5 }

// Static values for missing and empty-array fields.
var (
	nullValue      = bsoncore.Value{Type: bsoncore.TypeNull}
	undefinedValue = bsoncore.Value{Type: bsoncore.TypeUndefined}
	emptyDocBytes  = []byte{5, 0, 0, 0, 0}
)
