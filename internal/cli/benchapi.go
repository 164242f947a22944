package cli

import "github.com/tokbench/tokbench/api"

// setAPIKey sends key in the adapter's own header (Authorization: Bearer,
// or Anthropic's x-api-key) unless a --header already set that header, and
// keeps it among the secrets. Called again after --api auto picks the
// protocol, it moves the key to that protocol's header.
func (p *benchPlan) setAPIKey(key string) {
	if key == "" {
		return
	}
	if p.keyHeader != "" {
		p.header.Del(p.keyHeader)
		p.keyHeader = ""
	}
	name, value := api.KeyHeader(p.adapter, key)
	if p.header.Get(name) != "" {
		return
	}
	p.header.Set(name, value)
	p.apiKey, p.keyHeader = key, name
	for _, s := range p.secrets {
		if s == key {
			return
		}
	}
	p.secrets = append(p.secrets, key)
}
