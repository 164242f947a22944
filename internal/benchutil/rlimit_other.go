//go:build !unix

package benchutil

// RaiseFileLimit does nothing where there is no open-file limit to raise.
func RaiseFileLimit() {}
