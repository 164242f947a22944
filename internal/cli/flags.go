package cli

import (
	"strconv"
	"strings"
)

// parseIntList parses "1,4,16" for flag, each value at least lo.
func parseIntList(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.Atoi(part)
		if err != nil {
			return nil, usagef("%s: %q is not a whole number (want a comma list like 1,4,16)", flag, part)
		}
		if v < lo {
			return nil, usagef("%s: %d is below %d", flag, v, lo)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseFloatList parses "2,5.5" for flag, each value positive.
func parseFloatList(flag, s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.ParseFloat(part, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return nil, usagef("%s: %q is not a positive number (want a comma list like 2,5)", flag, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// sensitiveHeader reports whether a header's value is a credential.
func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "x-api-key", "api-key":
		return true
	}
	return strings.Contains(n, "key") || strings.Contains(n, "token") ||
		strings.Contains(n, "secret") || strings.Contains(n, "auth") || strings.Contains(n, "password")
}

// redactHeaderArg shows a --header argument with a sensitive value hidden.
func redactHeaderArg(h string) string {
	name, _, ok := strings.Cut(h, ":")
	if !ok {
		if len(h) > 12 {
			return h[:4] + "…[REDACTED]"
		}
		return "[REDACTED]"
	}
	if sensitiveHeader(strings.TrimSpace(name)) {
		return strings.TrimSpace(name) + ": [REDACTED]"
	}
	return h
}
