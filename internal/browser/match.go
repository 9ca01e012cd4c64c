package browser

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/runtime"
)

// trailingLocation matches a location at the end of a console message:
// "(checkout.ts:131)", "(http://x/a.js:3:9)", " at checkout.ts:131:7" or
// " at render (http://x/a.js:3:9)".
var trailingLocation = regexp.MustCompile(`(?:\s*\([^()\s]+:\d+(?::\d+)?\)|\s+at\s+\S.*:\d+(?::\d+)?\)?)$`)

// normalize returns the normal form of a console message, by the rule in the
// package comment.
func normalize(msg string) string {
	lines := strings.Split(msg, "\n")
	kept := lines[:1]
	for _, l := range lines[1:] {
		if !strings.HasPrefix(strings.TrimSpace(l), "at ") {
			kept = append(kept, l)
		}
	}
	s := strings.Join(strings.Fields(strings.Join(kept, " ")), " ")
	for _, p := range []string{"Uncaught (in promise) ", "Uncaught "} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			s = rest
			break
		}
	}
	s = trailingLocation.ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}

// matcher reports which captured console errors a fresh one matches.
type matcher struct {
	want map[string]string // normal form -> the captured text
}

// newMatcher returns a matcher for the captured errors, skipping those whose
// normal form is empty.
func newMatcher(captured []string) matcher {
	m := matcher{want: make(map[string]string)}
	for _, c := range captured {
		if n := normalize(c); n != "" {
			if _, dup := m.want[n]; !dup {
				m.want[n] = c
			}
		}
	}
	return m
}

// empty reports whether there is no captured error to compare.
func (m matcher) empty() bool { return len(m.want) == 0 }

// match returns the captured error that fresh matches, if any.
func (m matcher) match(fresh string) (string, bool) {
	c, ok := m.want[normalize(fresh)]
	return c, ok
}

// consoleText renders the arguments of a console.error call as the DevTools
// console shows them: a leading string is a format for the arguments after
// it, and the rest follow, separated by spaces.
func consoleText(args []*runtime.RemoteObject) string {
	if len(args) == 0 {
		return ""
	}
	var parts []string
	rest := args
	if s, ok := stringValue(args[0]); ok {
		var used int
		s, used = consoleFormat(s, args[1:])
		parts = append(parts, s)
		rest = args[1+used:]
	}
	for _, a := range rest {
		parts = append(parts, valueText(a))
	}
	return strings.Join(parts, " ")
}

// consoleFormat applies %s, %d, %i, %f, %o, %O, %c and %% in format to args,
// and returns the text and how many arguments it used.
func consoleFormat(format string, args []*runtime.RemoteObject) (string, int) {
	if !strings.Contains(format, "%") {
		return format, 0
	}
	var b strings.Builder
	used := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		verb := format[i+1]
		switch {
		case verb == '%':
			b.WriteByte('%')
			i++
		case !strings.ContainsRune("sdifoOc", rune(verb)) || used == len(args):
			b.WriteByte(c)
		default:
			a := args[used]
			used++
			i++
			switch verb {
			case 'd', 'i', 'f':
				b.WriteString(numberText(a, verb != 'f'))
			case 'c': // a CSS style: prints nothing
			default:
				b.WriteString(valueText(a))
			}
		}
	}
	return b.String(), used
}

// numberText renders an argument of %d, %i (integer) or %f.
func numberText(a *runtime.RemoteObject, integer bool) string {
	if a == nil || a.Type != runtime.RemoteObjectTypeNumber {
		return "NaN"
	}
	if a.UnserializableValue != "" {
		return string(a.UnserializableValue)
	}
	f, err := strconv.ParseFloat(string(a.Value), 64)
	if err != nil {
		return "NaN"
	}
	if integer {
		f = float64(int64(f))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// stringValue returns the value of a string argument.
func stringValue(a *runtime.RemoteObject) (string, bool) {
	if a == nil || a.Type != runtime.RemoteObjectTypeString {
		return "", false
	}
	var s string
	if err := json.Unmarshal(a.Value, &s); err != nil {
		return "", false
	}
	return s, true
}

// valueText renders one argument: a string as it is, a primitive as its
// value, an object (an Error, say) as its description, without the stack.
func valueText(a *runtime.RemoteObject) string {
	if s, ok := stringValue(a); ok {
		return s
	}
	switch {
	case a == nil || a.Subtype == runtime.RemoteObjectSubtypeNull:
		return "null"
	case a.Type == runtime.RemoteObjectTypeUndefined:
		return "undefined"
	case a.UnserializableValue != "":
		return string(a.UnserializableValue)
	case a.Description != "":
		desc, _, _ := strings.Cut(a.Description, "\n    at ")
		return desc
	case len(a.Value) > 0:
		return string(a.Value)
	}
	return string(a.Type)
}

// exceptionText renders an uncaught exception as the DevTools console shows
// it: "Uncaught" and the error's description, without the stack.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return ""
	}
	if d.Exception == nil {
		return d.Text
	}
	return strings.TrimSpace(d.Text + " " + valueText(d.Exception))
}
