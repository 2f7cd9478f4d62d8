//go:build !race

package tests

// raceBuild: the tests run without -race (see race_test.go).
const raceBuild = false
