package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// bucketFlag names the transfer bucket on AWS.
func bucketFlag() cli.Flag {
	return &cli.StringFlag{Name: "bucket", Usage: "the transfer bucket, `s3://BUCKET[/PREFIX]` " + cliutil.AWSOnly}
}

// transferOptions are the SDK options of --bucket.
func transferOptions(cmd *cli.Command) ([]rayito.Option, error) {
	b := cmd.String("bucket")
	if b == "" {
		return nil, nil
	}
	p, err := rayito.ParseS3Prefix(b)
	if err != nil || p.Bucket == "" {
		return nil, cliutil.Usagef("--bucket is s3://BUCKET or s3://BUCKET/PREFIX")
	}
	return []rayito.Option{rayito.WithTransferBucket(rayito.TransferBucket{Bucket: p.Bucket, Prefix: p.Prefix})}, nil
}

type uploadURLOut struct {
	URL        string            `json:"url"`
	Method     string            `json:"method"`
	Headers    map[string]string `json:"headers"`
	ExpiresAt  time.Time         `json:"expires_at"`
	Path       string            `json:"path"`
	TransferID string            `json:"transfer_id"`
}

type downloadURLOut struct {
	URL       string    `json:"url"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	ExpiresAt time.Time `json:"expires_at"`
}

func urlCommand(f *cliutil.Factory) *cli.Command {
	common := func() []cli.Flag {
		return []cli.Flag{
			&cli.DurationFlag{Name: "expires", Value: rayito.DefaultURLExpiry, Usage: "how long the URL stays valid, a `DURATION` up to 24h"},
			bucketFlag(), tokenFlag(), cliutil.JSONFlag(),
		}
	}
	return &cli.Command{
		Name:  "url",
		Usage: "hand out a pre-signed URL to upload a file into, or download one from, a sandbox",
		Description: "upload prints a URL anyone holding it may PUT one file to (curl -T FILE URL) until it expires;\n" +
			"the sandbox then imports it into PATH, once. download exports PATH and prints a URL to GET it.\n" +
			"The URLs are secrets: they are printed, never logged. On the local platform they point at\n" +
			"its own store (served to its owner only); on AWS at --bucket.",
		Commands: []*cli.Command{
			{
				Name:          "upload",
				Usage:         "print a URL to PUT one file that the sandbox imports into PATH",
				ArgsUsage:     "ID PATH",
				ShellComplete: completeIDs(f, firstArg),
				Flags: append(common(),
					&cli.StringFlag{Name: "max-bytes", Usage: "the largest file accepted, in `BYTES` (default and at most 5 GiB)"},
					&cli.StringFlag{Name: "sha256", Usage: "the file's expected `SHA256`: another one is refused"},
					&cli.BoolFlag{Name: "wait", Usage: "print the URL, then wait until the file is imported (not with --json)"},
				),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					sbx, path, err := urlArgs(ctx, cmd, f)
					if err != nil {
						return err
					}
					opts := []rayito.FileOption{rayito.WithURLExpiry(cmd.Duration("expires"))}
					if s := cmd.String("max-bytes"); s != "" {
						n, err := strconv.ParseUint(s, 10, 64)
						if err != nil || n == 0 {
							return cliutil.Usagef("--max-bytes is a positive number of bytes")
						}
						opts = append(opts, rayito.WithMaxBytes(n))
					}
					if s := cmd.String("sha256"); s != "" {
						opts = append(opts, rayito.WithExpectedSHA256(s))
					}
					tk, err := sbx.Files.UploadURL(ctx, path, opts...)
					if err != nil {
						return cliutil.OnSandbox(sbx.ID(), err)
					}
					if cmd.Bool("wait") && cmd.Bool("json") {
						return cliutil.Usagef("--wait prints the URL first, in text: not with --json")
					}
					out := uploadURLOut{URL: tk.URL, Method: tk.Method, Headers: tk.Headers, ExpiresAt: tk.ExpiresAt.UTC(), Path: tk.Path, TransferID: tk.TransferID}
					if !cmd.Bool("wait") {
						return printUploadURL(f, cmd, out)
					}
					fmt.Fprintln(f.IO.Out, tk.URL)
					fmt.Fprintf(f.IO.Err, "rayito: PUT the file to the URL above (until %s); waiting for it...\n", out.ExpiresAt.Format(time.RFC3339))
					e, err := tk.Wait(ctx)
					if err != nil {
						return cliutil.OnSandbox(sbx.ID(), err)
					}
					sum := ""
					if st, _ := tk.Status(ctx); st != nil {
						sum = st.SHA256
					}
					fmt.Fprintf(f.IO.Err, "rayito: imported %s (%d bytes, sha256 %s)\n", e.Path, e.Size, sum)
					return nil
				},
			},
			{
				Name:          "download",
				Usage:         "export PATH and print a URL to GET it",
				ArgsUsage:     "ID PATH",
				ShellComplete: completeIDs(f, firstArg),
				Flags:         common(),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					sbx, path, err := urlArgs(ctx, cmd, f)
					if err != nil {
						return err
					}
					link, err := sbx.Files.DownloadURL(ctx, path, rayito.WithURLExpiry(cmd.Duration("expires")))
					if err != nil {
						return cliutil.OnSandbox(sbx.ID(), err)
					}
					out := downloadURLOut{URL: link.URL, Size: link.Size, SHA256: link.SHA256, ExpiresAt: link.ExpiresAt.UTC()}
					if cmd.Bool("json") {
						return cliutil.PrintJSON(f.IO.Out, out)
					}
					fmt.Fprintln(f.IO.Out, link.URL)
					fmt.Fprintf(f.IO.Err, "rayito: %d bytes, sha256 %s; the URL expires at %s\n", link.Size, link.SHA256, out.ExpiresAt.Format(time.RFC3339))
					return nil
				},
			},
		},
	}
}

func printUploadURL(f *cliutil.Factory, cmd *cli.Command, out uploadURLOut) error {
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	fmt.Fprintln(f.IO.Out, out.URL)
	fmt.Fprintf(f.IO.Err, "rayito: PUT the file to the URL above (curl -T FILE URL) until %s; the sandbox imports it into %s\n",
		out.ExpiresAt.Format(time.RFC3339), out.Path)
	return nil
}

// urlArgs checks ID PATH and --expires, and connects to the sandbox.
func urlArgs(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) (*rayito.Sandbox, string, error) {
	if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
		return nil, "", err
	}
	if err := cliutil.CheckArgs(cmd, 2, "the file's path in the sandbox"); err != nil {
		return nil, "", err
	}
	if n := cmd.Args().Len(); n > 2 {
		return nil, "", cliutil.Usagef("want ID and PATH, got %d arguments", n)
	}
	if d := cmd.Duration("expires"); d < time.Second || d > rayito.MaxURLExpiry {
		return nil, "", cliutil.Usagef("--expires must be between 1s and 24h, got %s", d)
	}
	path := cmd.Args().Get(1)
	if strings.TrimSpace(path) == "" {
		return nil, "", cliutil.Usagef("the path is empty")
	}
	extra, err := transferOptions(cmd)
	if err != nil {
		return nil, "", err
	}
	sbx, err := connectID(ctx, cmd, f, cmd.Args().Get(0), extra...)
	return sbx, path, err
}
