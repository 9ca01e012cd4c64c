package index

import (
	"reflect"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/snag"
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

// TestWireCarriesEveryField checks that each conversion to the API's types
// sets every field of the API's type: a field added to package api without
// its conversion here fails.
func TestWireCarriesEveryField(t *testing.T) {
	var row Row
	fill(t, &row)
	var hit Hit
	fill(t, &hit)
	var c snag.Counts
	fill(t, &c)
	var s Session
	fill(t, &s)
	var a snag.Activity
	fill(t, &a)
	var l Lease
	fill(t, &l)
	var e snag.AuditEntry
	fill(t, &e)
	var r snag.VerifyRun
	fill(t, &r)
	for name, got := range map[string]any{
		"Row": row.Wire(), "Hit": hit.Wire(), "Hit.Task": hit.Wire().Task, "Counts": c, "Session": s.Wire(),
		"Activity": a, "Lease": l.Wire(), "AuditEntry": e, "VerifyRun": r, "VerifyRun.Visual": *r.Visual,
	} {
		if z := zeroFields(got); len(z) > 0 {
			t.Errorf("%s.Wire() leaves %v zero: set them in wire.go", name, z)
		}
	}
}
