// Package layout holds no code: its test enforces the import rules that keep
// the architecture of docs/architecture.md true (which package may import
// which).
package layout
