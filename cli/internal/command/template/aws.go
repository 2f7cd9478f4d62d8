package template

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	imagecmd "github.com/rayito-dev/rayito/cli/internal/command/image"
	build "github.com/rayito-dev/rayito/cli/internal/image"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/template"
)

// AWSBase is the base a template names in its FROM on AWS: the Rayito
// image, built from --image-dir as `rayito image publish` builds it.
const AWSBase = "rayito"

// Why a template build on AWS failed (the JSON's reason): a closed set.
const (
	ReasonRunStepFailed        = "run_step_failed"        // the build's words say a RUN step failed
	ReasonBuildFailed          = "build_failed"           // the build failed otherwise (a hook, the service)
	ReasonBuildTimeout         = "build_timeout"          // the service's build ran out of time
	ReasonBuildQuota           = "build_quota"            // ServiceQuotaExceeded: images, versions or concurrent builds
	ReasonAWSError             = "aws_error"              // S3 or the MicroVMs API refused or failed
	ReasonBaseImageUnsupported = "base_image_unsupported" // FROM is not rayito (exit 2)
	ReasonBaseImageInvalid     = "base_image_invalid"     // the Rayito image's source tree is refused (exit 2)
)

// awsOnlyFlags are the build flags for AWS alone.
var awsOnlyFlags = []string{"bucket", "prefix", "build-role", "base-image-version", "memory", "os-capabilities", "image-dir"}

// awsBuildFlags are the flags template build takes for AWS: publish's
// (but --wait-timeout, which build has) and --image-dir.
func awsBuildFlags() []cli.Flag {
	flags := slices.DeleteFunc(imagecmd.TargetFlags(), func(fl cli.Flag) bool { return slices.Contains(fl.Names(), "wait-timeout") })
	return append(flags, &cli.StringFlag{Name: "image-dir", Value: "image", Usage: "on AWS, the Rayito image's source `DIR` (as `rayito image publish --dir`)"})
}

// onAWS reports whether RAYITO_BACKEND is aws.
func onAWS(f *cliutil.Factory) (bool, error) {
	b, err := platform.Backend(f.Getenv)
	return b == rayito.BackendAWS, err
}

// buildOnAWS runs template build on AWS when RAYITO_BACKEND is aws
// (done), refuses the AWS flags on the local platform (done with a usage
// error), else leaves the build to the local platform.
func buildOnAWS(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, name string) (done bool, err error) {
	aws, err := onAWS(f)
	if err != nil {
		return true, err
	}
	if !aws {
		for _, n := range awsOnlyFlags {
			if cmd.IsSet(n) {
				return true, cliutil.Usagef("--%s is for template builds on AWS (RAYITO_BACKEND=aws)", n)
			}
		}
		return false, nil
	}
	return true, awsBuild(ctx, f, cmd, name)
}

// awsBuildJSON is `template build --json` on AWS.
type awsBuildJSON struct {
	Name      string   `json:"name"`
	State     string   `json:"state"` // READY or FAILED
	SHA256    string   `json:"sha256"`
	Reason    string   `json:"reason,omitempty"`
	ImageARN  string   `json:"image_arn,omitempty"`
	Version   string   `json:"version,omitempty"`
	BuildID   string   `json:"build_id,omitempty"`
	Bucket    string   `json:"bucket,omitempty"`
	Key       string   `json:"key,omitempty"`
	Uploaded  bool     `json:"uploaded"`
	Unchanged bool     `json:"unchanged,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// BuildError is a failed template build on AWS: Reason is one of the
// Reason constants.
type BuildError struct {
	Name, Reason string
	Err          error
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("template %s: the build failed (%s): %s", e.Name, e.Reason, cliutil.Describe(e.Err))
}

func (e *BuildError) Unwrap() error { return e.Err }

// Is matches rayito.ErrTemplateBuild.
func (e *BuildError) Is(target error) bool { return target == rayito.ErrTemplateBuild }

func awsBuild(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, name string) error {
	if !ptemplate.ValidName(name) {
		return cliutil.Usagef("template name %q: 1 to %d of a-z, 0-9, '-' and '_'", name, ptemplate.MaxNameLen)
	}
	if cmd.Bool("no-wait") {
		return cliutil.Usagef("--no-wait is not supported on AWS yet: the build is followed to its end (--wait-timeout bounds the wait)")
	}
	target, err := imagecmd.ParseTarget(f, cmd, name)
	if err != nil {
		return err
	}
	art, warnings, err := compileTemplate(ctx, f, cmd)
	if err != nil {
		return err
	}
	defer art.Close()
	if err := checkAWSBase(art.Spec.Base); err != nil {
		return err
	}
	zr, closeZip, err := openArtifact(art)
	if err != nil {
		return err
	}
	defer closeZip()
	merge, err := mergeOf(name, art, zr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "rayito-template-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img, err := imagecmd.BuildArtifact(cmd.String("image-dir"), tmp, build.Options{Template: merge})
	if err != nil {
		var ue *cliutil.UsageError
		if errors.As(err, &ue) {
			return cliutil.Usage(fmt.Errorf("%s: %w", ReasonBaseImageInvalid, ue.Err))
		}
		return err
	}
	fmt.Fprintf(f.IO.Err, "template %s: image artifact %.12s (the template's %.12s, %d files)\n", name, img.SHA256(), art.SHA256, art.Files)

	res, err := imagecmd.Publish(ctx, f, &imagecmd.Build{Target: target, Artifact: img, Template: name, Force: cmd.Bool("force")})
	out := awsBuildJSON{Name: name, SHA256: img.SHA256(), Warnings: warnings}
	var (
		te *imagecmd.WaitTimeoutError
		be *imagecmd.BuildFailedError
	)
	switch {
	case errors.As(err, &te):
		return cli.Exit(fmt.Sprintf("template %s: still building after %s (--wait-timeout); the build goes on: rayito template status %s", name, te.Limit, name), cliutil.ExitTimeout)
	case err != nil && ctx.Err() != nil:
		return cliutil.Interrupted(ctx, err)
	case errors.As(err, &be):
		out.Reason, out.ImageARN, out.Version, out.BuildID = ClassifyBuild(be.StateReason), be.ARN, be.Version, be.BuildID
	case errors.Is(err, microvms.ErrQuotaExceeded):
		out.Reason = ReasonBuildQuota
	case err != nil:
		out.Reason = ReasonAWSError
	}
	if err != nil {
		out.State = "FAILED"
		if cmd.Bool("json") {
			_ = cliutil.PrintJSON(f.IO.Out, out)
		}
		return &BuildError{Name: name, Reason: out.Reason, Err: err}
	}
	out.State, out.ImageARN, out.Version = "READY", res.Image.ImageArn, res.Version.ImageVersion
	out.Bucket, out.Key, out.Uploaded, out.Unchanged = target.Bucket(), res.Key, res.Uploaded, res.Unchanged
	if res.Unchanged {
		fmt.Fprintf(f.IO.Err, "template %s: this build is already image %s version %s (--force builds it again)\n", name, name, res.Version.ImageVersion)
	} else {
		fmt.Fprintf(f.IO.Err, "template %s: ready, image version %s\n", name, res.Version.ImageVersion)
	}
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	_, err = fmt.Fprintln(f.IO.Out, res.Image.ImageArn)
	return err
}

// compileTemplate reads --file and compiles it with --context, warnings
// on stderr.
func compileTemplate(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) (*template.Artifact, []string, error) {
	text, err := readDockerfile(cmd.String("file"))
	if err != nil {
		return nil, nil, err
	}
	dir := cmd.String("context")
	if dir == "" {
		dir = filepath.Dir(cmd.String("file"))
	}
	t, err := template.FromDockerfile(text)
	if err != nil {
		return nil, nil, cliutil.Usage(err)
	}
	var warnings []string
	art, err := template.Compile(ctx, t, dir, template.WithWarn(func(w string) {
		warnings = append(warnings, w)
		fmt.Fprintf(f.IO.Err, "warning: %s\n", w)
	}))
	if err != nil {
		return nil, nil, cliutil.Usage(err)
	}
	return art, warnings, nil
}

// checkAWSBase refuses a FROM other than AWSBase.
func checkAWSBase(base string) error {
	switch base {
	case AWSBase:
		return nil
	case cliutil.LocalTemplate, cliutil.LocalRootTemplate:
		return cliutil.Usagef("%s: FROM %s is the local platform's base; on AWS a template builds on the Rayito image: FROM %s", ReasonBaseImageUnsupported, base, AWSBase)
	}
	return cliutil.Usagef("%s: on AWS a template builds on the Rayito image only: FROM %s (another base image is not supported)", ReasonBaseImageUnsupported, AWSBase)
}

// mergeOf is what the template adds to the image artifact: its layer
// (COPY sources under template/context), the runtime configuration rayd
// reads, and its context's files.
func mergeOf(name string, art *template.Artifact, zr *zip.Reader) (*build.Template, error) {
	layer, err := build.TemplateLayer(art.Dockerfile)
	if err != nil {
		return nil, err
	}
	rt, err := ptemplate.EncodeRuntime(ptemplate.RuntimeOf(name, art.Spec))
	if err != nil {
		return nil, cliutil.Usage(err)
	}
	m := &build.Template{
		Layer: append(layer, build.TemplateTrailer(ptemplate.RuntimePath)...),
		Files: []build.TemplateFile{{Name: build.TemplateRuntimeName, Data: rt}, {Name: ptemplate.ContextDir}},
	}
	for _, zf := range zr.File {
		if !strings.HasPrefix(zf.Name, ptemplate.ContextDir) || zf.Name == ptemplate.ContextDir {
			continue
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			m.Files = append(m.Files, build.TemplateFile{Name: strings.TrimSuffix(zf.Name, "/") + "/"})
		case mode.IsRegular():
			m.Files = append(m.Files, build.TemplateFile{Name: zf.Name, Exec: mode.Perm()&0o111 != 0, Open: zf.Open})
		case mode&fs.ModeSymlink != 0:
			return nil, cliutil.Usagef("the context's %s is a symbolic link: links in a template's context are not supported on AWS yet", strings.TrimPrefix(zf.Name, ptemplate.ContextDir))
		default:
			return nil, fmt.Errorf("the template's artifact holds %s, neither a file nor a directory", zf.Name)
		}
	}
	return m, nil
}

// openArtifact opens the compiled template's zip, in memory or spilled
// to its temporary file (then closed by the func returned).
func openArtifact(a *template.Artifact) (*zip.Reader, func(), error) {
	if a.Zip != nil {
		zr, err := zip.NewReader(bytes.NewReader(a.Zip), int64(len(a.Zip)))
		return zr, func() {}, err
	}
	fh, err := os.Open(a.Path)
	if err != nil {
		return nil, nil, err
	}
	zr, err := zip.NewReader(fh, a.Size)
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	return zr, func() { fh.Close() }, nil
}

// ClassifyBuild maps the service's words about a failed build (its
// stateReason, free text never printed) to a reason: run_step_failed
// when they say a RUN step failed (Docker's "did not complete
// successfully", "returned a non-zero code", "executor failed running"),
// build_timeout when they say the build timed out, else build_failed.
// It is a guess from text the service does not document.
func ClassifyBuild(stateReason string) string {
	s := strings.ToLower(stateReason)
	switch {
	case strings.Contains(s, "timed out") || strings.Contains(s, "timeout") || strings.Contains(s, "time limit"):
		return ReasonBuildTimeout
	case strings.Contains(s, "did not complete successfully") || strings.Contains(s, "returned a non-zero code") ||
		strings.Contains(s, "executor failed running") || strings.Contains(s, "run ") && strings.Contains(s, "exit code"):
		return ReasonRunStepFailed
	}
	return ReasonBuildFailed
}

// statusJSON is `template status --json` on AWS.
type statusJSON struct {
	Name          string `json:"name"`
	State         string `json:"state"` // BUILDING, READY or FAILED
	SHA256        string `json:"sha256"`
	Reason        string `json:"reason,omitempty"`
	ImageARN      string `json:"image_arn"`
	ImageState    string `json:"image_state"`
	ActiveVersion string `json:"active_version,omitempty"`
	FailedVersion string `json:"failed_version,omitempty"`
	BuildID       string `json:"build_id,omitempty"`
}

// statusOnAWS is `template status` when RAYITO_BACKEND is aws (done).
func statusOnAWS(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, name string) (done bool, err error) {
	aws, err := onAWS(f)
	if err != nil || !aws {
		return err != nil, err
	}
	st, err := awsStatus(ctx, name)
	if err != nil {
		return true, err
	}
	if cmd.Bool("json") {
		return true, cliutil.PrintJSON(f.IO.Out, st)
	}
	fmt.Fprintf(f.IO.Out, "NAME\tSTATE\tSHA256\tVERSION\tREASON\n%s\t%s\t%.12s\t%s\t%s\n", st.Name, st.State, st.SHA256, st.ActiveVersion, st.Reason)
	return true, nil
}

// awsImage is the template's image: it must exist and carry its
// template tag.
func awsImage(ctx context.Context, c *microvms.Client, name string) (*microvmsapi.MicrovmImage, error) {
	if !ptemplate.ValidName(name) {
		return nil, cliutil.Usagef("template name %q: 1 to %d of a-z, 0-9, '-' and '_'", name, ptemplate.MaxNameLen)
	}
	img, err := c.GetMicrovmImage(ctx, name)
	switch {
	case errors.Is(err, microvms.ErrNotFound):
		return nil, fmt.Errorf("template %s: no image of that name (build it with `rayito template build %s`)", name, name)
	case err != nil:
		return nil, err
	case img.Tags[imagecmd.TagTemplate] != name:
		return nil, fmt.Errorf("template %s: image %s is not a template (no %s tag): see `rayito image list %s`", name, name, imagecmd.TagTemplate, name)
	}
	return img, nil
}

func awsStatus(ctx context.Context, name string) (*statusJSON, error) {
	env, err := imagecmd.LoadAWS(ctx)
	if err != nil {
		return nil, err
	}
	c := env.MicroVMs
	img, err := awsImage(ctx, c, name)
	if err != nil {
		return nil, err
	}
	st := &statusJSON{Name: name, SHA256: img.Tags[imagecmd.TagArtifactSHA256], ImageARN: img.ImageArn, ImageState: string(img.State),
		ActiveVersion: img.LatestActiveImageVersion, FailedVersion: img.LatestFailedImageVersion}
	switch {
	case imagecmd.Busy(img.State):
		st.State = "BUILDING"
	case imagecmd.FailedState(img.State):
		st.State = "FAILED"
		st.Reason = ReasonBuildFailed
		if v := img.LatestFailedImageVersion; v != "" {
			reason := ""
			if ver, err := c.GetMicrovmImageVersion(ctx, img.ImageArn, v); err == nil {
				reason = ver.StateReason
			}
			if b := imagecmd.LastBuild(ctx, c, img.ImageArn, v); b != nil {
				st.BuildID = b.BuildID
				if b.StateReason != "" {
					reason = b.StateReason
				}
			}
			st.Reason = ClassifyBuild(reason)
		}
	case img.State.Launchable() && img.LatestActiveImageVersion != "":
		st.State = "READY"
	default:
		st.State = string(img.State)
	}
	return st, nil
}

// logsOnAWS is `template logs` when RAYITO_BACKEND is aws (done): the CLI
// has no CloudWatch Logs client yet, so it names where the log is.
func logsOnAWS(ctx context.Context, f *cliutil.Factory, _ *cli.Command, name string) (done bool, err error) {
	aws, err := onAWS(f)
	if err != nil || !aws {
		return err != nil, err
	}
	msg := fmt.Sprintf("template logs on AWS are not built yet (the CLI has no CloudWatch Logs client): open the log group /rayito/%s in the CloudWatch console", name)
	if st, err := awsStatus(ctx, name); err == nil && st.BuildID != "" {
		msg += fmt.Sprintf(" (the failed build %s of version %s)", st.BuildID, st.FailedVersion)
	} else if err != nil {
		var ue *cliutil.UsageError
		if errors.As(err, &ue) {
			return true, err
		}
	}
	return true, errors.New(msg)
}
