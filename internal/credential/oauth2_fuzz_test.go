package credential

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
)

// answerTransport answers every request in memory (no connection at all)
// with one status, content type and body.
type answerTransport struct {
	status      int
	contentType string
	body        []byte
}

func (a answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: a.status,
		Status:     strconv.Itoa(a.status) + " " + http.StatusText(a.status),
		Header:     http.Header{"Content-Type": {a.contentType}},
		Body:       io.NopCloser(bytes.NewReader(a.body)),
		Request:    req,
	}, nil
}

// FuzzTokenResponse feeds token endpoint answers through x/oauth2's
// parsing and the credential's checks (interpretToken, parseExpiresIn,
// the error excerpts): nothing panics, a token is a valid header value of
// bounded size with a lifetime in (0, MaxTokenLifetime], and no error
// holds the client secret or more than an excerpt of the body.
func FuzzTokenResponse(f *testing.F) {
	f.Add(200, "application/json", []byte(`{"access_token":"abc","token_type":"bearer","expires_in":3600}`))
	f.Add(200, "application/x-www-form-urlencoded", []byte(`access_token=abc&expires_in=60`))
	f.Add(400, "application/json", []byte(`{"error":"invalid_client","error_description":"`+testSecret+`"}`))
	dir := f.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte(testSecret), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		client := &http.Client{Transport: answerTransport{status: status, contentType: contentType, body: body}}
		c, err := New(Spec{Name: "api", Kind: KindOAuth2, OAuth2: &OAuth2Spec{
			TokenURL: "https://auth.invalid/token", ClientID: "c", ClientSecret: SecretRef{File: file}, AuthStyle: "header",
		}}, Deps{
			TokenClient: func([]string) (*http.Client, error) { return client, nil },
			Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		oc := c.(*oauth2Cred)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		token, lifetime, result, cause := oc.request(ctx)
		if cause != nil {
			if token != "" || result == fetchOK {
				t.Fatalf("a failure with token %q, result %q", token, result)
			}
			msg := cause.Error()
			if strings.Contains(msg, testSecret) {
				t.Fatalf("the cause holds the client secret: %q", msg)
			}
			if len(msg) > 4*tokenErrorExcerpt+200 {
				t.Fatalf("the cause is %d bytes long", len(msg))
			}
			return
		}
		if result != fetchOK {
			t.Fatalf("result %q without a cause", result)
		}
		if token == "" || len(token) > MaxAccessToken || !httpguts.ValidHeaderFieldValue("Bearer "+token) || strings.ContainsAny(token, "\r\n") {
			t.Fatalf("accepted token %q", token)
		}
		if lifetime < time.Second || lifetime > MaxTokenLifetime {
			t.Fatalf("lifetime %v", lifetime)
		}
	})
}
