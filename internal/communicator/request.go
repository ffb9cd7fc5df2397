package communicator

// Request is a pending non-blocking send or receive. It completes in
// WaitAll; its buffer belongs to the communicator until then.
type Request struct {
	done bool
	err  error
	n    int // bytes transferred, once done

	local *localReq // set by the in-process world
	mpi   *mpiReq   // set by World
}

// Done reports whether the request has completed.
func (r *Request) Done() bool { return r.done }

// Len is the number of bytes the completed request transferred.
func (r *Request) Len() int { return r.n }
