package stackapi

import (
	"context"
	"errors"
	"net/http"
	"regexp"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"

	"github.com/rayito-dev/rayito/dashboard/internal/jwt"
	"github.com/rayito-dev/rayito/dashboard/internal/strictjson"
)

// Directory is the part of Cognito the actions re-check uses.
type Directory interface {
	AdminGetUser(ctx context.Context, in *cip.AdminGetUserInput, opts ...func(*cip.Options)) (*cip.AdminGetUserOutput, error)
	AdminListGroupsForUser(ctx context.Context, in *cip.AdminListGroupsForUserInput, opts ...func(*cip.Options)) (*cip.AdminListGroupsForUserOutput, error)
}

// ErrDirectory means Cognito did not answer; ErrNotAllowed that it
// answered and the user may not act.
var (
	ErrDirectory  = errors.New("stackapi: Cognito did not answer")
	ErrNotAllowed = errors.New("stackapi: user not enabled or not in the group")
)

// CheckUser re-checks the token's user in Cognito: the user exists under
// the token's username, carries the token's sub, is enabled and is in
// group (first 6 pages of groups).
func CheckUser(ctx context.Context, d Directory, poolID, group string, c *jwt.Claims) error {
	if c.Username == "" {
		return ErrNotAllowed
	}
	u, err := d.AdminGetUser(ctx, &cip.AdminGetUserInput{UserPoolId: aws.String(poolID), Username: aws.String(c.Username)})
	if err != nil {
		if awsCode(err) == "UserNotFoundException" {
			return ErrNotAllowed
		}
		return ErrDirectory
	}
	if !u.Enabled {
		return ErrNotAllowed
	}
	sub := ""
	for _, a := range u.UserAttributes {
		if aws.ToString(a.Name) == "sub" {
			sub = aws.ToString(a.Value)
		}
	}
	if sub != c.Sub {
		return ErrNotAllowed
	}
	in := &cip.AdminListGroupsForUserInput{UserPoolId: aws.String(poolID), Username: aws.String(c.Username), Limit: aws.Int32(60)}
	for range 6 {
		g, err := d.AdminListGroupsForUser(ctx, in)
		if err != nil {
			return ErrDirectory
		}
		for _, x := range g.Groups {
			if aws.ToString(x.GroupName) == group {
				return nil
			}
		}
		if aws.ToString(g.NextToken) == "" {
			break
		}
		in.NextToken = g.NextToken
	}
	return ErrNotAllowed
}

// Action names of the API, the audit and the control plane.
var actionNames = map[string]string{"kill": "TerminateMicrovm", "pause": "SuspendMicrovm", "resume": "ResumeMicrovm"}

// subRE is what goes into a role session name ([\w+=,.@-], <= 64 with the prefix).
var subRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,44}$`)

// SessionName is the actions role's session name for sub.
func SessionName(sub string) (string, bool) {
	if !subRE.MatchString(sub) {
		return "", false
	}
	return "rayito-dash-" + sub, true
}

type actionRequest struct {
	Action  string   `json:"action"`
	IDs     []string `json:"ids"`
	Confirm bool     `json:"confirm"`
}

type actionResult struct {
	ID      string `json:"id"`
	OK      bool   `json:"ok"`
	Code    string `json:"code,omitempty"`
	AWSCode string `json:"awsCode,omitempty"`
}

func (h *Handler) actions(ctx context.Context, c *jwt.Claims, req events.LambdaFunctionURLRequest, body []byte) events.LambdaFunctionURLResponse {
	if !h.Config.AllowActions || h.Assume == nil {
		return h.fail(http.StatusForbidden, "actions_disabled")
	}
	var in actionRequest
	// Exact keys only (strictjson): encoding/json alone would take
	// "Confirm" for confirm.
	if strictjson.Decode(body, &in) != nil {
		return h.fail(http.StatusBadRequest, "invalid_request")
	}
	if _, ok := actionNames[in.Action]; !ok || len(in.IDs) == 0 {
		return h.fail(http.StatusBadRequest, "invalid_request")
	}
	if len(in.IDs) > MaxIDs {
		return h.fail(http.StatusBadRequest, "too_many_ids")
	}
	seen := map[string]bool{}
	for _, id := range in.IDs {
		if !validID(id) || seen[id] {
			return h.fail(http.StatusBadRequest, "invalid_id")
		}
		seen[id] = true
	}
	if !in.Confirm {
		return h.fail(http.StatusBadRequest, "confirm_required")
	}
	session, ok := SessionName(c.Sub)
	if !ok {
		return h.fail(http.StatusForbidden, "not_allowed")
	}
	// Live identity: Cognito must say yes now.
	switch err := CheckUser(ctx, h.Directory, h.Config.PoolID, h.Config.Group, c); {
	case errors.Is(err, ErrNotAllowed):
		return h.fail(http.StatusForbidden, "not_allowed")
	case err != nil:
		return h.fail(http.StatusServiceUnavailable, "directory_unavailable")
	}
	// The audit rows before acting: any failure stops everything.
	reqID := req.RequestContext.RequestID
	ip := req.RequestContext.HTTP.SourceIP
	at := h.now().UTC()
	for _, id := range in.IDs {
		if err := h.Audit.Record(ctx, Entry{RequestID: reqID, SandboxID: id, Action: in.Action, Sub: c.Sub, SourceIP: ip, At: at}); err != nil {
			return h.fail(http.StatusServiceUnavailable, "audit_failed")
		}
	}
	actor, err := h.Assume(ctx, session)
	if err != nil {
		return h.upstream(err)
	}
	results := make([]actionResult, 0, len(in.IDs))
	for _, id := range in.IDs {
		var err error
		switch in.Action {
		case "kill":
			err = actor.TerminateMicrovm(ctx, id)
		case "pause":
			err = actor.SuspendMicrovm(ctx, id)
		case "resume":
			err = actor.ResumeMicrovm(ctx, id)
		}
		r := actionResult{ID: id, OK: err == nil}
		if err != nil {
			r.Code = "upstream_error"
			if c := awsCode(err); c != "" && len(c) <= 64 && codeRE.MatchString(c) {
				r.AWSCode = c
			}
		}
		results = append(results, r)
	}
	return h.json(http.StatusOK, map[string]any{"action": in.Action, "results": results})
}
