package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Error is a failed Redis operation with its cause named. It wraps
// store.ErrUnavailable and the client's error, which never holds a
// password.
type Error struct {
	// Op is the operation: "admit", "complete", "verify", ...
	Op string
	// Cause names what went wrong; see store.Cause.
	Cause store.Cause
	// Err is the client's error.
	Err error
}

// Error returns "redisstore: OP: CAUSE: ERR".
func (e *Error) Error() string {
	return "redisstore: " + e.Op + ": " + string(e.Cause) + ": " + e.Err.Error()
}

// Unwrap returns store.ErrUnavailable and the client's error.
func (e *Error) Unwrap() []error { return []error{store.ErrUnavailable, e.Err} }

// StoreCause returns the cause, for store.CauseOf.
func (e *Error) StoreCause() store.Cause { return e.Cause }

// sentinelError rewords go-redis's "all sentinels specified in
// configuration are unreachable" when every sentinel did answer.
type sentinelError struct{ err error }

func (e sentinelError) Error() string {
	msg := e.err.Error()
	if _, after, ok := strings.Cut(msg, "unreachable: "); ok {
		msg = after
	}
	return "the sentinels answered but named no master (an unknown master name, or not sentinels): " + msg
}

func (e sentinelError) Unwrap() error { return e.err }

// newError names err's cause.
func newError(op string, err error) *Error {
	cause := Classify(err)
	if cause == store.CauseSentinel {
		err = sentinelError{err}
	}
	return &Error{Op: op, Cause: cause, Err: err}
}

// errUnexpected marks replies the scripts should never give.
var errUnexpected = errors.New("unexpected reply")

func unexpected(op string, got any) error {
	return &Error{Op: op, Cause: store.CauseUnexpected, Err: fmt.Errorf("%w %v", errUnexpected, got)}
}

// Classify names the cause of a client error by the Redis error's first
// word (MOVED, ASK, CROSSSLOT, NOPERM, WRONGPASS, NOAUTH, OOM, READONLY,
// LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN), by the text of the ERR
// replies that mean the same (a script's command refused by the ACL, a
// cluster client on a server without cluster support), by TLS and
// certificate errors, and by the Sentinel client's "no master" error.
// Anything else the server answered is store.CauseOther; errors the server
// did not answer (connections refused, lost or timed out) are
// store.CauseUnreachable.
func Classify(err error) store.Cause {
	if err == nil {
		return store.CauseNone
	}
	if errors.Is(err, errUnexpected) {
		return store.CauseUnexpected
	}
	var nerr net.Error
	if strings.Contains(err.Error(), "all sentinels specified in configuration are unreachable") && !errors.As(err, &nerr) {
		// Every sentinel answered, but none named a master: the master
		// name is unknown to them, or they are no sentinels.
		return store.CauseSentinel
	}
	if errors.Is(err, redis.Nil) {
		return store.CauseUnexpected // the scripts never answer nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return classifyReply(rerr.Error())
	}
	if tlsError(err) {
		return store.CauseTLS
	}
	return store.CauseUnreachable
}

// classifyReply names the cause of an error reply.
func classifyReply(msg string) store.Cause {
	word, rest, _ := strings.Cut(msg, " ")
	switch word {
	case "MOVED", "ASK":
		return store.CauseMoved
	case "CROSSSLOT":
		return store.CauseCrossSlot
	case "NOPERM":
		return store.CauseNoPerm
	case "WRONGPASS", "NOAUTH":
		return store.CauseWrongPass
	case "OOM":
		return store.CauseOOM
	case "READONLY":
		return store.CauseReadOnly
	case "LOADING":
		return store.CauseLoading
	case "MASTERDOWN":
		return store.CauseMasterDown
	case "CLUSTERDOWN", "TRYAGAIN":
		return store.CauseClusterDown
	case "ERR":
		switch {
		case strings.Contains(rest, "can't run this command"), strings.Contains(rest, "no permissions"),
			strings.Contains(rest, "can't publish to the channel"), strings.Contains(rest, "can't access"):
			return store.CauseNoPerm // a script's command, key or channel refused by the ACL (Redis 7.0)
		case strings.Contains(rest, "cluster support disabled"):
			return store.CauseNotCluster
		case strings.Contains(rest, "invalid password"), strings.Contains(rest, "invalid username-password"),
			strings.Contains(rest, "Protocol error: unauthenticated"): // a long command before AUTH
			return store.CauseWrongPass
		}
	}
	return store.CauseOther
}

// tlsError reports whether err comes from a TLS handshake or a
// certificate check.
func tlsError(err error) bool {
	var (
		verr   *tls.CertificateVerificationError
		alert  tls.AlertError
		record tls.RecordHeaderError
		ua     x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || errors.As(err, &alert) || errors.As(err, &record) ||
		errors.As(err, &ua) || errors.As(err, &host) || errors.As(err, &inv) ||
		strings.Contains(err.Error(), "remote error: tls:")
}
