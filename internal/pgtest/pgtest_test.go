package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestClusterRestarts connects with the password over TCP, stops the
// server, sees the connection refused, and connects again after a start
// on the same port.
func TestClusterRestarts(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "select 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("select: %d, %v", n, err)
	}
	conn.Close(ctx)

	bad := strings.Replace(c.DSN(db), c.Password, "wrong", 1)
	if _, err := pgx.Connect(ctx, bad); err == nil {
		t.Fatal("a wrong password connected: TCP must need the password")
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, c.DSN(db)); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	conn.Close(ctx)
	if strings.Contains(c.Log(), c.Password) {
		t.Fatal("the server's log holds the password")
	}
}
