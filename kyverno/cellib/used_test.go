// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUsed(t *testing.T) {
	cases := map[string][]string{
		"object.spec.containers.all(c, c.image != '')":                             {},
		"resource.Get('v1', 'configmaps', 'ns', 'name').data.size() > 0":           {"resource"},
		"http.Get('https://example.com').ok && globalContext.Get('x', '') != null": {"globalContext", "http"},
		"image('nginx:1').registry() == 'docker.io'":                               {"image"},
		"image.GetMetadata('nginx').config != null":                                {"imagedata"},
		"time.now() > timestamp('2020-01-01T00:00:00Z')":                           {"time"},
		"sha256('x') != '' && json.unmarshal('{}') != null":                        {"hash", "json"},
		"exceptions.allowedValues.size() == 0":                                     {"exceptions"},
		"object.spec.resource == 'x' && object.time.now == 1":                      {},
		"user.parseServiceAccount(request.userInfo.username).namespace == 'x'":     {"user"},
		"not ( valid": {},
	}
	for expression, want := range cases {
		got := Used(expression)
		if len(got) == 0 {
			got = []string{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", expression, diff)
		}
	}
}
