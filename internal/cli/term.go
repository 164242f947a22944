package cli

import "github.com/mattn/go-isatty"

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
