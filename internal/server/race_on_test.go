//go:build race

package server_test

// raceDetector reports a build with the race detector, whose
// instrumentation makes every frame larger.
const raceDetector = true
