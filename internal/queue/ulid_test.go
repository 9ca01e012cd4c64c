package queue

import (
	"math/rand/v2"
	"testing"

	oklog "github.com/oklog/ulid/v2"
)

// TestULIDAsTheLibraryWritesIt: the ULIDs NewID writes are the ones
// github.com/oklog/ulid (which snag used before) writes for the same time and
// entropy, and isULID accepts exactly what its strict parser accepts.
func TestULIDAsTheLibraryWritesIt(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		ms := r.Uint64() >> 16
		switch i {
		case 0:
			ms = 0
		case 1:
			ms = oklog.MaxTime()
		}
		var e [10]byte
		for j := range e {
			e[j] = byte(r.Uint32())
		}
		var want oklog.ULID
		if err := want.SetTime(ms); err != nil {
			t.Fatal(err)
		}
		want.SetEntropy(e[:])
		if got := ulid(ms, e); got != want.String() {
			t.Fatalf("ulid(%d, %x) = %s, want %s", ms, e, got, want)
		}
	}
	const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ!-" // upper case: IsID upper-cases first
	for range 20000 {
		n := 24 + r.IntN(4)
		b := make([]byte, n)
		for j := range b {
			b[j] = chars[r.IntN(len(chars))]
		}
		if r.IntN(2) == 0 && n > 0 {
			b[0] = "01234567"[r.IntN(8)]
		}
		_, err := oklog.ParseStrict(string(b))
		if got, want := isULID(string(b)), err == nil; got != want {
			t.Fatalf("isULID(%q) = %v, the library's strict parse says %v (%v)", b, got, want, err)
		}
	}
}
