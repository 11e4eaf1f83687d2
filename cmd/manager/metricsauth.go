// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long review results are kept: the TTLs of controller-runtime's
// filters.WithAuthenticationAndAuthorization (a Prometheus scraping every
// 30s costs one TokenReview a minute and one SubjectAccessReview every five).
const (
	metricsAuthnTTL       = time.Minute
	metricsAuthnDenyTTL   = 10 * time.Second
	metricsAllowTTL       = 5 * time.Minute
	metricsDenyTTL        = 30 * time.Second
	metricsReviewTimeout  = 10 * time.Second
	metricsAuthCacheLimit = 256
)

// metricsAuthFilter is the metrics server's FilterProvider with
// --metrics-secure: every request must carry a bearer token that the API
// server authenticates (TokenReview) and whose user it authorizes for the
// request's verb and path, as a non-resource URL (SubjectAccessReview: GET
// /metrics, which the metrics-reader ClusterRole grants). It does what
// controller-runtime's filters.WithAuthenticationAndAuthorization does,
// results cached alike, without linking k8s.io/apiserver's delegating
// authenticator, which brings gRPC and OpenTelemetry into the binary (160
// packages, 14 MB, resident in every replica).
func metricsAuthFilter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	a := &metricsAuth{
		tokens:    authn.TokenReviews(),
		access:    authz.SubjectAccessReviews(),
		users:     cache.NewLRUExpireCache(metricsAuthCacheLimit),
		decisions: cache.NewLRUExpireCache(metricsAuthCacheLimit),
	}
	return a.filter, nil
}

type metricsAuth struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	// users maps a token's hash to its *authenticationv1.UserInfo, nil
	// when the token was refused; decisions maps a request's attributes to
	// whether they are allowed.
	users, decisions *cache.LRUExpireCache
}

func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), metricsReviewTimeout)
		defer cancel()
		user, err := a.authenticate(ctx, r)
		if err != nil {
			log.Error(err, "metrics: authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		allowed, err := a.authorize(ctx, user, verb, r.URL.Path)
		if err != nil {
			log.Error(err, "metrics: authorization failed", "user", user.Username)
			http.Error(w, fmt.Sprintf("Authorization for user %s failed", user.Username), http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("metrics: authorization denied", "user", user.Username, "verb", verb, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// authenticate returns the user of the request's bearer token, or nil when
// there is none or the API server refuses it.
func (a *metricsAuth) authenticate(ctx context.Context, r *http.Request) (*authenticationv1.UserInfo, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, nil
	}
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if cached, ok := a.users.Get(key); ok {
		return cached.(*authenticationv1.UserInfo), nil
	}
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		a.users.Add(key, (*authenticationv1.UserInfo)(nil), metricsAuthnDenyTTL)
		return nil, nil
	}
	user := review.Status.User
	a.users.Add(key, &user, metricsAuthnTTL)
	return &user, nil
}

// authorize asks the API server whether user may use verb on the
// non-resource URL path.
func (a *metricsAuth) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(raw)
	key := hex.EncodeToString(sum[:])
	if cached, ok := a.decisions.Get(key); ok {
		return cached.(bool), nil
	}
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := metricsDenyTTL
	if allowed {
		ttl = metricsAllowTTL
	}
	a.decisions.Add(key, allowed, ttl)
	return allowed, nil
}
