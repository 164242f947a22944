package api

import (
	"strconv"
	"strings"
)

// Class names why a request failed. The names are stable: records,
// summaries, gates and the docs use them.
type Class string

// Failure classes. An HTTP error answer is HTTPClass(status), "http_429".
const (
	// Before any answer.
	ClassBadRequest        Class = "bad_request" // the request could not be built
	ClassConnection        Class = "connection"
	ClassConnectionRefused Class = "connection_refused"
	ClassConnectionReset   Class = "connection_reset"
	ClassDNS               Class = "dns"
	ClassTLS               Class = "tls"
	ClassTimeout           Class = "timeout"
	ClassInterrupted       Class = "interrupted"
	ClassStallTimeout      Class = "stall_timeout"
	ClassHeadTooLarge      Class = "head_too_large"
	ClassTooManyInterim    Class = "too_many_interim"
	ClassRedirect          Class = "redirect"
	// While the answer streamed.
	ClassConnectionDropped Class = "connection_dropped"
	ClassStreamError       Class = "stream_error"
	ClassMalformedStream   Class = "malformed_stream"
	ClassIncompleteStream  Class = "incomplete_stream"
	ClassEmptyResponse     Class = "empty_response"
	ClassEncodedStream     Class = "encoded_stream"
	ClassLineTooLong       Class = "line_too_long"
	ClassEventTooLarge     Class = "event_too_large"
	ClassOverlongStream    Class = "overlong_stream"
)

// HTTPClass is the class of an HTTP error answer: "http_" and the status.
func HTTPClass(status int) Class { return Class("http_" + strconv.Itoa(status)) }

// HTTPStatus is the status of an HTTP class, and whether c is one.
func (c Class) HTTPStatus() (int, bool) {
	s, ok := strings.CutPrefix(string(c), "http_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
