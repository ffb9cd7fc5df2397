package collectivetest

import (
	"context"
	"os"
	"os/exec"
	"strconv"

	"github.com/datahelix/datahelix/internal/mpinode"
)

// MPIRun returns a command that starts np copies of prog with args under
// the MPI launcher matching the library this binary was built against:
// OpenMPI's mpirun with --oversubscribe (tests run more ranks than cores),
// --allow-run-as-root when running as root, and shared-memory transfers
// that do not need ptrace (containers restrict it); MPICH's Hydra mpiexec
// otherwise.
func MPIRun(ctx context.Context, np int, prog string, args ...string) *exec.Cmd {
	var argv []string
	name := "mpirun.openmpi"
	if mpinode.Flavor() == "mpich" {
		name = "mpiexec.mpich"
		argv = append(argv, "-n", strconv.Itoa(np))
	} else {
		argv = append(argv, "-np", strconv.Itoa(np), "--oversubscribe",
			"--mca", "btl_vader_single_copy_mechanism", "none")
		if os.Geteuid() == 0 {
			argv = append(argv, "--allow-run-as-root")
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		name = "mpirun"
	}
	argv = append(argv, prog)
	argv = append(argv, args...)
	return exec.CommandContext(ctx, name, argv...)
}
