package ops

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A request's fields say where HTTP carries them: `path:"ref"` is the
// {ref} segment of its route's path, `query:"limit"` a query parameter
// (of a GET), and the rest its JSON body. A query field may bound a
// number (`min:"1" max:"10000"`; 0 to 2^30 when not given), take a
// second name (`alias:"kind"`), and `query:"q,always"` is sent even when
// empty.

// EncodeQuery is the query string of v's query fields, without the "?":
// a zero field is left out, a list is comma-separated, a flag is "true".
func EncodeQuery(v any) string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	vals := url.Values{}
	for _, f := range reflect.VisibleFields(rv.Type()) {
		name, always, ok := queryTag(f)
		if !ok {
			continue
		}
		fv := rv.FieldByIndex(f.Index)
		if fv.IsZero() && !always {
			continue
		}
		vals.Set(name, formatValue(fv))
	}
	return vals.Encode()
}

func queryTag(f reflect.StructField) (name string, always, ok bool) {
	tag, ok := f.Tag.Lookup("query")
	if !ok || !f.IsExported() {
		return "", false, false
	}
	name, opt, _ := strings.Cut(tag, ",")
	return name, opt == "always", true
}

func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		s := make([]string, v.Len())
		for i := range s {
			s[i] = v.Index(i).String()
		}
		return strings.Join(s, ",")
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	}
	return v.String()
}

// DecodeQuery reads vals into the query fields of *v. A parameter v does
// not know, one given twice, or a value it cannot read is refused (400,
// naming it) rather than read as its default.
func DecodeQuery(vals url.Values, v any) error {
	rv := reflect.ValueOf(v).Elem()
	var known []string
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(rv.Type()) {
		if name, _, ok := queryTag(f); ok {
			known = append(known, name)
			fields[name] = f
			if alias, ok := f.Tag.Lookup("alias"); ok {
				known = append(known, alias)
				fields[alias] = f
			}
		}
	}
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		f, ok := fields[k]
		switch {
		case !ok:
			if len(known) == 0 {
				return badQuery("bad_query", "unknown query parameter %q (this endpoint takes none)", k)
			}
			return badQuery("bad_query", "unknown query parameter %q (this endpoint takes %s)", k, strings.Join(known, ", "))
		case len(vals[k]) > 1:
			return badQuery("bad_query", "query parameter %q is given %d times: give it once", k, len(vals[k]))
		}
		if vals.Get(k) == "" {
			continue // empty reads as absent: an alias's empty twin does not undo it
		}
		if err := setValue(rv.FieldByIndex(f.Index), f, k, vals.Get(k)); err != nil {
			return err
		}
	}
	return nil
}

func setValue(fv reflect.Value, f reflect.StructField, name, s string) error {
	switch fv.Kind() {
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "1", "true", "yes":
			fv.SetBool(true)
		case "", "0", "false", "no":
			fv.SetBool(false)
		default:
			return badQuery("bad_"+name, "%s=%q: want 1, true or yes (or 0, false, no)", name, s)
		}
	case reflect.Int, reflect.Int64:
		if s == "" {
			return nil
		}
		lo, hi := bound(f, "min", 0), bound(f, "max", 1<<30)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			return badQuery("bad_"+name, "%s=%q: want a whole number from %d to %d", name, s, lo, hi)
		}
		fv.SetInt(n)
	case reflect.Slice:
		if s == "" {
			return nil
		}
		parts := strings.Split(s, ",")
		out := reflect.MakeSlice(fv.Type(), len(parts), len(parts))
		for i, p := range parts {
			out.Index(i).SetString(p)
		}
		fv.Set(out)
	default:
		fv.SetString(s)
	}
	return nil
}

func bound(f reflect.StructField, tag string, def int64) int64 {
	if s, ok := f.Tag.Lookup(tag); ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return def
}

func badQuery(code, format string, args ...any) *Error {
	return &Error{Status: 400, Code: code, Message: fmt.Sprintf(format, args...)}
}

// SetPath sets the path fields of *v from their segments of the request's
// path (get returns a segment by name). A number that does not read is
// refused (400, with the field's code tag, or bad_ and its name).
func SetPath(v any, get func(name string) string) error {
	rv := reflect.ValueOf(v).Elem()
	for _, f := range reflect.VisibleFields(rv.Type()) {
		name, ok := f.Tag.Lookup("path")
		if !ok || !f.IsExported() {
			continue
		}
		fv := rv.FieldByIndex(f.Index)
		if fv.Kind() != reflect.Int64 {
			fv.SetString(get(name))
			continue
		}
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil {
			code := f.Tag.Get("code")
			if code == "" {
				code = "bad_" + name
			}
			return badQuery(code, "{%s} is %q: want a whole number", name, get(name))
		}
		fv.SetInt(n)
	}
	return nil
}

// Path is pattern ("/tasks/{ref}/claim") with each {name} replaced by v's
// path field of that name, escaped.
func Path(pattern string, v any) string {
	if !strings.Contains(pattern, "{") {
		return pattern
	}
	rv := reflect.Indirect(reflect.ValueOf(v))
	segs := map[string]string{}
	for _, f := range reflect.VisibleFields(rv.Type()) {
		if name, ok := f.Tag.Lookup("path"); ok && f.IsExported() {
			segs[name] = url.PathEscape(formatValue(rv.FieldByIndex(f.Index)))
		}
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		j := strings.IndexByte(pattern[i:], '}')
		b.WriteString(pattern[:i])
		b.WriteString(segs[pattern[i+1:i+j]])
		pattern = pattern[i+j+1:]
	}
}

// Target is what a request's path names (a task's ref, a plan's slug, a
// session's id), space-separated: what the audit log names beside the
// operation.
func Target(v any) string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() != reflect.Struct {
		return ""
	}
	var parts []string
	for _, f := range reflect.VisibleFields(rv.Type()) {
		if _, ok := f.Tag.Lookup("path"); ok && f.IsExported() {
			if s := formatValue(rv.FieldByIndex(f.Index)); s != "" && s != "0" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, " ")
}
