package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// secretCommand is `rayito secret`: the secrets sandboxes get with
// secrets.WithSecrets. The store is --store, else aws when RAYITO_BACKEND
// is aws, else local (--dir, default secrets.DefaultLocalDir). A
// value is read from stdin or from the variable --from-env names, never
// from a flag; only `get --reveal` prints one.
func secretCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "secret",
		Usage: "manage the secrets sandboxes can get as environment variables",
		Description: "The store is --store (local or aws); the default is aws when RAYITO_BACKEND is aws, else local\n" +
			"(files under --dir, default RAYITO_SECRETS_DIR, else $XDG_CONFIG_HOME/rayito/secrets, else\n" +
			"~/.config/rayito/secrets). Values are read from stdin or from --from-env VAR, byte for byte.",
		Commands: []*cli.Command{
			secretPutCommand(f, "create", "store a new secret"),
			secretPutCommand(f, "update", "store a new version of a secret"),
			secretGetCommand(f),
			secretListCommand(f),
			secretDeleteCommand(f),
		},
	}
}

func secretStoreFlags(more ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "store", Usage: "the secret `STORE`: local or aws (default: aws when RAYITO_BACKEND is aws, else local)"},
		&cli.StringFlag{Name: "dir", Usage: "the local store's `DIR` (default: RAYITO_SECRETS_DIR, else ~/.config/rayito/secrets)"},
		cliutil.JSONFlag(),
	}, more...)
}

// secretStore opens the store the flags and the environment pick.
func secretStore(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) (secrets.Store, error) {
	return platform.SecretStore(ctx, f.Getenv, cmd.String("store"), cmd.String("dir"))
}

// secretName is the one NAME argument, checked.
func secretName(cmd *cli.Command) (string, error) {
	if cmd.Args().Len() != 1 {
		if cmd.Args().Len() == 0 {
			return "", cliutil.Usagef("missing the secret name")
		}
		return "", cliutil.Usagef("want one secret name, got %d arguments", cmd.Args().Len())
	}
	name := cmd.Args().First()
	if err := secrets.ValidateName(name); err != nil {
		return "", cliutil.Usage(err)
	}
	return name, nil
}

// describeSecretErr words a store's error with the secret's name.
func describeSecretErr(name string, err error) error {
	switch {
	case errors.Is(err, rayito.ErrSecretNotFound):
		return fmt.Errorf("secret %s not found", name)
	case errors.Is(err, rayito.ErrSecretExists):
		return fmt.Errorf("secret %s already exists (use 'rayito secret update')", name)
	}
	return err
}

type secretJSON struct {
	Name        string    `json:"name"`
	Version     string    `json:"version,omitempty"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	Value       *string   `json:"value,omitempty"`
	ValueBase64 *string   `json:"value_base64,omitempty"`
}

func secretInfoJSON(in secrets.Info) secretJSON {
	return secretJSON{Name: in.Name, Version: in.Version, CreatedAt: in.CreatedAt}
}

func secretPutCommand(f *cliutil.Factory, name, usage string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage + " (the value from stdin, or from --from-env)",
		ArgsUsage: "NAME",
		Flags:     secretStoreFlags(&cli.StringFlag{Name: "from-env", Usage: "read the value from the environment variable `VAR`"}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			sname, err := secretName(cmd)
			if err != nil {
				return err
			}
			var value []byte
			if v := cmd.String("from-env"); v != "" {
				value = []byte(f.Getenv(v))
				if len(value) == 0 {
					return cliutil.Usagef("--from-env: %s is unset or empty", v)
				}
			} else {
				if cliutil.IsTerminal(f.IO.In) {
					return cliutil.Usagef("pipe the value on stdin, or use --from-env VAR")
				}
				value, err = io.ReadAll(io.LimitReader(f.IO.In, secrets.MaxValueBytes+1))
				if err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				if len(value) == 0 {
					return cliutil.Usagef("the value on stdin is empty")
				}
			}
			if len(value) > secrets.MaxValueBytes {
				return cliutil.Usagef("the value is larger than %d bytes", secrets.MaxValueBytes)
			}
			store, err := secretStore(ctx, f, cmd)
			if err != nil {
				return err
			}
			put := store.CreateSecret
			if name == "update" {
				put = store.UpdateSecret
			}
			info, err := put(ctx, sname, value)
			if err != nil {
				return describeSecretErr(sname, err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, secretInfoJSON(info))
			}
			verb := "created"
			if name == "update" {
				verb = "updated"
			}
			_, err = fmt.Fprintf(f.IO.Out, "%s secret %s (version %s)\n", verb, info.Name, info.Version)
			return err
		},
	}
}

func secretGetCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "describe a secret; --reveal prints its value",
		ArgsUsage: "NAME",
		Flags: secretStoreFlags(
			&cli.StringFlag{Name: "version", Usage: "the `VERSION` (default: the current one)"},
			&cli.BoolFlag{Name: "reveal", Usage: "print the value on stdout (as it is, with --json as value or value_base64)"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			sname, err := secretName(cmd)
			if err != nil {
				return err
			}
			store, err := secretStore(ctx, f, cmd)
			if err != nil {
				return err
			}
			sec, err := store.GetSecret(ctx, secrets.Ref{Name: sname, Version: cmd.String("version")})
			if err != nil {
				return describeSecretErr(sname, err)
			}
			reveal := cmd.Bool("reveal")
			if cmd.Bool("json") {
				out := secretInfoJSON(sec.Info)
				if reveal {
					v := sec.Value()
					if utf8.Valid(v) {
						s := string(v)
						out.Value = &s
					} else {
						s := base64.StdEncoding.EncodeToString(v)
						out.ValueBase64 = &s
					}
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			if reveal {
				_, err := f.IO.Out.Write(sec.Value())
				return err
			}
			_, err = fmt.Fprintf(f.IO.Out, "name:     %s\nversion:  %s\ncreated:  %s\n", sec.Name, sec.Version, createdText(sec.CreatedAt))
			return err
		},
	}
}

func createdText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func secretListCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the secrets (names and current versions, never values)",
		Flags: secretStoreFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return cliutil.Usagef("list takes no arguments")
			}
			store, err := secretStore(ctx, f, cmd)
			if err != nil {
				return err
			}
			infos, err := store.ListSecrets(ctx)
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				out := make([]secretJSON, 0, len(infos))
				for _, in := range infos {
					out = append(out, secretInfoJSON(in))
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tCREATED")
			for _, in := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, in.Version, createdText(in.CreatedAt))
			}
			return tw.Flush()
		},
	}
}

func secretDeleteCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a secret and all its versions",
		ArgsUsage: "NAME",
		Flags:     secretStoreFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			sname, err := secretName(cmd)
			if err != nil {
				return err
			}
			store, err := secretStore(ctx, f, cmd)
			if err != nil {
				return err
			}
			if err := store.DeleteSecret(ctx, sname); err != nil {
				return describeSecretErr(sname, err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]string{"deleted": sname})
			}
			_, err = fmt.Fprintf(f.IO.Out, "deleted secret %s\n", sname)
			return err
		},
	}
}
