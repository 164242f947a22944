package cli

import "github.com/mattn/go-isatty"

func isTerminalFd(fd uintptr) bool {
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

// TerminalCheck is the IsTerminal function for a real process.
var TerminalCheck = fileIsTerminal
