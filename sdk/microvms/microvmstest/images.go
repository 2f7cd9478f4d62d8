package microvmstest

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// image is one MicroVM image of the account.
type image struct {
	seq       uint64
	name, arn string
	state     microvmsapi.ImageState
	createdAt time.Time
	updatedAt time.Time
	tags      map[string]string
	cfg       microvmsapi.ImageBuildConfig
	versions  []*version // by number
	lastNum   int
	// The operation in progress: a build (building) or a version
	// deletion (deleting), and how many Get calls have seen it.
	building *version
	deleting *version
	gets     int
}

type version struct {
	num         int
	name        string
	cfg         microvmsapi.ImageBuildConfig
	state       microvmsapi.VersionState
	status      microvmsapi.VersionStatus
	createdAt   time.Time
	updatedAt   time.Time
	stateReason string
	builds      []*build
	fail        bool
}

type build struct {
	seq         uint64
	id          string
	state       microvmsapi.BuildState
	createdAt   time.Time
	stateReason string
}

func (v *version) launchable() bool {
	return v.state == microvmsapi.VersionSuccessful && v.status == microvmsapi.VersionActive
}

func (img *image) version(name string) *version {
	for _, v := range img.versions {
		if v.name == name {
			return v
		}
	}
	return nil
}

func (img *image) latestActive() *version {
	for i := len(img.versions) - 1; i >= 0; i-- {
		if v := img.versions[i]; v.launchable() {
			return v
		}
	}
	return nil
}

func (img *image) latestFailed() string {
	for i := len(img.versions) - 1; i >= 0; i-- {
		if v := img.versions[i]; v.state == microvmsapi.VersionFailed {
			return v.name
		}
	}
	return ""
}

func (img *image) busy() bool { return img.building != nil || img.deleting != nil }

// validName reports whether s matches [a-zA-Z0-9-_]{1,64}.
func validName(s string) bool {
	if s == "" || len(s) > microvmsapi.MaxImageNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// largeRegions have the larger build quota.
var largeRegions = []string{"us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"}

// managedCreated dates the managed image.
var managedCreated = time.Date(2025, 9, 9, 0, 0, 0, 0, time.UTC)

// AddImage registers a ready, launchable image (CREATED, version "1"
// SUCCESSFUL and ACTIVE, with one SUCCESSFUL build) and returns its ARN.
// An image of that name that exists already is left as it is.
func (s *Server) AddImage(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if img := s.images[name]; img != nil {
		return img.arn
	}
	now := s.clock().UTC()
	cfg := microvmsapi.ImageBuildConfig{
		BaseImageArn:      s.ManagedImageARN(ManagedImage),
		BaseImageVersion:  "1.0",
		BuildRoleArn:      s.RoleARN("rayito-build"),
		CodeArtifact:      &microvmsapi.CodeArtifact{URI: "s3://rayito-test/" + name + ".zip"},
		CPUConfigurations: []microvmsapi.CPUConfiguration{{Architecture: microvmsapi.ArchitectureARM64}},
		Resources:         []microvmsapi.Resources{{MinimumMemoryInMiB: 2048}},
	}
	img := s.newImageLocked(name, cfg, nil, now)
	v := img.building
	s.finishBuildLocked(img, v, now)
	return img.arn
}

// newImageLocked creates an image with version 1 building.
func (s *Server) newImageLocked(name string, cfg microvmsapi.ImageBuildConfig, tags map[string]string, now time.Time) *image {
	s.imgSeq++
	img := &image{seq: s.imgSeq, name: name, arn: s.ImageARN(name), state: microvmsapi.ImageCreating,
		createdAt: now, updatedAt: now, tags: map[string]string{}, cfg: cfg}
	for k, v := range tags {
		img.tags[k] = v
	}
	s.images[name] = img
	s.startBuildLocked(img, cfg, now)
	return img
}

// startBuildLocked adds the next version of img and starts its build.
func (s *Server) startBuildLocked(img *image, cfg microvmsapi.ImageBuildConfig, now time.Time) *version {
	img.lastNum++
	s.buildSeq++
	v := &version{num: img.lastNum, name: strconv.Itoa(img.lastNum), cfg: cfg,
		state: microvmsapi.VersionPending, status: microvmsapi.VersionInactive, createdAt: now, updatedAt: now}
	v.builds = []*build{{seq: s.buildSeq, id: "build-" + newUUID(), state: microvmsapi.BuildPending, createdAt: now}}
	if s.failBuild > 0 {
		s.failBuild--
		v.fail = true
	}
	img.versions = append(img.versions, v)
	img.building, img.gets = v, 0
	img.cfg = cfg
	img.updatedAt = now
	return v
}

func (s *Server) finishBuildLocked(img *image, v *version, now time.Time) {
	b := v.builds[len(v.builds)-1]
	v.updatedAt, img.updatedAt = now, now
	img.building = nil
	if v.fail {
		v.state, v.status = microvmsapi.VersionFailed, microvmsapi.VersionInactive
		v.stateReason = "The build failed: the ready hook did not answer 200."
		b.state, b.stateReason = microvmsapi.BuildFailed, v.stateReason
		if img.state == microvmsapi.ImageCreating {
			img.state = microvmsapi.ImageCreateFailed
		} else {
			img.state = microvmsapi.ImageUpdateFailed
		}
		return
	}
	v.state, v.status = microvmsapi.VersionSuccessful, microvmsapi.VersionActive
	b.state = microvmsapi.BuildSuccessful
	if img.state == microvmsapi.ImageCreating {
		img.state = microvmsapi.ImageCreated
	} else {
		img.state = microvmsapi.ImageUpdated
	}
}

// pollImageLocked counts one Get call concerning img and advances its
// operation.
func (s *Server) pollImageLocked(img *image) {
	now := s.clock().UTC()
	switch {
	case img.building != nil:
		img.gets++
		v := img.building
		if img.gets >= s.polls {
			s.finishBuildLocked(img, v, now)
			return
		}
		if v.state == microvmsapi.VersionPending {
			v.state, v.updatedAt = microvmsapi.VersionInProgress, now
			v.builds[len(v.builds)-1].state = microvmsapi.BuildInProgress
		}
	case img.deleting != nil:
		img.gets++
		if img.gets >= s.polls {
			img.versions = slices.DeleteFunc(img.versions, func(v *version) bool { return v == img.deleting })
			img.deleting = nil
			img.state, img.updatedAt = microvmsapi.ImageUpdated, now
		}
	}
}

// imageLocked resolves an image identifier: a name or an ARN of the
// account and region.
func (s *Server) imageLocked(ident string) (*image, *apiErr) {
	name := ident
	if strings.HasPrefix(ident, "arn:") {
		n, ok := strings.CutPrefix(ident, s.ImageARN(""))
		if !ok {
			return nil, notFound("The image does not exist.")
		}
		name = n
	}
	img := s.images[name]
	if img == nil {
		return nil, notFound("The image does not exist.")
	}
	return img, nil
}

func (s *Server) versionLocked(img *image, name string) (*version, *apiErr) {
	v := img.version(name)
	if v == nil {
		return nil, notFound("The image version does not exist.")
	}
	return v, nil
}

// ---- Views ----

func (s *Server) imageView(img *image, withConfig bool) microvmsapi.MicrovmImage {
	out := microvmsapi.MicrovmImage{
		ImageArn: img.arn, Name: img.name, State: img.state,
		LatestFailedImageVersion: img.latestFailed(),
		CreatedAt:                ts(img.createdAt), UpdatedAt: ts(img.updatedAt),
		Tags: cloneMap(img.tags),
	}
	if v := img.latestActive(); v != nil {
		out.LatestActiveImageVersion = v.name
	}
	if withConfig {
		out.ImageBuildConfig = cloneConfig(img.cfg)
		if img.building != nil {
			out.ImageVersion = img.building.name
		}
	}
	return out
}

func versionView(img *image, v *version) microvmsapi.MicrovmImageVersion {
	return microvmsapi.MicrovmImageVersion{
		ImageBuildConfig: cloneConfig(v.cfg),
		ImageArn:         img.arn, ImageVersion: v.name, State: v.state, Status: v.status,
		CreatedAt: ts(v.createdAt), UpdatedAt: ts(v.updatedAt), StateReason: v.stateReason,
	}
}

func buildView(img *image, v *version, b *build, detail bool) microvmsapi.MicrovmImageBuild {
	out := microvmsapi.MicrovmImageBuild{
		ImageArn: img.arn, ImageVersion: v.name, BuildID: b.id, BuildState: b.state,
		Architecture: microvmsapi.ArchitectureARM64, Chipset: microvmsapi.ChipsetGraviton, ChipsetGeneration: "4",
		StateReason: b.stateReason, CreatedAt: ts(b.createdAt),
	}
	if detail && b.state == microvmsapi.BuildSuccessful {
		out.SnapshotBuild = &microvmsapi.SnapshotBuild{
			MemorySnapshotSizeInBytes: 512 << 20, CodeInstallSizeInBytes: 64 << 20, DiskSnapshotSizeInBytes: 1 << 30,
		}
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneConfig(c microvmsapi.ImageBuildConfig) microvmsapi.ImageBuildConfig {
	var out microvmsapi.ImageBuildConfig
	b, _ := json.Marshal(c)
	_ = json.Unmarshal(b, &out)
	return out
}

// ---- Validation ----

func (s *Server) validateBuildConfig(c *microvmsapi.ImageBuildConfig) *apiErr {
	switch {
	case c.BaseImageArn == "":
		return validation("baseImageArn is required.")
	case !strings.HasPrefix(c.BaseImageArn, "arn:"):
		return validation("Invalid ARN format")
	case !s.isManagedARN(c.BaseImageArn):
		return validation("baseImageArn must be a managed image of the region, such as %s.", s.ManagedImageARN(ManagedImage))
	case c.BaseImageVersion != "" && c.BaseImageVersion != "1" && c.BaseImageVersion != "1.0":
		return validation("baseImageVersion is not a version of the base image.")
	case c.BuildRoleArn == "":
		return validation("buildRoleArn is required.")
	case !s.isRoleARN(c.BuildRoleArn):
		return validation("buildRoleArn must be the ARN of an IAM role of the account.")
	case c.CodeArtifact == nil || c.CodeArtifact.URI == "":
		return validation("codeArtifact.uri is required.")
	}
	rest, ok := strings.CutPrefix(c.CodeArtifact.URI, microvmsapi.CodeArtifactS3Scheme)
	if bucket, key, _ := strings.Cut(rest, "/"); !ok || bucket == "" || key == "" {
		return validation("codeArtifact.uri must be an S3 URI, s3://bucket/key.")
	}
	if e := validLogging(c.Logging); e != nil {
		return e
	}
	if e := s.checkConnectors("egressNetworkConnectors", c.EgressNetworkConnectors, false); e != nil {
		return e
	}
	for i, cpu := range c.CPUConfigurations {
		if cpu.Architecture != microvmsapi.ArchitectureARM64 {
			return validation("cpuConfigurations[%d].architecture must be %s.", i, microvmsapi.ArchitectureARM64)
		}
	}
	if len(c.Resources) > microvmsapi.MaxResourcesEntries {
		return validation("resources must list at most %d entry.", microvmsapi.MaxResourcesEntries)
	}
	for _, r := range c.Resources {
		if !slices.Contains(microvmsapi.MemorySizesMiB, r.MinimumMemoryInMiB) {
			return validation("resources[0].minimumMemoryInMiB must be one of 512, 1024, 2048, 4096 and 8192.")
		}
	}
	for i, capab := range c.AdditionalOsCapabilities {
		if capab != microvmsapi.CapabilityAll {
			return validation("additionalOsCapabilities[%d] must be %s.", i, microvmsapi.CapabilityAll)
		}
	}
	if len(c.EnvironmentVariables) > microvmsapi.MaxEnvironmentVariables {
		return validation("environmentVariables must have at most %d entries.", microvmsapi.MaxEnvironmentVariables)
	}
	for k := range c.EnvironmentVariables {
		if k == "" {
			return validation("environmentVariables has an empty name.")
		}
	}
	if h := c.Hooks; h != nil {
		if h.Port != 0 && (h.Port < 1 || h.Port > 65535) {
			return validation("hooks.port must be between 1 and 65535.")
		}
		runtimeOn := false
		if m := h.MicrovmHooks; m != nil {
			for _, t := range []struct {
				name  string
				state microvmsapi.HookState
				secs  int
			}{{"run", m.Run, m.RunTimeoutInSeconds}, {"resume", m.Resume, m.ResumeTimeoutInSeconds},
				{"suspend", m.Suspend, m.SuspendTimeoutInSeconds}, {"terminate", m.Terminate, m.TerminateTimeoutInSeconds}} {
				if e := validHook("microvmHooks."+t.name, t.state, t.secs, microvmsapi.MinMicrovmHookTimeout, microvmsapi.MaxMicrovmHookTimeout); e != nil {
					return e
				}
				runtimeOn = runtimeOn || t.state == microvmsapi.HookEnabled
			}
		}
		readyOn := false
		if m := h.MicrovmImageHooks; m != nil {
			for _, t := range []struct {
				name  string
				state microvmsapi.HookState
				secs  int
			}{{"ready", m.Ready, m.ReadyTimeoutInSeconds}, {"validate", m.Validate, m.ValidateTimeoutInSeconds}} {
				if e := validHook("microvmImageHooks."+t.name, t.state, t.secs, microvmsapi.MinImageHookTimeout, microvmsapi.MaxImageHookTimeout); e != nil {
					return e
				}
			}
			readyOn = m.Ready == microvmsapi.HookEnabled
		}
		if runtimeOn && !readyOn {
			return validation("Enabling a runtime hook requires the ready hook.")
		}
	}
	return nil
}

func validHook(name string, state microvmsapi.HookState, secs, lo, hi int) *apiErr {
	if state != "" && state != microvmsapi.HookEnabled && state != microvmsapi.HookDisabled {
		return validation("hooks.%s must be ENABLED or DISABLED.", name)
	}
	if secs != 0 && (secs < lo || secs > hi) {
		return validation("hooks.%sTimeoutInSeconds must be between %d and %d.", name, lo, hi)
	}
	return nil
}

func (s *Server) isManagedARN(arn string) bool {
	return arn == s.ManagedImageARN(ManagedImage)
}

func validTags(tags map[string]string) *apiErr {
	if len(tags) > 50 {
		return validation("A resource has at most 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 || strings.HasPrefix(k, "aws:") {
			return validation("Tag keys must be 1 to 128 characters (not starting with aws:) and values at most 256.")
		}
	}
	return nil
}

// ---- Operations ----

func (s *Server) buildsRunningLocked() int {
	n := 0
	for _, img := range s.images {
		if img.building != nil {
			n++
		}
	}
	return n
}

func (s *Server) buildQuota() int {
	if slices.Contains(largeRegions, s.region) {
		return microvmsapi.MaxConcurrentBuildsLarger
	}
	return microvmsapi.MaxConcurrentBuilds
}

func (s *Server) createImage(c *call) (any, *apiErr) {
	var in microvmsapi.CreateMicrovmImageInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if !validName(in.Name) {
		return nil, validation("name must match [a-zA-Z0-9-_]{1,64}.")
	}
	if e := s.validateBuildConfig(&in.ImageBuildConfig); e != nil {
		return nil, e
	}
	if e := validTags(in.Tags); e != nil {
		return nil, e
	}
	if e := validClientToken(in.ClientToken); e != nil {
		return nil, e
	}
	fp := fingerprint(in)
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ClientToken != "" {
		if prev, ok := s.imageTokens[in.ClientToken]; ok {
			if prev.fingerprint != fp {
				return nil, conflict("The clientToken was already used with a different request.")
			}
			if img := s.images[prev.id]; img != nil {
				return s.imageView(img, true), nil
			}
		}
	}
	if s.images[in.Name] != nil {
		return nil, conflict("An image with this name already exists.")
	}
	if len(s.images) >= microvmsapi.MaxImagesPerRegion {
		return nil, quota("The account has %d images, the most allowed per region.", microvmsapi.MaxImagesPerRegion)
	}
	if s.buildsRunningLocked() >= s.buildQuota() {
		return nil, quota("The account runs %d concurrent builds, the most allowed.", s.buildQuota())
	}
	cfg := cloneConfig(in.ImageBuildConfig)
	if cfg.BaseImageVersion == "1" || cfg.BaseImageVersion == "" {
		cfg.BaseImageVersion = "1.0"
	}
	img := s.newImageLocked(in.Name, cfg, in.Tags, s.clock().UTC())
	if in.ClientToken != "" {
		s.imageTokens[in.ClientToken] = idem{fingerprint: fp, id: img.name}
	}
	return s.imageView(img, true), nil
}

func (s *Server) listImages(c *call) (any, *apiErr) {
	filter := c.query.Get(microvmsapi.QueryNameFilter)
	listing := "ListMicrovmImages\x00" + filter
	max, after, e := s.pageParams(c, listing)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var imgs []*image
	for _, img := range s.images {
		if img.seq > after && strings.Contains(img.name, filter) {
			imgs = append(imgs, img)
		}
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].seq < imgs[j].seq })
	out := microvmsapi.ListMicrovmImagesOutput{Items: []microvmsapi.MicrovmImageSummary{}}
	for i, img := range imgs {
		if i == max {
			out.NextToken = s.newPageTokenLocked(listing, imgs[i-1].seq)
			break
		}
		v := s.imageView(img, false)
		out.Items = append(out.Items, microvmsapi.MicrovmImageSummary{
			ImageArn: v.ImageArn, Name: v.Name, State: v.State, CreatedAt: v.CreatedAt,
			LatestActiveImageVersion: v.LatestActiveImageVersion, LatestFailedImageVersion: v.LatestFailedImageVersion,
		})
	}
	return out, nil
}

func (s *Server) getImage(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	s.pollImageLocked(img)
	return s.imageView(img, false), nil
}

func (s *Server) updateImage(c *call) (any, *apiErr) {
	var in microvmsapi.UpdateMicrovmImageInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if e := s.validateBuildConfig(&in.ImageBuildConfig); e != nil {
		return nil, e
	}
	if e := validClientToken(in.ClientToken); e != nil {
		return nil, e
	}
	fp := fingerprint(in)
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	key := img.name + "\x00" + in.ClientToken
	if in.ClientToken != "" {
		if prev, ok := s.imageTokens[key]; ok {
			if prev.fingerprint != fp {
				return nil, conflict("The clientToken was already used with a different request.")
			}
			out := s.imageView(img, true)
			out.ImageVersion = prev.id
			return out, nil
		}
	}
	if img.busy() {
		return nil, conflict("Another operation on the image is in progress.")
	}
	if len(img.versions) >= microvmsapi.MaxVersionsPerImage {
		return nil, quota("The image has %d versions, the most allowed.", microvmsapi.MaxVersionsPerImage)
	}
	if s.buildsRunningLocked() >= s.buildQuota() {
		return nil, quota("The account runs %d concurrent builds, the most allowed.", s.buildQuota())
	}
	cfg := cloneConfig(in.ImageBuildConfig)
	if cfg.BaseImageVersion == "1" || cfg.BaseImageVersion == "" {
		cfg.BaseImageVersion = "1.0"
	}
	img.state = microvmsapi.ImageUpdating
	v := s.startBuildLocked(img, cfg, s.clock().UTC())
	if in.ClientToken != "" {
		s.imageTokens[key] = idem{fingerprint: fp, id: v.name}
	}
	return s.imageView(img, true), nil
}

func (s *Server) deleteImage(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	if img.busy() {
		return nil, conflict("Another operation on the image is in progress.")
	}
	delete(s.images, img.name)
	return microvmsapi.DeleteMicrovmImageOutput{ImageIdentifier: img.arn, State: microvmsapi.ImageDeleting}, nil
}

func (s *Server) listVersions(c *call) (any, *apiErr) {
	s.mu.Lock()
	img, e := s.imageLocked(c.params[0])
	s.mu.Unlock()
	if e != nil {
		return nil, e
	}
	listing := "ListMicrovmImageVersions\x00" + img.arn
	max, after, e := s.pageParams(c, listing)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := microvmsapi.ListMicrovmImageVersionsOutput{Items: []microvmsapi.MicrovmImageVersion{}}
	var vs []*version
	for _, v := range img.versions {
		if uint64(v.num) > after {
			vs = append(vs, v)
		}
	}
	for i, v := range vs {
		if i == max {
			out.NextToken = s.newPageTokenLocked(listing, uint64(vs[i-1].num))
			break
		}
		out.Items = append(out.Items, versionView(img, v))
	}
	return out, nil
}

func (s *Server) getVersion(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	s.pollImageLocked(img)
	v, e := s.versionLocked(img, c.params[1])
	if e != nil {
		return nil, e
	}
	return versionView(img, v), nil
}

func (s *Server) updateVersion(c *call) (any, *apiErr) {
	var in microvmsapi.UpdateMicrovmImageVersionInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if !in.Status.Valid() {
		return nil, validation("status must be ACTIVE or INACTIVE.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	v, e := s.versionLocked(img, c.params[1])
	if e != nil {
		return nil, e
	}
	switch {
	case v == img.building || v == img.deleting:
		return nil, conflict("The version's build or deletion is in progress.")
	case in.Status == microvmsapi.VersionActive && v.state != microvmsapi.VersionSuccessful:
		return nil, validation("Only a SUCCESSFUL version can be ACTIVE.")
	}
	now := s.clock().UTC()
	v.status, v.updatedAt, img.updatedAt = in.Status, now, now
	return versionView(img, v), nil
}

func (s *Server) deleteVersion(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	v, e := s.versionLocked(img, c.params[1])
	if e != nil {
		return nil, e
	}
	if img.busy() {
		return nil, conflict("Another operation on the image is in progress.")
	}
	now := s.clock().UTC()
	v.state, v.updatedAt = microvmsapi.VersionDeleting, now
	img.deleting, img.gets = v, 0
	img.state, img.updatedAt = microvmsapi.ImageUpdating, now
	return microvmsapi.DeleteMicrovmImageVersionOutput{ImageIdentifier: img.arn, ImageVersion: v.name, State: microvmsapi.VersionDeleting}, nil
}

func (s *Server) listBuilds(c *call) (any, *apiErr) {
	s.mu.Lock()
	img, e := s.imageLocked(c.params[0])
	var v *version
	if e == nil {
		v, e = s.versionLocked(img, c.params[1])
	}
	s.mu.Unlock()
	if e != nil {
		return nil, e
	}
	arch, chip, gen := c.query.Get(microvmsapi.QueryArchitecture), c.query.Get(microvmsapi.QueryChipset), c.query.Get(microvmsapi.QueryChipsetGeneration)
	listing := "ListMicrovmImageBuilds\x00" + img.arn + "\x00" + v.name + "\x00" + arch + "\x00" + chip + "\x00" + gen
	max, after, e := s.pageParams(c, listing)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := microvmsapi.ListMicrovmImageBuildsOutput{Items: []microvmsapi.MicrovmImageBuild{}}
	var bs []*build
	for _, b := range v.builds {
		bv := buildView(img, v, b, false)
		if b.seq > after && (arch == "" || arch == bv.Architecture) && (chip == "" || chip == bv.Chipset) &&
			(gen == "" || gen == bv.ChipsetGeneration) {
			bs = append(bs, b)
		}
	}
	for i, b := range bs {
		if i == max {
			out.NextToken = s.newPageTokenLocked(listing, bs[i-1].seq)
			break
		}
		out.Items = append(out.Items, buildView(img, v, b, false))
	}
	return out, nil
}

func (s *Server) getBuild(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.imageLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	s.pollImageLocked(img)
	v, e := s.versionLocked(img, c.params[1])
	if e != nil {
		return nil, e
	}
	for _, b := range v.builds {
		if b.id == c.params[2] {
			return buildView(img, v, b, true), nil
		}
	}
	return nil, notFound("The build does not exist.")
}

func (s *Server) listManaged(c *call) (any, *apiErr) {
	_, after, e := s.pageParams(c, "ListManagedMicrovmImages")
	if e != nil {
		return nil, e
	}
	out := microvmsapi.ListManagedMicrovmImagesOutput{Items: []microvmsapi.ManagedMicrovmImage{}}
	if after == 0 {
		out.Items = append(out.Items, microvmsapi.ManagedMicrovmImage{
			ImageArn: s.ManagedImageARN(ManagedImage), CreatedAt: ts(managedCreated), UpdatedAt: ts(managedCreated),
		})
	}
	return out, nil
}

func (s *Server) listManagedVersions(c *call) (any, *apiErr) {
	ident := c.params[0]
	if ident != ManagedImage && ident != s.ManagedImageARN(ManagedImage) {
		return nil, notFound("The managed image does not exist.")
	}
	_, after, e := s.pageParams(c, "ListManagedMicrovmImageVersions")
	if e != nil {
		return nil, e
	}
	out := microvmsapi.ListManagedMicrovmImageVersionsOutput{Items: []microvmsapi.ManagedMicrovmImageVersion{}}
	if after == 0 {
		out.Items = append(out.Items, microvmsapi.ManagedMicrovmImageVersion{
			ImageArn: s.ManagedImageARN(ManagedImage), ImageVersion: "1", CreatedAt: ts(managedCreated), UpdatedAt: ts(managedCreated),
		})
	}
	return out, nil
}

// ---- Tags ----

// taggableLocked resolves a resource ARN to a taggable image.
func (s *Server) taggableLocked(arn string) (*image, *apiErr) {
	switch {
	case !strings.HasPrefix(arn, "arn:"):
		return nil, validation("Invalid ARN format")
	case strings.Contains(arn, ":microvm:") || strings.Contains(arn, ":microvm/"):
		return nil, validation("MicroVMs cannot be tagged.")
	case !strings.HasPrefix(arn, s.ImageARN("")):
		return nil, validation("The resource ARN is not a taggable resource of this account and region.")
	}
	return s.imageLocked(arn)
}

func (s *Server) tagResource(c *call) (any, *apiErr) {
	var in microvmsapi.TagResourceInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if len(in.Tags) == 0 {
		return nil, validation("Tags must not be empty.")
	}
	if e := validTags(in.Tags); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.taggableLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	merged := cloneMap(img.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range in.Tags {
		merged[k] = v
	}
	if e := validTags(merged); e != nil {
		return nil, e
	}
	img.tags = merged
	return struct{}{}, nil
}

func (s *Server) untagResource(c *call) (any, *apiErr) {
	keys := c.query[microvmsapi.QueryTagKeys]
	if len(keys) == 0 {
		return nil, validation("tagKeys is required.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.taggableLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	for _, k := range keys {
		delete(img.tags, k)
	}
	return struct{}{}, nil
}

func (s *Server) listTags(c *call) (any, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, e := s.taggableLocked(c.params[0])
	if e != nil {
		return nil, e
	}
	tags := cloneMap(img.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	return microvmsapi.ListTagsOutput{Tags: tags}, nil
}
