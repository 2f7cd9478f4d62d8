// Package strictjson decodes the dashboards' closed-key JSON bodies
// (actions, the theme) strictly: encoding/json matches object keys without
// regard to case and keeps the last of duplicate keys, so that
// {"Confirm":true} would set a field named confirm and {"confirm":false,
// "confirm":true} would confirm. Here every key must be one of the target
// type's JSON names exactly, once per object, nothing unknown and nothing
// after the value.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// ErrInvalid is Decode's error (it names no key or value).
var ErrInvalid = errors.New("not the expected JSON")

// Decode decodes data into v (a pointer to a struct) strictly.
func Decode(data []byte, v any) error {
	names := map[string]bool{}
	collect(reflect.TypeOf(v), names, map[reflect.Type]bool{})
	if !keysOK(json.NewDecoder(bytes.NewReader(data)), names) {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return ErrInvalid
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalid
	}
	return nil
}

// collect adds the JSON names of t's struct fields, at every depth.
func collect(t reflect.Type, names map[string]bool, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
		collect(f.Type, names, seen)
	}
}

// keysOK walks one JSON value: every object key is in names exactly, once
// per object.
func keysOK(dec *json.Decoder, names map[string]bool) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			key, ok := k.(string)
			if err != nil || !ok || !names[key] || seen[key] {
				return false
			}
			seen[key] = true
			if !keysOK(dec, names) {
				return false
			}
		}
		end, err := dec.Token()
		return err == nil && end == json.Delim('}')
	case json.Delim('['):
		for dec.More() {
			if !keysOK(dec, names) {
				return false
			}
		}
		end, err := dec.Token()
		return err == nil && end == json.Delim(']')
	}
	return true
}
