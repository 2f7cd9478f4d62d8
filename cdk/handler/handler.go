// Package handler embeds the code of RayitoAgent's custom-resource
// function (index.py, Python 3.12): Custom::RayitoImageBuild and
// Custom::RayitoRuntimeMmds. It is Python so that synthesizing needs no
// compiler and no network (the Lambda runtime has boto3); it is the
// constructs' own code, tested by handler_test.py.
package handler

import _ "embed"

// Source is index.py; the function's handler is index.handler.
//
//go:embed index.py
var Source string
