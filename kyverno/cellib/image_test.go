// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/go-cmp/cmp"
)

// imageDigest is a valid sha256 digest for the references of the tests.
const imageDigest = "sha256:6aefddb645ee6963afd681b1845c661d0ea4c3b20ab9db86d9e753b203d385f2"

// imageParts are the results of the image value's member functions.
type imageParts struct {
	Registry, Repository, Identifier, IdentifierWithSeparator, Tag, Digest string
	ContainsDigest                                                         bool
}

// imageRefCases are references and what Kyverno v1.19.1 gives for them
// (go-containerregistry v0.21.8's name.ParseReference, weak validation),
// as its own library computed them: the parts, or the parse error.
var imageRefCases = []struct {
	name string
	ref  string
	want imageParts
	err  string
}{
	// Docker Hub: the default registry (docker.io is rewritten), the
	// library namespace for a one-component repository, the default tag.
	{name: "short name", ref: "nginx", want: imageParts{"index.docker.io", "library/nginx", "latest", ":latest", "latest", "", false}},
	{name: "short name tag", ref: "nginx:1.25", want: imageParts{"index.docker.io", "library/nginx", "1.25", ":1.25", "1.25", "", false}},
	{name: "library", ref: "library/nginx:1.25", want: imageParts{"index.docker.io", "library/nginx", "1.25", ":1.25", "1.25", "", false}},
	{name: "docker.io", ref: "docker.io/nginx", want: imageParts{"index.docker.io", "library/nginx", "latest", ":latest", "latest", "", false}},
	{name: "docker.io library", ref: "docker.io/library/nginx:stable", want: imageParts{"index.docker.io", "library/nginx", "stable", ":stable", "stable", "", false}},
	{name: "docker.io org", ref: "docker.io/bitnami/redis:7.2", want: imageParts{"index.docker.io", "bitnami/redis", "7.2", ":7.2", "7.2", "", false}},
	{name: "index.docker.io", ref: "index.docker.io/library/busybox:1.36", want: imageParts{"index.docker.io", "library/busybox", "1.36", ":1.36", "1.36", "", false}},
	{name: "hub org", ref: "myorg/app:v2", want: imageParts{"index.docker.io", "myorg/app", "v2", ":v2", "v2", "", false}},
	// Other registries: a first component with a dot or a colon, or localhost.
	{name: "ghcr", ref: "ghcr.io/kyverno/kyverno:v1.19.1", want: imageParts{"ghcr.io", "kyverno/kyverno", "v1.19.1", ":v1.19.1", "v1.19.1", "", false}},
	{name: "one component", ref: "registry.k8s.io/pause:3.10", want: imageParts{"registry.k8s.io", "pause", "3.10", ":3.10", "3.10", "", false}},
	{name: "port", ref: "registry.example.com:5000/team/app:2.0", want: imageParts{"registry.example.com:5000", "team/app", "2.0", ":2.0", "2.0", "", false}},
	{name: "port no tag", ref: "registry.example.com:5000/team/app", want: imageParts{"registry.example.com:5000", "team/app", "latest", ":latest", "latest", "", false}},
	{name: "localhost", ref: "localhost/app", want: imageParts{"localhost", "app", "latest", ":latest", "latest", "", false}},
	{name: "localhost port", ref: "localhost:5000/app:dev", want: imageParts{"localhost:5000", "app", "dev", ":dev", "dev", "", false}},
	{name: "ipv4", ref: "127.0.0.1:5000/app:dev", want: imageParts{"127.0.0.1:5000", "app", "dev", ":dev", "dev", "", false}},
	{name: "ipv6", ref: "[::1]:5000/app:dev", want: imageParts{"[::1]:5000", "app", "dev", ":dev", "dev", "", false}},
	{name: "uppercase tag", ref: "gcr.io/project/app:Latest_1.0-rc", want: imageParts{"gcr.io", "project/app", "Latest_1.0-rc", ":Latest_1.0-rc", "Latest_1.0-rc", "", false}},
	{name: "deep path", ref: "a/b/c/d:e", want: imageParts{"index.docker.io", "a/b/c/d", "e", ":e", "e", "", false}},
	{name: "two characters", ref: "ab", want: imageParts{"index.docker.io", "library/ab", "latest", ":latest", "latest", "", false}},
	{name: "tag 128", ref: "app:" + strings.Repeat("t", 128), want: imageParts{"index.docker.io", "library/app", strings.Repeat("t", 128), ":" + strings.Repeat("t", 128), strings.Repeat("t", 128), "", false}},
	// Weak validation's leniencies: a port without a path is a tag, empty
	// path components and a scheme's colon pass.
	{name: "port alone", ref: "host:5000", want: imageParts{"index.docker.io", "library/host", "5000", ":5000", "5000", "", false}},
	{name: "leading slash", ref: "/nginx", want: imageParts{"index.docker.io", "/nginx", "latest", ":latest", "latest", "", false}},
	{name: "trailing slash", ref: "nginx/", want: imageParts{"index.docker.io", "nginx/", "latest", ":latest", "latest", "", false}},
	{name: "empty component", ref: "nginx//app", want: imageParts{"index.docker.io", "nginx//app", "latest", ":latest", "latest", "", false}},
	{name: "scheme", ref: "https://ghcr.io/app", want: imageParts{"https:", "/ghcr.io/app", "latest", ":latest", "latest", "", false}},
	// Digests; a tag before the digest is kept by tag() and identifier()
	// only (go-containerregistry drops it).
	{name: "digest", ref: "nginx@" + imageDigest, want: imageParts{"index.docker.io", "library/nginx", imageDigest, "@" + imageDigest, "", imageDigest, true}},
	{name: "tag and digest", ref: "nginx:1.25@" + imageDigest, want: imageParts{"index.docker.io", "library/nginx", "1.25@" + imageDigest, "@" + imageDigest, "1.25", imageDigest, true}},
	{name: "registry tag and digest", ref: "ghcr.io/org/app:v1@" + imageDigest, want: imageParts{"ghcr.io", "org/app", "v1@" + imageDigest, "@" + imageDigest, "v1", imageDigest, true}},
	{name: "port digest", ref: "registry.example.com:5000/repo@" + imageDigest, want: imageParts{"registry.example.com:5000", "repo", imageDigest, "@" + imageDigest, "", imageDigest, true}},
	{name: "port tag digest", ref: "localhost:5000/team/app:dev@" + imageDigest, want: imageParts{"localhost:5000", "team/app", "dev@" + imageDigest, "@" + imageDigest, "dev", imageDigest, true}},
	{name: "docker.io tag digest", ref: "docker.io/library/alpine:3.20@" + imageDigest, want: imageParts{"index.docker.io", "library/alpine", "3.20@" + imageDigest, "@" + imageDigest, "3.20", imageDigest, true}},
	// Not references.
	{name: "empty", ref: "", err: "could not parse reference: "},
	{name: "uppercase", ref: "Nginx", err: "could not parse reference: Nginx"},
	{name: "uppercase tagged", ref: "NGINX:1", err: "could not parse reference: NGINX:1"},
	{name: "uppercase path", ref: "ghcr.io/Org/app", err: "could not parse reference: ghcr.io/Org/app"},
	{name: "one character", ref: "a", err: "could not parse reference: a"},
	{name: "empty tag", ref: "nginx:", err: "could not parse reference: nginx:"},
	{name: "two tags", ref: "nginx:1.0:2", err: "could not parse reference: nginx:1.0:2"},
	{name: "no repository", ref: ":latest", err: "could not parse reference: :latest"},
	{name: "space in tag", ref: "nginx:tag with space", err: "could not parse reference: nginx:tag with space"},
	{name: "bang in tag", ref: "nginx:tag!", err: "could not parse reference: nginx:tag!"},
	{name: "tag 129", ref: "app:" + strings.Repeat("t", 129), err: "could not parse reference: app:" + strings.Repeat("t", 129)},
	{name: "bad port", ref: "registry.example.com:port/app", err: "could not parse reference: registry.example.com:port/app"},
	{name: "space in registry", ref: "reg istry.io/app", err: "could not parse reference: reg istry.io/app"},
	{name: "short digest", ref: "nginx@sha256:abc", err: "could not parse reference: nginx@sha256:abc"},
	{name: "uppercase digest", ref: "nginx@" + strings.ToUpper(imageDigest), err: "could not parse reference: nginx@" + strings.ToUpper(imageDigest)},
	{name: "sha512", ref: "nginx@sha512:" + strings.Repeat("ab", 64), err: "could not parse reference: nginx@sha512:" + strings.Repeat("ab", 64)},
	{name: "two ats", ref: "nginx@@" + imageDigest, err: "could not parse reference: nginx@@" + imageDigest},
	{name: "two digests", ref: "nginx@" + imageDigest + "@" + imageDigest, err: "could not parse reference: nginx@" + imageDigest + "@" + imageDigest},
	{name: "empty digest", ref: "nginx:1.25@sha256:", err: "could not parse reference: nginx:1.25@sha256:"},
}

// TestImageReferences evaluates every member function on every reference,
// through both constructors, and isImage.
func TestImageReferences(t *testing.T) {
	env := newEnv(t, "image")
	const parts = `[%[1]s(object.ref).registry(), %[1]s(object.ref).repository(), %[1]s(object.ref).identifier(),
		%[1]s(object.ref).identifierWithSeparator(), %[1]s(object.ref).tag(), %[1]s(object.ref).digest(),
		string(%[1]s(object.ref).containsDigest())]`
	for _, tc := range imageRefCases {
		object := map[string]any{"ref": tc.ref}
		for _, fn := range []string{"image", "parseImageReference"} {
			t.Run(tc.name+"/"+fn, func(t *testing.T) {
				expr := fmt.Sprintf(parts, fn)
				got, compileErr, err := evaluate(t, env, expr, object)
				if compileErr != nil {
					t.Fatalf("%s: %v", expr, compileErr)
				}
				if tc.err != "" {
					if err == nil {
						t.Fatalf("%s(%q) = %v, want the error %q", fn, tc.ref, got, tc.err)
					}
					if diff := cmp.Diff(tc.err, err.Error()); diff != "" {
						t.Errorf("%s(%q): error (-want +got):\n%s", fn, tc.ref, diff)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s(%q): %v", fn, tc.ref, err)
				}
				w := tc.want
				want := []any{w.Registry, w.Repository, w.Identifier, w.IdentifierWithSeparator, w.Tag, w.Digest, fmt.Sprint(w.ContainsDigest)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s(%q) (-want +got):\n%s", fn, tc.ref, diff)
				}
			})
		}
		t.Run(tc.name+"/isImage", func(t *testing.T) {
			got, compileErr, err := evaluate(t, env, "isImage(object.ref)", object)
			if compileErr != nil || err != nil {
				t.Fatal(compileErr, err)
			}
			if diff := cmp.Diff(tc.err == "", got); diff != "" {
				t.Errorf("isImage(%q) (-want +got):\n%s", tc.ref, diff)
			}
		})
	}
}

// TestImage: the library's values and declarations, results as Kyverno
// v1.19.1's library gives them.
func TestImage(t *testing.T) {
	obj := map[string]any{"n": int64(1), "s": "nginx", "images": []any{"nginx:1.25", "ghcr.io/org/app@" + imageDigest, "Bad"}}
	runCases(t, newEnv(t, "image"), []evalCase{
		{name: "literal", expr: "image('ghcr.io/org/app:v1').registry()", want: "ghcr.io"},
		{name: "isImage literal", expr: "isImage('nginx') && !isImage('Nginx')", want: true},
		{name: "error short-circuited", expr: "false && image('Bad').tag() == ''", want: false},
		{name: "error propagates", expr: "image('Bad').tag() == ''", wantErr: "could not parse reference: Bad"},
		{name: "all", expr: "object.images.all(i, isImage(i))", object: obj, want: false},
		{name: "filter map", expr: "object.images.filter(i, isImage(i)).map(i, image(i).containsDigest())", object: obj, want: []any{false, true}},
		// Equality compares the parsed references and the text written.
		{name: "equal", expr: "image('nginx') == parseImageReference('nginx')", want: true},
		{name: "equal default tag", expr: "image('nginx') == image('nginx:latest')", want: false},
		{name: "equal docker.io", expr: "image('nginx') == image('docker.io/nginx')", want: false},
		{name: "not equal", expr: "image('nginx:1') != image('nginx:2')", want: true},
		{name: "tag not digest", expr: "image('nginx@" + imageDigest + "') == image('nginx:1@" + imageDigest + "')", want: false},
		{name: "in", expr: "image('nginx') in [image('busybox'), image('nginx')]", want: true},
		{name: "dyn equal int", expr: "dyn(image('nginx')) == 1", wantErr: "no such overload"},
		{name: "dyn equal null", expr: "dyn(image('nginx')) == null", want: false},
		{name: "in a list", expr: "[image('nginx:1')][0].tag()", want: "1"},
		{name: "in a map", expr: "{'a': image('nginx:1')}.a.tag()", want: "1"},
		{name: "dyn receiver", expr: "dyn(image('nginx:1')).tag()", want: "1"},
		// Kyverno's type knows no conversion to type.
		{name: "type", expr: "type(image('nginx'))", wantErr: "type conversion error from 'kyverno.image' to 'type'"},
		{name: "dyn string receiver", expr: "dyn(object.s).registry()", object: obj, wantErr: "no such overload: registry(string)"},
		{name: "dyn int", expr: "isImage(object.n)", object: obj, wantErr: "no such overload: isImage(int)"},
		{name: "dyn int image", expr: "image(object.n).tag()", object: obj, wantErr: "no such overload: image(int)"},
		{name: "int", expr: "image(1)", wantNoComp: "found no matching overload for 'image' applied to '(int)'"},
		{name: "isImage int", expr: "isImage(1)", wantNoComp: "found no matching overload for 'isImage' applied to '(int)'"},
		{name: "string of image", expr: "string(image('nginx'))", wantNoComp: "found no matching overload for 'string' applied to '(kyverno.image)'"},
		{name: "member on string", expr: "'nginx'.registry()", wantNoComp: "found no matching overload for 'registry' applied to 'string.()'"},
		{name: "global registry", expr: "registry(image('nginx'))", wantNoComp: "found no matching overload for 'registry' applied to '(kyverno.image)'"},
		{name: "unknown member", expr: "image('nginx').foo()", wantNoComp: "undeclared reference to 'foo'"},
	})
}

// TestImageWithOtherLibraries: image in one environment with json (which
// serializes an image value as the text parsed, as go-containerregistry's
// references do) and hash.
func TestImageWithOtherLibraries(t *testing.T) {
	env := newEnv(t, "json", "image", "hash")
	runCases(t, env, []evalCase{
		{name: "marshal", expr: "json.marshal(image('docker.io/nginx:1'))", want: `"docker.io/nginx:1"`},
		{name: "marshal list", expr: "json.marshal([image('nginx@" + imageDigest + "')])", want: `["nginx@` + imageDigest + `"]`},
		{name: "marshal map", expr: "json.marshal({'i': image('nginx')})", want: `{"i":"nginx"}`},
		{name: "marshal error", expr: "json.marshal(image('Nginx'))", wantErr: "could not parse reference: Nginx"},
		{name: "hash", expr: "sha256(image('nginx').repository())", want: fmt.Sprintf("%x", sha256.Sum256([]byte("library/nginx")))},
		{name: "unmarshal", expr: "image(json.unmarshal('{\"i\": \"ghcr.io/a/b:c\"}').i).tag()", want: "c"},
	})
	// Without the library, its functions are undeclared.
	for _, expr := range []string{"image('nginx')", "parseImageReference('nginx')", "isImage('nginx')"} {
		if _, iss := newEnv(t, "json", "hash").Compile(expr); iss.Err() == nil {
			t.Errorf("%s compiles without the image library", expr)
		}
	}
}

// TestImageValue: the value's conversions, as Kyverno's Image.
func TestImageValue(t *testing.T) {
	r, err := parseImageRef("nginx:1")
	if err != nil {
		t.Fatal(err)
	}
	v := imageValue{r}
	if got, err := v.ConvertToNative(reflect.TypeFor[string]()); err != nil || got != "nginx:1" {
		t.Errorf("ConvertToNative(string) = %v, %v", got, err)
	}
	if got, err := v.ConvertToNative(reflect.TypeFor[any]()); err != nil || got != r {
		t.Errorf("ConvertToNative(any) = %v, %v", got, err)
	}
	_, err = v.ConvertToNative(reflect.TypeFor[int]())
	if diff := cmp.Diff("type conversion error from 'Image' to 'int'", errString(err)); diff != "" {
		t.Errorf("ConvertToNative(int) (-want +got):\n%s", diff)
	}
	if got := v.ConvertToType(imageType); got != v {
		t.Errorf("ConvertToType(kyverno.image) = %v", got)
	}
	if diff := cmp.Diff("type conversion error from 'kyverno.image' to 'string'", errString(v.ConvertToType(types.StringType).(*types.Err))); diff != "" {
		t.Errorf("ConvertToType(string) (-want +got):\n%s", diff)
	}
	if got := v.Equal(types.String("nginx:1")); !types.IsError(got) {
		t.Errorf("Equal(string) = %v, want an error", got)
	}
	if v.Type() != imageType {
		t.Errorf("Type() = %v", v.Type())
	}
}
