// Package version holds rayd's version, reported by Health.
package version

// Version is rayd's semantic version; release builds may override it with
// -ldflags "-X github.com/rayito-dev/rayito/rayd/internal/version.Version=…".
var Version = "0.1.0-dev"
