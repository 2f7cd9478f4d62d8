package microvmstest_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

func buildConfig(s *microvmstest.Server) microvmsapi.ImageBuildConfig {
	return microvmsapi.ImageBuildConfig{
		BaseImageArn:      s.ManagedImageARN(microvmstest.ManagedImage),
		BaseImageVersion:  "1",
		BuildRoleArn:      s.RoleARN("build"),
		CodeArtifact:      &microvmsapi.CodeArtifact{URI: "s3://bucket/app.zip"},
		CPUConfigurations: []microvmsapi.CPUConfiguration{{Architecture: microvmsapi.ArchitectureARM64}},
		Resources:         []microvmsapi.Resources{{MinimumMemoryInMiB: 2048}},
		Hooks: &microvmsapi.Hooks{
			Port:              9000,
			MicrovmHooks:      &microvmsapi.MicrovmHooks{Run: microvmsapi.HookEnabled, RunTimeoutInSeconds: 30},
			MicrovmImageHooks: &microvmsapi.MicrovmImageHooks{Ready: microvmsapi.HookEnabled, ReadyTimeoutInSeconds: 600},
		},
		EnvironmentVariables: map[string]string{"A": "1"},
		Logging:              &microvmsapi.Logging{Disabled: &struct{}{}},
	}
}

func imageInput(s *microvmstest.Server, name string) *microvmsapi.CreateMicrovmImageInput {
	return &microvmsapi.CreateMicrovmImageInput{Name: name, ImageBuildConfig: buildConfig(s), Tags: map[string]string{"team": "rayito"}}
}

func TestImageLifecycle(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)

	img, err := c.CreateMicrovmImage(ctx, imageInput(s, "app"))
	if err != nil {
		t.Fatal(err)
	}
	arn := s.ImageARN("app")
	if img.ImageArn != arn || img.State != microvmsapi.ImageCreating || img.ImageVersion != "1" || img.BaseImageVersion != "1.0" ||
		img.CodeArtifact == nil || img.Tags["team"] != "rayito" || img.CreatedAt == nil {
		t.Fatalf("create: %+v", img)
	}
	_, err = c.CreateMicrovmImage(ctx, imageInput(s, "app"))
	wantErr(t, err, microvmsapi.ConflictException, 409)

	// Version 1: PENDING, IN_PROGRESS after one Get, SUCCESSFUL after two.
	v, err := c.ListMicrovmImageVersions(ctx, arn, microvms.PageInput{})
	if err != nil || len(v.Items) != 1 || v.Items[0].State != microvmsapi.VersionPending {
		t.Fatalf("versions %+v %v", v, err)
	}
	ver, err := c.GetMicrovmImageVersion(ctx, arn, "1")
	if err != nil || ver.State != microvmsapi.VersionInProgress {
		t.Fatalf("version %+v %v", ver, err)
	}
	_, err = c.UpdateMicrovmImage(ctx, "app", &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: buildConfig(s)})
	wantErr(t, err, microvmsapi.ConflictException, 409) // the build runs
	got, err := c.GetMicrovmImage(ctx, "app")
	if err != nil || got.State != microvmsapi.ImageCreated || got.LatestActiveImageVersion != "1" || got.CodeArtifact != nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	ver, err = c.GetMicrovmImageVersion(ctx, arn, "1")
	if err != nil || !ver.Launchable() || ver.CodeArtifact == nil {
		t.Fatalf("version %+v %v", ver, err)
	}
	builds, err := c.ListMicrovmImageBuilds(ctx, arn, "1", microvms.ListBuildsInput{Architecture: microvmsapi.ArchitectureARM64})
	if err != nil || len(builds.Items) != 1 || builds.Items[0].BuildState != microvmsapi.BuildSuccessful {
		t.Fatalf("builds %+v %v", builds, err)
	}
	b, err := c.GetMicrovmImageBuild(ctx, arn, "1", builds.Items[0].BuildID)
	if err != nil || b.SnapshotBuild == nil {
		t.Fatalf("build %+v %v", b, err)
	}
	_, err = c.GetMicrovmImageBuild(ctx, arn, "1", "build-nope")
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
	none, err := c.ListMicrovmImageBuilds(ctx, arn, "1", microvms.ListBuildsInput{Chipset: "OTHER"})
	if err != nil || len(none.Items) != 0 {
		t.Fatalf("filtered builds %+v %v", none, err)
	}

	// It runs.
	m := run(t, c, arn)
	if m.ImageVersion != "1" {
		t.Fatalf("run %+v", m)
	}

	// Update: version 2, UPDATING → UPDATED.
	up, err := c.UpdateMicrovmImage(ctx, arn, &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: buildConfig(s)})
	if err != nil || up.State != microvmsapi.ImageUpdating || up.ImageVersion != "2" {
		t.Fatalf("update %+v %v", up, err)
	}
	_, err = c.UpdateMicrovmImage(ctx, arn, &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: buildConfig(s)})
	wantErr(t, err, microvmsapi.ConflictException, 409)
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn})
	wantErr(t, err, microvmsapi.ValidationException, 400) // UPDATING is not launchable
	pollImage(t, c, arn, microvmsapi.ImageUpdated)
	got, _ = c.GetMicrovmImage(ctx, arn)
	if got.LatestActiveImageVersion != "2" {
		t.Fatalf("latest %+v", got)
	}
	if m := run(t, c, arn); m.ImageVersion != "2" {
		t.Fatalf("run %+v", m)
	}

	// Pagination of versions.
	p1, err := c.ListMicrovmImageVersions(ctx, arn, microvms.PageInput{MaxResults: 1})
	if err != nil || len(p1.Items) != 1 || p1.NextToken == "" || p1.Items[0].ImageVersion != "1" {
		t.Fatalf("page 1 %+v %v", p1, err)
	}
	p2, err := c.ListMicrovmImageVersions(ctx, arn, microvms.PageInput{MaxResults: 1, NextToken: p1.NextToken})
	if err != nil || len(p2.Items) != 1 || p2.NextToken != "" || p2.Items[0].ImageVersion != "2" {
		t.Fatalf("page 2 %+v %v", p2, err)
	}
	n := 0
	for _, err := range c.ListAllMicrovmImageVersions(ctx, arn, microvms.PageInput{MaxResults: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("ListAll versions: %d", n)
	}

	// PATCH: INACTIVE version 2; the latest active is 1 again.
	pv, err := c.UpdateMicrovmImageVersion(ctx, arn, "2", microvmsapi.VersionInactive)
	if err != nil || pv.Status != microvmsapi.VersionInactive {
		t.Fatalf("patch %+v %v", pv, err)
	}
	if m := run(t, c, arn); m.ImageVersion != "1" {
		t.Fatalf("run %+v", m)
	}
	if _, err := c.UpdateMicrovmImageVersion(ctx, arn, "2", microvmsapi.VersionActive); err != nil {
		t.Fatal(err)
	}

	// Delete the ACTIVE version 1: the image is UPDATING meanwhile.
	d, err := c.DeleteMicrovmImageVersion(ctx, arn, "1")
	if err != nil || d.State != microvmsapi.VersionDeleting || d.ImageVersion != "1" {
		t.Fatalf("delete version %+v %v", d, err)
	}
	_, err = c.DeleteMicrovmImageVersion(ctx, arn, "2")
	wantErr(t, err, microvmsapi.ConflictException, 409)
	_, err = c.UpdateMicrovmImage(ctx, arn, &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: buildConfig(s)})
	wantErr(t, err, microvmsapi.ConflictException, 409)
	_, err = c.DeleteMicrovmImage(ctx, arn)
	wantErr(t, err, microvmsapi.ConflictException, 409)
	pollImage(t, c, arn, microvmsapi.ImageUpdated)
	_, err = c.GetMicrovmImageVersion(ctx, arn, "1")
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)

	// Delete the image.
	del, err := c.DeleteMicrovmImage(ctx, arn)
	if err != nil || del.State != microvmsapi.ImageDeleting {
		t.Fatalf("delete %+v %v", del, err)
	}
	_, err = c.GetMicrovmImage(ctx, arn)
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
}

func pollImage(t *testing.T, c *microvms.Client, arn string, want microvmsapi.ImageState) {
	t.Helper()
	for range 10 {
		img, err := c.GetMicrovmImage(ctx(t), arn)
		if err != nil {
			t.Fatal(err)
		}
		if img.State == want {
			return
		}
	}
	t.Fatalf("image never %s", want)
}

func TestFailedBuild(t *testing.T) {
	s := newServer(t, microvmstest.Options{Polls: 1})
	c := newClient(t, s)
	ctx := ctx(t)
	s.FailBuilds(1)
	if _, err := c.CreateMicrovmImage(ctx, imageInput(s, "bad")); err != nil {
		t.Fatal(err)
	}
	img, err := c.GetMicrovmImage(ctx, "bad")
	if err != nil || img.State != microvmsapi.ImageCreateFailed || img.LatestFailedImageVersion != "1" || img.LatestActiveImageVersion != "" {
		t.Fatalf("%+v %v", img, err)
	}
	v, _ := c.GetMicrovmImageVersion(ctx, "bad", "1")
	if v.State != microvmsapi.VersionFailed || v.StateReason == "" {
		t.Fatalf("version %+v", v)
	}
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: img.ImageArn})
	wantErr(t, err, microvmsapi.ValidationException, 400)
	_, err = c.UpdateMicrovmImageVersion(ctx, "bad", "1", microvmsapi.VersionActive)
	wantErr(t, err, microvmsapi.ValidationException, 400)
	// A new version fixes it.
	if _, err := c.UpdateMicrovmImage(ctx, "bad", &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: buildConfig(s)}); err != nil {
		t.Fatal(err)
	}
	pollImage(t, c, img.ImageArn, microvmsapi.ImageUpdated)
}

func TestImageValidation(t *testing.T) {
	s := newServer(t, microvmstest.Options{Rates: map[microvms.Operation]float64{microvms.OpCreateMicrovmImage: 0}})
	mod := func(f func(in *microvmsapi.CreateMicrovmImageInput)) []byte {
		in := imageInput(s, "x")
		f(in)
		return mustJSON(t, in)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"name", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Name = "a b" })},
		{"long name", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Name = string(make([]byte, 65)) })},
		{"base not an ARN", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.BaseImageArn = "al2023-1" })},
		{"base unknown", mod(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.BaseImageArn = "arn:aws:lambda:us-east-1:aws:microvm-image:ubuntu"
		})},
		{"base version", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.BaseImageVersion = "9" })},
		{"build role", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.BuildRoleArn = "arn:aws:iam::1:role/x" })},
		{"no build role", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.BuildRoleArn = "" })},
		{"ECR", mod(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.CodeArtifact.URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:latest"
		})},
		{"S3 without key", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.CodeArtifact.URI = "s3://bucket" })},
		{"no code", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.CodeArtifact = nil })},
		{"memory", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Resources[0].MinimumMemoryInMiB = 3000 })},
		{"two resources", mod(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.Resources = append(in.Resources, microvmsapi.Resources{MinimumMemoryInMiB: 512})
		})},
		{"x86", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.CPUConfigurations[0].Architecture = "X86_64" })},
		{"capability", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.AdditionalOsCapabilities = []string{"SOME"} })},
		{"run timeout", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmHooks.RunTimeoutInSeconds = 61 })},
		{"ready timeout", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmImageHooks.ReadyTimeoutInSeconds = 3601 })},
		{"hook state", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmHooks.Run = "ON" })},
		{"runtime hook without ready", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmImageHooks = nil })},
		{"hooks port", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.Port = 70000 })},
		{"51 variables", mod(func(in *microvmsapi.CreateMicrovmImageInput) {
			for i := range 51 {
				in.EnvironmentVariables["V"+strconv.Itoa(i)] = "x"
			}
		})},
		{"egress", mod(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.EgressNetworkConnectors = []string{s.ConnectorARN("NO_EGRESS")}
		})},
		{"logging", mod(func(in *microvmsapi.CreateMicrovmImageInput) { in.Logging = &microvmsapi.Logging{} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(t, s, http.MethodPost, microvmsapi.PathMicrovmImages, tc.body, false)
			if r.status != 400 || r.exception != microvmsapi.ValidationException {
				t.Fatalf("%d %s %s", r.status, r.exception, r.body)
			}
		})
	}
	// Update needs the three fields too.
	s.AddImage("u")
	r := raw(t, s, http.MethodPut, microvmsapi.MicrovmImagePath("u"), []byte(`{"baseImageArn":"`+s.ManagedImageARN("al2023-1")+`"}`), false)
	if r.status != 400 || r.exception != microvmsapi.ValidationException {
		t.Fatalf("update: %d %s", r.status, r.exception)
	}
}

func TestImageQuotaAndIdempotency(t *testing.T) {
	s := newServer(t, microvmstest.Options{Region: "eu-west-1", Rates: map[microvms.Operation]float64{microvms.OpCreateMicrovmImage: 0}})
	c := newClient(t, s)
	ctx := ctx(t)
	in := imageInput(s, "tok")
	in.ClientToken = "same"
	a, err := c.CreateMicrovmImage(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateMicrovmImage(ctx, in)
	if err != nil || b.ImageArn != a.ImageArn {
		t.Fatalf("repeat %+v %v", b, err)
	}
	in2 := imageInput(s, "tok2")
	in2.ClientToken = "same"
	_, err = c.CreateMicrovmImage(ctx, in2)
	wantErr(t, err, microvmsapi.ConflictException, 409)
	// Five concurrent builds in eu-west-1; the sixth is over the quota.
	for i := range 4 {
		if _, err := c.CreateMicrovmImage(ctx, imageInput(s, "b"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.CreateMicrovmImage(ctx, imageInput(s, "b5"))
	wantErr(t, err, microvmsapi.ServiceQuotaExceededException, 402)
}

func TestListImagesAndManaged(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)
	for _, n := range []string{"web-a", "web-b", "worker"} {
		s.AddImage(n)
	}
	l, err := c.ListMicrovmImages(ctx, microvms.ListImagesInput{NameFilter: "web"})
	if err != nil || len(l.Items) != 2 || l.Items[0].Name != "web-a" || l.Items[0].State != microvmsapi.ImageCreated ||
		l.Items[0].LatestActiveImageVersion != "1" {
		t.Fatalf("filter %+v %v", l, err)
	}
	l, err = c.ListMicrovmImages(ctx, microvms.ListImagesInput{NameFilter: "-b"}) // a substring
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "web-b" {
		t.Fatalf("substring %+v %v", l, err)
	}
	n := 0
	for _, err := range c.ListAllMicrovmImages(ctx, microvms.ListImagesInput{PageInput: microvms.PageInput{MaxResults: 1}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("ListAll images %d", n)
	}
	_, err = c.ListMicrovmImages(ctx, microvms.ListImagesInput{PageInput: microvms.PageInput{NextToken: "nope"}})
	wantErr(t, err, microvmsapi.ValidationException, 400)

	mi, err := c.ListManagedMicrovmImages(ctx, microvms.PageInput{})
	if err != nil || len(mi.Items) != 1 || mi.Items[0].ImageArn != "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1" {
		t.Fatalf("managed %+v %v", mi, err)
	}
	mv, err := c.ListManagedMicrovmImageVersions(ctx, mi.Items[0].ImageArn, microvms.PageInput{})
	if err != nil || len(mv.Items) != 1 || mv.Items[0].ImageVersion != "1" {
		t.Fatalf("managed versions %+v %v", mv, err)
	}
	if _, err := c.ListManagedMicrovmImageVersions(ctx, "al2023-1", microvms.PageInput{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ListManagedMicrovmImageVersions(ctx, "ubuntu", microvms.PageInput{})
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
}

func TestTags(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)
	arn := s.AddImage("app")
	if err := c.TagResource(ctx, arn, map[string]string{"a": "1", "b": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.UntagResource(ctx, arn, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.ListTags(ctx, arn)
	if err != nil || len(tags) != 1 || tags["b"] != "2" {
		t.Fatalf("tags %v %v", tags, err)
	}
	img, _ := c.GetMicrovmImage(ctx, arn)
	if img.Tags["b"] != "2" {
		t.Fatalf("image tags %v", img.Tags)
	}
	err = c.TagResource(ctx, s.ImageARN("nope"), map[string]string{"a": "1"})
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
	// MicroVMs cannot be tagged (the client refuses too; ask the server).
	for _, res := range []string{
		"arn:aws:lambda:us-east-1:123456789012:microvm:microvm-x",
		"arn:aws:lambda:us-east-1:123456789012:function:f",
		"app",
	} {
		r := raw(t, s, http.MethodGet, microvmsapi.TagsPath(res), nil, false)
		if r.status != 400 || r.exception != microvmsapi.ValidationException {
			t.Fatalf("%s: %d %s", res, r.status, r.exception)
		}
	}
	r := raw(t, s, http.MethodDelete, microvmsapi.TagsPath(arn), nil, false)
	if r.status != 400 {
		t.Fatalf("untag without keys: %d", r.status)
	}
}
