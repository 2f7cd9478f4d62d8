package microvmsapi

import (
	"encoding/json"
	"time"
)

// The service's rest-json protocol sends timestamps as epoch seconds
// (with a fraction). Microvm and MicrovmSummary keep *time.Time fields for
// their users and encode them that way; decoding takes epoch seconds or
// an RFC 3339 string (what state files of older local platforms hold).

func wireTime(t *time.Time) *Timestamp {
	if t == nil {
		return nil
	}
	return &Timestamp{Time: *t}
}

func goTime(t *Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// MarshalJSON writes the timestamps as epoch seconds.
func (m Microvm) MarshalJSON() ([]byte, error) {
	type plain Microvm
	// The outer fields win over plain's of the same JSON name.
	return json.Marshal(struct {
		plain
		StartedAt    *Timestamp `json:"startedAt,omitempty"`
		TerminatedAt *Timestamp `json:"terminatedAt,omitempty"`
	}{plain(m), wireTime(m.StartedAt), wireTime(m.TerminatedAt)})
}

// UnmarshalJSON reads the timestamps as epoch seconds or RFC 3339.
func (m *Microvm) UnmarshalJSON(b []byte) error {
	type plain Microvm
	aux := struct {
		*plain
		StartedAt    *Timestamp `json:"startedAt,omitempty"`
		TerminatedAt *Timestamp `json:"terminatedAt,omitempty"`
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	m.StartedAt, m.TerminatedAt = goTime(aux.StartedAt), goTime(aux.TerminatedAt)
	return nil
}

// MarshalJSON writes the timestamp as epoch seconds.
func (s MicrovmSummary) MarshalJSON() ([]byte, error) {
	type plain MicrovmSummary
	return json.Marshal(struct {
		plain
		StartedAt *Timestamp `json:"startedAt,omitempty"`
	}{plain(s), wireTime(s.StartedAt)})
}

// UnmarshalJSON reads the timestamp as epoch seconds or RFC 3339.
func (s *MicrovmSummary) UnmarshalJSON(b []byte) error {
	type plain MicrovmSummary
	aux := struct {
		*plain
		StartedAt *Timestamp `json:"startedAt,omitempty"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	s.StartedAt = goTime(aux.StartedAt)
	return nil
}
