package doctor

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/compat"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// AWSResult is what the AWS configuration resolved to: never a credential.
type AWSResult struct {
	Region string
	// Source names the credentials provider (EnvConfigCredentials,
	// SSOProvider, ...).
	Source string

	// api reaches AWS with the resolved configuration; nil when there is
	// no region or it cannot be built (the checks that call AWS are then
	// skipped).
	api awsAPI
}

// awsAPI is what the checks ask AWS.
type awsAPI interface {
	ResolveImageARN(ctx context.Context, nameOrARN string) (string, error)
	GetMicrovmImage(ctx context.Context, image string) (*microvmsapi.MicrovmImage, error)
	ListAllMicrovmImageVersions(ctx context.Context, image string, in microvms.PageInput) iter.Seq2[microvmsapi.MicrovmImageVersion, error]
	ListTags(ctx context.Context, resourceARN string) (map[string]string, error)
	ListAll(ctx context.Context, in microvms.ListInput) iter.Seq2[microvmsapi.MicrovmSummary, error]
	// HeadBucket's errors are *awsenv.S3Error.
	HeadBucket(ctx context.Context, bucket string) error
}

// liveAPI is awsAPI on the MicroVMs and S3 clients.
type liveAPI struct {
	*microvms.Client
	s3 *s3.Client
}

func (a liveAPI) HeadBucket(ctx context.Context, bucket string) error {
	_, err := a.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	return awsenv.SanitizeS3("HeadBucket", err)
}

// What awsProbe returns instead of the AWS SDK's errors, which can quote
// environment values, file paths and profile contents.
var (
	errNoCredentials = errors.New("no AWS credentials found")
	errNoProfile     = errors.New("the AWS profile does not exist")
	errAWSConfig     = errors.New("the AWS configuration cannot be loaded")
)

const credentialsFix = "set AWS_PROFILE (a profile in ~/.aws/config), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run `aws sso login` / `aws configure`; on EC2, attach an instance role"

// Environment variables the checks read.
const (
	templateEnv = rayito.EnvTemplate
	bucketEnv   = "RAYITO_ARTIFACT_BUCKET"
	// raydVersionTag is the image tag `rayito image publish` sets.
	raydVersionTag = "rayito:rayd-version"
)

// awsProbe loads the AWS configuration as the SDK does and retrieves
// credentials; its errors are only the sentinels above.
func awsProbe(ctx context.Context) (AWSResult, error) {
	cfg, err := awsenv.LoadConfig(ctx)
	if err != nil {
		if errors.Is(err, awsenv.ErrNoProfile) {
			return AWSResult{}, errNoProfile
		}
		return AWSResult{}, errAWSConfig
	}
	r := AWSResult{Region: cfg.Region}
	if cfg.Credentials == nil {
		return r, errNoCredentials
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || !creds.HasKeys() {
		return r, errNoCredentials
	}
	r.Source = creds.Source
	if cfg.Region != "" {
		if mv, err := awsenv.NewMicroVMs(cfg); err == nil {
			r.api = liveAPI{Client: mv, s3: awsenv.NewS3(cfg)}
		}
	}
	return r, nil
}

// awsState is what the AWS checks share: the probe's result, and the
// template's ARN once the launch gate resolved it.
type awsState struct {
	res      AWSResult
	err      error
	done     bool
	arn      string
	resolved bool // the launch gate resolved the template
}

func (s *awsState) resolve(ctx context.Context, e *Env) (AWSResult, error) {
	if !s.done {
		s.done = true
		timed(ctx, awsTimeout, func(ctx context.Context) Check {
			s.res, s.err = e.AWS(ctx)
			return Check{}
		})
	}
	return s.res, s.err
}

// api returns the AWS client, or the line of a check that cannot run.
func (s *awsState) api(ctx context.Context, e *Env, name string) (awsAPI, *Check) {
	r, err := s.resolve(ctx, e)
	var c Check
	switch {
	case err != nil:
		c = warn(name, "skipped: no usable AWS credentials (see aws credentials)", "fix the AWS credentials first (see aws credentials)")
	case r.Region == "":
		c = warn(name, "skipped: no AWS region (see aws region)", "set AWS_REGION, or a region in your AWS profile")
	case r.api == nil:
		c = warn(name, "skipped: the MicroVMs client cannot be built for this region and endpoint", "check AWS_REGION and AWS_ENDPOINT_URL (an http endpoint must be on loopback)")
	default:
		return r.api, nil
	}
	return nil, &c
}

// awsCheck is a check that calls AWS, bounded by awsTimeout.
func (s *awsState) awsCheck(name string, fn func(ctx context.Context, e *Env, api awsAPI) Check) func(context.Context, *Env) Check {
	return func(ctx context.Context, e *Env) Check {
		api, skip := s.api(ctx, e, name)
		if skip != nil {
			return *skip
		}
		return timed(ctx, awsTimeout, func(ctx context.Context) Check { return fn(ctx, e, api) })
	}
}

func awsChecks() []func(context.Context, *Env) Check {
	s := &awsState{}
	return []func(context.Context, *Env) Check{
		func(ctx context.Context, e *Env) Check {
			return classifyCredentials(s.resolve(ctx, e))
		},
		func(ctx context.Context, e *Env) Check {
			return classifyRegion(s.resolve(ctx, e))
		},
		checkTemplate,
		s.awsCheck("aws launch gate", s.checkLaunchGate),
		s.awsCheck("aws quotas", s.checkQuotas),
		s.awsCheck("aws artifact bucket", checkBucket),
		s.awsCheck("aws version", s.checkVersion),
	}
}

func classifyCredentials(r AWSResult, err error) Check {
	const name = "aws credentials"
	switch {
	case errors.Is(err, errNoProfile):
		return fail(name, "the AWS profile named by AWS_PROFILE is in neither ~/.aws/config nor ~/.aws/credentials", "set AWS_PROFILE to an existing profile, or unset it")
	case errors.Is(err, errNoCredentials):
		return fail(name, "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or sign in with aws sso login)", credentialsFix)
	case err != nil:
		return fail(name, "the AWS configuration cannot be loaded (a config or credentials file, or an AWS_* variable, is invalid)", "check ~/.aws/config, ~/.aws/credentials and the AWS_* variables (aws configure list)")
	}
	detail := "credentials resolved"
	if r.Source != "" {
		detail += " (from " + r.Source + ")"
	}
	return pass(name, detail)
}

func classifyRegion(r AWSResult, err error) Check {
	const name = "aws region"
	switch {
	case r.Region != "":
		return pass(name, r.Region)
	case err != nil && !errors.Is(err, errNoCredentials):
		return fail(name, "not resolved: the AWS configuration cannot be loaded", "fix the AWS configuration (see aws credentials above)")
	}
	return fail(name, "no AWS region configured", "set AWS_REGION, or a region in your AWS profile")
}

var imageNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkTemplate checks RAYITO_TEMPLATE's form; the launch gate looks it
// up. Its value is never printed.
func checkTemplate(_ context.Context, e *Env) Check {
	const name = "aws template"
	switch t := e.Getenv(templateEnv); {
	case t == "":
		return warn(name, "RAYITO_TEMPLATE is not set: sandbox create needs --template", "set RAYITO_TEMPLATE to your MicroVM image's ARN or name (see `rayito image list`)")
	case microvms.IsImageARN(t):
		return pass(name, "RAYITO_TEMPLATE is set (an image ARN)")
	case strings.HasPrefix(t, "arn:"):
		return fail(name, "RAYITO_TEMPLATE is an ARN, but not a MicroVM image's", "set RAYITO_TEMPLATE to arn:aws:lambda:REGION:ACCOUNT:microvm-image:NAME (see `rayito image list`)")
	case imageNameRE.MatchString(t):
		return pass(name, "RAYITO_TEMPLATE is set (an image name: looked up below)")
	}
	return fail(name, "RAYITO_TEMPLATE is neither an image ARN nor an image name", "set RAYITO_TEMPLATE to your MicroVM image's ARN or name (see `rayito image list`)")
}

const publishFix = "publish it with `rayito image publish NAME --bucket BUCKET --build-role ARN`, or set RAYITO_TEMPLATE to an image of `rayito image list`"

// apiFailure words an AWS error of a check (the SDK's sanitized text) and
// its fix.
func apiFailure(name, what string, err error) Check {
	msg := what + ": " + cliutil.Describe(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fail(name, what+": AWS did not answer in time", "check the network and AWS_ENDPOINT_URL, then run doctor again")
	case errors.Is(err, microvms.ErrAuthentication):
		return fail(name, msg, "these credentials are not allowed: attach SandboxLauncherPolicy (infra/iam.yaml) to them, or use a profile that has it")
	case errors.Is(err, microvms.ErrRateLimit):
		return fail(name, msg, "the account is throttled: run doctor again in a moment")
	}
	return fail(name, msg, "check the region and the network (AWS_REGION, AWS_ENDPOINT_URL), then run doctor again")
}

// checkLaunchGate: RAYITO_TEMPLATE names an image that can launch
// sandboxes: CREATED or UPDATED, with a version SUCCESSFUL and ACTIVE.
func (s *awsState) checkLaunchGate(ctx context.Context, e *Env, api awsAPI) Check {
	const name = "aws launch gate"
	t := e.Getenv(templateEnv)
	if t == "" {
		return warn(name, "skipped: RAYITO_TEMPLATE is not set", "set RAYITO_TEMPLATE to your MicroVM image's ARN or name (see `rayito image list`)")
	}
	region := s.res.Region
	arn, err := api.ResolveImageARN(ctx, t)
	switch {
	case errors.Is(err, microvms.ErrNotFound):
		return fail(name, "RAYITO_TEMPLATE names no image in this account and region ("+region+")", publishFix)
	case errors.Is(err, microvms.ErrInvalidArgument):
		return fail(name, "RAYITO_TEMPLATE is neither an image ARN nor an image name", "set RAYITO_TEMPLATE to your MicroVM image's ARN or name (see `rayito image list`)")
	case err != nil:
		return apiFailure(name, "cannot look up RAYITO_TEMPLATE", err)
	}
	img, err := api.GetMicrovmImage(ctx, arn)
	switch {
	case errors.Is(err, microvms.ErrNotFound):
		return fail(name, "RAYITO_TEMPLATE names no image in this account and region ("+region+")", publishFix)
	case err != nil:
		return apiFailure(name, "cannot read the image", err)
	}
	s.arn, s.resolved = arn, true
	st := img.State
	switch {
	case st == microvmsapi.ImageCreating || st == microvmsapi.ImageUpdating:
		return fail(name, "the image is "+string(st)+": a build or a deletion is in progress, and sandboxes cannot launch until it ends", "wait a few minutes (see `rayito image list`), then run doctor again")
	case st == microvmsapi.ImageCreateFailed || st == microvmsapi.ImageUpdateFailed:
		return fail(name, "the image is "+string(st)+": its last build failed, and sandboxes cannot launch from it", "publish it again with `rayito image publish` (a failed publish names the build id to look up)")
	case !st.Launchable():
		return fail(name, "the image is "+string(st)+": sandboxes cannot launch from it", publishFix)
	}
	var (
		best  *microvmsapi.MicrovmImageVersion
		count int
	)
	for v, err := range api.ListAllMicrovmImageVersions(ctx, arn, microvms.PageInput{}) {
		if err != nil {
			return apiFailure(name, "cannot list the image's versions", err)
		}
		count++
		switch {
		case !v.Launchable():
		case v.ImageVersion == img.LatestActiveImageVersion:
			// What RunMicrovm launches without an imageVersion.
			best = &v
		case best == nil || best.ImageVersion != img.LatestActiveImageVersion && newer(v, *best):
			best = &v
		}
	}
	if best == nil {
		return fail(name, fmt.Sprintf("the image is %s, but none of its %d versions is SUCCESSFUL and ACTIVE", st, count),
			"publish a new version with `rayito image publish`, or make a SUCCESSFUL version ACTIVE (UpdateMicrovmImageVersion)")
	}
	return pass(name, fmt.Sprintf("the image is %s and version %s is SUCCESSFUL and ACTIVE: sandboxes can launch", st, best.ImageVersion))
}

// newer reports whether a is a later version than b (by number).
func newer(a, b microvmsapi.MicrovmImageVersion) bool {
	if len(a.ImageVersion) != len(b.ImageVersion) {
		return len(a.ImageVersion) > len(b.ImageVersion)
	}
	return a.ImageVersion > b.ImageVersion
}

// largeRegions have the larger memory and build quotas (contracts.md
// §2.7).
var largeRegions = []string{"us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"}

// checkQuotas: the MicroVMs API has no quota operation, so the check
// counts the account's live microVMs and names the documented quotas.
func (s *awsState) checkQuotas(ctx context.Context, _ *Env, api awsAPI) Check {
	const name = "aws quotas"
	live := 0
	for vm, err := range api.ListAll(ctx, microvms.ListInput{MaxResults: microvmsapi.MaxListResults}) {
		if err != nil {
			c := apiFailure(name, "cannot count the account's microVMs", err)
			c.Status = Warn
			return c
		}
		if vm.State != microvmsapi.StateTerminated {
			live++
		}
	}
	memory, builds := "400 GB", microvmsapi.MaxConcurrentBuilds
	if slices.Contains(largeRegions, s.res.Region) {
		memory, builds = "1024 GB", microvmsapi.MaxConcurrentBuildsLarger
	}
	plural := "s"
	if live == 1 {
		plural = ""
	}
	return pass(name, fmt.Sprintf("%d live microVM%s (not TERMINATED) in %s; the API reports no quotas, the documented ones here are %s of RUNNING and SUSPENDED memory, %d images, %d versions an image, %d concurrent builds",
		live, plural, s.res.Region, memory, microvmsapi.MaxImagesPerRegion, microvmsapi.MaxVersionsPerImage, builds))
}

var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// checkBucket: RAYITO_ARTIFACT_BUCKET, where `rayito image publish` puts
// the artifacts, exists and these credentials reach it. Its name is never
// printed.
func checkBucket(ctx context.Context, e *Env, api awsAPI) Check {
	const name = "aws artifact bucket"
	b := e.Getenv(bucketEnv)
	switch {
	case b == "":
		return warn(name, "RAYITO_ARTIFACT_BUCKET is not set: `rayito image publish` then needs --bucket", "set RAYITO_ARTIFACT_BUCKET to the S3 bucket of your image artifacts (the ArtifactBucket of infra/iam.yaml)")
	case !bucketRE.MatchString(b):
		return fail(name, "RAYITO_ARTIFACT_BUCKET is not an S3 bucket name", "set RAYITO_ARTIFACT_BUCKET to the S3 bucket of your image artifacts")
	}
	err := api.HeadBucket(ctx, b)
	var se *awsenv.S3Error
	switch {
	case err == nil:
		return pass(name, "RAYITO_ARTIFACT_BUCKET exists and these credentials reach it")
	case errors.Is(err, context.DeadlineExceeded):
		return fail(name, "S3 did not answer in time", "check the network and AWS_ENDPOINT_URL_S3, then run doctor again")
	case !errors.As(err, &se):
		return fail(name, "cannot check RAYITO_ARTIFACT_BUCKET", "check the network, then run doctor again")
	case se.NotFound():
		return fail(name, "RAYITO_ARTIFACT_BUCKET does not exist ("+se.Error()+")", "create the bucket in this region, or set RAYITO_ARTIFACT_BUCKET to an existing one")
	case se.Forbidden():
		return warn(name, "RAYITO_ARTIFACT_BUCKET exists, but these credentials may not list it ("+se.Error()+"); publishing needs only s3:PutObject and s3:GetObject on its prefix, so it may still work",
			"to check it here, allow s3:ListBucket on the bucket; otherwise publish once with `rayito image publish`")
	case se.Status == 301:
		return fail(name, "RAYITO_ARTIFACT_BUCKET is in another region ("+se.Error()+")", "use a bucket of this region, or set AWS_REGION to the bucket's region")
	}
	return fail(name, "cannot check RAYITO_ARTIFACT_BUCKET ("+se.Error()+")", "check the network and the region, then run doctor again")
}

// checkVersion: the image's rayd (its rayito:rayd-version tag, set by
// `rayito image publish`) is one this CLI's SDK can drive.
func (s *awsState) checkVersion(ctx context.Context, e *Env, api awsAPI) Check {
	const name = "aws version"
	if !s.resolved {
		return warn(name, "skipped: the template's image was not found (see aws template and aws launch gate)", "fix RAYITO_TEMPLATE first (see aws launch gate)")
	}
	tags, err := api.ListTags(ctx, s.arn)
	if err != nil {
		c := apiFailure(name, "cannot read the image's tags", err)
		c.Status = Warn
		if errors.Is(err, microvms.ErrAuthentication) {
			c.Fix = "allow lambda:ListTags on the image to these credentials, then run doctor again"
		}
		return c
	}
	v, ok := tags[raydVersionTag]
	if !ok {
		return warn(name, "the image has no "+raydVersionTag+" tag: its rayd version is unknown", "publish it with `rayito image publish`, which tags it")
	}
	if _, err := compat.ParseVersion(v); err != nil {
		return warn(name, "the image's "+raydVersionTag+" tag is not a version", "publish it again with `rayito image publish`")
	}
	res, err := compat.Default().Check(rayito.Version, v)
	switch {
	case res == compat.Compatible:
		return pass(name, fmt.Sprintf("the image's rayd %s works with this rayito (SDK %s)", v, rayito.Version))
	case res == compat.CompatibleNewer:
		return warn(name, fmt.Sprintf("the image's rayd %s is newer than this rayito (SDK %s): it works, without rayd's newer features", v, rayito.Version), "update rayito")
	case errors.Is(err, compat.ErrIncompatible):
		return fail(name, fmt.Sprintf("this rayito (SDK %s) cannot drive the image's rayd %s", rayito.Version, v),
			"publish the image again with this rayito (`rayito image publish`), or install the rayito release of rayd "+v)
	}
	return warn(name, fmt.Sprintf("cannot tell whether this rayito (SDK %s) drives rayd %s", rayito.Version, v), "update rayito")
}
