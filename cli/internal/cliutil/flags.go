package cliutil

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"
)

// JSONFlag is the --json flag every command has (a new one for each
// command tree: flags hold parsed state).
func JSONFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON"} }

// ParseEnvs turns K=V flags into a map; a flag without '=' or with an
// empty name is a usage error naming flag ("--env").
func ParseEnvs(kvs []string) (map[string]string, error) { return ParseKVs("--env", kvs) }

// ParseKVs is ParseEnvs for any repeatable KEY=VALUE flag.
func ParseKVs(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, Usagef("%s wants NAME=VALUE, got an entry without a name or '='", flag)
		}
		out[k] = v
	}
	return out, nil
}

// IntPtr returns a pointer to n, for StopOnNthArg.
func IntPtr(n int) *int { return &n }

// CheckArgs fails with a usage error unless cmd has at least min args.
func CheckArgs(cmd *cli.Command, min int, what string) error {
	if cmd.Args().Len() < min {
		return Usagef("missing %s", what)
	}
	return nil
}

// sandboxID is the form of every sandbox id: "microvm-" and a UUID (the
// control plane's microvmId, on AWS and locally).
var sandboxID = regexp.MustCompile(`^microvm-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// maxShownID bounds how much of a malformed id is echoed.
const maxShownID = 80

// CheckID refuses what cannot be a sandbox id before any call is made, in
// the words a well-formed unknown id gets ("sandbox X not found").
func CheckID(id string) error {
	if sandboxID.MatchString(id) {
		return nil
	}
	shown := id
	if len(shown) > maxShownID {
		shown = shown[:maxShownID] + "…"
	}
	if !plainID.MatchString(shown) {
		shown = strconv.Quote(shown)
	}
	return &SandboxError{ID: shown, Err: errMalformedID}
}

// plainID is an id that can be echoed without quotes.
var plainID = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)

// errMalformedID: what was given cannot be a sandbox id.
var errMalformedID = errors.New("not a sandbox id")
