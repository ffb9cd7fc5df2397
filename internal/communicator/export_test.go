package communicator

// For the external tests: an in-process world with an abort hook.
type LocalOption = localOption

var WithAbortHook = withAbortHook

// NewLocalWith is NewLocal with options.
func NewLocalWith(n int, opts ...LocalOption) []Comm {
	var comms []Comm
	for _, c := range newLocal(n, opts...) {
		comms = append(comms, c)
	}
	return comms
}
