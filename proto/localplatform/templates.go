package localplatform

import "time"

// Templates on the local platform (docs/templates.md): a template's
// artifact (proto/template's zip) is PUT to the platform, which builds its
// root filesystem layer in a sandbox of its own; RunMicrovm then takes the
// template's name as imageIdentifier. Owner only, like every route.
const (
	// TemplatesPath lists the templates (GET, JSON TemplateList).
	// TemplatesPath + "/" + name: PUT the artifact (Content-Type
	// application/zip, at most MaxTemplateArtifact bytes; the header
	// TemplateSHA256Header, when sent, must be its hex sha256; ?force=1
	// builds again an artifact already built) → 202 Template (200 with
	// Unchanged when the same artifact is already READY); GET → Template;
	// DELETE → 204. TemplatesPath + "/" + name + "/logs": GET the last
	// build's log (text/plain).
	TemplatesPath = "/_rayito/templates"
	// TemplateSHA256Header carries an artifact's hex sha256.
	TemplateSHA256Header = "X-Rayito-Content-Sha256"
	// MaxTemplateArtifact bounds an artifact.
	MaxTemplateArtifact = 512 << 20
)

// Error codes of the templates routes (in localplatform.EventsError,
// beside the events routes' own).
const (
	// TemplatesUnsupported: this platform cannot build templates (it does
	// not run as root).
	TemplatesUnsupported = "unsupported"
	// TemplatesConflict: the template is being built, or too many builds
	// run.
	TemplatesConflict = "conflict"
)

// Template states.
const (
	TemplateBuilding = "BUILDING"
	TemplateReady    = "READY"
	TemplateFailed   = "FAILED"
)

// Reasons a template build failed (Template.Reason): a closed set.
const (
	TemplateReasonInvalidArtifact = "invalid_artifact" // the zip or its spec broke a rule
	TemplateReasonBaseUnsupported = "base_unsupported" // the local platform builds on "local" only
	TemplateReasonRunStepFailed   = "run_step_failed"  // a run step exited non-zero
	TemplateReasonCopyFailed      = "copy_failed"      // a copy step failed
	TemplateReasonWorkdirFailed   = "workdir_failed"   // a workdir could not be made
	TemplateReasonBuildTimeout    = "build_timeout"    // the build took longer than its limit
	TemplateReasonLaunchFailed    = "launch_failed"    // the build sandbox did not start
	TemplateReasonInterrupted     = "interrupted"      // the platform stopped during the build
	TemplateReasonInternal        = "internal"
)

// Template is a template's state on the platform.
type Template struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	SHA256 string `json:"sha256"`
	// Reason and Message say why a FAILED build failed (Message is fixed
	// text, never a command or file content); Step is the failed step's
	// index, -1 for none.
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	Step      int       `json:"step"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Unchanged: the PUT artifact was already built; nothing was done.
	Unchanged bool `json:"unchanged,omitempty"`
	// Runnable: a built layer exists (READY, or an earlier build's while
	// another builds or after one failed): sandboxes can start from it.
	Runnable bool `json:"runnable"`
}

// TemplateList is TemplatesPath's answer.
type TemplateList struct {
	Templates []Template `json:"templates"`
}
