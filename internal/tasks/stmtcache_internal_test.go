package tasks

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"modernc.org/sqlite"
)

// TestStmtCacheReusesAndNeverSharesAnOpenStatement: a query run again is
// not prepared again; the same query run while its rows are still open
// gets a statement of its own and both results are right; a script of
// several statements runs whole every time.
func TestStmtCacheReusesAndNeverSharesAnOpenStatement(t *testing.T) {
	db := sql.OpenDB(stmtCacheConnector{dsn: "file:" + filepath.Join(t.TempDir(), "c.db"), drv: &sqlite.Driver{}})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prepared := func() (n int) {
		if err := conn.Raw(func(dc any) error { n = dc.(*cachingConn).prepared; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const script = `CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);`
	if _, err := conn.ExecContext(ctx, script); err != nil {
		t.Fatal(err)
	}
	const q = `SELECT n FROM t WHERE n >= ? ORDER BY n`
	var got int
	for i := range 3 {
		if err := conn.QueryRowContext(ctx, q, 2).Scan(&got); err != nil || got != 2 {
			t.Fatalf("run %d: %d, %v", i, got, err)
		}
	}
	if n := prepared(); n != 2 {
		t.Fatalf("%d statements prepared for a script and one query run 3 times; want 2", n)
	}
	rows, err := conn.QueryContext(ctx, q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var outer []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, n)
		// The same query while rows of it are open.
		var inner int
		if err := conn.QueryRowContext(ctx, q, 2).Scan(&inner); err != nil || inner != 2 {
			t.Fatalf("inner: %d, %v", inner, err)
		}
	}
	if err := rows.Close(); err != nil || len(outer) != 2 || outer[0] != 1 || outer[1] != 2 {
		t.Fatalf("outer rows %v, %v", outer, err)
	}
	if _, err := conn.ExecContext(ctx, `DELETE FROM t; INSERT INTO t VALUES (7); INSERT INTO t VALUES (8);`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `DELETE FROM t; INSERT INTO t VALUES (7); INSERT INTO t VALUES (8);`); err != nil {
		t.Fatal(err)
	}
	var count int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&count); err != nil || count != 2 {
		t.Fatalf("a cached script ran partly: %d rows, %v", count, err)
	}
}
