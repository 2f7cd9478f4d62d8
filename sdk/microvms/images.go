package microvms

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// PageInput selects a page of a listing.
type PageInput struct {
	// MaxResults is the page size; 0 leaves it to the service.
	MaxResults int
	// NextToken continues a previous listing.
	NextToken string
}

// ListImagesInput selects a page of [Client.ListMicrovmImages].
type ListImagesInput struct {
	PageInput
	// NameFilter filters images by name; "" means any.
	NameFilter string
}

// ListBuildsInput selects a page of [Client.ListMicrovmImageBuilds].
type ListBuildsInput struct {
	PageInput
	// Architecture (ARM_64), Chipset (GRAVITON) and ChipsetGeneration
	// filter the builds; "" means any.
	Architecture      string
	Chipset           string
	ChipsetGeneration string
}

// encodeQuery encodes q as AWS wants it: url.Values.Encode writes a space
// as '+', AWS wants %20 (a literal '+' is already %2B).
func encodeQuery(q url.Values) string { return strings.ReplaceAll(q.Encode(), "+", "%20") }

func (p PageInput) query() url.Values {
	q := url.Values{}
	if p.MaxResults != 0 {
		q.Set(microvmsapi.QueryMaxResults, strconv.Itoa(p.MaxResults))
	}
	if p.NextToken != "" {
		q.Set(microvmsapi.QueryNextToken, p.NextToken)
	}
	return q
}

func encodeBody(op Operation, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalid(op, "cannot encode input: "+err.Error())
	}
	return b, nil
}

func noField(op Operation, field string) error {
	return &APIError{Kind: KindInternal, Operation: string(op), Reason: "response has no " + field}
}

// paginate yields every item of the pages fetch returns, following
// nextToken from start on, and stops at the first error (yielded with a
// zero item).
func paginate[T any](op Operation, start string, fetch func(token string) (*microvmsapi.Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		token := start
		for {
			page, err := fetch(token)
			if err != nil {
				yield(zero, err)
				return
			}
			next := page.NextToken
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			if next == token {
				yield(zero, &APIError{Kind: KindInternal, Operation: string(op), Reason: "service returned the same nextToken again"})
				return
			}
			token = next
		}
	}
}

// listPage GETs one page of a listing at path with the query q.
func listPage[T any](ctx context.Context, c *Client, op Operation, path string, q url.Values) (*microvmsapi.Page[T], error) {
	var out microvmsapi.Page[T]
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: path, query: encodeQuery(q)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- Images ----

// CreateMicrovmImage creates an image and starts building its first
// version; the image is CREATING until the build ends (CREATED or
// CREATE_FAILED). Poll [Client.GetMicrovmImage].
//
// When in.ClientToken is empty a random one is generated for this call, so
// the client's own retries cannot create two images; in is not modified.
func (c *Client) CreateMicrovmImage(ctx context.Context, in *microvmsapi.CreateMicrovmImageInput) (*microvmsapi.MicrovmImage, error) {
	const op = OpCreateMicrovmImage
	if err := validateCreateImage(in); err != nil {
		return nil, err
	}
	body := *in
	if body.ClientToken == "" {
		body.ClientToken = newUUID()
	}
	b, err := encodeBody(op, &body)
	if err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImage
	if err := c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.PathMicrovmImages, body: b}, &out); err != nil {
		return nil, err
	}
	if out.ImageArn == "" {
		return nil, noField(op, "imageArn")
	}
	return &out, nil
}

// ListMicrovmImages returns one page of the account's images. See
// [Client.ListAllMicrovmImages] for every page.
func (c *Client) ListMicrovmImages(ctx context.Context, in ListImagesInput) (*microvmsapi.ListMicrovmImagesOutput, error) {
	const op = OpListMicrovmImages
	if err := validateMaxResults(op, in.MaxResults); err != nil {
		return nil, err
	}
	q := in.query()
	if in.NameFilter != "" {
		q.Set(microvmsapi.QueryNameFilter, in.NameFilter)
	}
	return listPage[microvmsapi.MicrovmImageSummary](ctx, c, op, microvmsapi.PathMicrovmImages, q)
}

// ListAllMicrovmImages returns every image matching in, following
// nextToken from in.NextToken on. Iteration stops at the first error,
// which is yielded with a zero summary.
func (c *Client) ListAllMicrovmImages(ctx context.Context, in ListImagesInput) iter.Seq2[microvmsapi.MicrovmImageSummary, error] {
	return paginate(OpListMicrovmImages, in.NextToken, func(tok string) (*microvmsapi.Page[microvmsapi.MicrovmImageSummary], error) {
		page := in
		page.NextToken = tok
		return c.ListMicrovmImages(ctx, page)
	})
}

// GetMicrovmImage returns an image by ARN or id (name).
func (c *Client) GetMicrovmImage(ctx context.Context, image string) (*microvmsapi.MicrovmImage, error) {
	const op = OpGetMicrovmImage
	if err := validateIdent(op, "image identifier", image); err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImage
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.MicrovmImagePath(image)}, &out); err != nil {
		return nil, err
	}
	if out.ImageArn == "" {
		return nil, noField(op, "imageArn")
	}
	return &out, nil
}

// UpdateMicrovmImage (PUT) builds a new version of image from the whole
// configuration in; codeArtifact, baseImageArn and buildRoleArn are
// required every time. While another build of the image runs the service
// answers ConflictException ([KindConflict]).
//
// An empty in.ClientToken is generated, as for [Client.CreateMicrovmImage].
func (c *Client) UpdateMicrovmImage(ctx context.Context, image string, in *microvmsapi.UpdateMicrovmImageInput) (*microvmsapi.MicrovmImage, error) {
	const op = OpUpdateMicrovmImage
	if err := validateIdent(op, "image identifier", image); err != nil {
		return nil, err
	}
	if err := validateUpdateImage(in); err != nil {
		return nil, err
	}
	body := *in
	if body.ClientToken == "" {
		body.ClientToken = newUUID()
	}
	b, err := encodeBody(op, &body)
	if err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImage
	if err := c.call(ctx, request{op: op, method: http.MethodPut, path: microvmsapi.MicrovmImagePath(image), body: b}, &out); err != nil {
		return nil, err
	}
	if out.ImageArn == "" {
		return nil, noField(op, "imageArn")
	}
	return &out, nil
}

// DeleteMicrovmImage deletes an image.
func (c *Client) DeleteMicrovmImage(ctx context.Context, image string) (*microvmsapi.DeleteMicrovmImageOutput, error) {
	const op = OpDeleteMicrovmImage
	if err := validateIdent(op, "image identifier", image); err != nil {
		return nil, err
	}
	var out microvmsapi.DeleteMicrovmImageOutput
	if err := c.call(ctx, request{op: op, method: http.MethodDelete, path: microvmsapi.MicrovmImagePath(image)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- Image versions ----

// ListMicrovmImageVersions returns one page of an image's versions.
func (c *Client) ListMicrovmImageVersions(ctx context.Context, image string, in PageInput) (*microvmsapi.ListMicrovmImageVersionsOutput, error) {
	const op = OpListMicrovmImageVersions
	if err := validateIdent(op, "image identifier", image); err != nil {
		return nil, err
	}
	if err := validateMaxResults(op, in.MaxResults); err != nil {
		return nil, err
	}
	return listPage[microvmsapi.MicrovmImageVersion](ctx, c, op, microvmsapi.MicrovmImageVersionsPath(image), in.query())
}

// ListAllMicrovmImageVersions returns every version of image, following
// nextToken from in.NextToken on.
func (c *Client) ListAllMicrovmImageVersions(ctx context.Context, image string, in PageInput) iter.Seq2[microvmsapi.MicrovmImageVersion, error] {
	return paginate(OpListMicrovmImageVersions, in.NextToken, func(tok string) (*microvmsapi.Page[microvmsapi.MicrovmImageVersion], error) {
		return c.ListMicrovmImageVersions(ctx, image, PageInput{MaxResults: in.MaxResults, NextToken: tok})
	})
}

// GetMicrovmImageVersion returns one version of an image.
func (c *Client) GetMicrovmImageVersion(ctx context.Context, image, version string) (*microvmsapi.MicrovmImageVersion, error) {
	const op = OpGetMicrovmImageVersion
	if err := validateVersionArgs(op, image, version); err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImageVersion
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.MicrovmImageVersionPath(image, version)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateMicrovmImageVersion (PATCH) sets a version's status, ACTIVE or
// INACTIVE.
func (c *Client) UpdateMicrovmImageVersion(ctx context.Context, image, version string, status microvmsapi.VersionStatus) (*microvmsapi.MicrovmImageVersion, error) {
	const op = OpUpdateMicrovmImageVersion
	if err := validateVersionArgs(op, image, version); err != nil {
		return nil, err
	}
	if !status.Valid() {
		return nil, invalid(op, "status must be ACTIVE or INACTIVE")
	}
	b, err := encodeBody(op, &microvmsapi.UpdateMicrovmImageVersionInput{Status: status})
	if err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImageVersion
	if err := c.call(ctx, request{op: op, method: http.MethodPatch, path: microvmsapi.MicrovmImageVersionPath(image, version), body: b}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteMicrovmImageVersion deletes a version, even an ACTIVE one. The
// image is UPDATING for a few seconds afterwards, so serialise deletions.
func (c *Client) DeleteMicrovmImageVersion(ctx context.Context, image, version string) (*microvmsapi.DeleteMicrovmImageVersionOutput, error) {
	const op = OpDeleteMicrovmImageVersion
	if err := validateVersionArgs(op, image, version); err != nil {
		return nil, err
	}
	var out microvmsapi.DeleteMicrovmImageVersionOutput
	if err := c.call(ctx, request{op: op, method: http.MethodDelete, path: microvmsapi.MicrovmImageVersionPath(image, version)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func validateVersionArgs(op Operation, image, version string) error {
	if err := validateIdent(op, "image identifier", image); err != nil {
		return err
	}
	return validateIdent(op, "image version", version)
}

// ---- Builds ----

// ListMicrovmImageBuilds returns one page of a version's builds.
func (c *Client) ListMicrovmImageBuilds(ctx context.Context, image, version string, in ListBuildsInput) (*microvmsapi.ListMicrovmImageBuildsOutput, error) {
	const op = OpListMicrovmImageBuilds
	if err := validateVersionArgs(op, image, version); err != nil {
		return nil, err
	}
	if err := validateMaxResults(op, in.MaxResults); err != nil {
		return nil, err
	}
	q := in.query()
	if in.Architecture != "" {
		q.Set(microvmsapi.QueryArchitecture, in.Architecture)
	}
	if in.Chipset != "" {
		q.Set(microvmsapi.QueryChipset, in.Chipset)
	}
	if in.ChipsetGeneration != "" {
		q.Set(microvmsapi.QueryChipsetGeneration, in.ChipsetGeneration)
	}
	return listPage[microvmsapi.MicrovmImageBuild](ctx, c, op, microvmsapi.MicrovmImageBuildsPath(image, version), q)
}

// ListAllMicrovmImageBuilds returns every build of a version matching in,
// following nextToken from in.NextToken on.
func (c *Client) ListAllMicrovmImageBuilds(ctx context.Context, image, version string, in ListBuildsInput) iter.Seq2[microvmsapi.MicrovmImageBuild, error] {
	return paginate(OpListMicrovmImageBuilds, in.NextToken, func(tok string) (*microvmsapi.Page[microvmsapi.MicrovmImageBuild], error) {
		page := in
		page.NextToken = tok
		return c.ListMicrovmImageBuilds(ctx, image, version, page)
	})
}

// GetMicrovmImageBuild returns one build, with its snapshot sizes.
func (c *Client) GetMicrovmImageBuild(ctx context.Context, image, version, buildID string) (*microvmsapi.MicrovmImageBuild, error) {
	const op = OpGetMicrovmImageBuild
	if err := validateVersionArgs(op, image, version); err != nil {
		return nil, err
	}
	if err := validateIdent(op, "build id", buildID); err != nil {
		return nil, err
	}
	var out microvmsapi.MicrovmImageBuild
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.MicrovmImageBuildPath(image, version, buildID)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- Managed images ----

// ListManagedMicrovmImages returns one page of the AWS managed base
// images.
func (c *Client) ListManagedMicrovmImages(ctx context.Context, in PageInput) (*microvmsapi.ListManagedMicrovmImagesOutput, error) {
	const op = OpListManagedMicrovmImages
	if err := validateMaxResults(op, in.MaxResults); err != nil {
		return nil, err
	}
	return listPage[microvmsapi.ManagedMicrovmImage](ctx, c, op, microvmsapi.PathManagedMicrovmImages, in.query())
}

// ListAllManagedMicrovmImages returns every managed base image.
func (c *Client) ListAllManagedMicrovmImages(ctx context.Context, in PageInput) iter.Seq2[microvmsapi.ManagedMicrovmImage, error] {
	return paginate(OpListManagedMicrovmImages, in.NextToken, func(tok string) (*microvmsapi.Page[microvmsapi.ManagedMicrovmImage], error) {
		return c.ListManagedMicrovmImages(ctx, PageInput{MaxResults: in.MaxResults, NextToken: tok})
	})
}

// ListManagedMicrovmImageVersions returns one page of a managed image's
// versions.
func (c *Client) ListManagedMicrovmImageVersions(ctx context.Context, image string, in PageInput) (*microvmsapi.ListManagedMicrovmImageVersionsOutput, error) {
	const op = OpListManagedMicrovmImageVersions
	if err := validateIdent(op, "image identifier", image); err != nil {
		return nil, err
	}
	if err := validateMaxResults(op, in.MaxResults); err != nil {
		return nil, err
	}
	return listPage[microvmsapi.ManagedMicrovmImageVersion](ctx, c, op, microvmsapi.ManagedMicrovmImageVersionsPath(image), in.query())
}

// ListAllManagedMicrovmImageVersions returns every version of a managed
// image.
func (c *Client) ListAllManagedMicrovmImageVersions(ctx context.Context, image string, in PageInput) iter.Seq2[microvmsapi.ManagedMicrovmImageVersion, error] {
	return paginate(OpListManagedMicrovmImageVersions, in.NextToken, func(tok string) (*microvmsapi.Page[microvmsapi.ManagedMicrovmImageVersion], error) {
		return c.ListManagedMicrovmImageVersions(ctx, image, PageInput{MaxResults: in.MaxResults, NextToken: tok})
	})
}

// ---- Shell token ----

// CreateMicrovmShellAuthToken mints a shell token for a microVM run with
// the SHELL_INGRESS connector and returns the header map the service
// answers. The service allows 5 calls per second.
func (c *Client) CreateMicrovmShellAuthToken(ctx context.Context, id string, in *microvmsapi.CreateMicrovmShellAuthTokenInput) (*microvmsapi.CreateMicrovmShellAuthTokenOutput, error) {
	const op = OpCreateMicrovmShellAuthToken
	if err := validateID(op, id); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, invalid(op, "nil input")
	}
	if in.ExpirationInMinutes < 1 {
		return nil, invalid(op, "expirationInMinutes must be at least 1")
	}
	b, err := encodeBody(op, in)
	if err != nil {
		return nil, err
	}
	var out microvmsapi.CreateMicrovmShellAuthTokenOutput
	if err := c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.ShellAuthTokenPath(id), body: b}, &out); err != nil {
		return nil, err
	}
	if len(out.AuthToken) == 0 {
		return nil, noField(op, "authToken")
	}
	return &out, nil
}

// ---- Tags ----

// TagResource adds or replaces tags on an image (by ARN). MicroVMs cannot
// be tagged.
func (c *Client) TagResource(ctx context.Context, resourceARN string, tags map[string]string) error {
	const op = OpTagResource
	if err := validateTaggable(op, resourceARN); err != nil {
		return err
	}
	if len(tags) == 0 {
		return invalid(op, "no tags")
	}
	for k := range tags {
		if k == "" {
			return invalid(op, "empty tag key")
		}
	}
	b, err := encodeBody(op, &microvmsapi.TagResourceInput{Tags: tags})
	if err != nil {
		return err
	}
	return c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.TagsPath(resourceARN), body: b}, nil)
}

// UntagResource removes the tags with the given keys from a resource.
func (c *Client) UntagResource(ctx context.Context, resourceARN string, keys []string) error {
	const op = OpUntagResource
	if err := validateTaggable(op, resourceARN); err != nil {
		return err
	}
	if len(keys) == 0 {
		return invalid(op, "no tag keys")
	}
	for _, k := range keys {
		if k == "" {
			return invalid(op, "empty tag key")
		}
	}
	q := url.Values{microvmsapi.QueryTagKeys: keys}
	return c.call(ctx, request{op: op, method: http.MethodDelete, path: microvmsapi.TagsPath(resourceARN), query: encodeQuery(q)}, nil)
}

// ListTags returns a resource's tags (ListTagsForResource in other
// services; the operation is named ListTags here).
func (c *Client) ListTags(ctx context.Context, resourceARN string) (map[string]string, error) {
	const op = OpListTags
	if err := validateTaggable(op, resourceARN); err != nil {
		return nil, err
	}
	var out microvmsapi.ListTagsOutput
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.TagsPath(resourceARN)}, &out); err != nil {
		return nil, err
	}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	return out.Tags, nil
}
