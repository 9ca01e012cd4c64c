// Command pair times two commands as whole processes, in turn (A B, then
// B A, and so on), and prints each one's median wall time and the median of the
// ratios B/A taken pair by pair, so that a comparison holds while a shared
// machine's speed drifts. make bench-peer uses it to set snag beside
// Backlog.md, and make bench-cli one build of snag beside another.
//
// Usage: go run ./scripts/bench-peer/pair -name NAME [-runs N] [-warmup N] 'COMMAND A' 'COMMAND B'
//
// A command is split into words as a shell would for plain words and
// '...' or "..." quotes, and run directly, without a shell; its output is
// thrown away. A run that exits non-zero is reported and stops the pair.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "", "what the pair times, for the table")
	runs := flag.Int("runs", 10, "counted runs of each command")
	warmup := flag.Int("warmup", 2, "uncounted runs of each command first")
	flag.Parse()
	if flag.NArg() != 2 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "usage: pair -name NAME [-runs N] [-warmup N] 'COMMAND A' 'COMMAND B'")
		os.Exit(2)
	}
	a, b := words(flag.Arg(0)), words(flag.Arg(1))
	var ta, tb, ratios []time.Duration
	for i := range *warmup + *runs {
		// Every other pair runs B first, so neither always runs in the
		// other's wake.
		da, db, err := runPair(a, b, i%2 == 1)
		if err != nil {
			fail(err)
		}
		if i < *warmup {
			continue
		}
		ta, tb = append(ta, da), append(tb, db)
		ratios = append(ratios, time.Duration(float64(db)/float64(da)*1000))
	}
	fmt.Printf("| %s | %s | %s | %s (%s-%s) | %d |\n", *name, ms(median(ta)), ms(median(tb)),
		ratio(median(ratios)), ratio(slices.Min(ratios)), ratio(slices.Max(ratios)), *runs)
}

// ratio writes a ratio kept in thousandths: 34x, or 0.92x for a pair of
// near equals (a build beside another).
func ratio(r time.Duration) string {
	if r >= 10_000 {
		return fmt.Sprintf("%.0fx", float64(r)/1000)
	}
	return fmt.Sprintf("%.2fx", float64(r)/1000)
}

// runPair runs a and b, b first when bFirst, and times each.
func runPair(a, b []string, bFirst bool) (da, db time.Duration, err error) {
	first, second := a, b
	if bFirst {
		first, second = b, a
	}
	d1, err := run(first)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(first, " "), err)
	}
	d2, err := run(second)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(second, " "), err)
	}
	if bFirst {
		return d2, d1, nil
	}
	return d1, d2, nil
}

func run(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	start := time.Now()
	err := cmd.Run()
	return time.Since(start), err
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pair: %v\n", err)
	os.Exit(1)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// words splits a command line into words: spaces separate, and '...' or
// "..." keep spaces inside a word.
func words(s string) []string {
	var out []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}
