package tasks

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
)

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres://
// URL or a keyword/value string, as libpq and pgx take them), runs River's
// migrations and the broker's, and returns a store whose worker
// dispatches each due task with prepare and runner. Several brokers may
// open the same database: River hands each job to one of them at a time.
// Call Start to begin dispatching and Close to stop.
//
// dsn may hold a password: no error names it (see redactDSN).
func OpenPostgres(ctx context.Context, dsn string, runner Runner, prepare Prepare, opts ...Option) (*RiverStore, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	secrets := dsnSecrets(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, redact(fmt.Errorf("tasks: postgres URL: %w", err), secrets)
	}
	secrets = append(secrets, cfg.Password)
	// River's migrator takes no lock: replicas starting at once would race
	// on CREATE TABLE. A session advisory lock on a connection of its own
	// (not the pool's, which the migrations use) makes them take turns;
	// closing the connection releases it.
	lock, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, redact(fmt.Errorf("tasks: connect to postgres: %w", err), secrets)
	}
	defer func() { _ = lock.Close(context.WithoutCancel(ctx)) }()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return nil, redact(fmt.Errorf("tasks: lock for migrations: %w", err), secrets)
	}
	// database/sql over pgx keeps the River client a river.Client[*sql.Tx]
	// and every query of this package shared with SQLite.
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, redact(fmt.Errorf("tasks: connect to postgres: %w", err), secrets)
	}
	s, err := newRiverStore(ctx, db, riverdatabasesql.New(db), postgresSchema(schema), true, runner, prepare, o)
	if err != nil {
		_ = db.Close()
		return nil, redact(err, secrets)
	}
	return s, nil
}

// migrationLock is the PostgreSQL advisory lock key that serializes the
// migrations of brokers starting at once ("rbtask" in ASCII).
const migrationLock int64 = 0x7262_7461_736b

// rebind returns q with each ? placeholder outside quotes (string
// literals '...', quoted identifiers "...") replaced by $1, $2, ... in
// order, PostgreSQL's syntax. A doubled quote inside quotes is part of
// the quoted text.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte // the open quote, 0 outside
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote closes and reopens at once
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// postgresTypes maps the SQLite schema's column types to PostgreSQL's,
// whole words only: SQLite's INTEGER holds 64 bits (BIGINT), BLOB is
// BYTEA, and the AUTOINCREMENT key is an identity column.
var postgresTypes = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`(?i)\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b`), "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"},
	{regexp.MustCompile(`(?i)\bINTEGER\b`), "BIGINT"},
	{regexp.MustCompile(`(?i)\bBLOB\b`), "BYTEA"},
}

// postgresSchema derives the PostgreSQL form of a SQLite schema written
// with INTEGER, TEXT and BLOB columns (TEXT is the same in both).
func postgresSchema(sqlite string) string {
	for _, t := range postgresTypes {
		sqlite = t.re.ReplaceAllString(sqlite, t.repl)
	}
	return sqlite
}

// dsnSecrets returns the password a connection string holds, in URL
// userinfo, a password query parameter, or a password= keyword, to redact
// from errors even when the string does not parse.
func dsnSecrets(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.PathEscape(p), url.QueryEscape(p))
		}
		if p := u.Query().Get("password"); p != "" {
			out = append(out, p, url.QueryEscape(p))
		}
	} else if i := strings.Index(dsn, "://"); i >= 0 {
		// An unparsable URL: everything between :// and the last @ may
		// be userinfo.
		if j := strings.LastIndex(dsn, "@"); j > i {
			userinfo := dsn[i+3 : j]
			out = append(out, userinfo)
			if _, p, ok := strings.Cut(userinfo, ":"); ok {
				out = append(out, p)
			}
		}
	}
	for _, m := range keywordPassword.FindAllStringSubmatch(dsn, -1) {
		out = append(out, strings.Trim(m[1], "'"))
	}
	return out
}

var keywordPassword = regexp.MustCompile(`(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// redact returns err with every non-empty secret in its message replaced
// by "xxxxx"; errors.Is and As still see err's chain.
func redact(err error, secrets []string) error {
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }
