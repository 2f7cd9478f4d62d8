// Package tests holds Rayito's cross-module tests: the Go SDK against an
// in-process local platform (localvm) with real sandboxes, and end-to-end
// tests that build and run the real rayito binary. They need root for
// isolated sandboxes; without root the platform runs sandboxes as plain
// processes and the isolation checks skip with a reason.
package tests
