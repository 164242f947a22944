package api

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// SensitiveHeader reports whether a header named name carries a
// credential: Authorization, Proxy-Authorization, Cookie, x-api-key,
// api-key, and any whose name holds key, token, secret, auth or password.
func SensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "x-api-key", "api-key":
		return true
	}
	return strings.Contains(n, "key") || strings.Contains(n, "token") ||
		strings.Contains(n, "secret") || strings.Contains(n, "auth") || strings.Contains(n, "password")
}

// RequestSecrets are the credentials a request carries, for Scrub, the
// longest first: each sensitive header's value whole and, for a scheme
// and its credentials ("Bearer sk-…", "Basic dXNlcjpwYXNz"), the
// credentials alone and a Basic one's user:password and password; each
// cookie's value; and the secrets of its URL (see URLSecrets). A server
// that quotes one back in any of the encodings Scrub knows is scrubbed.
func RequestSecrets(h http.Header, u *url.URL) []string {
	var out []string
	for name, vs := range h {
		if !SensitiveHeader(name) {
			continue
		}
		cookie := strings.EqualFold(name, "Cookie")
		for _, v := range vs {
			v = strings.TrimSpace(v)
			out = append(out, v)
			if cookie {
				out = append(out, parseCookies(v)...)
				continue
			}
			scheme, cred, ok := strings.Cut(v, " ")
			if !ok {
				continue
			}
			cred = strings.TrimSpace(cred)
			out = append(out, cred)
			if strings.EqualFold(scheme, "Basic") {
				if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
					out = append(out, string(dec))
					if _, pw, ok := strings.Cut(string(dec), ":"); ok {
						out = append(out, pw)
					}
				}
			}
		}
	}
	if u != nil {
		out = append(out, URLSecrets(u.String())...)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < 4 })
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// parseCookies are the values of a Cookie header's name=value pairs.
func parseCookies(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ";") {
		if _, val, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			out = append(out, strings.Trim(val, `"`))
		}
	}
	return out
}
