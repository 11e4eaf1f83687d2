package controllers

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kyvap/kyvap/translate"
)

// planCache remembers each policy's last plan. Most reconciles are caused by
// kyvap's own writes (its VAPs and bindings appearing, the API server's
// type-checking status), and translating again would compile every CEL
// expression again for nothing. A plan is reused only when everything it was
// computed from is the same: the policy's generation and annotations, the
// exceptions naming it, the resolver (discovery) and the options.
type planCache struct {
	mu      sync.Mutex
	entries map[string]planEntry
}

type planEntry struct {
	key      string
	resolver translate.KindResolver
	plan     translate.Plan
}

func (c *planCache) translate(in translate.Input, resolver translate.KindResolver, opts translate.Options) (translate.Plan, error) {
	key := planKey(in, opts)
	name := in.Policy.Name
	c.mu.Lock()
	entry, ok := c.entries[name]
	c.mu.Unlock()
	if ok && entry.key == key && entry.resolver == resolver {
		return entry.plan, nil
	}
	plan, err := translate.Translate(in, resolver, opts)
	if err != nil {
		return plan, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]planEntry{}
	}
	c.entries[name] = planEntry{key: key, resolver: resolver, plan: plan}
	c.mu.Unlock()
	return plan, nil
}

func (c *planCache) forget(policy string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, policy)
}

// planKey identifies the inputs of a translation without the policy's
// status, which changes on every report and does not affect the plan.
func planKey(in translate.Input, opts translate.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/%+v", in.Policy.UID, in.Policy.Generation, opts)
	keys := make([]string, 0, len(in.Policy.Annotations))
	for k := range in.Policy.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|a:%s=%s", k, in.Policy.Annotations[k])
	}
	exceptions := make([]string, 0, len(in.Exceptions))
	for _, e := range in.Exceptions {
		exceptions = append(exceptions, fmt.Sprintf("%s/%s@%s#%d", e.Namespace, e.Name, e.UID, e.Generation))
	}
	sort.Strings(exceptions)
	for _, e := range exceptions {
		b.WriteString("|e:" + e)
	}
	return b.String()
}
