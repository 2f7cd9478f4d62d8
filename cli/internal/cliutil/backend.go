package cliutil

import (
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// The marks that end the usage of a flag (or a command) meaningful on one
// backend only (RAYITO_BACKEND), so that every help screen says it the
// same way.
const (
	AWSOnly   = "(AWS only)"
	LocalOnly = "(local only)"
)

// The local platform's templates (images): LocalTemplate, the SDK's
// default there, and LocalRootTemplate (root allowed). --template and
// RAYITO_TEMPLATE may name them on the local backend; any other name is
// refused there.
const (
	LocalTemplate     = rayito.LocalTemplate
	LocalRootTemplate = rayito.LocalRootTemplate
)

// OnlyOn is the backend whose mark ends fl's usage ("" for none).
func OnlyOn(fl cli.Flag) rayito.Backend {
	df, ok := fl.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	switch u := strings.TrimSpace(df.GetUsage()); {
	case strings.HasSuffix(u, " "+AWSOnly):
		return rayito.BackendAWS
	case strings.HasSuffix(u, " "+LocalOnly):
		return rayito.BackendLocal
	}
	return ""
}

// CheckCreateOptions refuses, before anything is created, what the
// backend b cannot honour among the options of a command that creates a
// sandbox (create, run): every flag of cmd the user set whose usage is
// marked for the other backend, and on the local backend a template
// (--template, else RAYITO_TEMPLATE from getenv) other than its own. The
// errors are usage errors naming the flag or variable.
func CheckCreateOptions(cmd *cli.Command, b rayito.Backend, getenv func(string) string) error {
	for _, fl := range cmd.Flags {
		name := fl.Names()[0]
		if !cmd.IsSet(name) {
			continue
		}
		switch only := OnlyOn(fl); {
		case only == rayito.BackendAWS && b == rayito.BackendLocal:
			return Usagef("--%s is AWS only: the local platform cannot honour it (RAYITO_BACKEND is local)", name)
		case only == rayito.BackendLocal && b == rayito.BackendAWS:
			return Usagef("--%s is for the local platform only (RAYITO_BACKEND is aws)", name)
		}
	}
	if cmd.IsSet("template") {
		return CheckTemplate(b, "--template", cmd.String("template"))
	}
	return CheckTemplate(b, rayito.EnvTemplate, getenv(rayito.EnvTemplate))
}

// CheckTemplate refuses, on the local backend, a template t that can name
// neither LocalTemplate, LocalRootTemplate nor a template built on the
// platform (rayito template build): a usage error naming where it came
// from, a flag ("--template") or an environment variable
// ("RAYITO_TEMPLATE"). Whether a valid name was built is the platform's
// answer.
func CheckTemplate(b rayito.Backend, from, t string) error {
	if b != rayito.BackendLocal || t == "" || t == LocalTemplate || t == LocalRootTemplate || ptemplate.ValidName(t) {
		return nil
	}
	if strings.HasPrefix(from, "-") {
		return Usagef("%s %s: the local platform has %s, %s (root allowed) and the templates built on it (rayito template list), named with a-z, 0-9, - and _; an image ARN is AWS only (RAYITO_BACKEND=aws)", from, quoteShort(t), LocalTemplate, LocalRootTemplate)
	}
	return EnvUsagef("%s=%s: the local platform has %s, %s (root allowed) and the templates built on it (rayito template list), named with a-z, 0-9, - and _; an image ARN is AWS only (unset it, or set RAYITO_BACKEND=aws)", from, quoteShort(t), LocalTemplate, LocalRootTemplate)
}

// quoteShort quotes s for a message, cut to a readable length.
func quoteShort(s string) string {
	if len(s) > maxShownID {
		s = s[:maxShownID] + "…"
	}
	if plainID.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}
