package microvmsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Field names below the ones contracts.md names (its §2.2) follow the
// service model of lambda-microvms 2025-09-09 as published in AWS's typed
// SDK stubs.

// Paths of the image, build, managed-image, shell-token and tag
// operations, relative to the endpoint.
const (
	PathMicrovmImages        = APIVersion + "/microvm-images"         // POST Create, GET List
	PathManagedMicrovmImages = APIVersion + "/managed-microvm-images" // GET ListManaged
	// TagsAPIVersion is the (Lambda) path prefix of the tag operations.
	TagsAPIVersion = "/2017-03-31"
)

// MicrovmImagePath is GET, PUT (Update) and DELETE of one image.
func MicrovmImagePath(image string) string {
	return PathMicrovmImages + "/" + url.PathEscape(image)
}

// MicrovmImageVersionsPath is GET ListMicrovmImageVersions.
func MicrovmImageVersionsPath(image string) string { return MicrovmImagePath(image) + "/versions" }

// MicrovmImageVersionPath is GET, PATCH (Update) and DELETE of one version.
func MicrovmImageVersionPath(image, version string) string {
	return MicrovmImageVersionsPath(image) + "/" + url.PathEscape(version)
}

// MicrovmImageBuildsPath is GET ListMicrovmImageBuilds.
func MicrovmImageBuildsPath(image, version string) string {
	return MicrovmImageVersionPath(image, version) + "/builds"
}

// MicrovmImageBuildPath is GET GetMicrovmImageBuild.
func MicrovmImageBuildPath(image, version, build string) string {
	return MicrovmImageBuildsPath(image, version) + "/" + url.PathEscape(build)
}

// ManagedMicrovmImageVersionsPath is GET ListManagedMicrovmImageVersions.
func ManagedMicrovmImageVersionsPath(image string) string {
	return PathManagedMicrovmImages + "/" + url.PathEscape(image) + "/versions"
}

// ShellAuthTokenPath is POST CreateMicrovmShellAuthToken.
func ShellAuthTokenPath(id string) string { return MicrovmPath(id) + "/shell-auth-token" }

// TagsPath is POST TagResource, DELETE UntagResource and GET ListTags.
func TagsPath(resourceARN string) string {
	return TagsAPIVersion + "/tags/" + url.PathEscape(resourceARN)
}

// Further query parameters.
const (
	QueryNameFilter        = "nameFilter"
	QueryArchitecture      = "architecture"
	QueryChipset           = "chipset"
	QueryChipsetGeneration = "chipsetGeneration"
	QueryTagKeys           = "tagKeys"
)

// Limits of the image operations (contracts.md §2.2, §2.5, §2.7).
const (
	MaxImageNameLen           = 64
	MaxResourcesEntries       = 1
	MaxEnvironmentVariables   = 50
	MinMicrovmHookTimeout     = 1
	MaxMicrovmHookTimeout     = 60
	MinImageHookTimeout       = 1
	MaxImageHookTimeout       = 3600
	ArchitectureARM64         = "ARM_64"
	CapabilityAll             = "ALL"
	ChipsetGraviton           = "GRAVITON"
	CodeArtifactS3Scheme      = "s3://"
	MaxImagesPerRegion        = 100
	MaxVersionsPerImage       = 50
	MaxConcurrentBuilds       = 5
	MaxConcurrentBuildsLarger = 10
)

// MemorySizesMiB are the accepted resources[].minimumMemoryInMiB values.
var MemorySizesMiB = []int{512, 1024, 2048, 4096, 8192}

// ImageState is a MicroVM image's state.
type ImageState string

// The states of an image.
const (
	ImageCreating     ImageState = "CREATING"
	ImageCreated      ImageState = "CREATED"
	ImageCreateFailed ImageState = "CREATE_FAILED"
	ImageUpdating     ImageState = "UPDATING"
	ImageUpdated      ImageState = "UPDATED"
	ImageUpdateFailed ImageState = "UPDATE_FAILED"
	ImageDeleting     ImageState = "DELETING"
	ImageDeleteFailed ImageState = "DELETE_FAILED"
	ImageDeleted      ImageState = "DELETED"
)

// Valid reports whether s is one of the image states.
func (s ImageState) Valid() bool {
	switch s {
	case ImageCreating, ImageCreated, ImageCreateFailed, ImageUpdating, ImageUpdated,
		ImageUpdateFailed, ImageDeleting, ImageDeleteFailed, ImageDeleted:
		return true
	}
	return false
}

// Launchable reports whether an image in state s can run microVMs
// (CREATED or UPDATED); the version must also be SUCCESSFUL and ACTIVE.
func (s ImageState) Launchable() bool { return s == ImageCreated || s == ImageUpdated }

// VersionState is an image version's state.
type VersionState string

// The states of an image version.
const (
	VersionPending      VersionState = "PENDING"
	VersionInProgress   VersionState = "IN_PROGRESS"
	VersionSuccessful   VersionState = "SUCCESSFUL"
	VersionFailed       VersionState = "FAILED"
	VersionDeleting     VersionState = "DELETING"
	VersionDeleted      VersionState = "DELETED"
	VersionDeleteFailed VersionState = "DELETE_FAILED"
)

// Valid reports whether s is one of the version states.
func (s VersionState) Valid() bool {
	switch s {
	case VersionPending, VersionInProgress, VersionSuccessful, VersionFailed,
		VersionDeleting, VersionDeleted, VersionDeleteFailed:
		return true
	}
	return false
}

// VersionStatus is an image version's status.
type VersionStatus string

// The statuses of an image version.
const (
	VersionActive   VersionStatus = "ACTIVE"
	VersionInactive VersionStatus = "INACTIVE"
)

// Valid reports whether s is ACTIVE or INACTIVE.
func (s VersionStatus) Valid() bool { return s == VersionActive || s == VersionInactive }

// BuildState is an image build's state.
type BuildState string

// The states of a build.
const (
	BuildPending    BuildState = "PENDING"
	BuildInProgress BuildState = "IN_PROGRESS"
	BuildSuccessful BuildState = "SUCCESSFUL"
	BuildFailed     BuildState = "FAILED"
)

// Valid reports whether s is one of the build states.
func (s BuildState) Valid() bool {
	switch s {
	case BuildPending, BuildInProgress, BuildSuccessful, BuildFailed:
		return true
	}
	return false
}

// HookState enables or disables one lifecycle hook.
type HookState string

// The hook states.
const (
	HookEnabled  HookState = "ENABLED"
	HookDisabled HookState = "DISABLED"
)

// Timestamp is a service timestamp. The service sends epoch seconds (a
// JSON number, possibly fractional); an RFC 3339 string is also accepted.
// It is written as epoch seconds.
type Timestamp struct{ time.Time }

// MarshalJSON writes epoch seconds.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := strconv.AppendInt(nil, t.Unix(), 10)
	if ns := t.Nanosecond(); ns != 0 {
		frac := strconv.Itoa(1e9 + ns)[1:] // nine digits
		b = append(b, '.')
		b = append(b, strings.TrimRight(frac, "0")...)
	}
	return b, nil
}

// UnmarshalJSON reads epoch seconds or an RFC 3339 string.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		t.Time = v
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("microvmsapi: timestamp is neither epoch seconds nor RFC 3339")
	}
	sec, frac := math.Modf(f)
	t.Time = time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC()
	return nil
}

// CodeArtifact is the S3 zip with the Dockerfile at its root.
type CodeArtifact struct {
	URI string `json:"uri"`
}

// CPUConfiguration names an architecture (ARM_64).
type CPUConfiguration struct {
	Architecture string `json:"architecture"`
}

// Resources sets the image's memory: 512, 1024, 2048, 4096 or 8192 MiB.
type Resources struct {
	MinimumMemoryInMiB int `json:"minimumMemoryInMiB"`
}

// MicrovmHooks are the runtime hooks; each timeout is 1 to 60 seconds
// (0: unset).
type MicrovmHooks struct {
	Run                       HookState `json:"run,omitempty"`
	RunTimeoutInSeconds       int       `json:"runTimeoutInSeconds,omitempty"`
	Resume                    HookState `json:"resume,omitempty"`
	ResumeTimeoutInSeconds    int       `json:"resumeTimeoutInSeconds,omitempty"`
	Suspend                   HookState `json:"suspend,omitempty"`
	SuspendTimeoutInSeconds   int       `json:"suspendTimeoutInSeconds,omitempty"`
	Terminate                 HookState `json:"terminate,omitempty"`
	TerminateTimeoutInSeconds int       `json:"terminateTimeoutInSeconds,omitempty"`
}

// MicrovmImageHooks are the build hooks; each timeout is 1 to 3600
// seconds (0: unset).
type MicrovmImageHooks struct {
	Ready                    HookState `json:"ready,omitempty"`
	ReadyTimeoutInSeconds    int       `json:"readyTimeoutInSeconds,omitempty"`
	Validate                 HookState `json:"validate,omitempty"`
	ValidateTimeoutInSeconds int       `json:"validateTimeoutInSeconds,omitempty"`
}

// Hooks configures the lifecycle hooks, served on Port (Rayito: 9000).
type Hooks struct {
	Port              int                `json:"port,omitempty"`
	MicrovmHooks      *MicrovmHooks      `json:"microvmHooks,omitempty"`
	MicrovmImageHooks *MicrovmImageHooks `json:"microvmImageHooks,omitempty"`
}

// ImageBuildConfig is what each image version is built from: the body
// of UpdateMicrovmImage and most of CreateMicrovmImage, echoed by the
// image, version and build answers.
type ImageBuildConfig struct {
	BaseImageArn             string             `json:"baseImageArn,omitempty"`
	BaseImageVersion         string             `json:"baseImageVersion,omitempty"`
	BuildRoleArn             string             `json:"buildRoleArn,omitempty"`
	Description              string             `json:"description,omitempty"`
	CodeArtifact             *CodeArtifact      `json:"codeArtifact,omitempty"`
	Logging                  *Logging           `json:"logging,omitempty"`
	EgressNetworkConnectors  []string           `json:"egressNetworkConnectors,omitempty"`
	CPUConfigurations        []CPUConfiguration `json:"cpuConfigurations,omitempty"`
	Resources                []Resources        `json:"resources,omitempty"`
	AdditionalOsCapabilities []string           `json:"additionalOsCapabilities,omitempty"`
	Hooks                    *Hooks             `json:"hooks,omitempty"`
	EnvironmentVariables     map[string]string  `json:"environmentVariables,omitempty"`
}

// CreateMicrovmImageInput is the body of CreateMicrovmImage.
type CreateMicrovmImageInput struct {
	Name string `json:"name"`
	ImageBuildConfig
	Tags        map[string]string `json:"tags,omitempty"`
	ClientToken string            `json:"clientToken,omitempty"`
}

// UpdateMicrovmImageInput is the body of UpdateMicrovmImage (PUT): the
// whole configuration every time; codeArtifact, baseImageArn and
// buildRoleArn are required.
type UpdateMicrovmImageInput struct {
	ImageBuildConfig
	ClientToken string `json:"clientToken,omitempty"`
}

// MicrovmImage is the answer of CreateMicrovmImage, UpdateMicrovmImage
// (with the build configuration and ImageVersion, the version being
// built) and GetMicrovmImage (without them).
type MicrovmImage struct {
	ImageArn                 string     `json:"imageArn"`
	Name                     string     `json:"name,omitempty"`
	State                    ImageState `json:"state,omitempty"`
	LatestActiveImageVersion string     `json:"latestActiveImageVersion,omitempty"`
	LatestFailedImageVersion string     `json:"latestFailedImageVersion,omitempty"`
	CreatedAt                *Timestamp `json:"createdAt,omitempty"`
	UpdatedAt                *Timestamp `json:"updatedAt,omitempty"`
	ImageVersion             string     `json:"imageVersion,omitempty"`
	ImageBuildConfig
	Tags map[string]string `json:"tags,omitempty"`
}

// MicrovmImageSummary is one item of ListMicrovmImages.
type MicrovmImageSummary struct {
	ImageArn                 string     `json:"imageArn"`
	Name                     string     `json:"name"`
	State                    ImageState `json:"state"`
	CreatedAt                *Timestamp `json:"createdAt,omitempty"`
	LatestActiveImageVersion string     `json:"latestActiveImageVersion,omitempty"`
	LatestFailedImageVersion string     `json:"latestFailedImageVersion,omitempty"`
}

// Page is one page of a listing: its items and the token of the next
// page ("" after the last).
type Page[T any] struct {
	Items     []T    `json:"items"`
	NextToken string `json:"nextToken,omitempty"`
}

// ListMicrovmImagesOutput is the answer of ListMicrovmImages.
type ListMicrovmImagesOutput = Page[MicrovmImageSummary]

// DeleteMicrovmImageOutput is the answer of DeleteMicrovmImage.
type DeleteMicrovmImageOutput struct {
	ImageIdentifier string     `json:"imageIdentifier"`
	State           ImageState `json:"state"`
}

// MicrovmImageVersion is one version: an item of ListMicrovmImageVersions
// and the answer of GetMicrovmImageVersion and UpdateMicrovmImageVersion.
type MicrovmImageVersion struct {
	ImageBuildConfig
	ImageArn     string            `json:"imageArn"`
	ImageVersion string            `json:"imageVersion"`
	State        VersionState      `json:"state"`
	Status       VersionStatus     `json:"status"`
	CreatedAt    *Timestamp        `json:"createdAt,omitempty"`
	UpdatedAt    *Timestamp        `json:"updatedAt,omitempty"`
	StateReason  string            `json:"stateReason,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// Launchable reports whether microVMs can run from this version
// (SUCCESSFUL and ACTIVE; the image must also be CREATED or UPDATED).
func (v *MicrovmImageVersion) Launchable() bool {
	return v.State == VersionSuccessful && v.Status == VersionActive
}

// ListMicrovmImageVersionsOutput is the answer of ListMicrovmImageVersions.
type ListMicrovmImageVersionsOutput = Page[MicrovmImageVersion]

// UpdateMicrovmImageVersionInput is the body of UpdateMicrovmImageVersion.
type UpdateMicrovmImageVersionInput struct {
	Status VersionStatus `json:"status"`
}

// DeleteMicrovmImageVersionOutput is the answer of DeleteMicrovmImageVersion.
type DeleteMicrovmImageVersionOutput struct {
	ImageIdentifier string       `json:"imageIdentifier"`
	ImageVersion    string       `json:"imageVersion"`
	State           VersionState `json:"state"`
}

// SnapshotBuild are the sizes of a build's snapshot.
type SnapshotBuild struct {
	MemorySnapshotSizeInBytes int64 `json:"memorySnapshotSizeInBytes,omitempty"`
	CodeInstallSizeInBytes    int64 `json:"codeInstallSizeInBytes,omitempty"`
	DiskSnapshotSizeInBytes   int64 `json:"diskSnapshotSizeInBytes,omitempty"`
}

// MicrovmImageBuild is one build of a version: an item of
// ListMicrovmImageBuilds and the answer of GetMicrovmImageBuild (which
// adds SnapshotBuild).
type MicrovmImageBuild struct {
	ImageArn          string         `json:"imageArn"`
	ImageVersion      string         `json:"imageVersion"`
	BuildID           string         `json:"buildId"`
	BuildState        BuildState     `json:"buildState"`
	Architecture      string         `json:"architecture,omitempty"`
	Chipset           string         `json:"chipset,omitempty"`
	ChipsetGeneration string         `json:"chipsetGeneration,omitempty"`
	StateReason       string         `json:"stateReason,omitempty"`
	CreatedAt         *Timestamp     `json:"createdAt,omitempty"`
	SnapshotBuild     *SnapshotBuild `json:"snapshotBuild,omitempty"`
}

// ListMicrovmImageBuildsOutput is the answer of ListMicrovmImageBuilds.
type ListMicrovmImageBuildsOutput = Page[MicrovmImageBuild]

// ManagedMicrovmImage is one item of ListManagedMicrovmImages.
type ManagedMicrovmImage struct {
	ImageArn  string     `json:"imageArn"`
	CreatedAt *Timestamp `json:"createdAt,omitempty"`
	UpdatedAt *Timestamp `json:"updatedAt,omitempty"`
}

// ListManagedMicrovmImagesOutput is the answer of ListManagedMicrovmImages.
type ListManagedMicrovmImagesOutput = Page[ManagedMicrovmImage]

// ManagedMicrovmImageVersion is one item of ListManagedMicrovmImageVersions.
type ManagedMicrovmImageVersion struct {
	ImageArn     string     `json:"imageArn"`
	ImageVersion string     `json:"imageVersion"`
	CreatedAt    *Timestamp `json:"createdAt,omitempty"`
	UpdatedAt    *Timestamp `json:"updatedAt,omitempty"`
}

// ListManagedMicrovmImageVersionsOutput is the answer of
// ListManagedMicrovmImageVersions.
type ListManagedMicrovmImageVersionsOutput = Page[ManagedMicrovmImageVersion]

// CreateMicrovmShellAuthTokenInput is the body of
// CreateMicrovmShellAuthToken.
type CreateMicrovmShellAuthTokenInput struct {
	ExpirationInMinutes int `json:"expirationInMinutes"`
}

// CreateMicrovmShellAuthTokenOutput maps header names to values.
type CreateMicrovmShellAuthTokenOutput struct {
	AuthToken map[string]string `json:"authToken"`
}

// TagResourceInput is the body of TagResource (Lambda's capitalised
// names).
type TagResourceInput struct {
	Tags map[string]string `json:"Tags"`
}

// ListTagsOutput is the answer of ListTags.
type ListTagsOutput struct {
	Tags map[string]string `json:"Tags"`
}
