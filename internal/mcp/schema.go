package mcp

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func no() *bool { b := false; return &b }

func readOnly(title string) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, DestructiveHint: no(), OpenWorldHint: no()}
}

func writes(title string, idem bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, DestructiveHint: no(), IdempotentHint: idem, OpenWorldHint: no()}
}

// schema is the input schema inferred from In, with defaults, bounds and
// enums set on the named properties: they belong in the schema, not in
// prose.
func schema[In any](tweak func(p map[string]*jsonschema.Schema)) *jsonschema.Schema {
	sc, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err)
	}
	tweak(sc.Properties)
	return sc
}

// outSchema is the output schema inferred from Out, with every nullable
// type union (type: [null, array], which Go's nil slices and pointers
// infer) spelled as anyOf branches of one type each, which tool dialects
// with a single type (the OpenAPI subset some hosts map schemas to) keep.
func outSchema[Out any]() *jsonschema.Schema {
	sc, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(err)
	}
	portable(sc)
	return sc
}

// portable rewrites s and every schema under it: a type union of null and
// one other type becomes anyOf null and that type, with the constraints.
func portable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for _, p := range s.Properties {
		portable(p)
	}
	portable(s.Items)
	for _, a := range s.AnyOf {
		portable(a)
	}
	if len(s.Types) != 2 || !slices.Contains(s.Types, "null") {
		return
	}
	other := s.Types[0]
	if other == "null" {
		other = s.Types[1]
	}
	branch := *s
	branch.Types, branch.Type, branch.Description = nil, other, ""
	*s = jsonschema.Schema{Description: s.Description, AnyOf: []*jsonschema.Schema{{Type: "null"}, &branch}}
}

func enum[T ~string](vals []T) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

func limit(p *jsonschema.Schema, def, maxv int) {
	lo, hi := 1.0, float64(maxv)
	p.Default, p.Minimum, p.Maximum = json.RawMessage(strconv.Itoa(def)), &lo, &hi
	p.Description = ""
}
