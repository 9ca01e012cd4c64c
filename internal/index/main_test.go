package index_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}
