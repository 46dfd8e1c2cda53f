package config

import (
	"errors"
	"fmt"
	"io"
)

// Check loads the configuration at path the way the broker would and
// writes the verdict to w: "ok: N tenants, M policies" for a valid file,
// or every problem, one per line, as "file:line:column: path: message".
// It returns nil for a valid file, an error wrapping ErrInvalid for an
// invalid one, and the I/O error when the file cannot be read. It backs
// "broker config check FILE".
//
// Each credential's secrets are read to check that they exist; no value is
// ever written.
func Check(path string, w io.Writer, opts ...LoadOption) error {
	d, err := Load(path, opts...)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(w, p.Error())
			}
			return fmt.Errorf("%s: %d problem(s): %w", path, len(ce.Problems), ErrInvalid)
		}
		fmt.Fprintln(w, err)
		return err
	}
	fmt.Fprintf(w, "ok: %d tenants, %d policies\n", d.Len(), d.PolicyCount())
	return nil
}
