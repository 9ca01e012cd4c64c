// Command pair times two commands as whole processes, in turn (A B, then
// B A, and so on), and prints each one's median wall time and the median of the
// ratios B/A taken pair by pair, so that a comparison holds while a shared
// machine's speed drifts. make bench-peer uses it to set snag beside
// Backlog.md, and make bench-cli one build of snag beside another.
//
// Usage: go run ./scripts/bench-peer/pair -name NAME [-runs N] [-warmup N] [-max-ms MS] [-max-ratio R] 'COMMAND A' 'COMMAND B' ['COMMAND C']
//
// A third command C (make bench-cli's hello-world Go program) runs in the
// same rounds, the three in turn (A B C, B C A, C A B), and the line adds
// C's median and the median of the ratios B/C. -max-ms and -max-ratio are
// B's targets (its median, and its ratio to C, or to A without C): the
// line's last column says which it meets.
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
	maxMS := flag.Float64("max-ms", 0, "B's target: its median at most this many milliseconds (0: none)")
	maxRatio := flag.Float64("max-ratio", 0, "B's target: its median ratio to C (to A without C) at most this (0: none)")
	flag.Parse()
	if flag.NArg() < 2 || flag.NArg() > 3 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "usage: pair -name NAME [-runs N] [-warmup N] [-max-ms MS] [-max-ratio R] 'COMMAND A' 'COMMAND B' ['COMMAND C']")
		os.Exit(2)
	}
	cmds := make([][]string, flag.NArg())
	for i := range cmds {
		cmds[i] = words(flag.Arg(i))
	}
	times := make([][]time.Duration, len(cmds))
	var ratios, ratiosC []time.Duration
	for i := range *warmup + *runs {
		// The first command turns round every round, so none always
		// runs in another's wake.
		d, err := runRound(cmds, i%len(cmds))
		if err != nil {
			fail(err)
		}
		if i < *warmup {
			continue
		}
		for j := range d {
			times[j] = append(times[j], d[j])
		}
		ratios = append(ratios, per(d[1], d[0]))
		if len(d) == 3 {
			ratiosC = append(ratiosC, per(d[1], d[2]))
		}
	}
	line := fmt.Sprintf("| %s | %s | %s | %s |", *name, ms(median(times[0])), ms(median(times[1])), spread(ratios))
	against := ratios
	if len(cmds) == 3 {
		line += fmt.Sprintf(" %s | %s |", ms(median(times[2])), spread(ratiosC))
		against = ratiosC
	}
	line += fmt.Sprintf(" %d |", *runs)
	if *maxMS > 0 || *maxRatio > 0 {
		line += " " + verdict(median(times[1]), median(against), *maxMS, *maxRatio) + " |"
	}
	fmt.Println(line)
}

// per is b/a, kept in thousandths.
func per(b, a time.Duration) time.Duration { return time.Duration(float64(b) / float64(a) * 1000) }

// spread writes the median of ratios and their range: 1.27x (0.98x-2.10x).
func spread(ratios []time.Duration) string {
	return fmt.Sprintf("%s (%s-%s)", ratio(median(ratios)), ratio(slices.Min(ratios)), ratio(slices.Max(ratios)))
}

// verdict says which of B's targets its medians meet: "meets <= 10 ms;
// misses <= 1.30x (2.90x)".
func verdict(b, r time.Duration, maxMS, maxRatio float64) string {
	var met, missed []string
	if maxMS > 0 {
		t := fmt.Sprintf("<= %g ms", maxMS)
		if float64(b)/float64(time.Millisecond) <= maxMS {
			met = append(met, t)
		} else {
			missed = append(missed, t+" ("+ms(b)+")")
		}
	}
	if maxRatio > 0 {
		t := fmt.Sprintf("<= %.2fx", maxRatio)
		if float64(r)/1000 <= maxRatio {
			met = append(met, t)
		} else {
			missed = append(missed, t+" ("+ratio(r)+")")
		}
	}
	var out []string
	if len(met) > 0 {
		out = append(out, "meets "+strings.Join(met, ", "))
	}
	if len(missed) > 0 {
		out = append(out, "misses "+strings.Join(missed, ", "))
	}
	return strings.Join(out, "; ")
}

// ratio writes a ratio kept in thousandths: 34x, or 0.92x for a pair of
// near equals (a build beside another).
func ratio(r time.Duration) string {
	if r >= 10_000 {
		return fmt.Sprintf("%.0fx", float64(r)/1000)
	}
	return fmt.Sprintf("%.2fx", float64(r)/1000)
}

// runRound runs every command once, starting with cmds[first] and going
// round, and times each: d[i] is cmds[i]'s time.
func runRound(cmds [][]string, first int) ([]time.Duration, error) {
	d := make([]time.Duration, len(cmds))
	for k := range cmds {
		i := (first + k) % len(cmds)
		t, err := run(cmds[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(cmds[i], " "), err)
		}
		d[i] = t
	}
	return d, nil
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
