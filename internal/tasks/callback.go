package tasks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// CallbackState is where the delivery of a task's callback is; the values
// match the proto's TaskCallbackState.
type CallbackState int8

// Callback states.
const (
	// CallbackNone: the task has no callback.
	CallbackNone CallbackState = iota
	// CallbackAwaitingTask: the task has one and is not final yet.
	CallbackAwaitingTask
	// CallbackPending: the task is final and its callback is being
	// delivered (retried with backoff).
	CallbackPending
	// CallbackDelivered: the receiver answered 2xx.
	CallbackDelivered
	// CallbackFailed: the broker gave up (a refused destination, or every
	// try failed).
	CallbackFailed
)

var callbackStateNames = [...]string{"none", "awaiting_task", "pending", "delivered", "failed"}

// String returns the state's lower-case name, e.g. "pending".
func (c CallbackState) String() string {
	if c < 0 || int(c) >= len(callbackStateNames) {
		return "none"
	}
	return callbackStateNames[c]
}

func callbackStateAtCreate(url string) CallbackState {
	if url == "" {
		return CallbackNone
	}
	return CallbackAwaitingTask
}

// Callback delivery defaults: the first retry after CallbackBaseDelay,
// doubling up to CallbackMaxDelay, at most CallbackMaxTries POSTs in all
// (about 34 minutes from the first to the last), each given
// CallbackTimeout; at most CallbackMaxDrain bytes of a response are read.
const (
	CallbackBaseDelay = time.Second
	CallbackMaxDelay  = 5 * time.Minute
	CallbackMaxTries  = 15
	CallbackTimeout   = 10 * time.Second
	CallbackMaxDrain  = 64 << 10
)

// Callbacks configures the delivery of task callbacks (WithCallbacks).
type Callbacks struct {
	// Secret signs every delivery. Required.
	Secret *CallbackSecret
	// Body encodes the final task as the JSON the receiver gets; the task
	// it is given has its callback fields cleared, so every try of one
	// final state sends the same body. Required.
	Body func(*Task) ([]byte, error)
	// BaseDelay, MaxDelay and MaxTries override the defaults when positive.
	BaseDelay, MaxDelay time.Duration
	MaxTries            int
	// Timeout bounds one try (default CallbackTimeout).
	Timeout time.Duration
}

type callbacks struct {
	Callbacks
	enabled bool
}

func defaultCallbacks() callbacks {
	return callbacks{Callbacks: Callbacks{
		BaseDelay: CallbackBaseDelay, MaxDelay: CallbackMaxDelay, MaxTries: CallbackMaxTries, Timeout: CallbackTimeout,
	}}
}

// WithCallbacks enables callback delivery. Without it a task's callback
// fails at its first try ("callbacks are not configured"); the server
// refuses such tasks at CreateTask.
func WithCallbacks(c Callbacks) Option {
	return func(o *options) {
		d := defaultCallbacks()
		if c.BaseDelay <= 0 {
			c.BaseDelay = d.BaseDelay
		}
		if c.MaxDelay <= 0 {
			c.MaxDelay = d.MaxDelay
		}
		if c.MaxTries <= 0 {
			c.MaxTries = d.MaxTries
		}
		if c.Timeout <= 0 {
			c.Timeout = d.Timeout
		}
		o.cb = callbacks{Callbacks: c, enabled: c.Secret != nil && c.Body != nil}
	}
}

// delay is the wait after the tries-th failed try: BaseDelay doubled
// tries-1 times, at most MaxDelay.
func (c *callbacks) delay(tries int) time.Duration {
	d := c.BaseDelay
	for i := 1; i < tries && d < c.MaxDelay; i++ {
		d *= 2
	}
	return min(d, c.MaxDelay)
}

// callbackArgs is the River job of one final state's callback.
type callbackArgs struct {
	Tenant     string `json:"tenant"`
	TaskID     string `json:"task_id"`
	CallbackID string `json:"callback_id"`
}

// Kind implements river.JobArgs.
func (callbackArgs) Kind() string { return "retrybroker_task_callback" }

// scheduleCallback, inside the transaction that made r final, marks r's
// callback PENDING under a new webhook-id and inserts its job; nothing
// when r has no callback.
func (s *RiverStore) scheduleCallback(ctx context.Context, tx *sql.Tx, r *row) error {
	if r.CallbackURL == "" {
		return nil
	}
	id := "msg_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET callback_state = ?, callback_attempts = 0,
		callback_error = '', callback_id = ? WHERE seq = ?`), CallbackPending, id, r.seq); err != nil {
		return fmt.Errorf("tasks: mark callback: %w", err)
	}
	if _, err := s.client.InsertTx(ctx, tx, callbackArgs{Tenant: r.Tenant, TaskID: r.ID, CallbackID: id}, nil); err != nil {
		return fmt.Errorf("tasks: schedule callback: %w", err)
	}
	return nil
}

// callbackWorker delivers one final state's callback.
type callbackWorker struct {
	river.WorkerDefaults[callbackArgs]
	s *RiverStore
}

// Timeout bounds one try's job: the POST's own timeout and 10 s for the
// database. It also makes the job rescuable: River rescues a job of a
// broker that died mid-try once it has been running this long and
// rescueAfter has passed (see newRiverStore).
func (w *callbackWorker) Timeout(*river.Job[callbackArgs]) time.Duration { return w.s.cb.jobTimeout() }

func (c *callbacks) jobTimeout() time.Duration { return c.Timeout + 10*time.Second }

// rescueAfter is River's RescueStuckJobsAfter: twice a callback job's
// timeout, at least 30 s. Only jobs whose worker has a Timeout are
// rescued (River ignores a stuck job whose timeout is -1, the client's
// JobTimeout, which the dispatch jobs keep: a dispatch's length is its
// policy's), so this is how long a delivery cut by a dead broker waits.
func (c *callbacks) rescueAfter() time.Duration { return max(30*time.Second, 2*c.jobTimeout()) }

// Work makes one try: it POSTs the final task, signed, through the task
// policy's guarded client. A 2xx is DELIVERED; a refused destination is
// FAILED at once (nothing is dialled); anything else is retried through
// River's snooze (which counts no River attempt) after the backoff, until
// MaxTries. A job whose row moved on (deleted, retried, another final
// state) does nothing.
func (w *callbackWorker) Work(ctx context.Context, job *river.Job[callbackArgs]) error {
	s := w.s
	r, err := s.getRow(ctx, job.Args.Tenant, job.Args.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.callbackID != job.Args.CallbackID || r.Callback != CallbackPending {
		return nil
	}
	tries := r.CallbackAttempts + 1
	sctx, span := s.callbackSpan(ctx, r, tries)
	defer span.End()
	refused, permanent, tryErr := s.tryCallback(sctx, r)
	if ctx.Err() != nil {
		span.SetStatus(codes.Error, "interrupted: the broker is stopping")
		return river.JobSnooze(0) // stopping: the try runs again at the next start
	}
	state, msg, result := CallbackDelivered, "", "delivered"
	switch {
	case tryErr == nil:
	case refused:
		state, msg, result = CallbackFailed, tryErr.Error(), "refused"
	case permanent:
		state, msg, result = CallbackFailed, tryErr.Error(), "failed"
	case tries >= s.cb.MaxTries:
		state, msg, result = CallbackFailed, tryErr.Error(), "failed"
	default:
		state, msg, result = CallbackPending, tryErr.Error(), "retry"
	}
	res, err := s.db.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET callback_state = ?, callback_attempts = ?, callback_error = ?
		WHERE seq = ? AND callback_id = ? AND callback_state = ?`), state, tries, msg, r.seq, r.callbackID, CallbackPending)
	if err != nil {
		return fmt.Errorf("tasks: record callback: %w", err)
	}
	s.callbackDone(span, result, tryErr)
	if n, _ := res.RowsAffected(); n == 1 && state == CallbackPending {
		return river.JobSnooze(s.cb.delay(tries))
	}
	return nil
}

// tryCallback POSTs r's final state once. refused reports that the
// destination guard refused the URL (nothing was dialled); permanent, a
// failure no retry can mend (refused included). The error names
// the receiver's status or the kind of transport failure, never the
// secret, the URL's query or an internal address.
func (s *RiverStore) tryCallback(ctx context.Context, r *row) (refused, permanent bool, err error) {
	if !s.cb.enabled {
		return false, true, errors.New("callbacks are not configured on this broker (--tasks-callback-secret-file)")
	}
	keys, err := s.cb.Secret.Keys()
	if err != nil {
		return false, false, errors.New("the callback signing secret is unavailable")
	}
	t := r.Task
	t.Callback, t.CallbackAttempts, t.CallbackError = CallbackNone, 0, ""
	body, err := s.cb.Body(&t)
	if err != nil {
		return false, true, fmt.Errorf("encode the task: %w", err)
	}
	// The policy's guarded client, resolved in the task's tenant now: the
	// receiver is held to the destinations the task's own call may reach.
	call, err := s.prepare(ctx, r.Tenant, r.ID, r.Request)
	if err != nil {
		return false, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cb.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return false, true, errors.New("invalid callback URL")
	}
	ts := s.clock.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "retrybroker-callback")
	req.Header.Set("Webhook-Id", r.callbackID)
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("Webhook-Signature", Sign(keys, r.callbackID, ts, body))
	// The try's span (task.callback) reaches the receiver as W3C trace
	// context, as an attempt's does its upstream; with tracing off the
	// span is not valid and nothing is added. The signature does not cover
	// headers.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := call.Client.Do(req)
	if err != nil {
		var re *egress.RefusedError
		if errors.As(err, &re) {
			return true, true, errors.New(re.CallerMessage())
		}
		return false, false, fmt.Errorf("transport error: %s", egress.Classify(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, CallbackMaxDrain))
	_ = resp.Body.Close()
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrStatus.Int(resp.StatusCode))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, false, fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return false, false, nil
}

// Sign returns the webhook-signature header of Standard Webhooks for msgID,
// timestamp (Unix seconds) and body: for each key, "v1," and the base64
// HMAC-SHA256 of "msgID.timestamp.body", space-separated (several keys
// during a rotation; a receiver accepts any one).
func Sign(keys [][]byte, msgID string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msgID))
		m.Write([]byte{'.'})
		m.Write([]byte(strconv.FormatInt(timestamp, 10)))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

// CallbackSecret is the signing secret of callbacks, read from a file: one
// secret a line, each "whsec_" and the standard base64 of 24 to 64 random
// bytes (Standard Webhooks' form); every line signs (rotation: add the new
// secret, let receivers learn it, remove the old one). The file is checked
// for a change at most every CallbackSecretCheck, when a callback is
// signed; a changed file is re-read, and when the re-read fails (or holds
// no valid secret) the last good secrets stay in use.
type CallbackSecret struct {
	path  string
	clock engine.Clock
	warn  func(msg string, args ...any)

	mu   sync.Mutex
	keys [][]byte
	stat fileStat
	next time.Time
}

// CallbackSecretCheck is how often a callback secret file is checked for a
// change.
const CallbackSecretCheck = time.Second

type fileStat struct {
	size  int64
	mtime time.Time
}

// maxSecretFile bounds a callback secret file's size.
const maxSecretFile = 64 << 10

// NewCallbackSecret reads the secret file at path once; an unreadable file
// or one without a valid secret is an error (which names the file and the
// line, never the secret). warn, when set, is told of a failed re-read.
func NewCallbackSecret(path string, clock engine.Clock, warn func(msg string, args ...any)) (*CallbackSecret, error) {
	if clock == nil {
		clock = engine.SystemClock{}
	}
	if warn == nil {
		warn = func(string, ...any) {}
	}
	keys, st, err := readCallbackSecret(path)
	if err != nil {
		return nil, err
	}
	return &CallbackSecret{path: path, clock: clock, warn: warn, keys: keys, stat: st, next: clock.Now().Add(CallbackSecretCheck)}, nil
}

// Keys returns the current signing keys (decoded); the slices must not be
// modified.
func (c *CallbackSecret) Keys() ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.Before(c.next) {
		return c.keys, nil
	}
	c.next = now.Add(CallbackSecretCheck)
	fi, err := os.Stat(c.path)
	if err == nil && (fileStat{fi.Size(), fi.ModTime()}) == c.stat {
		return c.keys, nil
	}
	var keys [][]byte
	var st fileStat
	if err == nil {
		keys, st, err = readCallbackSecret(c.path)
	}
	if err != nil {
		c.warn("tasks: callback secret file unreadable; the last secrets read stay in use", "error", err)
		return c.keys, nil
	}
	c.keys, c.stat = keys, st
	return c.keys, nil
}

func readCallbackSecret(path string) ([][]byte, fileStat, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fileStat{}, fmt.Errorf("callback secret file %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStat{}, fmt.Errorf("callback secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStat{}, fmt.Errorf("callback secret file: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fileStat{}, fmt.Errorf("callback secret file: %w", err)
	}
	if len(b) > maxSecretFile {
		return nil, fileStat{}, fmt.Errorf("callback secret file %s is larger than %d bytes", path, maxSecretFile)
	}
	keys, err := ParseCallbackSecrets(string(b))
	if err != nil {
		return nil, fileStat{}, fmt.Errorf("callback secret file %s: %w", path, err)
	}
	return keys, fileStat{fi.Size(), fi.ModTime()}, nil
}

// ParseCallbackSecrets decodes the lines of a callback secret file: blank
// lines are skipped, every other line must be "whsec_" and the standard
// base64 of 24 to 64 bytes. The error names the line, never its content.
func ParseCallbackSecrets(text string) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		enc, ok := strings.CutPrefix(line, "whsec_")
		if !ok {
			return nil, fmt.Errorf("line %d: a secret starts with whsec_", i+1)
		}
		k, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: not standard base64 after whsec_", i+1)
		}
		if len(k) < 24 || len(k) > 64 {
			return nil, fmt.Errorf("line %d: the secret is %d bytes; Standard Webhooks asks for 24 to 64", i+1, len(k))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no secret (one whsec_... line)")
	}
	return keys, nil
}
