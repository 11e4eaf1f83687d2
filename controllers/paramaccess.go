// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// paramKindForbidden is how the API server says that the creator of a VAP
// with a paramKind, or of its binding, may not read every object of that
// kind (k8s.io/kubernetes pkg/registry/admissionregistration).
const paramKindForbidden = "permission on all objects of the referenced paramKind"

// paramsReaderLabel is webhook.ParamsReaderLabel (controllers does not
// import the webhook).
const paramsReaderLabel = "kyvap.io/aggregate-to-params-reader"

// explainApplyError adds to the API server's refusal of a VAP or binding
// with a paramKind the one step that fixes it, so that the status says
// exactly which permission is missing and how to grant it.
func explainApplyError(desired client.Object, err error) error {
	if err == nil || !strings.Contains(err.Error(), paramKindForbidden) {
		return err
	}
	kind := "the paramKind"
	if vap, ok := desired.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && vap.Spec.ParamKind != nil {
		kind = fmt.Sprintf("%s (%s)", vap.Spec.ParamKind.Kind, vap.Spec.ParamKind.APIVersion)
	}
	return fmt.Errorf("%w; kyvap's ServiceAccount needs get, list and watch on every %s: create a ClusterRole labelled %s: \"true\" granting them (docs/install.md#parameter-kinds)",
		err, kind, paramsReaderLabel)
}
