package collation

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Key post-processing for the options x/text lacks (see the package comment).
//
// x/text's key layout (collate.Collator.keyFromElems), for the options this package sets:
//
//	primary weights          2 bytes each, 3 when the first byte has its high bit set
//	00 00 secondary weights  2 bytes each                  (strength >= 2)
//	00 00                    an empty secondary level      (strength 1 with caseLevel)
//	00 00 tertiary weights   1 byte each, never 0          (strength >= 3 or caseLevel)
//	00 quaternary weights    0xFF or a primary weight      (strength >= 4 with ka-shifted)
//
// No weight is zero, so a separator is recognised at a weight boundary.

// appendKey appends the key of s (without the identical level) to dst.
func (c *Collator) appendKey(w *worker, dst, s []byte) []byte {
	src := s
	if c.spaceOnly {
		src = stripSpaces(s)
	}
	start := len(dst)
	dst = append(dst, w.c.Key(&w.buf, src)...)
	w.buf.Reset()
	if c.caseFirst != 0 && c.tertiary {
		if i, j, ok := c.tertiaryRange(dst[start:]); ok {
			for k := start + i; k < start+j; k++ {
				dst[k] = caseFirstWeight(dst[k], c.caseFirst)
			}
		}
	}
	if c.spaceOnly && c.strength >= 4 {
		dst = c.appendSpaceQuaternary(w, dst, s)
	}
	return dst
}

// primaryEnd returns the end of the primary weights of key k.
func primaryEnd(k []byte) int {
	i := 0
	for i+1 < len(k) {
		if k[i] == 0 && k[i+1] == 0 {
			return i
		}
		if k[i]&0x80 != 0 {
			i += 3
		} else {
			i += 2
		}
	}
	return min(i, len(k))
}

// tertiaryRange locates the tertiary weights of a key of c (ok false when it has none or
// does not parse).
func (c *Collator) tertiaryRange(k []byte) (start, end int, ok bool) {
	i := primaryEnd(k)
	if i+2 > len(k) {
		return 0, 0, false
	}
	i += 2 // separator
	if c.strength >= 2 {
		for ; ; i += 2 {
			if i+1 >= len(k) {
				return 0, 0, false
			}
			if k[i] == 0 && k[i+1] == 0 {
				break
			}
		}
	}
	// Now at the separator before the tertiary level (for strength 1 with caseLevel, the
	// empty secondary level's separator came first).
	i += 2
	if i > len(k) {
		return 0, 0, false
	}
	j := i
	for j < len(k) && k[j] != 0 {
		j++
	}
	return i, j, true
}

// upperTertiary marks the DUCET tertiary weights of uppercase collation elements: capital,
// and its wide, compatibility, font, circled and square/super/sub variants (UTS #10's
// tertiary weight table; x/text keeps these values).
var upperTertiary = [32]bool{0x08: true, 0x09: true, 0x0A: true, 0x0B: true, 0x0C: true, 0x1D: true}

// caseFirstWeight maps a tertiary weight so that uppercase ones sort first (mode 'u') or
// last ('l'); the order within each group is kept.
func caseFirstWeight(t byte, mode byte) byte {
	if t >= 0x20 {
		return t
	}
	if upperTertiary[t] == (mode == 'u') {
		return t
	}
	return t + 0x20
}

// stripSpaces returns s without its White_Space characters (s itself when it has none).
func stripSpaces(s []byte) []byte {
	if bytes.IndexFunc(s, unicode.IsSpace) < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if !unicode.IsSpace(r) {
			out = append(out, s[:n]...)
		}
		s = s[n:]
	}
	return out
}

// appendSpaceQuaternary appends ICU's quaternary level for alternate "shifted" with
// maxVariable "space": per collation element, a space's primary weight, and 0xFF for any
// other element that is not completely ignorable (counted by its tertiary weights).
func (c *Collator) appendSpaceQuaternary(w *worker, dst, s []byte) []byte {
	dst = append(dst, 0)
	nfd := norm.NFD.Bytes(s)
	var rb [utf8.UTFMax]byte
	for len(nfd) > 0 {
		r, n := utf8.DecodeRune(nfd)
		k := w.c.Key(&w.buf, rb[:utf8.EncodeRune(rb[:], r)])
		if unicode.IsSpace(r) {
			dst = append(dst, k[:primaryEnd(k)]...)
		} else if i, j, ok := c.tertiaryRange(k); ok {
			for range j - i {
				dst = append(dst, 0xFF)
			}
		}
		w.buf.Reset()
		nfd = nfd[n:]
	}
	return dst
}
