// Package realrun runs the benchmark for real and checks the simulator
// against it: mpirun jobs of datahelix run on datasets generated after a
// workload's source mix (Evaluate, in the environment SetRealEnv sets),
// their results parsed into the simulator's Result fields, and each run
// replayed in the simulator as it ran — on the very samples it read, with
// the cores, CPU time and allreduce it measured — for the "validation"
// section (ValidationSection) and the "real" section (RealSection); and
// the "bridge" section (BridgeSection): a real PyTorch trainer fed by
// datahelix train and by stock torch, against the simulator of the same
// configuration.
//
// It also runs the commands the measured sections need (MPIRun,
// RunCommand).
package realrun
