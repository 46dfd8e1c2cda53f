package egress_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func TestRedactURLString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://api.example.com/v1/items", "https://api.example.com/v1/items"},
		{"https://user:s3cret@api.example.com/v1", "https://REDACTED@api.example.com/v1"},
		{"https://ghp_tokenAsUser@github.com/x", "https://REDACTED@github.com/x"},
		{"https://api.example.com/v1?key=s3cret&page=2", "https://api.example.com/v1?key=REDACTED&page=REDACTED"},
		{"https://api.example.com/?a=1&a=2&b=", "https://api.example.com/?a=REDACTED&a=REDACTED&b=REDACTED"},
		{"https://api.example.com/?baretoken&x=1", "https://api.example.com/?REDACTED&x=REDACTED"},
		{"https://api.example.com/?a=1;token=s3cret", "https://api.example.com/?a=REDACTED"},
		{"https://api.example.com/p#access_token=s3cret", "https://api.example.com/p"},
		{"https://u:p@h.example:8443/p?q=v#f", "https://REDACTED@h.example:8443/p?q=REDACTED"},
		{"http://[::1]:80/a%2Fb?x=%20y", "http://[::1]:80/a%2Fb?x=REDACTED"},
		{"https://api.example.com/?", "https://api.example.com/?"},
		{"mailto:someone@example.com", egress.UnparsableURL},
		{"http://h/%zz?secret=1", egress.UnparsableURL},
		{"http://user:pa ss@h/", egress.UnparsableURL},
		{"https://h.example/\x7fsecret", egress.UnparsableURL},
		{"", ""},
	} {
		if got := egress.RedactURLString(tc.in); got != tc.want {
			t.Errorf("RedactURLString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	if got := egress.RedactURL(nil); got != "" {
		t.Errorf("RedactURL(nil) = %q", got)
	}
	u := &url.URL{Scheme: "https", Host: "h.example", Path: "/p", RawQuery: "token=abc", Fragment: "frag", User: url.UserPassword("me", "pw")}
	if got, want := egress.RedactURL(u), "https://REDACTED@h.example/p?token=REDACTED"; got != want {
		t.Errorf("RedactURL = %q, want %q", got, want)
	}
	if u.User.Username() != "me" || u.RawQuery != "token=abc" {
		t.Error("RedactURL modified its argument")
	}
	// A hand-built URL whose host hides userinfo.
	odd := &url.URL{Scheme: "http", Host: "me:pw@h.example"}
	if got := egress.RedactURL(odd); strings.Contains(got, "pw") {
		t.Errorf("RedactURL(%v) = %q leaks", odd, got)
	}
}
