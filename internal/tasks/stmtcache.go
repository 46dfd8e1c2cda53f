package tasks

import (
	"context"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
)

// The pure-Go SQLite driver parses every query it is given: database/sql
// caches no statement, and River's SQLite driver sends its queries as text.
// Parsing was about half of the CPU of creating and of dispatching a task
// (go tool pprof on both). stmtCacheConnector keeps, per connection, the
// prepared statement of each distinct query text, and hands it out again
// while no other use of it is open; a statement in use and queries past
// maxCachedStmts are prepared and closed as before. (A script of several
// statements is cached too: the driver keeps its text and runs it
// statement by statement each time, as it does uncached.)

// maxCachedStmts bounds the statements one connection keeps.
const maxCachedStmts = 256

// stmtCacheConnector opens modernc.org/sqlite connections for dsn, each
// with a statement cache.
type stmtCacheConnector struct {
	dsn string
	drv *sqlite.Driver
}

// Connect implements driver.Connector.
func (c stmtCacheConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &cachingConn{Conn: conn, stmts: map[string]*cachedStmt{}}, nil
}

// Driver implements driver.Connector.
func (c stmtCacheConnector) Driver() driver.Driver { return c.drv }

// cachingConn is a connection whose PrepareContext reuses statements.
// database/sql uses one connection from one goroutine at a time, so the
// cache needs no lock. It implements neither ExecerContext nor
// QueryerContext: database/sql then prepares every query (here, from the
// cache), runs it and closes the statement (here, gives it back).
type cachingConn struct {
	driver.Conn
	stmts map[string]*cachedStmt
	// prepared counts the statements the driver prepared (cache misses).
	prepared int
}

// cachedStmt is a statement of the cache; Close gives it back.
type cachedStmt struct {
	driver.Stmt
	inUse bool
}

// Close implements driver.Stmt: the statement stays prepared for the next
// use of the same query.
func (s *cachedStmt) Close() error {
	s.inUse = false
	return nil
}

// ExecContext implements driver.StmtExecContext.
func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

// QueryContext implements driver.StmtQueryContext.
func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// Prepare implements driver.Conn.
func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext implements driver.ConnPrepareContext.
func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if s, ok := c.stmts[query]; ok && !s.inUse {
		s.inUse = true
		return s, nil
	}
	c.prepared++
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	_, cached := c.stmts[query]
	if cached || len(c.stmts) >= maxCachedStmts {
		return st, nil // closed by its user, as usual
	}
	s := &cachedStmt{Stmt: st, inUse: true}
	c.stmts[query] = s
	return s, nil
}

// BeginTx implements driver.ConnBeginTx.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

// Ping implements driver.Pinger.
func (c *cachingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession implements driver.SessionResetter.
func (c *cachingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements driver.Validator.
func (c *cachingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue implements driver.NamedValueChecker, as the wrapped
// connection does (or with database/sql's default conversion).
func (c *cachingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// Close implements driver.Conn: every cached statement is closed with the
// connection.
func (c *cachingConn) Close() error {
	var errs []error
	for q, s := range c.stmts {
		errs = append(errs, s.Stmt.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.Conn.Close())...)
}
