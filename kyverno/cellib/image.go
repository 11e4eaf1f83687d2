// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// imageLib is Kyverno's kyverno.image: parseImageReference(string) (and its
// deprecated alias image(string)) parses a container image reference into a
// value of the opaque type kyverno.image, whose member functions give its
// parts; isImage(string) tells whether a string parses.
//
// Kyverno parses with go-containerregistry's pkg/name (ParseReference, no
// options: weak validation, default registry index.docker.io, default tag
// latest), at the version Kyverno v1.19.1 builds with (v0.21.8). That module
// is not in kyvap's module graph: parseImageRef below reproduces its grammar.
type imageLib struct{}

func (*imageLib) LibraryName() string { return "kyverno.image" }

// imageType is Kyverno's ImageType.
var imageType = cel.OpaqueType("kyverno.image")

func (*imageLib) CompileOptions() []cel.EnvOption {
	member := func(name, overload string, result *cel.Type, fn func(imageRef) ref.Val) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(overload, []*cel.Type{imageType}, result,
			cel.UnaryBinding(func(arg ref.Val) ref.Val {
				r, ok := arg.Value().(imageRef)
				if !ok {
					return types.MaybeNoSuchOverloadErr(arg)
				}
				return fn(r)
			})))
	}
	return []cel.EnvOption{
		// Deprecated in Kyverno, an alias of parseImageReference.
		cel.Function("image", cel.Overload("string_to_image_deprecated", []*cel.Type{cel.StringType}, imageType,
			cel.UnaryBinding(stringToImage))),
		cel.Function("parseImageReference", cel.Overload("string_to_image", []*cel.Type{cel.StringType}, imageType,
			cel.UnaryBinding(stringToImage))),
		cel.Function("isImage", cel.Overload("is_image_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(isImage))),
		member("containsDigest", "image_contains_digest", cel.BoolType, func(r imageRef) ref.Val {
			return types.Bool(r.isDigest && len(r.identifier) != 0)
		}),
		member("registry", "image_registry", cel.StringType, func(r imageRef) ref.Val {
			return types.String(r.registry)
		}),
		member("repository", "image_repository", cel.StringType, func(r imageRef) ref.Val {
			return types.String(r.repositoryStr())
		}),
		member("identifier", "image_identifier", cel.StringType, func(r imageRef) ref.Val {
			// A digest written after a tag (repo:tag@digest): tag@digest.
			if r.isDigest {
				if tag := tagFromTaggedDigestReference(r.original); tag != "" {
					return types.String(tag + "@" + r.identifier)
				}
			}
			return types.String(r.identifier)
		}),
		member("identifierWithSeparator", "image_identifier_with_separator", cel.StringType, func(r imageRef) ref.Val {
			if r.isDigest {
				return types.String("@" + r.identifier)
			}
			return types.String(":" + r.identifier)
		}),
		member("tag", "image_tag", cel.StringType, func(r imageRef) ref.Val {
			if !r.isDigest {
				return types.String(r.identifier)
			}
			return types.String(tagFromTaggedDigestReference(r.original))
		}),
		member("digest", "image_digest", cel.StringType, func(r imageRef) ref.Val {
			if r.isDigest {
				return types.String(r.identifier)
			}
			return types.String("")
		}),
	}
}

func (*imageLib) ProgramOptions() []cel.ProgramOption { return nil }

func isImage(arg ref.Val) ref.Val {
	s, ok := arg.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	_, err := parseImageRef(s)
	return types.Bool(err == nil)
}

func stringToImage(arg ref.Val) ref.Val {
	s, ok := arg.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	r, err := parseImageRef(s)
	if err != nil {
		return types.WrapErr(err)
	}
	return imageValue{r}
}

// tagFromTaggedDigestReference is the tag of a reference written
// repo:tag@digest (go-containerregistry keeps only the digest of it), ""
// when there is none; a colon before the last slash is a registry's port.
func tagFromTaggedDigestReference(s string) string {
	i := strings.Index(s, "@")
	if i == -1 {
		return ""
	}
	before := s[:i]
	slash := strings.LastIndex(before, "/")
	j := strings.LastIndex(before, ":")
	if j == -1 || j < slash {
		return ""
	}
	return before[j+1:]
}

// imageValue is Kyverno's Image, the CEL value of type kyverno.image.
type imageValue struct {
	ref imageRef
}

func (v imageValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(v.ref).AssignableTo(typeDesc) {
		return v.ref, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return v.ref.original, nil
	}
	return nil, fmt.Errorf("type conversion error from 'Image' to '%v'", typeDesc)
}

func (v imageValue) ConvertToType(typeVal ref.Type) ref.Val {
	if typeVal == imageType {
		return v
	}
	return types.NewErr("type conversion error from '%s' to '%s'", imageType, typeVal)
}

// Equal compares the parsed references field by field, as Kyverno's
// reflect.DeepEqual of two name.Reference: the text written is one of them.
func (v imageValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(imageValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.ref == o.ref)
}

func (v imageValue) Type() ref.Type { return imageType }

func (v imageValue) Value() any { return v.ref }

// imageRef is a reference as go-containerregistry's name.ParseReference
// returns it: a name.Tag or a name.Digest, with the same fields.
type imageRef struct {
	// isDigest: a name.Digest, else a name.Tag.
	isDigest bool
	// registry is the registry's name (index.docker.io by default and
	// for docker.io).
	registry string
	// repository is the repository as written (without the implicit
	// library/ of Docker Hub).
	repository string
	// identifier is the tag (latest by default) or the digest.
	identifier string
	// original is the text parsed.
	original string
}

// repositoryStr is name.Repository.RepositoryStr: Docker Hub's
// single-component repositories are in the library namespace.
func (r imageRef) repositoryStr() string {
	if !strings.ContainsRune(r.repository, '/') && r.registry == imageDefaultRegistry {
		return "library/" + r.repository
	}
	return r.repository
}

// MarshalJSON: name.Tag and name.Digest serialize as the text parsed (what
// Kyverno's json.marshal gives for an image value).
func (r imageRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.original) }

const (
	imageDefaultRegistry  = "index.docker.io"
	imageDockerHubAlias   = "docker.io"
	imageDefaultTag       = "latest"
	imageRepositoryChars  = "abcdefghijklmnopqrstuvwxyz0123456789_-./"
	imageTagChars         = "abcdefghijklmnopqrstuvwxyz0123456789_-.ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	imageSHA256HexLength  = 64
	imageSHA256Prefix     = "sha256:"
	imageLowerHexAlphabet = "0123456789abcdef"
)

// parseImageRef is go-containerregistry's name.ParseReference without
// options: a tag reference if the text is one, else a digest reference.
// Its only error is the one ParseReference returns (it drops the reasons).
func parseImageRef(s string) (imageRef, error) {
	if r, ok := parseImageTag(s); ok {
		return r, nil
	}
	if r, ok := parseImageDigest(s); ok {
		return r, nil
	}
	return imageRef{}, fmt.Errorf("could not parse reference: %s", s)
}

// parseImageTag is name.NewTag: the text after the last colon is the tag
// unless it contains a slash (then the colon is a registry's port).
func parseImageTag(s string) (imageRef, bool) {
	base, tag := s, ""
	parts := strings.Split(s, ":")
	if len(parts) > 1 && !strings.Contains(parts[len(parts)-1], "/") {
		base = strings.Join(parts[:len(parts)-1], ":")
		tag = parts[len(parts)-1]
		if tag == "" {
			return imageRef{}, false
		}
	}
	if tag != "" && !checkImageElement(tag, imageTagChars, 1, 128) {
		return imageRef{}, false
	}
	if tag == "" {
		tag = imageDefaultTag
	}
	registry, repository, ok := parseImageRepository(base)
	if !ok {
		return imageRef{}, false
	}
	return imageRef{registry: registry, repository: repository, identifier: tag, original: s}, true
}

// parseImageDigest is name.NewDigest: exactly one @, a sha256 digest, and
// before it a repository, with a tag or not.
func parseImageDigest(s string) (imageRef, bool) {
	parts := strings.Split(s, "@")
	if len(parts) != 2 {
		return imageRef{}, false
	}
	base, digest := parts[0], parts[1]
	hex, ok := strings.CutPrefix(digest, imageSHA256Prefix)
	if !ok || len(hex) != imageSHA256HexLength || strings.Trim(hex, imageLowerHexAlphabet) != "" {
		return imageRef{}, false
	}
	// name.NewDigest drops a tag by parsing the text before @ as a tag
	// reference and taking that reference's repository name (with its
	// registry and implicit namespace).
	if tag, ok := parseImageTag(base); ok {
		base = tag.registry + "/" + tag.repositoryStr()
	}
	registry, repository, ok := parseImageRepository(base)
	if !ok {
		return imageRef{}, false
	}
	return imageRef{isDigest: true, registry: registry, repository: repository, identifier: digest, original: s}, true
}

// parseImageRepository is name.NewRepository: the first path component is
// the registry if it is localhost or contains a dot or a colon (Docker
// Hub's index.docker.io otherwise), and the rest is the repository.
func parseImageRepository(s string) (registry, repository string, ok bool) {
	if s == "" {
		return "", "", false
	}
	repository = s
	parts := strings.SplitN(s, "/", 2)
	if len(parts) == 2 && (parts[0] == "localhost" || strings.ContainsAny(parts[0], ".:")) {
		registry, repository = parts[0], parts[1]
	}
	if !checkImageElement(repository, imageRepositoryChars, 2, 255) {
		return "", "", false
	}
	// name.NewRegistry: a valid RFC 3986 authority.
	if u, err := url.Parse("//" + registry); err != nil || u.Host != registry {
		return "", "", false
	}
	switch registry {
	case "", imageDockerHubAlias:
		registry = imageDefaultRegistry
	}
	return registry, repository, true
}

// checkImageElement is pkg/name's checkElement: a length in runes and an
// alphabet.
func checkImageElement(element, allowed string, minRunes, maxRunes int) bool {
	n := 0
	for _, r := range element {
		if !strings.ContainsRune(allowed, r) {
			return false
		}
		n++
	}
	return minRunes <= n && n <= maxRunes
}
