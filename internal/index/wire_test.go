package index

import (
	"reflect"
	"testing"
	"time"
)

// fill sets every exported field of the struct v points to to a value that
// is not zero.
func fill(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f, sf := rv.Field(i), rv.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch {
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(time.Unix(1700000000, 0)))
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
			f.SetInt(7)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{"x"}))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			f.SetBytes([]byte("x"))
		case f.Kind() == reflect.Float64:
			f.SetFloat(0.5)
		case f.Kind() == reflect.Struct:
			fill(t, f.Addr().Interface())
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.New(f.Type().Elem()))
			fill(t, f.Interface())
		default:
			t.Fatalf("fill: %s.%s: no value for a %s", rv.Type(), sf.Name, f.Type())
		}
	}
}

// zeroFields names the exported fields of the struct v that are zero.
func zeroFields(v any) []string {
	rv := reflect.ValueOf(v)
	var out []string
	for i := range rv.NumField() {
		if rv.Type().Field(i).IsExported() && rv.Field(i).IsZero() {
			out = append(out, rv.Type().Field(i).Name)
		}
	}
	return out
}

// TestWireCarriesEveryField checks that each conversion of an index row
// to the domain's value the API carries sets every field of that value: a
// field added to package snag without its conversion here fails. (The
// rows the index stores as snag's own values need none.)
func TestWireCarriesEveryField(t *testing.T) {
	var row Row
	fill(t, &row)
	var hit Hit
	fill(t, &hit)
	var s Session
	fill(t, &s)
	var l Lease
	fill(t, &l)
	var m Message
	fill(t, &m)
	for name, got := range map[string]any{
		"Row": row.Wire(), "Hit": hit.Wire(), "Hit.Task": hit.Wire().Task, "Session": s.Wire(), "Lease": l.Wire(),
		"Message": m.Wire(),
	} {
		if z := zeroFields(got); len(z) > 0 {
			t.Errorf("%s.Wire() leaves %v zero: set them in wire.go", name, z)
		}
	}
}
