package api

import (
	"fmt"
	"net/http"
	"strings"
)

// maxRedirects is how many hops FollowSameOrigin follows for one request.
const maxRedirects = 3

// RefuseRedirects is an http.Client CheckRedirect that follows none: the
// 3xx answer is the request's outcome, class "redirect".
func RefuseRedirects(req *http.Request, _ []*http.Request) error {
	if t := traceOf(req); t != nil {
		t.refuse("not followed")
	}
	return http.ErrUseLastResponse
}

// FollowSameOrigin is an http.Client CheckRedirect that follows a 307 or
// 308 to the same origin (scheme, host and port), at most three hops, with
// the method, body and headers unchanged. It follows nothing else, so no
// credential goes to another origin and no POST turns into a GET: a 301,
// 302 or 303 (which net/http would follow as a GET with no body), a
// redirect to another origin and a fourth hop are the request's outcome,
// class "redirect", with the reason.
//
// A followed request's clock starts when its first hop was sent: TTFT
// includes every hop, as the user's request pays them; the record counts
// the hops in its phases.
func FollowSameOrigin(req *http.Request, via []*http.Request) error {
	t := traceOf(req)
	refuse := func(why string) error {
		if t != nil {
			t.refuse(why)
		}
		return http.ErrUseLastResponse
	}
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	switch {
	case code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect:
		return refuse(fmt.Sprintf("not followed: a %d would turn the %s into a GET without its body", code, via[0].Method))
	case origin(req) != origin(via[0]):
		return refuse("not followed: another origin, where the API key must not go")
	case len(via) > maxRedirects:
		return refuse(fmt.Sprintf("not followed: more than %d redirects", maxRedirects))
	}
	if t != nil {
		t.redirected()
	}
	return nil
}

// origin is a request URL's scheme and host with its port.
func origin(r *http.Request) string {
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(r.URL.Scheme)]
	}
	return strings.ToLower(r.URL.Scheme) + "://" + strings.ToLower(r.URL.Hostname()) + ":" + port
}

type traceKey struct{}

// traceOf is the request's trace, which requestTrace.context put in its
// context.
func traceOf(req *http.Request) *requestTrace {
	t, _ := req.Context().Value(traceKey{}).(*requestTrace)
	return t
}
