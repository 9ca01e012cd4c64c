package daemon

import "strings"

// joinStrings lists values for a message: "a, b, c".
func joinStrings[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
