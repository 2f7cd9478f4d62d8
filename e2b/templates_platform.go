package e2b

import (
	"context"
	"io"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// templatePlatform is what the template build API needs of Rayito: the
// rayito SDK's template calls (the local platform's template store) in
// production, a fake in the tests. A platform without it answers the
// template routes with 501.
type templatePlatform interface {
	buildTemplate(ctx context.Context, name string, artifact io.Reader, sha256 string, force bool) (*rayito.TemplateInfo, error)
	getTemplate(ctx context.Context, name string) (*rayito.TemplateInfo, error)
	templateLogs(ctx context.Context, name string, w io.Writer) error
	deleteTemplate(ctx context.Context, name string) error
	listTemplates(ctx context.Context) ([]rayito.TemplateInfo, error)
}

func (p *rayitoPlatform) buildTemplate(ctx context.Context, name string, artifact io.Reader, sha string, force bool) (*rayito.TemplateInfo, error) {
	return rayito.BuildTemplate(ctx, rayito.BuildTemplateInput{Name: name, Artifact: artifact, SHA256: sha, Force: force}, p.opts...)
}

func (p *rayitoPlatform) getTemplate(ctx context.Context, name string) (*rayito.TemplateInfo, error) {
	return rayito.GetTemplate(ctx, name, p.opts...)
}

func (p *rayitoPlatform) templateLogs(ctx context.Context, name string, w io.Writer) error {
	return rayito.TemplateLogs(ctx, name, w, p.opts...)
}

func (p *rayitoPlatform) deleteTemplate(ctx context.Context, name string) error {
	return rayito.DeleteTemplate(ctx, name, p.opts...)
}

func (p *rayitoPlatform) listTemplates(ctx context.Context) ([]rayito.TemplateInfo, error) {
	return rayito.ListTemplates(ctx, p.opts...)
}
