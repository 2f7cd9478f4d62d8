// Package raydtest is test support for rayd's packages: a harness that
// serves any rayd-shaped server (package daemon's Daemon, through
// package daemontest) on loopback listeners, clients for each of its
// services with the access token, the child supervisor one test binary
// shares, and the stream collectors the service tests read with.
//
// Only tests import it (and package daemontest, itself only imported by
// tests): TestOnlyTestsImport fails when non-test code of the rayd
// module does.
package raydtest
