package stackapi

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
)

// Environment variable names (infra/dashboard.yaml sets them).
const (
	EnvMode           = "RAYITO_DASHBOARD_MODE" // "api" (default) or "quota"
	EnvOrigin         = "RAYITO_DASHBOARD_ORIGIN"
	EnvPoolID         = "RAYITO_DASHBOARD_USER_POOL_ID"
	EnvClientID       = "RAYITO_DASHBOARD_CLIENT_ID"
	EnvHostedUIDomain = "RAYITO_DASHBOARD_HOSTED_UI_DOMAIN"
	EnvGroup          = "RAYITO_DASHBOARD_GROUP"
	EnvAuditTable     = "RAYITO_DASHBOARD_AUDIT_TABLE"
	EnvStateTable     = "RAYITO_DASHBOARD_STATE_TABLE"
	EnvActionsRoleArn = "RAYITO_DASHBOARD_ACTIONS_ROLE_ARN" // "" without AllowActions
	EnvCostExplorer   = "RAYITO_DASHBOARD_COST_EXPLORER"    // "true" or "false"
	EnvTopicArn       = "RAYITO_DASHBOARD_QUOTA_TOPIC_ARN"
	EnvQuotaLimit     = "RAYITO_DASHBOARD_QUOTA_LIMIT"
	EnvQuotaPercent   = "RAYITO_DASHBOARD_QUOTA_PERCENT"
	EnvTheme          = "RAYITO_DASHBOARD_THEME" // a theme JSON (docs/dashboard.md); invalid is discarded
	EnvLogo           = "RAYITO_DASHBOARD_LOGO"  // s3://bucket/key of an SVG logo, or "" (logo.go)
	EnvRegion         = "AWS_REGION"
)

// ErrConfig reports a missing or invalid variable.
var ErrConfig = errors.New("stackapi: bad configuration")

// Env is the Lambda's configuration.
type Env struct {
	Mode         string
	Config       Config
	AuditTable   string
	StateTable   string
	ActionsRole  string
	TopicArn     string
	QuotaLimit   int
	QuotaPercent int
	// ThemeDiscarded is set when RAYITO_DASHBOARD_THEME was invalid.
	ThemeDiscarded bool
	// LogoBucket and LogoKey name the logo object ("": none).
	LogoBucket, LogoKey string
}

var (
	originRE = regexp.MustCompile(`^https://[a-z0-9]{1,63}\.lambda-url\.[a-z0-9-]{1,30}\.on\.aws$`)
	tableRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	arnRE    = regexp.MustCompile(`^arn:aws[a-z-]*:(iam|sns)::?[0-9]{0,12}:?[A-Za-z0-9_+=,.@/:-]{1,512}$`)
	domainRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,200}[a-z0-9]$`)
	groupRE  = regexp.MustCompile(`^[\p{L}\p{M}\p{S}\p{N}\p{P}]{1,128}$`)
)

// LoadEnv reads the configuration.
func LoadEnv(getenv func(string) string) (Env, error) {
	e := Env{Mode: getenv(EnvMode)}
	if e.Mode == "" {
		e.Mode = "api"
	}
	bad := func(k string) (Env, error) { return Env{}, fmt.Errorf("%w: %s", ErrConfig, k) }
	region := getenv(EnvRegion)
	switch e.Mode {
	case "quota":
		e.StateTable, e.TopicArn = getenv(EnvStateTable), getenv(EnvTopicArn)
		if !tableRE.MatchString(e.StateTable) {
			return bad(EnvStateTable)
		}
		if !arnRE.MatchString(e.TopicArn) || !strings.HasPrefix(strings.SplitN(e.TopicArn, ":", 4)[2], "sns") {
			return bad(EnvTopicArn)
		}
		n, err := strconv.Atoi(getenv(EnvQuotaLimit))
		if err != nil || n < 1 || n > 100000 {
			return bad(EnvQuotaLimit)
		}
		p, err := strconv.Atoi(getenv(EnvQuotaPercent))
		if err != nil || p < 1 || p > 100 {
			return bad(EnvQuotaPercent)
		}
		e.QuotaLimit, e.QuotaPercent = n, p
		e.Config.Region = region
		return e, nil
	case "api":
	default:
		return bad(EnvMode)
	}
	c := Config{
		Origin: getenv(EnvOrigin), PoolID: getenv(EnvPoolID), ClientID: getenv(EnvClientID),
		HostedUIDomain: getenv(EnvHostedUIDomain), Group: getenv(EnvGroup), Region: region,
	}
	if c.Origin != "" {
		if u, err := url.Parse(c.Origin); err != nil || u.Host == "" || !originRE.MatchString(c.Origin) {
			return bad(EnvOrigin)
		}
	}
	if c.PoolID == "" || c.ClientID == "" {
		return bad(EnvPoolID + "/" + EnvClientID)
	}
	if !domainRE.MatchString(c.HostedUIDomain) {
		return bad(EnvHostedUIDomain)
	}
	if !groupRE.MatchString(c.Group) {
		return bad(EnvGroup)
	}
	e.AuditTable, e.StateTable = getenv(EnvAuditTable), getenv(EnvStateTable)
	if !tableRE.MatchString(e.AuditTable) || !tableRE.MatchString(e.StateTable) {
		return bad(EnvAuditTable + "/" + EnvStateTable)
	}
	e.ActionsRole = getenv(EnvActionsRoleArn)
	if e.ActionsRole != "" {
		if !arnRE.MatchString(e.ActionsRole) {
			return bad(EnvActionsRoleArn)
		}
		c.AllowActions = true
	}
	switch getenv(EnvCostExplorer) {
	case "true":
		c.EnableCostExplorer = true
	case "", "false":
	default:
		return bad(EnvCostExplorer)
	}
	// The theme: the local dashboard's validator; an invalid one is
	// discarded and the factory one served (ThemeDiscarded says so).
	c.Theme = theme.Default()
	if raw := getenv(EnvTheme); raw != "" {
		if t, err := theme.Parse([]byte(raw)); err == nil {
			c.Theme = t
		} else {
			e.ThemeDiscarded = true
		}
	}
	b, k, err := ParseLogoLocation(getenv(EnvLogo))
	if err != nil {
		return Env{}, err
	}
	e.LogoBucket, e.LogoKey = b, k
	e.Config = c
	return e, nil
}
