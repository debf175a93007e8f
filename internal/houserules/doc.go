// Package houserules holds no code: its test reads the source tree and fails
// when a change breaks the layering the architecture depends on (which
// package may import which, what a pure package may touch). Each rule
// carries its reason, and a violation prints it.
//
// The rules are in rules_test.go; docs/architecture.md draws the layers
// they guard.
package houserules
