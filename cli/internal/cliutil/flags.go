package cliutil

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"
)

// JSONFlag is the --json flag every command has.
var JSONFlag = &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON"}

// ParseEnvs turns K=V flags into a map; a flag without '=' or with an
// empty name is a usage error.
func ParseEnvs(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, Usagef("--env wants NAME=VALUE, got an entry without a name or '='")
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
		return Usage(fmt.Errorf("%s: missing %s", cmd.FullName(), what))
	}
	return nil
}
