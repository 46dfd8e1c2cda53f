package credential

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"golang.org/x/net/http/httpguts"
)

// The headers an aws_sigv4 credential sets. X-Amz-Content-Sha256 is the
// payload hash: S3 requires it, and other services ignore it (it is signed
// like any other header, so it costs nothing but its bytes).
const (
	hdrAuthorization = "Authorization"
	hdrAmzDate       = "X-Amz-Date"
	hdrAmzToken      = "X-Amz-Security-Token"
	hdrAmzContent    = "X-Amz-Content-Sha256"
)

// unsignedPayload is the payload hash that tells S3 the body is not signed.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// sigV4ChainTimeout bounds one retrieval of credentials from the AWS SDK's
// chain (a web identity token exchanged at STS), whatever the attempt's
// context allows.
const sigV4ChainTimeout = 10 * time.Second

// sigV4ChainExpiryWindow: credentials from the chain that expire (STS
// session credentials) are renewed this long before they do, so that a
// signature is never made with keys that expire while it travels.
const sigV4ChainExpiryWindow = time.Minute

// sigv4Cred signs each attempt with AWS Signature Version 4, made by the
// AWS SDK v2's signer over the attempt's final request: method, the URL as
// it will be sent, Host, Content-Length and every header then set (the
// signer leaves out only Authorization, User-Agent, X-Amzn-Trace-Id, Expect
// and Transfer-Encoding; headers the transport adds later, such as
// Accept-Encoding, are not signed and need not be). The signing time is
// Deps.Clock's now at each Apply, so a retry after a wait carries a fresh
// X-Amz-Date and signature instead of one the verifier finds too old.
type sigv4Cred struct {
	name, region, service string
	overwrite, unsigned   bool
	// keys from files or variables; nil when the chain is used
	ak, sk, tok *secret
	// chain is the SDK's cached default chain; nil when keys are given
	chain aws.CredentialsProvider
	// signer is the SDK's signer of the keys' current generation: its
	// cache of derived signing keys is keyed by access key id and day,
	// not by the secret, so a rotated secret key needs a new signer.
	signer atomic.Pointer[genSigner]
	clock  Clock
	// escapePath is false for S3, which signs the path as sent (the SDK's
	// S3 client does the same); other services sign it escaped again.
	escapePath bool

	mu      sync.Mutex // guards the chain's generation
	lastKey string     // access key id and expiry last retrieved
	gen     uint64
}

func newSigV4(spec Spec, deps Deps) (Credential, error) {
	s := spec.SigV4
	if err := checkScopePart(s.Region); err != nil {
		return nil, fmt.Errorf("credentials.%s.region: %w", spec.Name, err)
	}
	if err := checkScopePart(s.Service); err != nil {
		return nil, fmt.Errorf("credentials.%s.service: %w", spec.Name, err)
	}
	c := &sigv4Cred{
		name: spec.Name, region: s.Region, service: s.Service,
		overwrite: spec.Overwrite, unsigned: s.UnsignedPayload,
		clock:      deps.Clock,
		escapePath: s.Service != "s3",
	}
	switch {
	case s.AccessKeyID.IsZero() && s.SecretAccessKey.IsZero():
		if !s.SessionToken.IsZero() {
			return nil, fmt.Errorf("credentials.%s.session_token: set only with access_key_id and secret_access_key", spec.Name)
		}
		chain, err := loadSigV4Chain(s.Region, deps)
		if err != nil {
			return nil, fmt.Errorf("credential %s: the AWS credential chain: %w", spec.Name, err)
		}
		c.chain = chain
		return c, nil
	case s.AccessKeyID.IsZero():
		return nil, fmt.Errorf("credentials.%s.access_key_id: required with secret_access_key (or set neither, for the AWS SDK's chain)", spec.Name)
	case s.SecretAccessKey.IsZero():
		return nil, fmt.Errorf("credentials.%s.secret_access_key: required with access_key_id (or set neither, for the AWS SDK's chain)", spec.Name)
	}
	var err error
	if c.ak, err = newSecret(s.AccessKeyID, "credentials."+spec.Name+".access_key_id", spec.Name, &deps); err != nil {
		return nil, err
	}
	if c.sk, err = newSecret(s.SecretAccessKey, "credentials."+spec.Name+".secret_access_key", spec.Name, &deps); err != nil {
		return nil, err
	}
	if !s.SessionToken.IsZero() {
		if c.tok, err = newSecret(s.SessionToken, "credentials."+spec.Name+".session_token", spec.Name, &deps); err != nil {
			return nil, err
		}
	}
	if _, _, err := c.fromSecrets(); err != nil {
		return nil, err
	}
	return c, nil
}

// genSigner is a signer for one generation of keys.
type genSigner struct {
	gen uint64
	s   *v4.Signer
}

// signerFor returns the signer of the keys of generation gen.
func (c *sigv4Cred) signerFor(gen uint64) *v4.Signer {
	if g := c.signer.Load(); g != nil && g.gen == gen {
		return g.s
	}
	g := &genSigner{gen: gen, s: v4.NewSigner()}
	c.signer.Store(g)
	return g.s
}

// checkScopePart checks a region or service name, which goes into the
// credential scope of the Authorization header.
func checkScopePart(v string) error {
	if v == "" {
		return errors.New("required")
	}
	for _, r := range v {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.' {
			return fmt.Errorf("%q: only lower-case letters, digits, '-', '_' and '.'", v)
		}
	}
	return nil
}

// loadSigV4Chain builds the AWS SDK's default credential chain, restricted
// to what a server needs and never reaching the EC2 instance metadata
// service (169.254.169.254) or a container credentials endpoint, in the
// SDK's order:
//
//  1. with AWS_PROFILE set, that profile of the shared files, first;
//  2. the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
//     AWS_SESSION_TOKEN);
//  3. a web identity token file with a role (AWS_WEB_IDENTITY_TOKEN_FILE,
//     AWS_ROLE_ARN, optional AWS_ROLE_SESSION_NAME), exchanged at STS
//     (AWS_ENDPOINT_URL_STS overrides its endpoint) for session keys;
//  4. the default profile of the shared files (AWS_CONFIG_FILE,
//     AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/config and
//     ~/.aws/credentials).
//
// A profile may hold static keys or a web identity token file with a role;
// SSO, credential_process and role chaining are refused. STS is asked
// through Deps.TokenClient, the destination guard (without one, every
// request of the chain is refused); AWS_CA_BUNDLE does not apply, the
// broker's TLS roots do. Building reads the environment and files only;
// keys are retrieved, and cached by the SDK until a minute before they
// expire, when an attempt needs them.
func loadSigV4Chain(region string, deps Deps) (aws.CredentialsProvider, error) {
	getenv := deps.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	client := refusingClient
	if deps.TokenClient != nil {
		c, err := deps.TokenClient(deps.TokenAllow)
		if err != nil {
			return nil, err
		}
		client = c
	}
	webIdentity := func(tokenFile, role, session string) aws.CredentialsProvider {
		if session == "" {
			session = "retrybroker"
		}
		opts := sts.Options{Region: region, HTTPClient: client, RetryMaxAttempts: 2}
		if ep := getenv("AWS_ENDPOINT_URL_STS"); ep != "" {
			opts.BaseEndpoint = aws.String(ep)
		}
		return stscreds.NewWebIdentityRoleProvider(sts.New(opts), role, stscreds.IdentityTokenFile(tokenFile),
			func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = session })
	}
	profile := func(name string) (aws.CredentialsProvider, error) {
		cfgFile, credFile := getenv("AWS_CONFIG_FILE"), getenv("AWS_SHARED_CREDENTIALS_FILE")
		if cfgFile == "" {
			cfgFile = config.DefaultSharedConfigFilename()
		}
		if credFile == "" {
			credFile = config.DefaultSharedCredentialsFilename()
		}
		ctx, cancel := context.WithTimeout(context.Background(), sigV4ChainTimeout)
		defer cancel()
		sc, err := config.LoadSharedConfigProfile(ctx, name, func(o *config.LoadSharedConfigOptions) {
			o.ConfigFiles, o.CredentialsFiles = []string{cfgFile}, []string{credFile}
		})
		if err != nil {
			return nil, fmt.Errorf("no keys in the environment, and the shared config: %w", err)
		}
		switch {
		case sc.Credentials.HasKeys():
			return credentials.StaticCredentialsProvider{Value: sc.Credentials}, nil
		case sc.WebIdentityTokenFile != "" && sc.RoleARN != "":
			return webIdentity(sc.WebIdentityTokenFile, sc.RoleARN, sc.RoleSessionName), nil
		}
		return nil, fmt.Errorf("profile %q has neither static keys nor a web identity token file with a role (SSO, credential_process and role chaining are not supported)", name)
	}
	var (
		p   aws.CredentialsProvider
		err error
	)
	ak, sk := firstEnv(getenv, "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"), firstEnv(getenv, "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	switch {
	case getenv("AWS_PROFILE") != "":
		p, err = profile(getenv("AWS_PROFILE"))
	case ak != "" && sk != "":
		p = credentials.NewStaticCredentialsProvider(ak, sk, getenv("AWS_SESSION_TOKEN"))
	case getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "":
		role := getenv("AWS_ROLE_ARN")
		if role == "" {
			return nil, errors.New("AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN")
		}
		p = webIdentity(getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), role, getenv("AWS_ROLE_SESSION_NAME"))
	default:
		name := getenv("AWS_DEFAULT_PROFILE")
		if name == "" {
			name = "default"
		}
		p, err = profile(name)
	}
	if err != nil {
		return nil, err
	}
	return aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = sigV4ChainExpiryWindow }), nil
}

// firstEnv returns the first of the variables that is set.
func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// refusingClient refuses every request: the chain's client when the broker
// gave none.
var refusingClient = &http.Client{Transport: &http.Transport{
	Proxy: nil,
	DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("no HTTP client for the AWS credential chain: %s refused", addr)
	},
}}

func (c *sigv4Cred) Name() string { return c.name }
func (c *sigv4Cred) Kind() Kind   { return KindAWSSigV4 }

// Headers: X-Amz-Security-Token is listed even without a session token, so
// a caller's own token is refused (with the broker's keys it could only
// make the request fail) rather than signed.
func (c *sigv4Cred) Headers() []string {
	return []string{hdrAuthorization, hdrAmzDate, hdrAmzToken, hdrAmzContent}
}
func (c *sigv4Cred) Overwrite() bool { return c.overwrite }

// fromSecrets returns the keys from the secrets and their generation.
func (c *sigv4Cred) fromSecrets() (aws.Credentials, uint64, error) {
	ak, g1 := c.ak.text()
	sk, g2 := c.sk.text()
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	gen := g1 + g2
	if c.tok != nil {
		var g3 uint64
		creds.SessionToken, g3 = c.tok.text()
		gen += g3
	}
	if err := c.check(creds); err != nil {
		return aws.Credentials{}, 0, err
	}
	return creds, gen, nil
}

// check refuses keys that would make a bad Authorization or token header
// (the error names the credential, not the value).
func (c *sigv4Cred) check(creds aws.Credentials) error {
	switch {
	case creds.AccessKeyID == "" || creds.SecretAccessKey == "":
		return &UnavailableError{Credential: c.name, Cause: errors.New("empty access key id or secret access key")}
	case !httpguts.ValidHeaderFieldValue(creds.AccessKeyID) || strings.ContainsAny(creds.AccessKeyID, "\r\n\t ,/="):
		return &UnavailableError{Credential: c.name, Cause: errors.New("the access key id is not a valid key id")}
	case !httpguts.ValidHeaderFieldValue(creds.SessionToken) || strings.ContainsAny(creds.SessionToken, "\r\n"):
		return &UnavailableError{Credential: c.name, Cause: errors.New("the session token is not a valid header value")}
	}
	return nil
}

// fromChain retrieves the keys from the SDK's cache (fetching them when
// none are cached or they are about to expire), with its own timeout.
func (c *sigv4Cred) fromChain(ctx context.Context) (aws.Credentials, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, sigV4ChainTimeout)
	defer cancel()
	creds, err := c.chain.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, 0, &UnavailableError{Credential: c.name, Cause: fmt.Errorf("the AWS credential chain: %w", err)}
	}
	if err := c.check(creds); err != nil {
		return aws.Credentials{}, 0, err
	}
	key := creds.AccessKeyID + "\x00" + creds.Expires.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != c.lastKey {
		c.lastKey = key
		c.gen++
	}
	return creds, c.gen, nil
}

// Apply signs the attempt: it sets X-Amz-Content-Sha256 (the call's body
// hash, computed once per call, or UNSIGNED-PAYLOAD), then has the SDK set
// X-Amz-Date (Deps.Clock's now), X-Amz-Security-Token (with a session
// token) and Authorization. Any earlier values of these, and a Host header
// (which net/http does not send: req.Host is), are removed first. The
// request's URL is copied before signing, because its path is put in the
// form AWS signs (awsEscapedPath) and the signer rewrites its query in
// canonical form: the forms then sent, so the URL the caller gave is
// sent as the same resource in the form that was signed.
func (c *sigv4Cred) Apply(ctx context.Context, req *http.Request, call *Call) (Stamp, error) {
	var (
		creds aws.Credentials
		gen   uint64
		err   error
	)
	if c.chain != nil {
		creds, gen, err = c.fromChain(ctx)
	} else {
		creds, gen, err = c.fromSecrets()
	}
	if err != nil {
		return Stamp{}, err
	}
	hash := unsignedPayload
	if !c.unsigned {
		if call == nil {
			call = NewCall(nil)
		}
		hash = hex.EncodeToString(call.BodySHA256())
	}
	if req.URL == nil {
		return Stamp{}, &UnavailableError{Credential: c.name, Cause: errors.New("request without a URL")}
	}
	// The signer re-encodes the query from its parsed form, which leaves
	// out what does not parse (a ';' separator, a bad escape): such a query
	// would be sent changed, so it is not signed. No retry would change
	// it: it is the caller's error (a *ComponentError: INVALID_ARGUMENT).
	if q := req.URL.RawQuery; q != "" {
		if _, err := url.ParseQuery(q); err != nil {
			return Stamp{}, &ComponentError{Credential: c.name, Component: "query", Reason: "the query cannot be signed as sent: " + err.Error()}
		}
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	h := req.Header
	delete(h, hdrAuthorization)
	delete(h, hdrAmzDate)
	delete(h, hdrAmzToken)
	delete(h, "Host")
	h[hdrAmzContent] = []string{hash}
	u := *req.URL
	if u.Opaque == "" {
		u.RawPath = awsEscapedPath(&u, c.escapePath)
	}
	req.URL = &u
	err = c.signerFor(gen).SignHTTP(ctx, creds, req, hash, c.service, c.region, c.clock.Now(), func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = !c.escapePath
	})
	if err != nil {
		return Stamp{}, &UnavailableError{Credential: c.name, Cause: fmt.Errorf("signing: %w", err)}
	}
	return Stamp{Generation: gen}, nil
}

// awsEscapedPath is u's path in the form AWS signs, which is then the
// path sent (the same resource): everything but A-Z a-z 0-9 - _ . ~ and
// '/' percent-encoded, '=' and '+' included. For S3 (segments false) the
// decoded path is encoded whole, so an encoded '/' is sent as '/': S3
// keys do not tell them apart, and S3 servers sign the key that way.
// Other services (segments true) keep an encoded '/' inside a segment,
// and sign this form encoded once more (the signer does that).
func awsEscapedPath(u *url.URL, segments bool) string {
	escaped := u.EscapedPath()
	plain := true
	for i := 0; i < len(escaped) && plain; i++ {
		b := escaped[i]
		plain = b == '/' || b == '-' || b == '_' || b == '.' || b == '~' ||
			(b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
	}
	switch {
	case plain: // nothing to decode or encode: the common case
		return escaped
	case !segments:
		return httpbinding.EscapePath(u.Path, false)
	}
	segs := strings.Split(escaped, "/")
	for i, seg := range segs {
		if d, err := url.PathUnescape(seg); err == nil {
			segs[i] = httpbinding.EscapePath(d, true)
		}
	}
	return strings.Join(segs, "/")
}

// Rejected: a signature has nothing to renew; rotated files and expiring
// chain credentials are picked up by the next attempt anyway.
func (c *sigv4Cred) Rejected(Stamp) bool { return false }
