package providers

import (
	"reflect"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	item := func(name string, r int64, tt time.Duration) RateLimitItem {
		return RateLimitItem{Name: name, Remaining: r, HasRemaining: true, Reset: tt, HasReset: true}
	}
	cases := []struct {
		name  string
		lines []string
		want  []RateLimitItem
		ok    bool
	}{
		{"one string item", []string{`"default";r=0;t=30`}, []RateLimitItem{item("default", 0, 30*time.Second)}, true},
		{"token item", []string{`default;r=5;t=1`}, []RateLimitItem{item("default", 5, time.Second)}, true},
		{
			"two items",
			[]string{`"default";r=0;t=30, "daily";r=100;t=3600`},
			[]RateLimitItem{item("default", 0, 30*time.Second), item("daily", 100, time.Hour)},
			true,
		},
		{
			"split across lines",
			[]string{`"default";r=0;t=30`, `"daily";r=0;t=3600`},
			[]RateLimitItem{item("default", 0, 30*time.Second), item("daily", 0, time.Hour)},
			true,
		},
		{
			"whitespace",
			[]string{"  \"a\";r=0;t=1 ,\t\"b\";r=0;t=2  "},
			[]RateLimitItem{item("a", 0, time.Second), item("b", 0, 2*time.Second)},
			true,
		},
		{"space after semicolon", []string{`"a"; r=0; t=1`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"escaped string", []string{`"a\"b\\c";r=0;t=1`}, []RateLimitItem{item(`a"b\c`, 0, time.Second)}, true},
		{
			"other params of every type",
			[]string{`"a";r=0;t=1;pk=:YWJj:;q=1.5;w=?1;x;d=@1700000000;s="x";k=tok;u=%"caf%c3%a9"`},
			[]RateLimitItem{item("a", 0, time.Second)},
			true,
		},
		{"repeated param last wins", []string{`"a";r=?1;r=0;t=9;t=1`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"binary padded", []string{`"a";r=0;t=1;pk=:YQ==:`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"binary unpadded", []string{`"a";r=0;t=1;pk=:YQ:`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"binary one pad", []string{`"a";r=0;t=1;pk=:YWI=:`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"binary empty", []string{`"a";r=0;t=1;pk=::`}, []RateLimitItem{item("a", 0, time.Second)}, true},
		{"missing t", []string{`"a";r=0`}, []RateLimitItem{{Name: "a", HasRemaining: true}}, true},
		{"empty field", []string{""}, nil, true},
		{"no lines", nil, nil, true},

		{"negative r", []string{`"a";r=-1;t=1`}, nil, false},
		{"negative t", []string{`"a";r=0;t=-1`}, nil, false},
		{"decimal t", []string{`"a";r=0;t=1.5`}, nil, false},
		{"string t", []string{`"a";r=0;t="1"`}, nil, false},
		{"boolean r", []string{`"a";r;t=1`}, nil, false},
		{"t overflow", []string{`"a";r=0;t=999999999999999`}, nil, false},
		{"integer too long", []string{`"a";r=0;t=1000000000000000`}, nil, false},
		{"integer item", []string{`5;r=0;t=1`}, nil, false},
		{"inner list", []string{`("a" "b");r=0;t=1`}, nil, false},
		{"trailing comma", []string{`"a";r=0;t=1,`}, nil, false},
		{"leading comma", []string{`,"a";r=0;t=1`}, nil, false},
		{"double comma", []string{`"a";r=0;t=1,,"b";r=0;t=2`}, nil, false},
		{"empty line joined", []string{`"a";r=0;t=1`, ""}, nil, false},
		{"unterminated string", []string{`"a;r=0;t=1`}, nil, false},
		{"bad escape", []string{`"a\n";r=0;t=1`}, nil, false},
		{"control char in string", []string{"\"a\x01\";r=0;t=1"}, nil, false},
		{"non-ASCII in string", []string{"\"é\";r=0;t=1"}, nil, false},
		{"upper-case key", []string{`"a";R=0;t=1`}, nil, false},
		{"space before semicolon", []string{`"a" ;r=0;t=1`}, nil, false},
		{"space around equals", []string{`"a";r = 0;t=1`}, nil, false},
		{"missing separator", []string{`"a";r=0;t=1 "b";r=0;t=2`}, nil, false},
		{"dictionary syntax", []string{`limit=10, remaining=0, reset=30`}, nil, false},
		{"bad binary", []string{`"a";r=0;t=1;pk=:ab$:`}, nil, false},
		{"binary padding inside", []string{`"a";r=0;t=1;pk=:YW=Jj:`}, nil, false},
		{"binary padding first", []string{`"a";r=0;t=1;pk=:=YWJj:`}, nil, false},
		{"binary padding only", []string{`"a";r=0;t=1;pk=:==:`}, nil, false},
		{"binary three pads", []string{`"a";r=0;t=1;pk=:YQ===:`}, nil, false},
		{"binary pad after full group", []string{`"a";r=0;t=1;pk=:YWJj=:`}, nil, false},
		{"binary one pad after two", []string{`"a";r=0;t=1;pk=:YQ=:`}, nil, false},
		{"binary lone char", []string{`"a";r=0;t=1;pk=:YWJjZ:`}, nil, false},
		{"bad boolean", []string{`"a";r=0;t=1;x=?2`}, nil, false},
		{"bad decimal", []string{`"a";r=0;t=1;x=1.2345`}, nil, false},
		{"bad display string", []string{`"a";r=0;t=1;x=%"%C3%A9"`}, nil, false},
		{"invalid UTF-8 display string", []string{`"a";r=0;t=1;x=%"%ff"`}, nil, false},
		{"date with decimal", []string{`"a";r=0;t=1;d=@1.5`}, nil, false},
		{"lone minus", []string{`"a";r=-;t=1`}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseRateLimit(c.lines)
			if ok != c.ok || !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v, %v", c.lines, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestRateLimitDelay(t *testing.T) {
	cases := []struct {
		lines []string
		want  time.Duration
		ok    bool
	}{
		{[]string{`"default";r=0;t=30`}, 30 * time.Second, true},
		{[]string{`"default";r=0;t=30, "daily";r=100;t=3600`}, 30 * time.Second, true},
		{[]string{`"default";r=0;t=30, "daily";r=0;t=3600`}, time.Hour, true},
		{[]string{`"default";r=0;t=30`, `"daily";r=0;t=3600`}, time.Hour, true},
		{[]string{`"a";r=0;t=0`}, 0, true},
		{[]string{`"default";r=5;t=30`}, 0, false},
		{[]string{`"default";r=0`}, 0, false},
		{[]string{`"default";t=30`}, 0, false},
		{[]string{`"default";r=0;t=30, "daily";r=-1;t=3600`}, 0, false}, // malformed: ignored whole
		{[]string{`"default";r=0;t=30,`}, 0, false},
		{nil, 0, false},
	}
	for _, c := range cases {
		got, ok := RateLimitDelay(c.lines)
		if ok != c.ok || got != c.want {
			t.Errorf("RateLimitDelay(%q) = %v, %v; want %v, %v", c.lines, got, ok, c.want, c.ok)
		}
	}
}
