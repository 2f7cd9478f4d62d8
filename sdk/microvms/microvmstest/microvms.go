package microvmstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// vm is one microVM the fake answers for.
type vm struct {
	id  string
	seq uint64
	// pub is the microVM as GetMicrovm answers it. In forwarded mode its
	// state is the last one the backend reported.
	pub microvmsapi.Microvm
	// Simulated transitions: next is the state the microVM moves to once
	// left more GetMicrovm calls have seen it.
	next microvmsapi.State
	left int

	// Forwarded mode: the backend's id and endpoint.
	backendID       string
	backendEndpoint string

	proxy *proxyListener
}

// stateReasonSuccess is the stateReason of a microVM terminated by the
// API.
const stateReasonSuccess = "Success."

// stateReasonMaxDuration ends a simulated microVM whose
// maximumDurationInSeconds passed.
const stateReasonMaxDuration = "Maximum duration exceeded."

func (s *Server) forwarded() bool { return s.backend != nil }

// backendErr turns a backend client's error into the answer: the same
// exception and status, with a fixed message.
func backendErr(err error) *apiErr {
	var ae *microvms.APIError
	if errors.As(err, &ae) && ae.Exception != "" && ae.StatusCode != 0 {
		e := &apiErr{status: ae.StatusCode, exception: ae.Exception, message: defaultMessage(ae.Exception)}
		if ae.RetryAfter > 0 {
			e.retryAfter = fmt.Sprint(int(ae.RetryAfter / time.Second))
		}
		return e
	}
	if errors.As(err, &ae) && ae.Kind == microvms.KindInvalidArgument {
		return validation("The request is not valid.")
	}
	return internal()
}

// ---- RunMicrovm ----

func (s *Server) runMicrovm(c *call) (any, *apiErr) {
	var in microvmsapi.RunMicrovmInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	var seen struct {
		MaximumDurationInSeconds json.RawMessage            `json:"maximumDurationInSeconds"`
		IdlePolicy               map[string]json.RawMessage `json:"idlePolicy"`
	}
	_ = json.Unmarshal(c.body, &seen)
	if e := s.validateRun(&in, seen.MaximumDurationInSeconds, seen.IdlePolicy); e != nil {
		return nil, e
	}
	fp := fingerprint(in)

	s.mu.Lock()
	if in.ClientToken != "" {
		if prev, ok := s.runTokens[in.ClientToken]; ok {
			v := s.vms[prev.id]
			s.mu.Unlock()
			if prev.fingerprint != fp {
				return nil, conflict("The clientToken was already used with a different request.")
			}
			if v == nil {
				return nil, conflict("The clientToken was already used.")
			}
			return s.describe(c.ctx, v)
		}
	}
	img, version, e := s.launchableLocked(in.ImageIdentifier, in.ImageVersion)
	if e != nil {
		s.mu.Unlock()
		return nil, e
	}
	imageArn, imageName := img.arn, img.name
	s.mu.Unlock()

	now := s.clock().UTC()
	pub := microvmsapi.Microvm{
		State:                    microvmsapi.StatePending,
		ImageArn:                 imageArn,
		ImageVersion:             version,
		StartedAt:                ptrTime(now),
		ExecutionRoleArn:         in.ExecutionRoleArn,
		IdlePolicy:               in.IdlePolicy,
		Logging:                  in.Logging,
		MaximumDurationInSeconds: in.MaximumDurationInSeconds,
		IngressNetworkConnectors: in.IngressNetworkConnectors,
		EgressNetworkConnectors:  in.EgressNetworkConnectors,
	}
	if pub.MaximumDurationInSeconds == 0 {
		pub.MaximumDurationInSeconds = microvmsapi.MaxDurationSeconds
	}
	v := &vm{pub: pub}
	if s.forwarded() {
		if e := s.runOnBackend(c, v, in, imageName); e != nil {
			return nil, e
		}
	}
	if v.id == "" {
		v.id = "microvm-" + newUUID()
	}
	v.pub.MicrovmID = v.id
	if !s.forwarded() {
		v.next, v.left = microvmsapi.StateRunning, s.polls
	}
	p, err := s.newProxy(v.id)
	if err != nil {
		return nil, internal()
	}
	v.proxy = p
	v.pub.Endpoint = p.addr

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.close()
		return nil, internal()
	}
	s.proxies = append(s.proxies, p)
	s.vmSeq++
	v.seq = s.vmSeq
	s.vms[v.id] = v
	if in.ClientToken != "" {
		s.runTokens[in.ClientToken] = idem{fingerprint: fp, id: v.id}
	}
	out := clonePub(v.pub)
	s.mu.Unlock()
	// The service answers PENDING, whatever the backend said.
	out.State = microvmsapi.StatePending
	return out, nil
}

// runOnBackend runs in on the backend (image imageName, managed network
// connectors only) for v, which takes the backend's id, endpoint and start
// time.
func (s *Server) runOnBackend(c *call, v *vm, in microvmsapi.RunMicrovmInput, imageName string) *apiErr {
	fin := in
	fin.ImageIdentifier = imageName
	fin.IngressNetworkConnectors = managedOnly(in.IngressNetworkConnectors)
	fin.EgressNetworkConnectors = managedOnly(in.EgressNetworkConnectors)
	m, err := s.backend.RunMicrovm(c.ctx, &fin)
	if err != nil {
		return backendErr(err)
	}
	v.backendID, v.backendEndpoint = m.MicrovmID, m.Endpoint
	if m.StartedAt != nil {
		v.pub.StartedAt = ptrTime(m.StartedAt.UTC())
	}
	if strings.HasPrefix(m.MicrovmID, "microvm-") {
		v.id = m.MicrovmID
	}
	return nil
}

// managedOnly keeps the managed network connectors (a backend such as
// localvm has no VPCs).
func managedOnly(arns []string) []string {
	var out []string
	for _, a := range arns {
		if strings.Contains(a, microvmsapi.ConnectorARNInfix) {
			out = append(out, a)
		}
	}
	return out
}

func (s *Server) validateRun(in *microvmsapi.RunMicrovmInput, rawDuration json.RawMessage, rawIdle map[string]json.RawMessage) *apiErr {
	// The JSON itself: an explicit 0 duration, and an idle policy missing
	// a field, are refused (a Go zero value cannot tell them apart).
	if in.MaximumDurationInSeconds == 0 && rawDuration != nil && string(rawDuration) != "null" {
		return validation("maximumDurationInSeconds must be between %d and %d.", microvmsapi.MinDurationSeconds, microvmsapi.MaxDurationSeconds)
	}
	if rawIdle != nil {
		for _, k := range []string{"maxIdleDurationSeconds", "suspendedDurationSeconds", "autoResumeEnabled"} {
			if v, ok := rawIdle[k]; !ok || string(v) == "null" {
				return validation("idlePolicy must set maxIdleDurationSeconds, suspendedDurationSeconds and autoResumeEnabled.")
			}
		}
	}
	// The rules every implementation shares.
	if err := microvmsapi.CheckRun(in); err != nil {
		return validation("%s", err.Error())
	}
	// This account's: its roles and connectors.
	if in.ExecutionRoleArn != "" && !s.isRoleARN(in.ExecutionRoleArn) {
		return validation("executionRoleArn must be the ARN of an IAM role of the account.")
	}
	if e := s.checkConnectors("ingressNetworkConnectors", in.IngressNetworkConnectors, true); e != nil {
		return e
	}
	return s.checkConnectors("egressNetworkConnectors", in.EgressNetworkConnectors, false)
}

// validLogging and validClientToken are microvmsapi's rules as this
// server's errors.
func validLogging(l *microvmsapi.Logging) *apiErr {
	if err := microvmsapi.CheckLogging(l); err != nil {
		return validation("%s", err.Error())
	}
	return nil
}

func validClientToken(tok string) *apiErr {
	if err := microvmsapi.CheckClientToken(tok); err != nil {
		return validation("%s", err.Error())
	}
	return nil
}

// isRoleARN reports whether arn is an IAM role of the account.
func (s *Server) isRoleARN(arn string) bool {
	name, ok := strings.CutPrefix(arn, "arn:aws:iam::"+s.account+":role/")
	return ok && name != "" && len(arn) <= 2048 && !strings.ContainsAny(name, " \t\r\n")
}

// checkConnectors checks a list of connector ARNs: managed connectors of
// the region valid for the list, or VPC connectors of the account
// (arn:aws:lambda:<region>:<account>:network-connector:<name>).
func (s *Server) checkConnectors(field string, arns []string, ingress bool) *apiErr {
	if len(arns) > microvmsapi.MaxConnectors {
		return validation("%s must list at most %d connectors.", field, microvmsapi.MaxConnectors)
	}
	for i, arn := range arns {
		if name, ok := strings.CutPrefix(arn, microvmsapi.ConnectorARN(s.region, "")); ok {
			valid := name == microvmsapi.ConnectorInternet
			if ingress {
				valid = name == microvmsapi.ConnectorAllIngress || name == microvmsapi.ConnectorNoIngress ||
					name == microvmsapi.ConnectorShellIngress || name == "HTTP_INGRESS"
			}
			if !valid {
				return validation("%s[%d] is not a valid network connector for this list.", field, i)
			}
			continue
		}
		if name, ok := strings.CutPrefix(arn, "arn:aws:lambda:"+s.region+":"+s.account+":network-connector:"); ok && validName(name) {
			continue
		}
		return validation("%s[%d] is not a valid network connector ARN.", field, i)
	}
	return nil
}

// launchableLocked resolves RunMicrovm's image and version.
func (s *Server) launchableLocked(ident, version string) (*image, string, *apiErr) {
	if !strings.HasPrefix(ident, "arn:") {
		return nil, "", validation("Invalid ARN format")
	}
	parts := strings.Split(ident, ":")
	if len(parts) != 7 || parts[1] != "aws" || parts[2] != "lambda" || parts[5] != "microvm-image" || parts[6] == "" {
		return nil, "", validation("Invalid ARN format")
	}
	if parts[3] != s.region || parts[4] != s.account {
		return nil, "", validation("imageIdentifier must be an image of this account and region.")
	}
	img := s.images[parts[6]]
	if img == nil {
		return nil, "", notFound("The image does not exist.")
	}
	if !img.state.Launchable() {
		return nil, "", validation("The image is not launchable: its state is %s.", img.state)
	}
	if version != "" {
		v := img.version(version)
		if v == nil {
			return nil, "", notFound("The image version does not exist.")
		}
		if !v.launchable() {
			return nil, "", validation("The image version is not launchable: it must be SUCCESSFUL and ACTIVE.")
		}
		return img, v.name, nil
	}
	v := img.latestActive()
	if v == nil {
		return nil, "", validation("The image has no SUCCESSFUL and ACTIVE version.")
	}
	return img, v.name, nil
}

func clonePub(m microvmsapi.Microvm) microvmsapi.Microvm {
	b, _ := json.Marshal(m)
	var out microvmsapi.Microvm
	_ = json.Unmarshal(b, &out)
	return out
}

// ---- GetMicrovm, ListMicrovms ----

// tickLocked applies what the clock decides: a simulated microVM past its
// maximum duration terminates.
func (s *Server) tickLocked(v *vm, now time.Time) {
	if s.forwarded() || v.pub.State == microvmsapi.StateTerminated || v.pub.StartedAt == nil {
		return
	}
	if d := v.pub.MaximumDurationInSeconds; d > 0 && now.Sub(*v.pub.StartedAt) >= time.Duration(d)*time.Second {
		v.pub.State = microvmsapi.StateTerminated
		v.pub.StateReason = stateReasonMaxDuration
		v.pub.TerminatedAt = ptrTime(now.UTC())
		v.next, v.left = "", 0
	}
}

// pollLocked counts one GetMicrovm of a simulated microVM.
func (s *Server) pollLocked(v *vm, now time.Time) {
	if v.next == "" {
		return
	}
	v.left--
	if v.left > 0 {
		return
	}
	v.pub.State, v.next = v.next, ""
	if v.pub.State == microvmsapi.StateTerminated {
		v.pub.TerminatedAt = ptrTime(now.UTC())
		if v.pub.StateReason == "" {
			v.pub.StateReason = stateReasonSuccess
		}
	}
}

// describe answers GetMicrovm for v.
func (s *Server) describe(ctx context.Context, v *vm) (any, *apiErr) {
	if !s.forwarded() {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.clock()
		s.tickLocked(v, now)
		s.pollLocked(v, now)
		return clonePub(v.pub), nil
	}
	m, err := s.backend.GetMicrovm(ctx, v.backendID)
	if err != nil {
		return nil, backendErr(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.pub.State = m.State
	v.pub.StateReason = m.StateReason
	if m.TerminatedAt != nil {
		v.pub.TerminatedAt = ptrTime(m.TerminatedAt.UTC())
	}
	return clonePub(v.pub), nil
}

func (s *Server) lookupVM(id string) (*vm, *apiErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vms[id]
	if v == nil {
		return nil, notFound("The microVM does not exist.")
	}
	return v, nil
}

func (s *Server) getMicrovm(c *call) (any, *apiErr) {
	v, e := s.lookupVM(c.params[0])
	if e != nil {
		return nil, e
	}
	return s.describe(c.ctx, v)
}

func (s *Server) listMicrovms(c *call) (any, *apiErr) {
	imageFilter := c.query.Get(microvmsapi.QueryImageIdentifier)
	versionFilter := c.query.Get(microvmsapi.QueryImageVersion)
	if imageFilter != "" && !strings.HasPrefix(imageFilter, "arn:") {
		imageFilter = s.ImageARN(imageFilter)
	}
	max, after, e := s.pageParams(c, "ListMicrovms\x00"+imageFilter+"\x00"+versionFilter)
	if e != nil {
		return nil, e
	}
	var states map[string]microvmsapi.MicrovmSummary
	if s.forwarded() {
		states = map[string]microvmsapi.MicrovmSummary{}
		for it, err := range s.backend.ListAll(c.ctx, microvms.ListInput{MaxResults: microvmsapi.MaxListResults}) {
			if err != nil {
				return nil, backendErr(err)
			}
			states[it.MicrovmID] = it
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	var vms []*vm
	for _, v := range s.vms {
		s.tickLocked(v, now)
		if v.pub.State == microvmsapi.StateTerminated && v.pub.TerminatedAt != nil &&
			now.Sub(*v.pub.TerminatedAt) > microvmsapi.TerminatedListedFor {
			continue
		}
		if imageFilter != "" && v.pub.ImageArn != imageFilter {
			continue
		}
		if versionFilter != "" && v.pub.ImageVersion != versionFilter {
			continue
		}
		if after != 0 && v.seq >= after {
			continue
		}
		if it, ok := states[v.backendID]; ok {
			v.pub.State = it.State
		}
		vms = append(vms, v)
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].seq > vms[j].seq }) // newest first
	out := microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{}}
	for i, v := range vms {
		if i == max {
			out.NextToken = s.newPageTokenLocked("ListMicrovms\x00"+imageFilter+"\x00"+versionFilter, vms[i-1].seq)
			break
		}
		out.Items = append(out.Items, microvmsapi.MicrovmSummary{
			MicrovmID: v.pub.MicrovmID, State: v.pub.State, ImageArn: v.pub.ImageArn,
			ImageVersion: v.pub.ImageVersion, StartedAt: v.pub.StartedAt,
		})
	}
	return out, nil
}

// ---- Terminate, Suspend, Resume ----

func (s *Server) terminateMicrovm(c *call) (any, *apiErr) {
	v, e := s.lookupVM(c.params[0])
	if e != nil {
		return nil, e
	}
	if s.forwarded() {
		if err := s.backend.TerminateMicrovm(c.ctx, v.backendID); err != nil {
			return nil, backendErr(err)
		}
		return struct{}{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickLocked(v, s.clock())
	switch v.pub.State {
	case microvmsapi.StateTerminating, microvmsapi.StateTerminated:
	default:
		v.pub.State = microvmsapi.StateTerminating
		v.pub.StateReason = stateReasonSuccess
		v.next, v.left = microvmsapi.StateTerminated, s.polls
	}
	return struct{}{}, nil
}

func (s *Server) suspendMicrovm(c *call) (any, *apiErr) {
	return s.setWant(c, microvmsapi.StateSuspended)
}

func (s *Server) resumeMicrovm(c *call) (any, *apiErr) {
	return s.setWant(c, microvmsapi.StateRunning)
}

func (s *Server) setWant(c *call, want microvmsapi.State) (any, *apiErr) {
	if e := decode(c.body, &struct{}{}); e != nil {
		return nil, e
	}
	v, e := s.lookupVM(c.params[0])
	if e != nil {
		return nil, e
	}
	if s.forwarded() {
		var err error
		if want == microvmsapi.StateSuspended {
			err = s.backend.SuspendMicrovm(c.ctx, v.backendID)
		} else {
			err = s.backend.ResumeMicrovm(c.ctx, v.backendID)
		}
		if err != nil {
			return nil, backendErr(err)
		}
		return struct{}{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickLocked(v, s.clock())
	st := v.pub.State
	switch {
	case st == microvmsapi.StateTerminating || st == microvmsapi.StateTerminated:
		return nil, conflict("The microVM is terminated.")
	case want == microvmsapi.StateSuspended && st == microvmsapi.StatePending:
		return nil, conflict("The microVM is not running yet.")
	case want == microvmsapi.StateSuspended && st == microvmsapi.StateRunning:
		v.pub.State = microvmsapi.StateSuspending
		v.next, v.left = microvmsapi.StateSuspended, s.polls
	case want == microvmsapi.StateRunning && (st == microvmsapi.StateSuspended || st == microvmsapi.StateSuspending):
		if v.next != microvmsapi.StateRunning {
			v.next, v.left = microvmsapi.StateRunning, s.polls
		}
	}
	return struct{}{}, nil
}

// ---- Auth tokens ----

// authToken is a data-plane token the fake minted.
type authToken struct {
	microvmID string
	ports     []microvmsapi.AllowedPort
	expires   time.Time
	shell     bool
}

func (t *authToken) covers(port int) bool {
	if t.shell {
		return false
	}
	for _, p := range t.ports {
		switch {
		case p.AllPorts != nil:
			return true
		case p.Port != nil && *p.Port == port:
			return true
		case p.Range != nil && p.Range.StartPort <= port && port <= p.Range.EndPort:
			return true
		}
	}
	return false
}

// maxAllowedPorts bounds allowedPorts (as localvm does).
const maxAllowedPorts = 16

func validateAuthTokenInput(in *microvmsapi.CreateMicrovmAuthTokenInput) *apiErr {
	if in.ExpirationInMinutes < microvmsapi.MinAuthTokenMinutes || in.ExpirationInMinutes > microvmsapi.MaxAuthTokenMinutes {
		return validation("expirationInMinutes must be between %d and %d.", microvmsapi.MinAuthTokenMinutes, microvmsapi.MaxAuthTokenMinutes)
	}
	if len(in.AllowedPorts) == 0 || len(in.AllowedPorts) > maxAllowedPorts {
		return validation("allowedPorts must list 1 to %d entries.", maxAllowedPorts)
	}
	for i, p := range in.AllowedPorts {
		set := 0
		if p.Port != nil {
			set++
			if *p.Port < 1 || *p.Port > 65535 {
				return validation("allowedPorts[%d].port must be between 1 and 65535.", i)
			}
		}
		if p.Range != nil {
			set++
			if p.Range.StartPort < 1 || p.Range.EndPort > 65535 || p.Range.StartPort > p.Range.EndPort {
				return validation("allowedPorts[%d].range must satisfy 1 <= startPort <= endPort <= 65535.", i)
			}
		}
		if p.AllPorts != nil {
			set++
		}
		if set != 1 {
			return validation("allowedPorts[%d] must set exactly one of port, range and allPorts.", i)
		}
	}
	return nil
}

// liveState returns v's current state, asking the backend in forwarded
// mode.
func (s *Server) liveState(ctx context.Context, v *vm) (microvmsapi.State, *apiErr) {
	if s.forwarded() {
		m, err := s.backend.GetMicrovm(ctx, v.backendID)
		if err != nil {
			return "", backendErr(err)
		}
		s.mu.Lock()
		v.pub.State = m.State
		s.mu.Unlock()
		return m.State, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickLocked(v, s.clock())
	return v.pub.State, nil
}

func (s *Server) mint(v *vm, t *authToken) string {
	tok := "rayito-fake-" + randomToken(32)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	for k, old := range s.tokens { // drop expired tokens
		if !now.Before(old.expires) {
			delete(s.tokens, k)
		}
	}
	s.tokens[tok] = t
	return tok
}

func (s *Server) createAuthToken(c *call) (any, *apiErr) {
	var in microvmsapi.CreateMicrovmAuthTokenInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if e := validateAuthTokenInput(&in); e != nil {
		return nil, e
	}
	v, e := s.lookupVM(c.params[0])
	if e != nil {
		return nil, e
	}
	st, e := s.liveState(c.ctx, v)
	if e != nil {
		return nil, e
	}
	if st == microvmsapi.StateTerminating || st == microvmsapi.StateTerminated {
		return nil, conflict("The microVM is terminated.")
	}
	tok := s.mint(v, &authToken{
		microvmID: v.id, ports: in.AllowedPorts,
		expires: s.clock().Add(time.Duration(in.ExpirationInMinutes) * time.Minute),
	})
	return microvmsapi.CreateMicrovmAuthTokenOutput{AuthToken: map[string]string{microvmsapi.AuthTokenResponseKey: tok}}, nil
}

func (s *Server) createShellAuthToken(c *call) (any, *apiErr) {
	var in microvmsapi.CreateMicrovmShellAuthTokenInput
	if e := decode(c.body, &in); e != nil {
		return nil, e
	}
	if in.ExpirationInMinutes < microvmsapi.MinAuthTokenMinutes || in.ExpirationInMinutes > microvmsapi.MaxAuthTokenMinutes {
		return nil, validation("expirationInMinutes must be between %d and %d.", microvmsapi.MinAuthTokenMinutes, microvmsapi.MaxAuthTokenMinutes)
	}
	v, e := s.lookupVM(c.params[0])
	if e != nil {
		return nil, e
	}
	st, e := s.liveState(c.ctx, v)
	if e != nil {
		return nil, e
	}
	if st == microvmsapi.StateTerminating || st == microvmsapi.StateTerminated {
		return nil, conflict("The microVM is terminated.")
	}
	s.mu.Lock()
	shell := false
	for _, a := range v.pub.IngressNetworkConnectors {
		shell = shell || a == s.ConnectorARN(microvmsapi.ConnectorShellIngress) || a == s.ConnectorARN(microvmsapi.ConnectorAllIngress)
	}
	s.mu.Unlock()
	if !shell {
		return nil, validation("The microVM was not run with the %s network connector.", microvmsapi.ConnectorShellIngress)
	}
	tok := s.mint(v, &authToken{
		microvmID: v.id, shell: true,
		expires: s.clock().Add(time.Duration(in.ExpirationInMinutes) * time.Minute),
	})
	return microvmsapi.CreateMicrovmShellAuthTokenOutput{AuthToken: map[string]string{microvmsapi.AuthTokenResponseKey: tok}}, nil
}
