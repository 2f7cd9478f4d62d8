package stack

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	evstack "github.com/rayito-dev/rayito/events/stack"
)

// DefaultPrefix is --prefix's default: the key prefix of the Lambda zips.
const DefaultPrefix = "rayito/stacks/events/"

// zipTime is the modification time of every zip entry: the same binary
// gives the same zip.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// Compiled on first use (sync.OnceValue): a counted repetition such as
	// {1,512} compiles to a program of hundreds of KB, which every start of
	// the CLI would otherwise build.
	logGroupRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[.\-_/#A-Za-z0-9]{1,512}$`) })
	prefixRE   = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/-]*$`)
)

// deploySpec is deploy's validated command line.
type deploySpec struct {
	name, bucket, logGroup, prefix, dir string
	reconcile, retention                int // 0: not given
	waitTimeout                         time.Duration
	json                                bool
}

// deployOut is `stack deploy events --json`.
type deployOut struct {
	StackName string            `json:"stack_name"`
	StackID   string            `json:"stack_id"`
	Region    string            `json:"region"`
	Action    string            `json:"action"` // create, update or none
	Status    string            `json:"status"`
	Code      codeOut           `json:"code"`
	Outputs   map[string]string `json:"outputs"`
}

type codeOut struct {
	Bucket string   `json:"bucket"`
	Prefix string   `json:"prefix"` // the CodePrefix parameter
	SHA256 string   `json:"sha256"`
	Zips   []zipOut `json:"zips"`
}

type zipOut struct {
	Function string `json:"function"`
	Artifact string `json:"artifact"` // the binary's file name
	Key      string `json:"key"`
	SHA256   string `json:"sha256"`
	Bytes    int    `json:"bytes"`
	Uploaded bool   `json:"uploaded"`
}

func deployCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "deploy",
		Usage: "create or update a stack in your AWS account",
		Commands: []*cli.Command{{
			Name:  "events",
			Usage: "create or update the events stack (lifecycle events and webhooks), and wait for it",
			Description: "Finds in --artifacts the three Lambdas `make dist` builds (rayito-events-<function>-<version>-\n" +
				"linux-arm64 for forwarder, deliverer and reconciler), packs each as a deterministic zip holding\n" +
				"one executable `bootstrap`, uploads them to s3://BUCKET/PREFIX<sha256>/ unless they are there\n" +
				"(the sha256 of the three zips), then creates the stack or updates it with the template of the\n" +
				"events module (events/stack), and waits until it ends, showing progress on stderr. It prints the\n" +
				"stack's outputs: the table, the queues and the caller policies (docs/events-stack.md).\n" +
				"\n" +
				"--reconcile-minutes and --log-retention-days default to the template's defaults (5, 30) on\n" +
				"create and keep the stack's values on update. A stack with an operation in progress, or whose\n" +
				"creation failed, is refused before anything is uploaded.\n" +
				"\n" +
				"Exit codes: 0 the stack is CREATE_COMPLETE or UPDATE_COMPLETE (or had nothing to update), 1 a\n" +
				"failure (a failed or rolled-back stack names its first failed resource), 2 usage, 124\n" +
				"--wait-timeout passed (the operation goes on).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "bucket", Usage: "the S3 `BUCKET` for the Lambda zips, in the stack's region (required)"},
				&cli.StringFlag{Name: "log-group", Usage: "the image's log `GROUP` rayd writes to, e.g. /rayito/rayito-base (required)"},
				&cli.StringFlag{Name: "artifacts", Value: "dist", Usage: "the `DIR` holding the rayito-events-* binaries of `make dist`"},
				&cli.StringFlag{Name: "prefix", Value: DefaultPrefix, Usage: "the key `PREFIX` of the zips in the bucket"},
				nameFlag(),
				&cli.IntFlag{Name: "reconcile-minutes", HideDefault: true, Usage: fmt.Sprintf("run the reconciler every `M` minutes, %d to %d (default: %d; on update: unchanged)",
					evstack.ReconcileMinutesMin, evstack.ReconcileMinutesMax, evstack.ReconcileMinutesDefault)},
				&cli.IntFlag{Name: "log-retention-days", HideDefault: true, Usage: fmt.Sprintf("keep the functions' own logs `D` days: %s (default: %d; on update: unchanged)",
					joinInts(evstack.LogRetentionDays), evstack.LogRetentionDaysDefault)},
				&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "wait at most this `DURATION` for the stack"},
				cliutil.JSONFlag(),
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				s, err := parseDeploy(cmd)
				if err != nil {
					return err
				}
				return cliutil.Interrupted(ctx, deploy(ctx, f, s))
			},
		}},
	}
}

// parseDeploy checks the whole command line before anything is read or
// sent: every mistake is a usage error (exit 2).
func parseDeploy(cmd *cli.Command) (*deploySpec, error) {
	if err := noArgs(cmd); err != nil {
		return nil, err
	}
	name, err := stackName(cmd)
	if err != nil {
		return nil, err
	}
	s := &deploySpec{
		name: name, bucket: cmd.String("bucket"), logGroup: cmd.String("log-group"),
		prefix: cmd.String("prefix"), dir: cmd.String("artifacts"),
		waitTimeout: cmd.Duration("wait-timeout"), json: cmd.Bool("json"),
	}
	switch {
	case s.bucket == "":
		return nil, cliutil.Usagef("--bucket is required: the S3 bucket the Lambda zips go to")
	case !bucketRE.MatchString(s.bucket):
		return nil, cliutil.Usagef("--bucket %q is not an S3 bucket name", s.bucket)
	case s.logGroup == "":
		return nil, cliutil.Usagef("--log-group is required: the log group the image's rayd writes to (e.g. /rayito/rayito-base)")
	case !logGroupRE().MatchString(s.logGroup):
		return nil, cliutil.Usagef("--log-group %q is not a log group name (1 to 512 of A-Z a-z 0-9 . - _ / #)", s.logGroup)
	case s.dir == "":
		return nil, cliutil.Usagef("--artifacts is empty")
	case s.waitTimeout <= 0:
		return nil, cliutil.Usagef("--wait-timeout must be positive")
	}
	s.prefix = strings.TrimPrefix(s.prefix, "/")
	if s.prefix != "" && !strings.HasSuffix(s.prefix, "/") {
		s.prefix += "/"
	}
	if !prefixRE.MatchString(s.prefix) || strings.Contains(s.prefix, "//") || slices.Contains(strings.Split(s.prefix, "/"), "..") || len(s.prefix) > 512 {
		return nil, cliutil.Usagef("--prefix %q: use letters, digits and !_.*'()-, separated by /", cmd.String("prefix"))
	}
	if cmd.IsSet("reconcile-minutes") {
		s.reconcile = int(cmd.Int("reconcile-minutes"))
		if s.reconcile < evstack.ReconcileMinutesMin || s.reconcile > evstack.ReconcileMinutesMax {
			return nil, cliutil.Usagef("--reconcile-minutes %d: from %d to %d", s.reconcile, evstack.ReconcileMinutesMin, evstack.ReconcileMinutesMax)
		}
	}
	if cmd.IsSet("log-retention-days") {
		s.retention = int(cmd.Int("log-retention-days"))
		if !slices.Contains(evstack.LogRetentionDays, s.retention) {
			return nil, cliutil.Usagef("--log-retention-days %d: one of %s", s.retention, joinInts(evstack.LogRetentionDays))
		}
	}
	return s, nil
}

// ArtifactError is a --artifacts directory without exactly one binary of
// a function: Found lists the candidates (none, or several).
type ArtifactError struct {
	Dir, Function string
	Found         []string
}

func (e *ArtifactError) Error() string {
	pattern := artifactPattern(e.Function)
	if len(e.Found) == 0 {
		return fmt.Sprintf("no %s in %s: build them with `make dist COMPONENTS=events`, or give --artifacts", pattern, e.Dir)
	}
	return fmt.Sprintf("%d files match %s in %s (%s): keep one", len(e.Found), pattern, e.Dir, strings.Join(e.Found, ", "))
}

func artifactPattern(fn string) string { return "rayito-events-" + fn + "-*-linux-arm64" }

// BinaryError is an artifact that is not a linux arm64 executable.
type BinaryError struct {
	Path, Why string
}

func (e *BinaryError) Error() string { return e.Path + ": " + e.Why }

// lambdaZip is one function's packed code.
type lambdaZip struct {
	function, artifact string
	data               []byte
	sha256             string // hex
}

// findArtifacts returns, for each function in order, the one file of dir
// named rayito-events-<function>-<version>-linux-arm64.
func findArtifacts(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, cliutil.Usagef("--artifacts %s: no such directory (build it with `make dist COMPONENTS=events`)", dir)
	case err != nil:
		return nil, err
	case !st.IsDir():
		return nil, cliutil.Usagef("--artifacts %s: not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(evstack.Functions))
	for _, fn := range evstack.Functions {
		var found []string
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), "rayito-events-"+fn+"-")
			if ok && strings.HasSuffix(rest, "-linux-arm64") && len(rest) > len("-linux-arm64") {
				found = append(found, e.Name())
			}
		}
		if len(found) != 1 {
			return nil, cliutil.Usage(&ArtifactError{Dir: dir, Function: fn, Found: found})
		}
		paths = append(paths, filepath.Join(dir, found[0]))
	}
	return paths, nil
}

// readBinary reads path, a regular file holding a linux arm64 ELF
// executable.
func readBinary(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, cliutil.Usage(&BinaryError{Path: path, Why: "not a regular file"})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, cliutil.Usage(&BinaryError{Path: path, Why: "not an ELF executable"})
	}
	defer ef.Close()
	if ef.Machine != elf.EM_AARCH64 || ef.Class != elf.ELFCLASS64 || ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, cliutil.Usage(&BinaryError{Path: path, Why: fmt.Sprintf("a %s %s, not a linux arm64 executable", ef.Machine, ef.Type)})
	}
	return data, nil
}

// packZip returns the zip the template expects of a function: one entry,
// bootstrap, mode 0755, at a fixed time. The same binary gives the same
// bytes.
func packZip(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: evstack.ZipEntry, Method: zip.Deflate, Modified: zipTime}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(bin); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// packAll reads and packs the three functions of dir, and returns them
// with the code's sha256: that of "<function>.zip <sha256>\n" for each, in
// order (the zips' own SHA256SUMS).
func packAll(dir string) ([]lambdaZip, string, error) {
	paths, err := findArtifacts(dir)
	if err != nil {
		return nil, "", err
	}
	zips := make([]lambdaZip, len(paths))
	sums := sha256.New()
	for i, p := range paths {
		bin, err := readBinary(p)
		if err != nil {
			return nil, "", err
		}
		data, err := packZip(bin)
		if err != nil {
			return nil, "", err
		}
		sum := sha256.Sum256(data)
		fn := evstack.Functions[i]
		zips[i] = lambdaZip{function: fn, artifact: filepath.Base(p), data: data, sha256: hex.EncodeToString(sum[:])}
		fmt.Fprintf(sums, "%s.zip %s\n", fn, zips[i].sha256)
	}
	return zips, hex.EncodeToString(sums.Sum(nil)), nil
}

func deploy(ctx context.Context, f *cliutil.Factory, s *deploySpec) error {
	zips, codeSHA, err := packAll(s.dir)
	if err != nil {
		return err
	}
	aw, err := loadAWS(ctx)
	if err != nil {
		return err
	}

	// The stack as it is: absent (create), busy or broken (refuse before
	// uploading anything), or there (update).
	existing, err := cfnstack.Describe(ctx, aw.cfn, s.name)
	switch {
	case errors.Is(err, cfnstack.ErrStackMissing):
		existing = nil
	case err != nil:
		return err
	default:
		if err := canUpdate(s.name, existing); err != nil {
			return err
		}
	}

	codePrefix := s.prefix + codeSHA + "/"
	out := deployOut{StackName: s.name, Region: aw.region, Outputs: map[string]string{},
		Code: codeOut{Bucket: s.bucket, Prefix: codePrefix, SHA256: codeSHA}}
	for _, z := range zips {
		key := evstack.ZipKey(codePrefix, z.function)
		uploaded, err := upload(ctx, aw.env.S3, s.bucket, key, z)
		if err != nil {
			return err
		}
		where := "s3://" + s.bucket + "/" + key
		if uploaded {
			fmt.Fprintf(f.IO.Err, "%s: uploaded %s (%d bytes)\n", z.function, where, len(z.data))
		} else {
			fmt.Fprintf(f.IO.Err, "%s: %s already in S3, not uploaded\n", z.function, where)
		}
		out.Code.Zips = append(out.Code.Zips, zipOut{Function: z.function, Artifact: z.artifact, Key: key,
			SHA256: z.sha256, Bytes: len(z.data), Uploaded: uploaded})
	}

	res, err := cfnstack.Apply(ctx, aw.cfn, cfnstack.ApplyInput{
		Name: s.name, Template: string(evstack.Template), Parameters: parameters(s, codePrefix, existing != nil),
		Capabilities: capabilities(), Existing: existing, WaitTimeout: s.waitTimeout, Progress: f.IO.Err,
		Commands: commands(s.name),
	})
	var te *cfnstack.TimeoutError
	if errors.As(err, &te) {
		return timeoutExit(s.name, s.waitTimeout, te.Status, "the "+te.Action)
	}
	if err != nil {
		return err
	}
	out.StackID, out.Action, out.Status, out.Outputs = res.StackID, res.Action, string(res.Stack.StackStatus), cfnstack.Outputs(res.Stack)
	return printDeploy(f, s, out)
}

// commands are what a refusal of stack name tells to run.
func commands(name string) cfnstack.Commands {
	return cfnstack.Commands{Status: "rayito stack status events", Destroy: "rayito stack destroy events --stack-name " + name}
}

func printDeploy(f *cliutil.Factory, s *deploySpec, out deployOut) error {
	if s.json {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	fmt.Fprintf(f.IO.Err, "stack %s: %s\n", s.name, out.Status)
	printOutputs(f.IO.Out, out.Outputs)
	return nil
}

// canUpdate refuses a stack that is not the events stack, that has an
// operation in progress, or that cannot be updated.
func canUpdate(name string, st *cfntypes.Stack) error {
	if err := cfnstack.CanUpdate(name, st, commands(name)); err != nil {
		return err
	}
	if !strings.HasPrefix(aws.ToString(st.Description), evstack.DescriptionPrefix) {
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(st.StackStatus),
			Detail: "it is not an events stack (another template): choose another --stack-name; nothing was changed"}
	}
	return nil
}

func capabilities() []cfntypes.Capability {
	cs := make([]cfntypes.Capability, len(evstack.Capabilities))
	for i, c := range evstack.Capabilities {
		cs[i] = cfntypes.Capability(c)
	}
	return cs
}

// parameters are every parameter of the template: the optional numbers
// keep the stack's values on an update unless given, and are the
// template's defaults on a create.
func parameters(s *deploySpec, codePrefix string, update bool) []cfntypes.Parameter {
	num := func(key string, v, def int) cfntypes.Parameter {
		switch {
		case v != 0:
			return cfntypes.Parameter{ParameterKey: aws.String(key), ParameterValue: aws.String(strconv.Itoa(v))}
		case update:
			return cfntypes.Parameter{ParameterKey: aws.String(key), UsePreviousValue: aws.Bool(true)}
		}
		return cfntypes.Parameter{ParameterKey: aws.String(key), ParameterValue: aws.String(strconv.Itoa(def))}
	}
	return []cfntypes.Parameter{
		{ParameterKey: aws.String(evstack.ParamImageLogGroupName), ParameterValue: aws.String(s.logGroup)},
		{ParameterKey: aws.String(evstack.ParamCodeBucket), ParameterValue: aws.String(s.bucket)},
		{ParameterKey: aws.String(evstack.ParamCodePrefix), ParameterValue: aws.String(codePrefix)},
		num(evstack.ParamReconcileMinutes, s.reconcile, evstack.ReconcileMinutesDefault),
		num(evstack.ParamLogRetentionDays, s.retention, evstack.LogRetentionDaysDefault),
	}
}

// upload puts z at key unless an object is there already (the key holds
// the code's sha256), and reports whether it uploaded (awsenv.PutOnce).
func upload(ctx context.Context, c *s3.Client, bucket, key string, z lambdaZip) (bool, error) {
	return awsenv.PutOnce(ctx, c, bucket, key, awsenv.Object{Body: bytes.NewReader(z.data), Size: int64(len(z.data)), SHA256: z.sha256, ContentType: "application/zip"}, "")
}

// joinInts is "1, 3, 5".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
