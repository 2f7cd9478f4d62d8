package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/codebuild"
	cbtypes "github.com/aws/aws-sdk-go-v2/service/codebuild/types"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// The closed code of a failed image build.
const codeBuildFailed = "build_failed"

// stackDescriptionPrefix starts the description of every stack of
// agentcore.RuntimeTemplate: a stack of the agent's name without it is
// not touched.
const stackDescriptionPrefix = "Rayito agent on Amazon Bedrock AgentCore"

// artifactBucketRE is the template's ArtifactBucket pattern.
var artifactBucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// buildPoll is the interval of the image build's polls (tests shorten
// it).
var buildPoll = 5 * time.Second

// agentCoreDeployFlags are deploy's AgentCore-only flags.
func agentCoreDeployFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "base-image", Usage: "the image's base, pinned by digest: `REF`@sha256:... (agentcore; default: Python 3.12 slim by digest)"},
		&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "wait at most `DURATION` for the stack, the build and the runtime each (agentcore)"},
	}
}

// awsClients are the AWS clients of an AgentCore command.
type awsClients struct {
	cfg     aws.Config
	control *bedrockagentcorecontrol.Client
	ecr     *ecr.Client
	cfn     *cloudformation.Client
	s3      *s3.Client
	build   *codebuild.Client
}

func loadAgentCoreAWS(ctx context.Context, region string) (*awsClients, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(lctx, awsconfig.WithRegion(region), awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, errors.New("cannot load the AWS configuration (credentials, profile)")
	}
	return &awsClients{
		cfg: cfg, control: bedrockagentcorecontrol.NewFromConfig(cfg), ecr: ecr.NewFromConfig(cfg),
		cfn: cloudformation.NewFromConfig(cfg), s3: awsenv.NewS3(cfg), build: codebuild.NewFromConfig(cfg),
	}, nil
}

// regionOf is --region, else AWS_REGION.
func regionOf(f *cliutil.Factory, cmd *cli.Command) (string, error) {
	region := cmd.String("region")
	if region == "" {
		region = f.Getenv("AWS_REGION")
	}
	if region == "" {
		return "", cliutil.Usagef("--target agentcore needs a region: --region or AWS_REGION")
	}
	return region, nil
}

// agentCoreOut is deploy --target agentcore --json.
type agentCoreOut struct {
	Name        string `json:"name"`
	Target      string `json:"target"`
	Region      string `json:"region"`
	Stack       string `json:"stack"`
	StackAction string `json:"stack_action"`
	Image       string `json:"image"`
	Built       bool   `json:"built"`
	RuntimeID   string `json:"runtime_id"`
	RuntimeARN  string `json:"runtime_arn"`
	Runtime     string `json:"runtime_action"`
	MMDSv2      bool   `json:"mmdsv2"`
}

// deployAgentCore deploys p to AgentCore: the plan (with the account STS
// names when --account is not given) and the read-only preflight, which
// refuses a runtime Rayito did not create (name_conflict) and what a CDK
// stack declares (cdk_managed) before anything is written; then the
// stack rayito-agent-NAME, the image (built by CodeBuild from a
// deterministic context zip unless ECR has its tag), the runtime
// (created or updated, then MMDSv2 required) and the record.
func deployAgentCore(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, dir string, p *project.Project) error {
	region, err := regionOf(f, cmd)
	if err != nil {
		return err
	}
	if cmd.String("account") != "" {
		// The plan's refusals first: they need nothing of AWS.
		if _, err := agentCorePlan(f, cmd, p); err != nil {
			return err
		}
	}
	if !cmd.IsSet("artifact-bucket") {
		return cliutil.Usagef("--target agentcore needs --artifact-bucket: the bucket the build context goes to (rayito setup's artifact bucket)")
	}
	if b := cmd.String("artifact-bucket"); !artifactBucketRE.MatchString(b) {
		return cliutil.Usagef("--artifact-bucket %q is not a bucket name the template accepts (3 to 63 of a-z 0-9 -)", b)
	}
	base := cmd.String("base-image")
	if base == "" {
		base = agentcore.DefaultBaseImage
	}
	if err := agentcore.CheckBaseImage(base); err != nil {
		return cliutil.Usage(fmt.Errorf("--base-image: %w", err))
	}
	wait := cmd.Duration("wait-timeout")
	if wait <= 0 {
		return cliutil.Usagef("--wait-timeout must be positive")
	}
	host, err := findHost(cmd.String("host-binary"))
	if err != nil {
		return cliutil.Usage(err)
	}
	if err := checkHostFile(host); err != nil {
		return err
	}
	aw, err := loadAgentCoreAWS(ctx, region)
	if err != nil {
		return err
	}
	if cmd.String("account") == "" {
		id, err := sts.NewFromConfig(aw.cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil {
			return cliutil.Interrupted(ctx, awsFailure("sts:GetCallerIdentity", err))
		}
		if err := cmd.Set("account", aws.ToString(id.Account)); err != nil {
			return err
		}
	}
	pl, err := agentCorePlan(f, cmd, p)
	if err != nil {
		return err
	}
	ex, err := preflight(ctx, aw, pl)
	if err != nil {
		return err
	}
	d := &acDeploy{f: f, aw: aw, pl: pl, p: p, dir: dir, host: host, base: base, wait: wait, bucket: cmd.String("artifact-bucket"),
		out: agentCoreOut{Name: p.Name, Target: targetAgentCore, Region: region, Stack: pl.Stack}}
	if err := d.run(ctx, ex); err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	r := &record{Name: p.Name, Target: targetAgentCore, Region: region, RuntimeID: d.out.RuntimeID, RuntimeARN: d.out.RuntimeARN,
		Stack: pl.Stack, Image: d.out.Image, CreatedAt: time.Now().UTC()}
	if err := writeRecord(f, r); err != nil {
		return err
	}
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, d.out)
	}
	fmt.Fprintf(f.IO.Out, "agent %s: deployed to AgentCore in %s\n", p.Name, region)
	mmds := "MMDSv2 required"
	if !d.out.MMDSv2 {
		mmds = "MMDSv2 NOT shown as required"
	}
	fmt.Fprintf(f.IO.Out, "runtime  %s (%s, %s)\n", d.out.RuntimeARN, d.out.Runtime, mmds)
	fmt.Fprintf(f.IO.Out, "image    %s\n", d.out.Image)
	fmt.Fprintf(f.IO.Out, "stack    %s (%s)\n", pl.Stack, d.out.StackAction)
	fmt.Fprintf(f.IO.Out, "invoke   rayito agent invoke %s\n", p.Name)
	return nil
}

// checkHostFile refuses a host binary that is not a regular linux arm64
// ELF executable (a usage error).
func checkHostFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return cliutil.Usagef("--host-binary %s: %s", path, cliutil.Describe(err))
	}
	if !st.Mode().IsRegular() {
		return cliutil.Usagef("--host-binary %s: not a regular file", path)
	}
	fd, err := os.Open(path)
	if err != nil {
		return cliutil.Usagef("--host-binary %s: %s", path, cliutil.Describe(err))
	}
	defer fd.Close()
	if err := agentcore.CheckHostBinary(fd); err != nil {
		return cliutil.Usage(fmt.Errorf("--host-binary %s: %w", path, err))
	}
	return nil
}

// preflight runs agentcore.Preflight; its AWS failures name the call.
func preflight(ctx context.Context, aw *awsClients, pl *agentcore.Plan) (*agentcore.Existing, error) {
	ex, err := agentcore.Preflight(ctx, pl, aw.control, aw.ecr)
	if err != nil {
		var pe *agentcore.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, cliutil.Interrupted(ctx, awsFailure("the AgentCore preflight", err))
	}
	return ex, nil
}

// acDeploy is one deploy to AgentCore after the preflight.
type acDeploy struct {
	f                 *cliutil.Factory
	aw                *awsClients
	pl                *agentcore.Plan
	p                 *project.Project
	dir, host, base   string
	bucket            string
	wait              time.Duration
	out               agentCoreOut
	roleARN, repoURI  string
	buildProject, tag string
}

func (d *acDeploy) progress(format string, args ...any) {
	fmt.Fprintf(d.f.IO.Err, "agent %s: "+format+"\n", append([]any{d.p.Name}, args...)...)
}

func (d *acDeploy) run(ctx context.Context, ex *agentcore.Existing) error {
	if err := d.stack(ctx); err != nil {
		return err
	}
	zip, err := d.context()
	if err != nil {
		return err
	}
	sum := agentcore.Sum(zip)
	d.tag = agentcore.ImageTag(sum)
	digest, err := d.imageDigest(ctx)
	if err != nil {
		return err
	}
	if digest == "" {
		if err := d.build(ctx, zip, sum); err != nil {
			return err
		}
		if digest, err = d.imageDigest(ctx); err != nil {
			return err
		}
		if digest == "" {
			return fmt.Errorf("%s: the build succeeded but ECR has no image tagged %s in %s", codeBuildFailed, d.tag, d.pl.Repository)
		}
		d.out.Built = true
	} else {
		d.progress("image %s:%s is in ECR: no upload, no build", d.pl.Repository, d.tag)
	}
	d.out.Image = d.repoURI + "@" + digest
	return d.runtime(ctx, ex)
}

// stack creates or updates rayito-agent-NAME and reads its outputs.
func (d *acDeploy) stack(ctx context.Context) error {
	cmds := cfnstack.Commands{Status: "aws cloudformation describe-stacks --stack-name " + d.pl.Stack, Destroy: "rayito agent delete --target agentcore --region " + d.out.Region + " " + d.p.Name}
	existing, err := cfnstack.Describe(ctx, d.aw.cfn, d.pl.Stack)
	switch {
	case errors.Is(err, cfnstack.ErrStackMissing):
		existing = nil
	case err != nil:
		return err
	default:
		if err := cfnstack.CanUpdate(d.pl.Stack, existing, cmds); err != nil {
			return err
		}
		if !strings.HasPrefix(aws.ToString(existing.Description), stackDescriptionPrefix) {
			return &cfnstack.Error{Stack: d.pl.Stack, Reason: cfnstack.ReasonBlocked, Status: string(existing.StackStatus),
				Detail: "it is not an agent stack (another template): nothing was changed"}
		}
	}
	param := func(k, v string) cfntypes.Parameter {
		return cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)}
	}
	res, err := cfnstack.Apply(ctx, d.aw.cfn, cfnstack.ApplyInput{
		Name: d.pl.Stack, Template: agentcore.RuntimeTemplate, Existing: existing, WaitTimeout: d.wait, Progress: d.f.IO.Err, Commands: cmds,
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam},
		Parameters: []cfntypes.Parameter{
			param("AgentName", d.p.Name), param("RuntimeName", d.pl.Runtime), param("EcrRepositoryName", d.pl.Repository),
			param("ArtifactBucket", d.bucket), param("ArtifactPrefix", agentcore.ArtifactPrefix),
			param("BedrockModelArns", strings.Join(d.pl.StatementResources("InvokeBedrockModels"), ",")),
			param("ReadableSecretArns", strings.Join(d.pl.StatementResources("ReadSecrets"), ",")),
		},
	})
	var te *cfnstack.TimeoutError
	if errors.As(err, &te) {
		return cli.Exit(te.Error()+" (--wait-timeout)", cliutil.ExitTimeout)
	}
	if err != nil {
		return err
	}
	d.out.StackAction = res.Action
	outs := cfnstack.Outputs(res.Stack)
	d.roleARN, d.repoURI, d.buildProject = outs["RuntimeRoleArn"], outs["RepositoryUri"], outs["BuildProjectName"]
	if d.roleARN == "" || d.repoURI == "" || d.buildProject == "" {
		return fmt.Errorf("stack %s: its outputs lack RuntimeRoleArn, RepositoryUri or BuildProjectName", d.pl.Stack)
	}
	return nil
}

// context stages the project and the host as the MicroVM path does and
// packs the deterministic context zip.
func (d *acDeploy) context() ([]byte, error) {
	stage, err := os.MkdirTemp("", "rayito-agentcore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if _, err := stageContext(d.f.IO.Err, d.p.Name, d.dir, d.host, stage); err != nil {
		return nil, err
	}
	df, err := agentcore.Dockerfile(d.base, d.p.Command)
	if err != nil {
		return nil, cliutil.Usage(err)
	}
	return agentcore.BuildContext(stage, df)
}

// imageDigest is the digest of the repository's image tagged d.tag, ""
// when there is none.
func (d *acDeploy) imageDigest(ctx context.Context) (string, error) {
	out, err := d.aw.ecr.DescribeImages(ctx, &ecr.DescribeImagesInput{
		RepositoryName: aws.String(d.pl.Repository), ImageIds: []ecrtypes.ImageIdentifier{{ImageTag: aws.String(d.tag)}},
	})
	var nf *ecrtypes.ImageNotFoundException
	switch {
	case errors.As(err, &nf):
		return "", nil
	case err != nil:
		return "", awsFailure("ecr:DescribeImages", err)
	}
	for _, im := range out.ImageDetails {
		if dg := aws.ToString(im.ImageDigest); strings.HasPrefix(dg, "sha256:") {
			return dg, nil
		}
	}
	return "", nil
}

// build uploads the context, runs the CodeBuild build and always deletes
// the context object after it ends (success, failure or Ctrl-C).
func (d *acDeploy) build(ctx context.Context, zip []byte, sum string) (err error) {
	key := agentcore.ContextKey(d.p.Name, sum)
	raw, _ := hex.DecodeString(sum)
	if _, err := d.aw.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(zip), ContentLength: aws.Int64(int64(len(zip))),
		ContentType: aws.String("application/zip"), ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
	}); err != nil {
		return awsenv.SanitizeS3("PutObject", err)
	}
	d.progress("uploaded the build context (%d bytes) to s3://%s/%s", len(zip), d.bucket, key)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, derr := d.aw.s3.DeleteObject(dctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)}); derr != nil {
			d.progress("the build context could not be deleted (%s): the bucket expires it after 7 days", cliutil.Describe(awsenv.SanitizeS3("DeleteObject", derr)))
		} else {
			d.progress("deleted the build context")
		}
	}()
	started, err := d.aw.build.StartBuild(ctx, &codebuild.StartBuildInput{
		ProjectName:            aws.String(d.buildProject),
		SourceTypeOverride:     cbtypes.SourceTypeS3,
		SourceLocationOverride: aws.String(d.bucket + "/" + key),
		EnvironmentVariablesOverride: []cbtypes.EnvironmentVariable{
			{Name: aws.String("IMAGE_TAG"), Value: aws.String(d.tag), Type: cbtypes.EnvironmentVariableTypePlaintext},
		},
	})
	if err != nil {
		return awsFailure("codebuild:StartBuild", err)
	}
	id := aws.ToString(started.Build.Id)
	d.progress("build %s started (image tag %s)", id, d.tag)
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	last := ""
	for {
		out, err := d.aw.build.BatchGetBuilds(wctx, &codebuild.BatchGetBuildsInput{Ids: []string{id}})
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return cli.Exit(fmt.Sprintf("build %s: still running after %s (--wait-timeout); it goes on", id, d.wait), cliutil.ExitTimeout)
			}
			return awsFailure("codebuild:BatchGetBuilds", err)
		}
		if len(out.Builds) == 1 {
			b := out.Builds[0]
			if ph := aws.ToString(b.CurrentPhase); ph != last {
				last = ph
				d.progress("build %s: %s", id, ph)
			}
			if b.BuildComplete {
				if b.BuildStatus == cbtypes.StatusTypeSucceeded {
					return nil
				}
				failed := ""
				for _, p := range b.Phases {
					if p.PhaseStatus != "" && p.PhaseStatus != cbtypes.StatusTypeSucceeded {
						failed = string(p.PhaseType)
						break
					}
				}
				return fmt.Errorf("%s: build %s ended %s in phase %s (its log: the CodeBuild console or aws codebuild batch-get-builds --ids %s)", codeBuildFailed, id, b.BuildStatus, orDash(failed), id)
			}
		}
		if err := agentcore.Sleep(wctx, buildPoll); err != nil {
			if ctx.Err() == nil {
				return cli.Exit(fmt.Sprintf("build %s: still running after %s (--wait-timeout); it goes on", id, d.wait), cliutil.ExitTimeout)
			}
			return err
		}
	}
}

// runtime creates or updates the runtime, waits for READY, and requires
// MMDSv2 unless the runtime already shows it.
func (d *acDeploy) runtime(ctx context.Context, ex *agentcore.Existing) error {
	spec := agentcore.RuntimeSpec{ContainerURI: d.out.Image, RoleARN: d.roleARN, Environment: d.pl.Environment}
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	var (
		ref agentcore.RuntimeRef
		err error
	)
	if ex.RuntimeID == "" {
		ref, err = agentcore.CreateRuntime(wctx, d.aw.control, d.pl, spec, newClientToken())
		if err != nil {
			return d.runtimeErr(ctx, wctx, "CreateAgentRuntime", err)
		}
		d.out.Runtime = "create"
		d.progress("runtime %s created", ref.ID)
	} else {
		ref, err = agentcore.UpdateRuntime(wctx, d.aw.control, ex.RuntimeID, spec, newClientToken())
		if err != nil {
			return d.runtimeErr(ctx, wctx, "UpdateAgentRuntime", err)
		}
		d.out.Runtime = "update"
		d.progress("runtime %s updated", ref.ID)
	}
	got, err := agentcore.WaitReady(wctx, d.aw.control, ref.ID, d.f.IO.Err)
	if err != nil {
		return d.runtimeErr(ctx, wctx, "GetAgentRuntime", err)
	}
	if !agentcore.MMDSv2(got) {
		if _, err := agentcore.UpdateRuntime(wctx, d.aw.control, ref.ID, spec, newClientToken()); err != nil {
			return d.runtimeErr(ctx, wctx, "UpdateAgentRuntime", err)
		}
		d.progress("runtime %s: MMDSv2 required", ref.ID)
		if got, err = agentcore.WaitReady(wctx, d.aw.control, ref.ID, d.f.IO.Err); err != nil {
			return d.runtimeErr(ctx, wctx, "GetAgentRuntime", err)
		}
	}
	d.out.RuntimeID, d.out.RuntimeARN, d.out.MMDSv2 = ref.ID, aws.ToString(got.AgentRuntimeArn), agentcore.MMDSv2(got)
	if !d.out.MMDSv2 {
		d.progress("warning: runtime %s does not show requireMMDSV2 after the update that sets it (AgentCore refuses to invoke it so)", ref.ID)
	}
	if d.out.RuntimeARN == "" {
		d.out.RuntimeARN = ref.ARN
	}
	return nil
}

func (d *acDeploy) runtimeErr(ctx, wctx context.Context, call string, err error) error {
	if ctx.Err() == nil && wctx.Err() != nil {
		return cli.Exit(fmt.Sprintf("runtime %s: not READY after %s (--wait-timeout)", d.pl.Runtime, d.wait), cliutil.ExitTimeout)
	}
	var re *agentcore.RuntimeError
	if errors.As(err, &re) {
		return err
	}
	return awsFailure("bedrock-agentcore-control:"+call, err)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newClientToken is an idempotency token (33 to 256 characters).
func newClientToken() string {
	t, _ := newToken()
	return "rayito-" + t[:40]
}

// awsFailure names the call and AWS's error code, never AWS's message
// (a signature error carries the canonical request).
func awsFailure(call string, err error) error {
	switch f := awsenv.Inspect(err); {
	case f.Code != "":
		return fmt.Errorf("%s failed: %s", call, f.Code)
	case f.Status != 0:
		return fmt.Errorf("%s failed: HTTP %d", call, f.Status)
	default:
		return fmt.Errorf("%s failed: %s", call, cliutil.Describe(err))
	}
}
