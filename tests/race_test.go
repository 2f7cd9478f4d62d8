//go:build race

package tests

// raceBuild: the tests run with -race, and so does the sandbox binary
// they build (sandboxBin).
const raceBuild = true
