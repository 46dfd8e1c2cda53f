package suite

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// HandlerShare is what one gRPC handler of the suite's own process spent
// per call in a CPU profile taken while its rows ran: its CPU outside the
// HTTP client (net/http.(*Client).Do, which the broker and its baseline
// share), and the largest parts of that. It explains a missed overhead
// target from the run itself.
type HandlerShare struct {
	Variant string
	Handler string // the handler's function, as the profile names it
	Calls   int    // calls made while the profile ran (warm-up rounds too)
	// Samples is the number of the profile's samples with the handler on
	// their stack (those under the HTTP client too). None means the
	// handler is not in the profile: its name is wrong, and PerCall says
	// nothing.
	Samples int
	PerCall time.Duration
	Top     []FuncShare // the largest parts below the handler, per call
}

// FuncShare is one function's CPU per call (its cumulative time, below
// the handler, outside the HTTP client).
type FuncShare struct {
	Func    string
	PerCall time.Duration
}

// profileExclude is the subtree left out of every handler's share.
const profileExclude = "net/http.(*Client).Do"

// cpuCapture is a CPU profile of the suite's process in progress.
type cpuCapture struct {
	buf bytes.Buffer
	on  bool
}

// errNoProfile reports a capture that could not start: another CPU
// profile (benchsuite -cpuprofile) was running.
var errNoProfile = errors.New("no CPU profile: another one was running (benchsuite -cpuprofile)")

func startCPUCapture() *cpuCapture {
	c := &cpuCapture{}
	c.on = pprof.StartCPUProfile(&c.buf) == nil
	return c
}

func (c *cpuCapture) stop() (*profile.Profile, error) {
	if !c.on {
		return nil, errNoProfile
	}
	pprof.StopCPUProfile()
	return profile.Parse(&c.buf)
}

// handlerShares computes each handler's share in p: handlers maps a
// variant to its handler function and the calls it served.
func handlerShares(p *profile.Profile, handlers []HandlerShare, top int) []HandlerShare {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	if vi < 0 {
		return nil
	}
	out := slices.Clone(handlers)
	for i := range out {
		h := &out[i]
		var total int64
		cum := map[string]int64{}
		for _, s := range p.Sample {
			names := stackNames(s)
			at := slices.Index(names, h.Handler)
			if at < 0 {
				continue
			}
			h.Samples++
			if slices.Contains(names[:at], profileExclude) {
				continue
			}
			v := s.Value[vi]
			total += v
			seen := map[string]bool{}
			for _, n := range names[:at] {
				if !seen[n] {
					seen[n] = true
					cum[n] += v
				}
			}
		}
		if h.Calls == 0 {
			continue
		}
		h.PerCall = time.Duration(total / int64(h.Calls))
		for n, v := range cum {
			// Wrappers (most of the handler) and runtime internals below
			// the allocator say nothing a reader can act on.
			if v*10 >= total*6 || !informative(n) || time.Duration(v/int64(h.Calls)) < 500*time.Nanosecond {
				continue
			}
			h.Top = append(h.Top, FuncShare{Func: shortFunc(n), PerCall: time.Duration(v / int64(h.Calls))})
		}
		slices.SortFunc(h.Top, func(a, b FuncShare) int {
			if a.PerCall != b.PerCall {
				return int(b.PerCall - a.PerCall)
			}
			return strings.Compare(a.Func, b.Func)
		})
		h.Top = h.Top[:min(top, len(h.Top))]
	}
	return out
}

// stackNames returns a sample's function names, leaf first, inlined
// frames included.
func stackNames(s *profile.Sample) []string {
	var names []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				names = append(names, l.Function.Name)
			}
		}
	}
	return names
}

// informative reports whether a function is worth naming in a share: the
// project's, the context and timer machinery, and of the runtime only the
// allocator and stack growth.
func informative(name string) bool {
	switch name {
	case "runtime.mallocgc", "runtime.newstack", "runtime.gcAssistAlloc":
		return true
	}
	return strings.Contains(name, "retrybroker/retrybroker/") || strings.HasPrefix(name, "context.") ||
		strings.HasPrefix(name, "time.") || strings.HasPrefix(name, "github.com/prometheus/")
}

// shortFunc drops the module path and type arguments from a function name.
func shortFunc(name string) string {
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[…]")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	name = strings.TrimPrefix(b.String(), "github.com/retrybroker/retrybroker/")
	return strings.TrimPrefix(name, "internal/")
}

// sharesKnown reports whether hs are the broker's share and its
// baseline's, both found in the profile.
func sharesKnown(hs []HandlerShare) bool {
	return len(hs) == 2 && hs[0].Samples > 0 && hs[1].Samples > 0
}

// shareText is one handler's share in a sentence's words.
func shareText(h HandlerShare) string {
	if h.Samples == 0 {
		return fmt.Sprintf("%s: its handler %s is not in the profile, so its CPU per call is unknown", h.Variant, shortFunc(h.Handler))
	}
	parts := make([]string, 0, len(h.Top))
	for _, t := range h.Top {
		parts = append(parts, fmt.Sprintf("%s %s", t.Func, fmtDur(t.PerCall)))
	}
	s := fmt.Sprintf("%s: %s of CPU per call in its handler outside the HTTP client (%d calls)", h.Variant, fmtDur(h.PerCall), h.Calls)
	if len(parts) > 0 {
		s += "; the largest parts: " + strings.Join(parts, ", ")
	}
	return s
}
