package cli

import (
	"fmt"

	"github.com/mattn/go-isatty"
)

func isTerminalFd(fd uintptr) bool {
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

// TerminalCheck is the IsTerminal function for a real process.
var TerminalCheck = fileIsTerminal

// clearLine clears the progress line a terminal's stderr shows, so that a
// line printed through it starts clean ("" off a terminal).
func clearLine(env Env) string {
	if env.isTerminal(env.Stderr) {
		return "\r\033[K"
	}
	return ""
}

// plural is n with noun, in the plural unless n is 1: "1 window",
// "3 windows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
