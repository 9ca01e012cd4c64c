// Command hello is a Go program that prints hello, world and exits:
// the start of any Go program on this machine. scripts/bench-cli times it
// beside snag, in the same run, as the second floor (the first,
// scripts/floor, also dials snagd), and holds snag list to 1.3 times it.
package main

import "fmt"

func main() {
	fmt.Println("hello, world")
}
