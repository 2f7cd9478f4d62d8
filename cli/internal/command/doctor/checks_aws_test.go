package doctor

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// awsWorld points the real probe (the AWS SDK's configuration, from the
// process environment) at the MicroVMs fake and an in-process S3 with one
// bucket, rayito-artifacts.
func awsWorld(t *testing.T) *microvmstest.Server {
	t.Helper()
	mv, err := microvmstest.New(microvmstest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mv.Close)
	be := s3mem.New()
	if err := be.CreateBucket("rayito-artifacts"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(s3.Close)
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME":                        home,
		"AWS_CONFIG_FILE":             filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_ACCESS_KEY_ID":           microvmstest.DefaultAccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       microvmstest.DefaultSecretAccessKey,
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  microvmstest.DefaultRegion,
		"AWS_DEFAULT_REGION":          "",
		"AWS_ENDPOINT_URL":            mv.URL(),
		"AWS_ENDPOINT_URL_LAMBDA":     "",
		"AWS_ENDPOINT_URL_S3":         s3.URL,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k)
		}
	}
	return mv
}

// awsRun runs the AWS checks with the real probe and kv as the CLI's
// environment, and returns them by name.
func awsRun(t *testing.T, kv ...string) map[string]Check {
	t.Helper()
	e := withEnv(fakeEnv(), kv...)
	e.AWS = awsProbe
	checks := Run(ctx, e, true)
	byName := map[string]Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	if len(byName) != 7 {
		t.Fatalf("%d checks: %v", len(checks), checks)
	}
	// No secret and no environment value ever reaches the output.
	text := Text(checks)
	for _, secret := range append([]string{microvmstest.DefaultSecretAccessKey, microvmstest.DefaultAccessKeyID}, kv...) {
		if strings.HasPrefix(secret, "RAYITO_") {
			continue
		}
		if secret != "" && strings.Contains(text, secret) {
			t.Errorf("output shows %q:\n%s", secret, text)
		}
	}
	return byName
}

func TestAWSWithFake(t *testing.T) {
	mv := awsWorld(t)
	arn := mv.AddImage("rayito-tmpl")
	c, err := mv.Client(microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}

	// A launchable image without rayito's tag, by name; the bucket exists.
	got := awsRun(t, "RAYITO_TEMPLATE", "rayito-tmpl", "RAYITO_ARTIFACT_BUCKET", "rayito-artifacts")
	status(t, got["aws credentials"], Pass, "EnvConfigCredentials")
	status(t, got["aws region"], Pass, "us-east-1")
	status(t, got["aws template"], Pass, "an image name")
	status(t, got["aws launch gate"], Pass, "the image is CREATED and version 1 is SUCCESSFUL and ACTIVE")
	status(t, got["aws quotas"], Pass, "0 live microVMs (not TERMINATED) in us-east-1; the API reports no quotas, the documented ones here are 1024 GB")
	status(t, got["aws artifact bucket"], Pass, "exists and these credentials reach it")
	status(t, got["aws version"], Warn, "no rayito:rayd-version tag")

	// Tagged by publish, as an ARN; a live microVM; no bucket configured.
	if err := c.TagResource(ctx, arn, map[string]string{raydVersionTag: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, Logging: &microvmsapi.Logging{Disabled: &struct{}{}}}); err != nil {
		t.Fatal(err)
	}
	got = awsRun(t, "RAYITO_TEMPLATE", arn)
	status(t, got["aws template"], Pass, "an image ARN")
	status(t, got["aws launch gate"], Pass, "version 1 is SUCCESSFUL and ACTIVE")
	status(t, got["aws quotas"], Pass, "1 live microVM (not TERMINATED)")
	status(t, got["aws artifact bucket"], Warn, "RAYITO_ARTIFACT_BUCKET is not set")
	status(t, got["aws version"], Pass, "the image's rayd 0.1.0 works with this rayito (SDK 0.1.0)")

	// A rayd this SDK cannot drive, or a tag that is no version.
	c.TagResource(ctx, arn, map[string]string{raydVersionTag: "7.0.0"})
	status(t, awsRun(t, "RAYITO_TEMPLATE", arn)["aws version"], Fail, "this rayito (SDK 0.1.0) cannot drive the image's rayd 7.0.0")
	c.TagResource(ctx, arn, map[string]string{raydVersionTag: "latest; rm -rf"})
	if v := awsRun(t, "RAYITO_TEMPLATE", arn)["aws version"]; v.Status != Warn || strings.Contains(v.Detail, "rm -rf") {
		t.Errorf("%+v", v)
	}

	// Unknown template, missing bucket.
	got = awsRun(t, "RAYITO_TEMPLATE", "rayito-nope", "RAYITO_ARTIFACT_BUCKET", "no-such-bucket")
	status(t, got["aws launch gate"], Fail, "RAYITO_TEMPLATE names no image in this account and region (us-east-1)")
	if !strings.Contains(got["aws launch gate"].Fix, "rayito image publish") {
		t.Errorf("fix: %q", got["aws launch gate"].Fix)
	}
	status(t, got["aws artifact bucket"], Fail, "RAYITO_ARTIFACT_BUCKET does not exist")
	status(t, got["aws version"], Warn, "skipped")

	// Template unset: the gate and the version are skipped with a fix.
	got = awsRun(t)
	status(t, got["aws launch gate"], Warn, "skipped: RAYITO_TEMPLATE is not set")
	status(t, got["aws version"], Warn, "skipped")

	// A build in progress: not launchable.
	cfg := microvmsapi.ImageBuildConfig{BaseImageArn: mv.ManagedImageARN(microvmstest.ManagedImage), BuildRoleArn: mv.RoleARN("b"),
		CodeArtifact: &microvmsapi.CodeArtifact{URI: "s3://rayito-artifacts/x.zip"}}
	if _, err := c.UpdateMicrovmImage(ctx, arn, &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	e := withEnv(fakeEnv(), "RAYITO_TEMPLATE", arn)
	e.AWS = awsProbe
	st := &awsState{}
	api, skip := st.api(ctx, e, "aws launch gate")
	if skip != nil {
		t.Fatal(skip)
	}
	// (The fake advances a build on every Get: check the state it
	// answers the gate's first Get with.)
	status(t, st.checkLaunchGate(ctx, e, api), Fail, "the image is UPDATING")

	// Credentials the service refuses: a failure with the SDK's sanitized
	// words and a fix, never AWS's message.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	got = awsRun(t, "RAYITO_TEMPLATE", "rayito-tmpl")
	status(t, got["aws launch gate"], Fail, "authentication failed")
	if !strings.Contains(got["aws launch gate"].Fix, "SandboxLauncherPolicy") || strings.Contains(got["aws launch gate"].Detail, "wrong-secret") {
		t.Errorf("%+v", got["aws launch gate"])
	}
}

// Without credentials the AWS calls are skipped, saying why, and --json
// carries no secret.
func TestAWSNoCredentials(t *testing.T) {
	awsWorld(t)
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	e := withEnv(fakeEnv(), "RAYITO_TEMPLATE", "rayito-tmpl")
	e.AWS = awsProbe
	checks := Run(ctx, e, true)
	for _, c := range checks[3:] {
		status(t, c, Warn, "skipped: no usable AWS credentials")
	}
	var b bytes.Buffer
	err := write(&b, checks, true)
	if err == nil || strings.Contains(b.String(), "rayito-tmpl") || !strings.Contains(b.String(), `"ok": false`) {
		t.Errorf("%v\n%s", err, b.String())
	}
}
