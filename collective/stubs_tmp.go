package collective

type localReq struct{}
type mpiReq struct{}
