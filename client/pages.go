package client

// A reader of its own for the two answers a person's commands read most,
// a page of tasks (GET /tasks) and of search hits (GET /search): every
// snag list and search is a new process, which pays encoding/json's
// first use of each type (its reflection over the fields, and the pages of
// code that touches) on top of the decoding itself. That was 0.75 ms of a
// snag list of 100 tasks on a loaded machine, a sixth of the process's CPU;
// this reader takes about a tenth of it.
//
// It reads the JSON snagd writes, and leaves everything else to
// encoding/json: an answer it meets anything unusual in (a key in another
// case, a key twice, an escaped key, a lone surrogate, invalid UTF-8, a
// number that is not a plain integer, a value of another type, nesting
// past a bound, a syntax error) is decoded again by json.Unmarshal, whose
// result and error are then the answer's. So what it accepts, it reads as
// json.Unmarshal would (FuzzPages holds it to that).

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/snagdev/snag/api"
)

// decodeAnswer decodes an answer's JSON into out as json.Unmarshal does,
// with the reader above for pages of tasks and of search hits.
func decodeAnswer(b []byte, out any) error {
	switch v := out.(type) {
	case *api.TaskList:
		if v.Next == "" && v.Tasks == nil {
			if page, ok := readTaskList(b); ok {
				*v = page
				return nil
			}
		}
	case *api.SearchResult:
		if v.Hits == nil {
			if res, ok := readSearchResult(b); ok {
				*v = res
				return nil
			}
		}
	}
	return json.Unmarshal(b, out)
}

// readTaskList reads a page of tasks; ok is false when the reader leaves
// the answer to encoding/json.
func readTaskList(b []byte) (page api.TaskList, ok bool) {
	r := newPageReader(b)
	var seen uint8
	ok = r.object(func(key string) bool {
		switch {
		case key == "next" && r.first(&seen, 1):
			return r.str(&page.Next)
		case key == "tasks" && r.first(&seen, 2):
			if r.null() {
				return true // nil, as it is
			}
			return r.array(func() bool {
				page.Tasks = append(page.Tasks, api.Task{})
				return r.task(&page.Tasks[len(page.Tasks)-1], nil)
			}, func() { page.Tasks = []api.Task{} })
		}
		return r.unknown(key, "next", "tasks")
	}) && r.end()
	return page, ok
}

// readSearchResult reads a page of search hits, as readTaskList does.
func readSearchResult(b []byte) (res api.SearchResult, ok bool) {
	r := newPageReader(b)
	var seen uint8
	ok = r.object(func(key string) bool {
		if key == "hits" && r.first(&seen, 1) {
			if r.null() {
				return true // nil, as it is: no hits
			}
			return r.array(func() bool {
				res.Hits = append(res.Hits, api.Hit{})
				h := &res.Hits[len(res.Hits)-1]
				return r.task(&h.Task, &h.Snippet)
			}, func() { res.Hits = []api.Hit{} })
		}
		if key == "notes" && r.first(&seen, 2) {
			// The notes a search found are few: encoding/json reads them.
			r.space()
			start := r.i
			return r.skip(0) && json.Unmarshal([]byte(r.src[start:r.i]), &res.Notes) == nil
		}
		return r.unknown(key, "hits", "notes")
	}) && r.end()
	return res, ok
}

// taskFields are api.Task's JSON fields, as its tags name them, each
// with where it lies in the struct and how to read it: a new field of the
// task row is read with no edit here. A field of a type the reader does not
// read (none yet) leaves the answer to encoding/json.
var taskFields, taskKeys = func() ([]taskField, []string) {
	var fields []taskField
	var keys []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[api.Task]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "" || name == "-" {
			continue
		}
		tf := taskField{off: f.Offset}
		switch {
		case f.Type.Kind() == reflect.String:
			tf.kind = 's'
		case f.Type.Kind() == reflect.Int:
			tf.kind = 'i'
		case f.Type.Kind() == reflect.Bool:
			tf.kind = 'b'
		case f.Type == reflect.TypeFor[[]string]():
			tf.kind = 'l'
		}
		fields = append(fields, tf)
		keys = append(keys, name)
	}
	return fields, append(keys, "snippet") // then a Hit's snippet
}()

// taskField is one field of api.Task: its offset and its kind (s string,
// i int, b bool, l list of strings, 0 none the reader reads).
type taskField struct {
	off  uintptr
	kind byte
}

// task reads one task's object into t, and a hit's snippet into snippet
// when it is not nil.
func (r *pageReader) task(t *api.Task, snippet *string) bool {
	if r.null() {
		return true // null leaves a struct as it is
	}
	var seen uint64
	keys := taskKeys
	if snippet == nil {
		keys = keys[:len(keys)-1]
	}
	return r.object(func(key string) bool {
		i := index(keys, key)
		if i < 0 {
			return r.unknown(key, keys...)
		}
		if i >= 64 || seen&(1<<i) != 0 {
			return false // a key twice
		}
		seen |= 1 << i
		if i == len(taskFields) {
			return r.str(snippet)
		}
		return r.field(unsafe.Add(unsafe.Pointer(t), taskFields[i].off), taskFields[i].kind)
	})
}

// field reads a value of kind into the field at p.
func (r *pageReader) field(p unsafe.Pointer, kind byte) bool {
	switch kind {
	case 's':
		return r.str((*string)(p))
	case 'i':
		return r.int((*int)(p))
	case 'b':
		return r.bool((*bool)(p))
	case 'l':
		list := (*[]string)(p)
		if r.null() {
			*list = nil
			return true
		}
		return r.array(func() bool {
			*list = append(*list, "")
			return r.str(&(*list)[len(*list)-1])
		}, func() { *list = []string{} })
	}
	return false // left to encoding/json
}

func index(keys []string, key string) int {
	for i, k := range keys {
		if k == key {
			return i
		}
	}
	return -1
}

// pageReader reads JSON from src. Its strings share one copy of the
// answer (the caller's buffer is used again for the next answer).
type pageReader struct {
	src string
	i   int
}

func newPageReader(b []byte) *pageReader { return &pageReader{src: string(b)} }

// first records bit in seen and reports whether it was not there: a
// top-level key seen once.
func (r *pageReader) first(seen *uint8, bit uint8) bool {
	was := *seen&bit != 0
	*seen |= bit
	return !was
}

// unknown skips the value of a key the reader does not know, unless it
// is one of known in another case, or twice (which encoding/json would
// put into the field): those are left to it.
func (r *pageReader) unknown(key string, known ...string) bool {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return false
		}
	}
	return r.skip(0)
}

func (r *pageReader) space() {
	for r.i < len(r.src) {
		switch r.src[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next skips white space and takes c when it comes next.
func (r *pageReader) next(c byte) bool {
	r.space()
	if r.i < len(r.src) && r.src[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end reports whether nothing but white space is left.
func (r *pageReader) end() bool {
	r.space()
	return r.i == len(r.src)
}

// word takes the literal w (true, false, null) when it comes next.
func (r *pageReader) word(w string) bool {
	r.space()
	if len(r.src)-r.i >= len(w) && r.src[r.i:r.i+len(w)] == w {
		r.i += len(w)
		return true
	}
	return false
}

func (r *pageReader) null() bool { return r.word("null") }

// object reads an object, calling field with each key, its colon read,
// to read the value.
func (r *pageReader) object(field func(key string) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	for {
		r.space()
		key, ok := r.plain()
		if !ok || !r.next(':') || !field(key) {
			return false
		}
		if !r.next(',') {
			return r.next('}')
		}
	}
}

// array reads an array, calling elem for each element; empty is called
// for an array with none (json.Unmarshal makes it an empty slice, not nil).
func (r *pageReader) array(elem func() bool, empty func()) bool {
	if !r.next('[') {
		return false
	}
	if r.next(']') {
		empty()
		return true
	}
	for {
		if !elem() {
			return false
		}
		if !r.next(',') {
			return r.next(']')
		}
	}
}

// plain reads a string with no escapes in it (a key, as snagd writes
// them).
func (r *pageReader) plain() (string, bool) {
	if r.i >= len(r.src) || r.src[r.i] != '"' {
		return "", false
	}
	for j := r.i + 1; j < len(r.src); j++ {
		switch c := r.src[j]; {
		case c == '"':
			s := r.src[r.i+1 : j]
			r.i = j + 1
			return s, true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

// str reads a string into s; null leaves s as it is.
func (r *pageReader) str(s *string) bool {
	r.space()
	if r.null() {
		return true
	}
	if r.i >= len(r.src) || r.src[r.i] != '"' {
		return false
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.src); j++ {
		switch c := r.src[j]; {
		case c == '"':
			if !ascii && !utf8.ValidString(r.src[start:j]) {
				return false
			}
			*s = r.src[start:j]
			r.i = j + 1
			return true
		case c == '\\':
			return r.escaped(s, start)
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return false
}

// escaped reads a string from start that has escapes in it.
func (r *pageReader) escaped(s *string, start int) bool {
	var b []byte
	j := start
	for j < len(r.src) {
		c := r.src[j]
		switch {
		case c == '"':
			r.i = j + 1
			*s = string(b)
			return true
		case c < 0x20:
			return false
		case c != '\\':
			k := j
			for k < len(r.src) && r.src[k] != '"' && r.src[k] != '\\' && r.src[k] >= 0x20 {
				k++
			}
			if !utf8.ValidString(r.src[j:k]) {
				return false
			}
			b = append(b, r.src[j:k]...)
			j = k
			continue
		}
		if j+1 >= len(r.src) {
			return false
		}
		switch e := r.src[j+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			c1, ok := hex4(r.src, j+2)
			if !ok {
				return false
			}
			j += 6
			if utf16.IsSurrogate(c1) {
				// Only a pair is read here: encoding/json makes a lone
				// half U+FFFD.
				c2, ok := hex4(r.src, j+2)
				if !ok || r.src[j] != '\\' || r.src[j+1] != 'u' {
					return false
				}
				rr := utf16.DecodeRune(c1, c2)
				if rr == utf8.RuneError {
					return false
				}
				c1 = rr
				j += 6
			}
			b = utf8.AppendRune(b, c1)
			continue
		default:
			return false
		}
		j += 2
	}
	return false
}

// hex4 reads the four hexadecimal digits of a \u escape at i.
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// int reads a plain integer (no fraction, no exponent) into n; null
// leaves n as it is.
func (r *pageReader) int(n *int) bool {
	r.space()
	if r.null() {
		return true
	}
	j := r.i
	if j < len(r.src) && r.src[j] == '-' {
		j++
	}
	digits := j
	for j < len(r.src) && '0' <= r.src[j] && r.src[j] <= '9' {
		j++
	}
	if j == digits || r.src[digits] == '0' && j > digits+1 {
		return false
	}
	if j < len(r.src) && (r.src[j] == '.' || r.src[j] == 'e' || r.src[j] == 'E') {
		return false
	}
	v, err := strconv.Atoi(r.src[r.i:j])
	if err != nil {
		return false
	}
	*n = v
	r.i = j
	return true
}

// bool reads true or false into v; null leaves v as it is.
func (r *pageReader) bool(v *bool) bool {
	switch {
	case r.word("true"):
		*v = true
	case r.word("false"):
		*v = false
	case r.null():
	default:
		return false
	}
	return true
}

// maxSkipDepth bounds the nesting of a value the reader skips; deeper is
// left to encoding/json.
const maxSkipDepth = 64

// skip reads past one value of any kind, checking its syntax as
// encoding/json does.
func (r *pageReader) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	r.space()
	if r.i >= len(r.src) {
		return false
	}
	switch c := r.src[r.i]; {
	case c == '{':
		return r.object(func(string) bool { return r.skip(depth + 1) })
	case c == '[':
		return r.array(func() bool { return r.skip(depth + 1) }, func() {})
	case c == '"':
		var s string
		return r.str(&s)
	case c == 't':
		return r.word("true")
	case c == 'f':
		return r.word("false")
	case c == 'n':
		return r.null()
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	}
	return false
}

// number reads past a JSON number.
func (r *pageReader) number() bool {
	s, j := r.src, r.i
	digits := func() bool {
		k := j
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case !digits():
		return false
	}
	if j < len(s) && s[j] == '.' {
		j++
		if !digits() {
			return false
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if !digits() {
			return false
		}
	}
	r.i = j
	return true
}
