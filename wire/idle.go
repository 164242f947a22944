package wire

// idleState is what a look at an idle connection found.
type idleState int

const (
	idleUnknown idleState = iota // the look was not possible
	idleQuiet                    // nothing waiting: usable
	idleBytes                    // bytes no request asked for
	idleClosed                   // the peer closed it, or it failed
)
