package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	build "github.com/rayito-dev/rayito/cli/internal/image"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// What publish declares in every image (contracts.md §2.2 and §2.5).
const (
	// HooksPort is where rayd serves the lifecycle hooks.
	HooksPort = 9000
	// DefaultPrefix is the key prefix of the artifacts in the bucket.
	DefaultPrefix = "images"
	// baseImageName is the managed base image every Rayito image builds on.
	baseImageName = "al2023-1"
	// TagRaydVersion and TagArtifactSHA256 are the tags publish puts on the
	// image: the rayd release this CLI ships with (doctor checks it against
	// the SDK) and the sha256 of the artifact of the last publish.
	TagRaydVersion    = "rayito:rayd-version"
	TagArtifactSHA256 = "rayito:artifact-sha256"
	// TagTemplate names the template an image is built from (rayito
	// template build on AWS); TagBuildSHA256 is the sha256 of that
	// build's whole configuration, artifact included: the same value on
	// a launchable image means there is nothing to build.
	TagTemplate    = "rayito:template"
	TagBuildSHA256 = "rayito:build-sha256"
	// TagManagedBy marks an image another tool owns (rayito-cdk): publish
	// refuses to change it.
	TagManagedBy = "rayito:managed-by"
	// ArtifactBucketEnv is --bucket's default.
	ArtifactBucketEnv = "RAYITO_ARTIFACT_BUCKET"
)

// Hook timeouts in seconds: what rayd declares (contracts.md §2.5). The
// service's undocumented default is about 1 s, so they are always sent.
const (
	runTimeout       = 30
	resumeTimeout    = 30
	suspendTimeout   = 30
	terminateTimeout = 10
	readyTimeout     = 600
	validateTimeout  = 600
)

var (
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// Compiled on first use (sync.OnceValue): a counted repetition such as
	// {1,512} compiles to a program of hundreds of KB, which every start of
	// the CLI would otherwise build.
	roleRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)
	})
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/-]*$`)
	baseVeRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	wordRE   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// publishOut is `image publish --json`.
type publishOut struct {
	ARN          string      `json:"arn"`
	Version      string      `json:"version"`
	Artifact     artifactOut `json:"artifact"`
	State        string      `json:"state"`
	VersionState string      `json:"version_state"`
	Status       string      `json:"status"`
}

type artifactOut struct {
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	SHA256   string `json:"sha256"`
	Uploaded bool   `json:"uploaded"`
}

// publishSpec is publish's validated command line.
type publishSpec struct {
	Target
	dir, zip string // one of them
	json     bool
}

func publishCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "build and publish a MicroVM image (a new version of it when it exists), and wait until it can launch",
		ArgsUsage: "NAME",
		Description: "Builds the artifact as `rayito image zip` does (or takes --zip), uploads it to\n" +
			"s3://BUCKET/PREFIX/rayito-image-<sha256>.zip unless that key already exists (the key is\n" +
			"the content's hash, so an unchanged tree is not uploaded again), then creates the image NAME\n" +
			"or, when it exists, builds a new version of it (UpdateMicrovmImage), with rayd's hooks on\n" +
			fmt.Sprintf("port %d and explicit hook timeouts. It waits until the image can launch: the image\n", HooksPort) +
			"CREATED or UPDATED and the new version SUCCESSFUL and ACTIVE (a build takes a few minutes),\n" +
			"showing progress on stderr, and prints the image's ARN: the value of RAYITO_TEMPLATE.\n" +
			"\n" +
			"The build role is the BuildRoleArn output of infra/iam.yaml; publishing needs the\n" +
			"ImagePublisherPolicy. AWS credentials and region come from the AWS SDK's usual chain.\n" +
			"The artifact is published as it is: check a downloaded release before you publish it.\n" +
			"\n" +
			"Exit codes: 0 the image can launch, 1 a failure (a failed build names its build id; a\n" +
			"build already in progress), 2 usage, 124 --wait-timeout passed (the build goes on).",
		Flags: append(TargetFlags(),
			&cli.StringFlag{Name: "dir", Value: "image", Usage: "the image's source `DIR`, built as `rayito image zip` does"},
			&cli.StringFlag{Name: "zip", Usage: "publish this artifact `FILE` (from `rayito image zip`) instead of building --dir"},
			cliutil.JSONFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			spec, err := parsePublish(f, cmd)
			if err != nil {
				return err
			}
			return cliutil.Interrupted(ctx, publish(ctx, f, spec))
		},
	}
}

// TargetFlags are the flags of Target: where the artifact goes and how
// the image is built (publish's, and template build's on AWS).
func TargetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "bucket", Usage: "the S3 `BUCKET` of the artifacts (default: " + ArtifactBucketEnv + ")"},
		&cli.StringFlag{Name: "prefix", Value: DefaultPrefix, Usage: "the key `PREFIX` of the artifacts in the bucket (infra/iam.yaml grants images/)"},
		&cli.StringFlag{Name: "build-role", Usage: "the IAM role `ARN` the service builds the image with (required)"},
		&cli.StringFlag{Name: "base-image-version", Value: "1", Usage: "the `VERSION` of the managed base image " + baseImageName},
		&cli.IntFlag{Name: "memory", Value: 2048, Usage: "the image's memory in `MiB`: " + joinInts(microvmsapi.MemorySizesMiB)},
		&cli.StringFlag{Name: "os-capabilities", Usage: "ALL grants the image's processes the additional OS `CAPABILITIES` (default: none)"},
		&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "wait at most this `DURATION` for the build"},
	}
}

// Target is where an artifact goes and how its image NAME is built: the
// validated TargetFlags.
type Target struct {
	name, bucket, prefix, role string
	baseVersion                string
	memory                     int
	osCapsAll                  bool
	waitTimeout                time.Duration
}

// Name is the image's name.
func (t *Target) Name() string { return t.name }

// Bucket is the artifacts' bucket.
func (t *Target) Bucket() string { return t.bucket }

// WaitTimeout is --wait-timeout.
func (t *Target) WaitTimeout() time.Duration { return t.waitTimeout }

// parsePublish checks the whole command line before anything is built or
// sent: every mistake is a usage error (exit 2).
func parsePublish(f *cliutil.Factory, cmd *cli.Command) (*publishSpec, error) {
	if cmd.Args().Len() != 1 {
		return nil, cliutil.Usagef("publish takes one argument, the image NAME")
	}
	t, err := ParseTarget(f, cmd, cmd.Args().First())
	if err != nil {
		return nil, err
	}
	s := &publishSpec{Target: *t, json: cmd.Bool("json")}
	if cmd.IsSet("zip") {
		if cmd.IsSet("dir") {
			return nil, cliutil.Usagef("--zip and --dir exclude each other")
		}
		s.zip = cmd.String("zip")
		if s.zip == "" {
			return nil, cliutil.Usagef("--zip is empty")
		}
	} else {
		s.dir = cmd.String("dir")
	}
	return s, nil
}

// ParseTarget checks the image name and TargetFlags: every mistake is a
// usage error (exit 2).
func ParseTarget(f *cliutil.Factory, cmd *cli.Command, name string) (*Target, error) {
	s := &Target{
		name:        name,
		bucket:      cmd.String("bucket"),
		prefix:      strings.Trim(cmd.String("prefix"), "/"),
		role:        cmd.String("build-role"),
		baseVersion: cmd.String("base-image-version"),
		memory:      int(cmd.Int("memory")),
		waitTimeout: cmd.Duration("wait-timeout"),
	}
	if !imageNameRE.MatchString(s.name) {
		return nil, cliutil.Usagef("image name %q: 1 to 64 letters, digits, '-' or '_'", s.name)
	}
	if !slices.Contains(microvmsapi.MemorySizesMiB, s.memory) {
		return nil, cliutil.Usagef("--memory %d: must be one of %s (MiB)", s.memory, joinInts(microvmsapi.MemorySizesMiB))
	}
	switch caps := cmd.String("os-capabilities"); strings.ToUpper(caps) {
	case "":
	case microvmsapi.CapabilityAll:
		s.osCapsAll = true
	default:
		return nil, cliutil.Usagef("--os-capabilities %q: the only value is ALL", caps)
	}
	if s.bucket == "" {
		s.bucket = f.Getenv(ArtifactBucketEnv)
		if s.bucket == "" {
			return nil, cliutil.Usagef("--bucket is required (or set %s)", ArtifactBucketEnv)
		}
		if !bucketRE.MatchString(s.bucket) {
			return nil, cliutil.EnvUsagef("%s is not an S3 bucket name", ArtifactBucketEnv)
		}
	} else if !bucketRE.MatchString(s.bucket) {
		return nil, cliutil.Usagef("--bucket %q is not an S3 bucket name", s.bucket)
	}
	if !prefixRE.MatchString(s.prefix) || strings.Contains(s.prefix, "//") || slices.Contains(strings.Split(s.prefix, "/"), "..") || len(s.prefix) > 512 {
		return nil, cliutil.Usagef("--prefix %q: use letters, digits and !_.*'()-, separated by /", s.prefix)
	}
	switch {
	case s.role == "":
		return nil, cliutil.Usagef("--build-role is required: the IAM role ARN the image is built with (BuildRoleArn of infra/iam.yaml)")
	case !roleRE().MatchString(s.role):
		return nil, cliutil.Usagef("--build-role %q is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)", s.role)
	}
	if !baseVeRE.MatchString(s.baseVersion) {
		return nil, cliutil.Usagef("--base-image-version %q is not a version number (like 1)", s.baseVersion)
	}
	if s.waitTimeout <= 0 {
		return nil, cliutil.Usagef("--wait-timeout must be positive")
	}
	return s, nil
}

// Artifact is the zip to publish.
type Artifact struct {
	path   string
	sha256 string // hex
	size   int64
}

// SHA256 is the artifact's hex sha256.
func (a *Artifact) SHA256() string { return a.sha256 }

// key is the artifact's content-addressed key under prefix.
func (a *Artifact) key(prefix string) string {
	k := "rayito-image-" + a.sha256 + ".zip"
	if prefix != "" {
		k = prefix + "/" + k
	}
	return k
}

// makeArtifact builds --dir into tmp (a directory of its own) or checks
// --zip: a zip with a Dockerfile at its root.
func makeArtifact(s *publishSpec, tmp string) (*Artifact, error) {
	if s.zip == "" {
		return BuildArtifact(s.dir, tmp, build.Options{})
	}
	st, err := os.Stat(s.zip)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, cliutil.Usagef("--zip %s: no such file", s.zip)
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, cliutil.Usagef("--zip %s: not a regular file", s.zip)
	}
	fh, err := os.Open(s.zip)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	// The service's rule, as the CDK construct checks it: a zip with a
	// Dockerfile at its root and no entry that climbs out.
	if err := microvmsapi.CheckCodeArtifact(fh, st.Size()); err != nil {
		return nil, cliutil.Usagef("--zip %s: %s (build it with `rayito image zip`)", s.zip, strings.TrimSuffix(err.Error(), "."))
	}
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return nil, err
	}
	return &Artifact{path: s.zip, sha256: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// BuildArtifact builds the image's source dir as `rayito image zip` does,
// with opts (a merged template), into tmp (a directory of its own). A
// refused tree (digest, lock, Dockerfile template) is a usage error.
func BuildArtifact(dir, tmp string, opts build.Options) (*Artifact, error) {
	out := filepath.Join(tmp, "rayito-image.zip")
	if err := checkPaths(dir, out); err != nil {
		return nil, err
	}
	sum, size, err := writeZipWith(dir, out, opts)
	if err != nil {
		return nil, classify(err)
	}
	return &Artifact{path: out, sha256: sum, size: size}, nil
}

// buildInProgress is the error for an image whose build is running.
func buildInProgress(name string) error {
	return fmt.Errorf("a build of image %s is in progress: wait for it to end (see 'rayito image list %s'), then publish again", name, name)
}

func publish(ctx context.Context, f *cliutil.Factory, s *publishSpec) error {
	tmp, err := os.MkdirTemp("", "rayito-publish-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	art, err := makeArtifact(s, tmp)
	if err != nil {
		return err
	}
	res, err := Publish(ctx, f, &Build{Target: &s.Target, Artifact: art})
	var te *WaitTimeoutError
	if errors.As(err, &te) {
		return cli.Exit(fmt.Sprintf("image %s: still not launchable after %s (--wait-timeout); the build goes on: see 'rayito image list %s'",
			s.name, s.waitTimeout, s.name), cliutil.ExitTimeout)
	}
	if err != nil {
		return err
	}
	if s.json {
		return cliutil.PrintJSON(f.IO.Out, publishOut{
			ARN: res.Image.ImageArn, Version: res.Version.ImageVersion,
			Artifact: artifactOut{Bucket: s.bucket, Key: res.Key, SHA256: art.sha256, Uploaded: res.Uploaded},
			State:    string(res.Image.State), VersionState: string(res.Version.State), Status: string(res.Version.Status),
		})
	}
	_, err = fmt.Fprintln(f.IO.Out, res.Image.ImageArn)
	return err
}

// Build is one publish of an artifact as a version of the image
// Target.Name.
type Build struct {
	Target   *Target
	Artifact *Artifact
	// Template, when set, names the template the artifact is built from
	// (rayito template build on AWS): the image carries TagTemplate (this
	// name) and TagBuildSHA256 (the hash of the whole build
	// configuration); an existing image without that TagTemplate is
	// refused, and an unchanged build (the same TagBuildSHA256 on a
	// launchable image) is not built again unless Force.
	Template string
	Force    bool
}

// Result is what Publish did.
type Result struct {
	// Image and Version are the launchable image and version.
	Image   *microvmsapi.MicrovmImage
	Version *microvmsapi.MicrovmImageVersion
	// Key is the artifact's key in Target's bucket; Uploaded says whether
	// this publish put it there.
	Key      string
	Uploaded bool
	// Unchanged: the image already runs this build (Build.Template);
	// nothing was uploaded or built.
	Unchanged bool
}

// WaitTimeoutError: the image was still not launchable after Target's
// --wait-timeout; the build goes on.
type WaitTimeoutError struct {
	Name  string
	Limit time.Duration
}

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("image %s: still not launchable after %s", e.Name, e.Limit)
}

// BuildFailedError is a failed build of the image. Its Error names the
// states and the build id, never the service's stateReason.
type BuildFailedError struct {
	Name, ARN, Version, BuildID string
	states                      string
	// StateReason is the service's free text about the failure (the
	// build's, else the version's): to classify, never to print.
	StateReason string
}

func (e *BuildFailedError) Error() string {
	msg := fmt.Sprintf("image %s version %s failed to build (%s)", e.Name, orUnknown(e.Version), e.states)
	if e.BuildID != "" {
		msg += fmt.Sprintf("; build id %s: read its stateReason with GetMicrovmImageBuild (image %s, version %s) and its log in CloudWatch", e.BuildID, e.ARN, e.Version)
	}
	return msg
}

// Publish uploads b's artifact to Target's bucket by its content hash
// (once), creates the image or builds a new version of it, and waits
// until it can launch, with progress on stderr. A build still running
// after Target's wait timeout is a *WaitTimeoutError; a failed build a
// *BuildFailedError; a refused build for a quota matches
// microvms.ErrQuotaExceeded.
func Publish(ctx context.Context, f *cliutil.Factory, b *Build) (*Result, error) {
	s, art := b.Target, b.Artifact
	env, err := loadAWS(ctx)
	if err != nil {
		return nil, err
	}
	mv := env.MicroVMs

	// The image as it is: absent (create), busy (refuse before uploading
	// anything), or there (update).
	existing, err := mv.GetMicrovmImage(ctx, s.name)
	switch {
	case errors.Is(err, microvms.ErrNotFound):
		existing = nil
	case err != nil:
		return nil, err
	case busy(existing.State):
		return nil, buildInProgress(s.name)
	case gone(existing.State):
		return nil, fmt.Errorf("image %s is %s: publish again once it is deleted, or under another name", s.name, existing.State)
	case existing.Tags[TagManagedBy] != "" && existing.Tags[TagManagedBy] != "rayito":
		// A stack declares this image: a publish would silently undo it.
		return nil, fmt.Errorf("image %s is managed by %s (its %s tag): publish it through that stack; nothing was uploaded or changed",
			s.name, safeWord(existing.Tags[TagManagedBy]), TagManagedBy)
	case b.Template != "" && existing.Tags[TagTemplate] != b.Template:
		return nil, fmt.Errorf("image %s exists and is not the template %s (its %s tag): choose another name; nothing was uploaded or changed",
			s.name, b.Template, TagTemplate)
	}

	key := art.key(s.prefix)
	where := "s3://" + s.bucket + "/" + key
	cfg := buildConfig(s, env.Region, where)
	tags := map[string]string{TagRaydVersion: rayito.Version, TagArtifactSHA256: art.sha256}
	if b.Template != "" {
		tags[TagTemplate] = b.Template
		tags[TagBuildSHA256] = configHash(cfg)
		if existing != nil && !b.Force && existing.Tags[TagBuildSHA256] == tags[TagBuildSHA256] &&
			existing.State.Launchable() && existing.LatestActiveImageVersion != "" {
			ver, err := mv.GetMicrovmImageVersion(ctx, existing.ImageArn, existing.LatestActiveImageVersion)
			if err != nil {
				return nil, err
			}
			if ver.Launchable() {
				return &Result{Image: existing, Version: ver, Key: key, Unchanged: true}, nil
			}
		}
	}

	uploaded, err := upload(ctx, env.S3, s.bucket, key, art)
	if err != nil {
		return nil, err
	}
	if uploaded {
		fmt.Fprintf(f.IO.Err, "artifact %s: uploaded (%d bytes)\n", where, art.size)
	} else {
		fmt.Fprintf(f.IO.Err, "artifact %s: already in S3, not uploaded\n", where)
	}

	var img *microvmsapi.MicrovmImage
	if existing == nil {
		img, err = mv.CreateMicrovmImage(ctx, &microvmsapi.CreateMicrovmImageInput{
			Name: s.name, ImageBuildConfig: cfg, Tags: tags,
		})
		switch {
		case errors.Is(err, microvms.ErrConflict):
			return nil, fmt.Errorf("image %s was created by someone else meanwhile: publish again to build a new version of it", s.name)
		case err != nil:
			return nil, quotaHint(s.name, err)
		}
		fmt.Fprintf(f.IO.Err, "image %s: created, building version %s\n", s.name, orUnknown(img.ImageVersion))
	} else {
		img, err = mv.UpdateMicrovmImage(ctx, existing.ImageArn, &microvmsapi.UpdateMicrovmImageInput{
			ImageBuildConfig: cfg,
		})
		switch {
		case errors.Is(err, microvms.ErrConflict):
			return nil, buildInProgress(s.name)
		case err != nil:
			return nil, quotaHint(s.name, err)
		}
		fmt.Fprintf(f.IO.Err, "image %s: building version %s\n", s.name, orUnknown(img.ImageVersion))
		// UpdateMicrovmImage takes no tags: the image's tags follow its
		// latest publish. A refusal (a policy without TagResource) does not
		// undo the build; doctor then warns that the version is unknown.
		if err := mv.TagResource(ctx, img.ImageArn, tags); err != nil {
			fmt.Fprintf(f.IO.Err, "warning: cannot tag image %s: %s; `rayito doctor --aws` will not know its rayd version\n", s.name, cliutil.Describe(err))
		}
	}

	wctx, cancel := context.WithTimeout(ctx, s.waitTimeout)
	defer cancel()
	p := newProgress(f.IO.Err)
	final, ver, err := waitGate(wctx, mv, s.name, img.ImageArn, img.ImageVersion, p)
	p.finish()
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return nil, &WaitTimeoutError{Name: s.name, Limit: s.waitTimeout}
		}
		return nil, err
	}
	return &Result{Image: final, Version: ver, Key: key, Uploaded: uploaded}, nil
}

// configHash is the hex sha256 of a build configuration's JSON (its
// artifact's URI holds the artifact's sha256).
func configHash(cfg microvmsapi.ImageBuildConfig) string {
	b, _ := json.Marshal(cfg) // a struct of strings, numbers and slices
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// quotaHint names the quotas a refused build may have hit.
func quotaHint(name string, err error) error {
	if errors.Is(err, microvms.ErrQuotaExceeded) {
		return fmt.Errorf("%w: the account reached a MicroVMs quota (%d images a region, %d versions an image, %d or %d concurrent builds); delete old versions with 'rayito image prune %s --keep N'",
			err, microvmsapi.MaxImagesPerRegion, microvmsapi.MaxVersionsPerImage, microvmsapi.MaxConcurrentBuilds, microvmsapi.MaxConcurrentBuildsLarger, name)
	}
	return err
}

// safeWord returns a tag value fit to print: short letters, digits and
// -_., else "another tool".
func safeWord(v string) string {
	if len(v) > 64 || !wordRE.MatchString(v) {
		return "another tool"
	}
	return v
}

func orUnknown(v string) string {
	if v == "" {
		return "(number not known yet)"
	}
	return v
}

// buildConfig is the whole build configuration, sent by Create and by
// every Update (a PUT: nothing is inherited from the previous version).
func buildConfig(s *Target, region, uri string) microvmsapi.ImageBuildConfig {
	cfg := microvmsapi.ImageBuildConfig{
		BaseImageArn:      "arn:aws:lambda:" + region + ":aws:microvm-image:" + baseImageName,
		BaseImageVersion:  s.baseVersion,
		BuildRoleArn:      s.role,
		CodeArtifact:      &microvmsapi.CodeArtifact{URI: uri},
		CPUConfigurations: []microvmsapi.CPUConfiguration{{Architecture: microvmsapi.ArchitectureARM64}},
		Resources:         []microvmsapi.Resources{{MinimumMemoryInMiB: s.memory}},
		Hooks: &microvmsapi.Hooks{
			Port: HooksPort,
			MicrovmHooks: &microvmsapi.MicrovmHooks{
				Run: microvmsapi.HookEnabled, RunTimeoutInSeconds: runTimeout,
				Resume: microvmsapi.HookEnabled, ResumeTimeoutInSeconds: resumeTimeout,
				Suspend: microvmsapi.HookEnabled, SuspendTimeoutInSeconds: suspendTimeout,
				Terminate: microvmsapi.HookEnabled, TerminateTimeoutInSeconds: terminateTimeout,
			},
			MicrovmImageHooks: &microvmsapi.MicrovmImageHooks{
				Ready: microvmsapi.HookEnabled, ReadyTimeoutInSeconds: readyTimeout,
				Validate: microvmsapi.HookEnabled, ValidateTimeoutInSeconds: validateTimeout,
			},
		},
	}
	if s.osCapsAll {
		cfg.AdditionalOsCapabilities = []string{microvmsapi.CapabilityAll}
	}
	return cfg
}

// upload puts the artifact at key unless an object is there already (the
// key is the content's sha256, so that object is this artifact), and
// reports whether it uploaded (awsenv.PutOnce: conditional, checksummed).
func upload(ctx context.Context, c *s3.Client, bucket, key string, a *Artifact) (bool, error) {
	fh, err := os.Open(a.path)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	return awsenv.PutOnce(ctx, c, bucket, key, awsenv.Object{Body: fh, Size: a.size, SHA256: a.sha256, ContentType: "application/zip"}, "the ImagePublisherPolicy of infra/iam.yaml allows it")
}

// waitGate polls the image and its version, with back-off, until the
// image can launch the version (image CREATED or UPDATED, version
// SUCCESSFUL and ACTIVE), a build fails, or ctx ends. version may be ""
// when the service did not say which version it builds; it is then the
// image's latest once the build ends.
func waitGate(ctx context.Context, c *microvms.Client, name, arn, version string, p *progress) (*microvmsapi.MicrovmImage, *microvmsapi.MicrovmImageVersion, error) {
	var b backoff
	for {
		img, err := c.GetMicrovmImage(ctx, arn)
		if err != nil {
			return nil, nil, err
		}
		if gone(img.State) {
			return nil, nil, fmt.Errorf("image %s is %s: it was deleted while it was building", name, img.State)
		}
		if version == "" && !busy(img.State) {
			version = img.LatestActiveImageVersion
			if failedState(img.State) && img.LatestFailedImageVersion != "" {
				version = img.LatestFailedImageVersion
			}
		}
		var ver *microvmsapi.MicrovmImageVersion
		if version != "" {
			ver, err = c.GetMicrovmImageVersion(ctx, arn, version)
			switch {
			case errors.Is(err, microvms.ErrNotFound):
				ver = nil // not visible yet
			case err != nil:
				return nil, nil, err
			}
		}
		switch {
		case failedState(img.State) || ver != nil && ver.State == microvmsapi.VersionFailed:
			return nil, nil, buildFailed(ctx, c, name, arn, img, ver, version)
		case ver != nil && (ver.State == microvmsapi.VersionDeleting || ver.State == microvmsapi.VersionDeleted):
			return nil, nil, fmt.Errorf("image %s version %s is %s: it was deleted while it was building", name, version, ver.State)
		case img.State.Launchable() && ver != nil && ver.Launchable():
			return img, ver, nil
		}
		line := fmt.Sprintf("image %s: %s", name, img.State)
		if ver != nil {
			line += fmt.Sprintf(", version %s %s %s", version, ver.State, ver.Status)
		}
		p.set(line)
		if err := b.wait(ctx); err != nil {
			return nil, nil, err
		}
	}
}

// buildFailed words a failed build with the short state names and the
// build's id, never the service's stateReason (free text from the build),
// which the error keeps to classify only.
func buildFailed(ctx context.Context, c *microvms.Client, name, arn string, img *microvmsapi.MicrovmImage, ver *microvmsapi.MicrovmImageVersion, version string) error {
	if !failedState(img.State) {
		// The version was read after the image: read the image again for
		// the state the failure left it in.
		if again, err := c.GetMicrovmImage(ctx, arn); err == nil {
			img = again
		}
	}
	e := &BuildFailedError{Name: name, ARN: arn, Version: version, states: "image " + string(img.State)}
	if ver != nil {
		e.states += ", version " + string(ver.State)
		e.StateReason = ver.StateReason
	}
	if version != "" {
		if last := LastBuild(ctx, c, arn, version); last != nil && last.BuildID != "" {
			e.BuildID = last.BuildID
			if last.StateReason != "" {
				e.StateReason = last.StateReason
			}
		}
	}
	return e
}
