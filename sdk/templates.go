package rayito

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rayito-dev/rayito/proto/localplatform"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
)

// Template states (TemplateInfo.State).
const (
	TemplateBuilding = localplatform.TemplateBuilding
	TemplateReady    = localplatform.TemplateReady
	TemplateFailed   = localplatform.TemplateFailed
)

// TemplateInfo is a template's state on the platform.
type TemplateInfo struct {
	Name  string
	State string
	// SHA256 is the hex sha256 of the artifact it was built from.
	SHA256 string
	// Reason (a closed set: invalid_artifact, base_unsupported,
	// run_step_failed, copy_failed, workdir_failed, build_timeout,
	// launch_failed, interrupted, internal), Step (-1: none) and Message
	// say why a FAILED build failed.
	Reason    string
	Step      int
	Message   string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Unchanged: BuildTemplate found the same artifact already built and
	// did nothing.
	Unchanged bool
}

// ErrTemplateBuild is what a failed build's *TemplateBuildError matches.
var ErrTemplateBuild = errors.New("template build failed")

// TemplateBuildError is a failed template build (WaitTemplate).
type TemplateBuildError struct {
	Name, Reason, Message string
	Step                  int
}

func (e *TemplateBuildError) Error() string {
	return fmt.Sprintf("template %s: build failed (%s): %s", e.Name, e.Reason, e.Message)
}

// Is matches ErrTemplateBuild.
func (e *TemplateBuildError) Is(target error) bool { return target == ErrTemplateBuild }

// BuildTemplateInput is what BuildTemplate builds.
type BuildTemplateInput struct {
	// Name is the template's name: 1 to 48 of a-z, 0-9, '-' and '_'.
	Name string
	// Artifact is the template's artifact (sdk/template.Compile's zip).
	Artifact io.Reader
	// SHA256, when set, is the artifact's hex sha256, checked by the
	// platform.
	SHA256 string
	// Force builds again an artifact already built.
	Force bool
}

// BuildTemplate starts building a template on the local platform (a
// root platform: docs/templates.md) and returns its state (BUILDING, or
// READY and Unchanged when the same artifact is already built). Follow it
// with WaitTemplate. On AWS, template builds are not built yet: the error
// matches ErrUnimplemented.
func BuildTemplate(ctx context.Context, in BuildTemplateInput, opts ...Option) (*TemplateInfo, error) {
	cfg := newConfig(opts)
	if err := templatesBackend(cfg); err != nil {
		return nil, err
	}
	if !ptemplate.ValidName(in.Name) || in.Name == LocalTemplate || in.Name == LocalRootTemplate {
		return nil, newError(ReasonInvalidArgument, "a template name is 1 to 48 of a-z, 0-9, '-' and '_' (not local or local-root)")
	}
	if in.Artifact == nil {
		return nil, newError(ReasonInvalidArgument, "no artifact")
	}
	h := http.Header{}
	h.Set("Content-Type", "application/zip")
	if in.SHA256 != "" {
		h.Set(localplatform.TemplateSHA256Header, in.SHA256)
	}
	path := templatePath(in.Name)
	if in.Force {
		path += "?force=1"
	}
	var out localplatform.Template
	// The upload may take longer than the default client's 30 s.
	c := *cfg
	if c.httpClient == nil {
		c.httpClient = &http.Client{}
	}
	if err := localCall(ctx, &c, localRequest{method: http.MethodPut, path: path, body: in.Artifact, header: h, what: "templates", missing: templatesMissing}, &out, nil); err != nil {
		return nil, err
	}
	return templateInfo(out), nil
}

// GetTemplate returns a template's state.
func GetTemplate(ctx context.Context, name string, opts ...Option) (*TemplateInfo, error) {
	cfg := newConfig(opts)
	if err := templatesBackend(cfg); err != nil {
		return nil, err
	}
	if !ptemplate.ValidName(name) {
		return nil, newError(ReasonNotFound, "no template is named like that")
	}
	var out localplatform.Template
	if err := localCall(ctx, cfg, localRequest{method: http.MethodGet, path: templatePath(name), what: "templates", missing: templatesMissing}, &out, nil); err != nil {
		return nil, err
	}
	return templateInfo(out), nil
}

// ListTemplates lists the templates built on the platform, by name.
func ListTemplates(ctx context.Context, opts ...Option) ([]TemplateInfo, error) {
	cfg := newConfig(opts)
	if err := templatesBackend(cfg); err != nil {
		return nil, err
	}
	var out localplatform.TemplateList
	if err := localCall(ctx, cfg, localRequest{method: http.MethodGet, path: localplatform.TemplatesPath, what: "templates", missing: templatesMissing}, &out, nil); err != nil {
		return nil, err
	}
	list := make([]TemplateInfo, 0, len(out.Templates))
	for _, t := range out.Templates {
		list = append(list, *templateInfo(t))
	}
	return list, nil
}

// DeleteTemplate removes a template (not while it builds). Sandboxes
// running it go on.
func DeleteTemplate(ctx context.Context, name string, opts ...Option) error {
	cfg := newConfig(opts)
	if err := templatesBackend(cfg); err != nil {
		return err
	}
	if !ptemplate.ValidName(name) {
		return newError(ReasonNotFound, "no template is named like that")
	}
	return localCall(ctx, cfg, localRequest{method: http.MethodDelete, path: templatePath(name), what: "templates", missing: templatesMissing}, nil, nil)
}

// TemplateLogs copies the last build's log of a template to w.
func TemplateLogs(ctx context.Context, name string, w io.Writer, opts ...Option) error {
	cfg := newConfig(opts)
	if err := templatesBackend(cfg); err != nil {
		return err
	}
	if !ptemplate.ValidName(name) {
		return newError(ReasonNotFound, "no template is named like that")
	}
	c := *cfg
	if c.httpClient == nil {
		c.httpClient = &http.Client{}
	}
	return localCall(ctx, &c, localRequest{method: http.MethodGet, path: templatePath(name) + "/logs", what: "templates", missing: templatesMissing}, nil, w)
}

// WaitTemplate waits until a template is no longer BUILDING: its state
// when READY, else a *TemplateBuildError (errors.Is ErrTemplateBuild).
func WaitTemplate(ctx context.Context, name string, opts ...Option) (*TemplateInfo, error) {
	poll := backoff.New(100*time.Millisecond, 2*time.Second)
	for {
		t, err := GetTemplate(ctx, name, opts...)
		if err != nil {
			return nil, err
		}
		switch t.State {
		case TemplateReady:
			return t, nil
		case TemplateFailed:
			return t, &TemplateBuildError{Name: name, Reason: t.Reason, Message: t.Message, Step: t.Step}
		}
		if err := poll.Wait(ctx); err != nil {
			return nil, err
		}
	}
}

const templatesMissing = "this local platform has no templates (update it)"

func templatePath(name string) string {
	return localplatform.TemplatesPath + "/" + url.PathEscape(name)
}

func templatesBackend(cfg *config) error {
	switch cfg.backend {
	case BackendLocal:
		return nil
	case BackendAWS:
		return newError(ReasonUnimplemented, "the SDK builds templates on the local platform only: on AWS, build with `RAYITO_BACKEND=aws rayito template build` (docs/templates.md)")
	}
	return errBackend(cfg)
}

func templateInfo(t localplatform.Template) *TemplateInfo {
	return &TemplateInfo{Name: t.Name, State: t.State, SHA256: t.SHA256, Reason: t.Reason, Step: t.Step, Message: t.Message,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Unchanged: t.Unchanged}
}

// checkLocalTemplate tells, before Create's call, why a template of the
// local platform cannot start sandboxes: not built, building, or its only
// build failed (a template with an earlier good build starts from it).
func checkLocalTemplate(ctx context.Context, cfg *config, name string) error {
	var t localplatform.Template
	err := localCall(ctx, cfg, localRequest{method: http.MethodGet, path: templatePath(name), what: "templates", missing: templatesMissing}, &t, nil)
	switch {
	case errors.Is(err, ErrNotFound):
		return newError(ReasonInvalidArgument, fmt.Sprintf("template %q is not built on this platform (rayito template list)", name))
	case err != nil:
		return err
	case t.Runnable:
		// READY, or a layer built earlier while another builds or after
		// one failed.
		return nil
	case t.State == TemplateFailed:
		return newError(ReasonInvalidArgument, fmt.Sprintf("template %q has no built layer: its build failed (%s; rayito template logs %s)", name, t.Reason, name))
	}
	return newError(ReasonInvalidArgument, fmt.Sprintf("template %q has no built layer yet: it is %s", name, t.State))
}
