package envdhttp

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// maxInitBody bounds POST /init's body.
const maxInitBody = 64 << 10

// initReq is envd's /init body: what E2B's orchestrator sends when a
// sandbox starts.
type initReq map[string]json.RawMessage

// In Rayito the platform's /run hook does what envd's /init does (the
// access token, the environment, the default user and directory), before
// any client can call; so /init here is a check that asks nothing rayd
// does not already do:
//
//   - accessToken: absent, or the token the request carries (the token
//     is the platform's to set, never a client's to change);
//   - defaultUser "user" and defaultWorkdir "/home/user" (or absent): the
//     defaults rayd applies;
//   - envVars, volumeMounts: absent or empty (set them at create);
//   - timestamp, hyperloopIP: ignored (the clock is the machine's; no
//     hyperloop).
//
// Then 204; anything else is 400 naming the field, never its value.
func (h *Handlers) init(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInitBody+1))
	if err != nil || len(body) > maxInitBody {
		fail(w, rpcerr.Invalid("the /init body is unreadable or larger than 64 KiB"))
		return
	}
	var req initReq
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			fail(w, rpcerr.Invalid("the /init body is not a JSON object"))
			return
		}
	}
	if msg := checkInit(req, r.Header.Get("X-Access-Token")); msg != "" {
		fail(w, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, msg))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// checkInit is "" when req asks nothing rayd does not already do, else a
// message naming the first field that does (fields in name order).
func checkInit(req initReq, token string) string {
	names := make([]string, 0, len(req))
	for k := range req {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := req[k]
		var s string
		switch k {
		case "timestamp", "hyperloopIP":
		case "accessToken":
			if json.Unmarshal(v, &s) != nil || s != "" && subtle.ConstantTimeCompare([]byte(s), []byte(token)) != 1 {
				return "accessToken: the sandbox's token is set by the platform when it starts and cannot be changed by /init"
			}
		case "defaultUser":
			if json.Unmarshal(v, &s) != nil || s != "" && s != "user" {
				return "defaultUser: the default user is \"user\" (pass user on each call for another)"
			}
		case "defaultWorkdir":
			if json.Unmarshal(v, &s) != nil || s != "" && s != "/home/user" {
				return "defaultWorkdir: the default directory is /home/user (pass cwd on each call for another)"
			}
		case "envVars", "volumeMounts":
			if !emptyJSON(v) {
				return fmt.Sprintf("%s: set at create, not by /init", k)
			}
		default:
			return fmt.Sprintf("%s: not supported by rayd's /init", k)
		}
	}
	return ""
}

// emptyJSON is null, {} or [].
func emptyJSON(v json.RawMessage) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	switch t := x.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
