package tasks

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`WHERE a = ? AND b = ?`, `WHERE a = $1 AND b = $2`},
		{`VALUES (?, '', ?, '[]', '?', ?)`, `VALUES ($1, '', $2, '[]', '?', $3)`},
		{`SET x = 'it''s ?' WHERE y = ?`, `SET x = 'it''s ?' WHERE y = $1`},
		{`SELECT "odd?col" FROM t WHERE z = ?`, `SELECT "odd?col" FROM t WHERE z = $1`},
		{strings.Repeat("?,", 11) + "?", "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12"},
	} {
		if got := rebind(c.in); got != c.want {
			t.Errorf("rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzRebind: the ? outside quotes become $1..$n in order, and nothing
// else changes (removing the placeholders from both sides leaves the same
// text); nothing panics.
func FuzzRebind(f *testing.F) {
	for _, s := range []string{"", "?", "a = ? AND b = '?'", `"?" ? '' ?`, "'unterminated ?", "it''s ?"} {
		f.Add(s)
	}
	placeholder := regexp.MustCompile(`\$[0-9]+`)
	digitAfterPlaceholder := regexp.MustCompile(`\?[0-9]`)
	f.Fuzz(func(t *testing.T, q string) {
		if strings.Contains(q, "$") || digitAfterPlaceholder.MatchString(q) {
			return // $ in the input, or ?0 (it becomes $10), would be indistinguishable
		}
		out := rebind(q)
		n := 0
		for _, m := range placeholder.FindAllString(out, -1) {
			n++
			if m != "$"+strconv.Itoa(n) {
				t.Fatalf("%q -> %q: placeholder %d is %s", q, out, n, m)
			}
		}
		if strings.Count(q, "?")-strings.Count(out, "?") != n {
			t.Fatalf("%q -> %q: %d placeholders for %d ? removed", q, out, n, strings.Count(q, "?")-strings.Count(out, "?"))
		}
		if a, b := strings.ReplaceAll(q, "?", ""), placeholder.ReplaceAllString(strings.ReplaceAll(out, "?", ""), ""); a != b {
			t.Fatalf("%q -> %q changed more than the placeholders", q, out)
		}
	})
}

func TestPostgresSchema(t *testing.T) {
	got := postgresSchema("CREATE TABLE t (\n\tseq INTEGER PRIMARY KEY AUTOINCREMENT,\n\tn integer NOT NULL,\n\tb BLOB,\n\tname TEXT NOT NULL,\n\tintegers_seen INTEGER,\n\tblobby TEXT\n)")
	want := "CREATE TABLE t (\n\tseq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n\tn BIGINT NOT NULL,\n\tb BYTEA,\n\tname TEXT NOT NULL,\n\tintegers_seen BIGINT,\n\tblobby TEXT\n)"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// The broker's own schema has no SQLite-only word left.
	pg := postgresSchema(schema)
	for _, w := range []string{"INTEGER", "BLOB", "AUTOINCREMENT"} {
		if strings.Contains(strings.ToUpper(pg), w) {
			t.Errorf("the PostgreSQL schema still says %s:\n%s", w, pg)
		}
	}
}

// TestRedactDSNSecrets: a password in URL userinfo, a password parameter
// or a password= keyword never appears in the error, which still wraps
// the original.
func TestRedactDSNSecrets(t *testing.T) {
	for _, dsn := range []string{
		"postgres://broker:s3cr%2Ft@db.internal:5432/tasks",
		"postgres://broker@db.internal/tasks?password=s3cr%2Ft",
		"host=db.internal user=broker password=s3cr/t dbname=tasks",
		"host=db.internal user=broker password='s3cr/t' dbname=tasks",
		"postgres://broker:s3cr/t@db.internal:bad port/tasks",
	} {
		base := errors.New("cannot connect using " + dsn + " (s3cr/t)")
		err := redact(base, dsnSecrets(dsn))
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("%s: error shows the password: %v", dsn, err)
		}
		if !errors.Is(err, base) {
			t.Errorf("%s: redacted error lost its chain", dsn)
		}
	}
	plain := errors.New("no secret here")
	if redact(plain, dsnSecrets("postgres://broker@db/tasks")) != plain {
		t.Error("an error with nothing to redact must be returned as it is")
	}
}
