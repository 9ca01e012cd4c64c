// Package version says which build of snag is running, for snag version,
// snagd --version, /health and the MCP server's name.
//
// A release build sets it with the linker:
//
//	go build -ldflags "-X github.com/snagdev/snag/internal/version.stamp=v1.2.3" ./cmd/snag
//
// (make build does, from git describe). Without that, it comes from what
// the Go toolchain recorded in the binary: the module's version for
// go install github.com/snagdev/snag/cmd/snag@v1.2.3, a pseudo-version
// naming the commit (and +dirty) for go build in a git checkout, or the
// commit alone when only that was recorded. A binary that carries none of
// these says "dev".
//
// version imports nothing of snag's.
package version

import (
	"runtime/debug"
	"sync"
)

// stamp is set with -ldflags -X; empty unless it was.
var stamp string

var once = sync.OnceValue(func() string {
	if stamp != "" {
		return stamp
	}
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
})

// String is this binary's version: the linker's stamp if there is one,
// else what FromBuildInfo finds in the build information.
func String() string { return once() }

// FromBuildInfo is the version recorded in bi: the main module's version
// when it has one ("v1.2.3", or a pseudo-version like
// "v0.0.0-20261201120000-0123456789ab+dirty"), else "dev-" and the first
// 12 digits of the commit, with "-dirty" when the tree had changes, else
// "dev".
func FromBuildInfo(bi *debug.BuildInfo) string {
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "dev-" + rev
	if dirty {
		v += "-dirty"
	}
	return v
}
