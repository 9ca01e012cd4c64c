package queue

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// IDPrefix starts every canonical task id; AliasPrefix starts every alias.
const (
	IDPrefix    = "tsk_"
	AliasPrefix = "SNAG-"
)

// NewID returns a fresh canonical task id: tsk_ and a ULID whose time part
// is now, so ids sort by creation.
func NewID(now time.Time) string {
	var entropy [10]byte
	rand.Read(entropy[:])
	return IDPrefix + ulid(uint64(now.UnixMilli()), entropy)
}

// IsID reports whether s has the form of a canonical task id (tsk_ and 26
// characters of Crockford base32), in any case.
func IsID(s string) bool {
	if len(s) != len(IDPrefix)+ulidSize || !strings.EqualFold(s[:len(IDPrefix)], IDPrefix) {
		return false
	}
	return isULID(strings.ToUpper(s[len(IDPrefix):]))
}

// A ULID (https://github.com/ulid/spec) is 48 bits of milliseconds since
// 1970 and 80 random bits, written as 26 characters of Crockford's base32.
// It is written here rather than by a library, whose init seeds a random
// source on every start of every command.
const (
	ulidSize  = 26
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// ulid writes the ULID of the time ms (its low 48 bits) and entropy.
func ulid(ms uint64, entropy [10]byte) string {
	hi := ms<<16 | uint64(binary.BigEndian.Uint16(entropy[:2]))
	lo := binary.BigEndian.Uint64(entropy[2:])
	var out [ulidSize]byte
	for i := ulidSize - 1; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// isULID reports whether s is a ULID in upper case: 26 characters of the
// alphabet whose first is at most 7 (128 bits fill 26 characters but for
// two bits).
func isULID(s string) bool {
	if len(s) != ulidSize || s[0] > '7' {
		return false
	}
	for i := range len(s) {
		if strings.IndexByte(crockford, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Alias formats the human alias for n: SNAG-12.
func Alias(n int) string { return AliasPrefix + strconv.Itoa(n) }

// AliasNumber reads the number out of an alias, in any case: 12 for SNAG-12
// or snag-12. It fails for anything else.
func AliasNumber(s string) (int, error) {
	if len(s) <= len(AliasPrefix) || !strings.EqualFold(s[:len(AliasPrefix)], AliasPrefix) {
		return 0, fmt.Errorf("%q is not an alias (want SNAG-<n>)", s)
	}
	digits := s[len(AliasPrefix):]
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || digits[0] == '0' || digits[0] == '+' {
		return 0, fmt.Errorf("%q is not an alias (want SNAG-<n>, n a positive number)", s)
	}
	return n, nil
}

// Ref is a reference to a task as a person or an agent types it: a canonical
// id or an alias, in any case.
type Ref struct {
	ID  string // canonical id, upper-cased ULID part, or ""
	Num int    // alias number, or 0
}

// ParseRef reads a task reference. It accepts tsk_<ULID> and SNAG-<n> in any
// case, and a bare number as a shorthand for the alias.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	switch {
	case IsID(s):
		return Ref{ID: IDPrefix + strings.ToUpper(s[len(IDPrefix):])}, nil
	case len(s) > 0 && s[0] >= '1' && s[0] <= '9':
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return Ref{Num: n}, nil
		}
	default:
		if n, err := AliasNumber(s); err == nil {
			return Ref{Num: n}, nil
		}
	}
	return Ref{}, fmt.Errorf("%q is not a task id: use an alias like SNAG-12 or an id like tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C (snag list shows them)", Truncate(s, 60))
}

// String gives the canonical form of the reference.
func (r Ref) String() string {
	if r.ID != "" {
		return r.ID
	}
	return Alias(r.Num)
}

// Matches reports whether t is the task the reference names.
func (r Ref) Matches(t *Task) bool {
	if r.ID != "" {
		return strings.EqualFold(t.ID, r.ID)
	}
	return t.Num() == r.Num
}

// Truncate cuts s to at most n bytes, on a rune's boundary, marking the
// cut with an ellipsis: how an error quotes what it was given.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
